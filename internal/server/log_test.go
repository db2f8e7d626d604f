package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/store/storetest"
	"github.com/waisteer/waisteer/verify/audit"
)

// mth is RFC 6962 §2.1's Merkle Tree Hash, as the store suite writes it
// from the RFC.
func mth(leaves [][]byte) tlog.Hash { return storetest.MTH(leaves) }

// steerMany sends n steering requests, each of a new session or, every
// third, again of an earlier one (its RELOAD-URI), and returns each
// decision's leaf (its digest and t, §7.1), in the order sent.
func (e *env) steerMany(n int) []store.LogEntry {
	e.t.Helper()
	var leaves []store.LogEntry
	var reloads []string
	for i := range n {
		target := "/v1/steer"
		if i%3 == 2 && len(reloads) > 0 {
			target = path(e.t, reloads[i%len(reloads)])
		}
		m := e.steer(target, nil)
		reloads = append(reloads, m.Reload)
		raw := e.fetch(path(e.t, m.Decision))
		d, err := decision.Parse(raw)
		if err != nil {
			e.t.Fatal(err)
		}
		leaves = append(leaves, store.LogEntry{Digest: d.Digest(), T: d.T})
		if i%50 == 49 {
			e.clock.Add(1_000_000)
		}
	}
	return leaves
}

func leafBytes(es []store.LogEntry) [][]byte {
	out := make([][]byte, len(es))
	for i, e := range es {
		out[i] = e.Leaf()
	}
	return out
}

// TestLogRoutes (issue 16): the room's log holds each decision the server
// made, in the order it committed them; its checkpoint is signed by the
// steering key and its root is RFC 6962's over those leaves; tiles, proofs
// and epochs are served as C2SP tlog-tiles and RFC 6962 §2.1.1-2.1.2 say;
// bad paths and queries are 400, what is past the log 404.
func TestLogRoutes(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	want := e.steerMany(300)
	room := e.sc.Room.ID()
	base := "/v1/rooms/" + e.room() + "/log/"

	resp, cp := e.get(base + "checkpoint")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("checkpoint: %d %s", resp.StatusCode, cp)
	}
	c, by, err := declog.Open(cp, room, []sig.PublicKey{e.sc.SteerKey.Public()})
	if err != nil || by != e.sc.SteerKey.Public() {
		t.Fatalf("the checkpoint does not open with the steering key: %v\n%s", err, cp)
	}
	if c.Size != 300 || c.Root != mth(leafBytes(want)) || c.Keys == nil || *c.Keys != (declog.Epoch{Seq: 1, From: 0}) {
		t.Fatalf("checkpoint %+v: want 300 leaves, RFC 6962's root of the decisions in order, head 1 from 0", c)
	}

	// Tiles: entries as each decision's digest and t, hashes as tlog's.
	resp, b := e.get(base + "tile/entries/000")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != immutable {
		t.Fatalf("tile/entries/000: %d %s", resp.StatusCode, b)
	}
	es, err := declog.ParseBundle(b, 256)
	if err != nil || !slices.Equal(es, want[:256]) {
		t.Fatalf("the first tile of entries: %v", err)
	}
	if es, err = declog.ParseBundle(e.fetch(base+"tile/entries/001.p/44"), 44); err != nil || !slices.Equal(es, want[256:]) {
		t.Fatalf("the partial tile of entries: %v", err)
	}
	// A level-0 tile is the leaves' hashes (RFC 6962: SHA-256 of 0x00 and
	// the leaf); the level-1 tile's one hash is the root of the first 256.
	h0 := e.fetch(base + "tile/0/001.p/44")
	for i := range 44 {
		if tlog.Hash(h0[32*i:32*i+32]) != mth(leafBytes(want[256+i:257+i])) {
			t.Fatalf("tile/0/001.p/44's hash %d is not leaf %d's", i, 256+i)
		}
	}
	if h1 := e.fetch(base + "tile/1/000.p/1"); tlog.Hash(h1) != mth(leafBytes(want[:256])) {
		t.Fatal("tile/1/000.p/1 is not the root of the first 256 leaves")
	}

	// Inclusion and consistency, checked against the reference's roots.
	for _, i := range []int{0, 7, 255, 256, 299} {
		var p declog.Inclusion
		if err := json.Unmarshal(e.fetchAny(base+fmt.Sprintf("inclusion/%s?size=300", want[i].Digest)), &p); err != nil {
			t.Fatal(err)
		}
		if p.Index != int64(i) || tlog.CheckRecord(p.Proof, 300, c.Root, int64(i), tlog.RecordHash(want[i].Leaf())) != nil {
			t.Errorf("leaf %d's inclusion does not prove (index %d)", i, p.Index)
		}
	}
	for _, m := range []int{1, 100, 256, 299, 300} {
		var p declog.Consistency
		if err := json.Unmarshal(e.fetchAny(base+fmt.Sprintf("consistency?from=%d&size=300", m)), &p); err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckTree(p.Proof, 300, c.Root, int64(m), mth(leafBytes(want[:m]))); err != nil {
			t.Errorf("consistency from %d: %v", m, err)
		}
	}

	for _, c := range []struct {
		target string
		status int
		code   string
	}{
		{"tile/0/1", 400, "bad_log_request"},
		{"tile/0/x001", 400, "bad_log_request"},
		{"tile/8/0/000", 400, "bad_log_request"},
		{"tile/entries/000.p/0", 400, "bad_log_request"},
		{"tile/entries/000.p/256", 400, "bad_log_request"},
		{"tile/entries/000.p/257", 400, "bad_log_request"},
		{"tile/9/000", 400, "bad_log_request"},
		{"tile/data/000", 400, "bad_log_request"},
		{"tile/entries/001", 404, "not_found"},      // 256 of 300: not full
		{"tile/entries/001.p/45", 404, "not_found"}, // past the log
		{"tile/1/000", 404, "not_found"},
		{"tile/0/000?x=1", 400, "query_not_allowed"},
		{"inclusion/" + strings.Repeat("0", 64), 404, "not_found"},
		{"inclusion/xyz", 400, "bad_digest"},
		{"inclusion/" + want[5].Digest.String() + "?size=5", 404, "not_found"},
		{"inclusion/" + want[5].Digest.String() + "?size=301", 404, "not_found"},
		{"inclusion/" + want[5].Digest.String() + "?size=01", 400, "bad_log_request"},
		{"inclusion/" + want[5].Digest.String() + "?size=-1", 400, "bad_log_request"},
		{"inclusion/" + want[5].Digest.String() + "?at=1", 400, "bad_log_request"},
		{"consistency", 400, "bad_log_request"},
		{"consistency?from=abc", 400, "bad_log_request"},
		{"consistency?from=10&size=5", 404, "not_found"},
		{"checkpoint?x", 400, "query_not_allowed"},
	} {
		resp, b := e.get(base + c.target)
		wantError(t, c.target, resp, b, c.status, c.code)
	}
	resp, b = e.get("/v1/rooms/" + strings.Repeat("ab", 32) + "/log/checkpoint")
	wantError(t, "another room", resp, b, 404, "room_not_found")

	// A new key log head: the checkpoint names it from the log's size
	// then, and the epochs give the handover, signed under head 1.
	head2, _, _, err := roomGrant(e)
	if err != nil {
		t.Fatal(err)
	}
	if resp, b := e.put("keylog", head2); resp.StatusCode != 200 {
		t.Fatalf("PUT keylog: %d %s", resp.StatusCode, b)
	}
	e.steerMany(3)
	var eps []Epoch
	if err := json.Unmarshal(e.fetchAny(base+"epochs"), &eps); err != nil || len(eps) != 2 || eps[1].Seq != 2 || eps[1].From != 300 || eps[0].Handover != "" {
		t.Fatalf("epochs %+v, %v", eps, err)
	}
	hc, _, err := declog.Open([]byte(eps[1].Handover), room, []sig.PublicKey{e.sc.SteerKey.Public()})
	if err != nil || hc.Size != 300 || hc.Root != c.Root || *hc.Keys != (declog.Epoch{Seq: 1, From: 0}) {
		t.Fatalf("the handover %+v, %v: want the 300 leaves under head 1", hc, err)
	}
	if got := e.fetch("/v1/rooms/" + e.room() + "/keylog/1"); string(got) != string(e.sc.Room.HeadBytes) {
		t.Error("keylog/1 is not the first head")
	}
	if got := e.fetch("/v1/rooms/" + e.room() + "/keylog/2"); string(got) != string(head2) {
		t.Error("keylog/2 is not the new head")
	}
	resp, b = e.get("/v1/rooms/" + e.room() + "/keylog/3")
	wantError(t, "keylog/3", resp, b, 404, "not_found")
	resp, b = e.get("/v1/rooms/" + e.room() + "/keylog/01")
	wantError(t, "keylog/01", resp, b, 400, "bad_log_request")
}

// roomGrant makes head 2 of the scenario's room: head 1 with a new key.
func roomGrant(e *env) ([]byte, uint64, bool, error) {
	k := room.TestKey("another steering key")
	return room.Grant(e.sc.Room.Room.Head(), e.sc.Room.OriginKey, k.Public(), []string{room.LiveSteer})
}

// fetchAny fetches target, which must answer 200.
func (e *env) fetchAny(target string) []byte {
	e.t.Helper()
	resp, b := e.get(target)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: status %d: %s", target, resp.StatusCode, b)
	}
	return b
}

// tamperedLog is a store whose log is another's: leaves edited, and the
// tree computed over them, so that the server signs a checkpoint of what
// a dishonest store holds. entriesOnly edits the leaves served and not
// the tree's hashes.
type tamperedLog struct {
	store.Store
	mu          sync.Mutex
	edit        func([]store.LogEntry) []store.LogEntry
	entriesOnly bool
}

func (s *tamperedLog) view(ctx context.Context, room sig.Hash) ([]store.LogEntry, []tlog.Hash, error) {
	n, err := s.Store.LogSize(ctx, room, 0)
	if err != nil {
		return nil, nil, err
	}
	es, err := s.Store.LogEntries(ctx, room, 0, 0, n)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	edit := s.edit
	s.mu.Unlock()
	edited := es
	if edit != nil {
		edited = edit(slices.Clone(es))
	}
	tree := edited
	if s.entriesOnly {
		tree = es
	}
	hs, err := store.AppendLog(0, leafBytes(tree), nil)
	return edited, hs, err
}

func (s *tamperedLog) LogSize(ctx context.Context, room sig.Hash, _ int64) (int64, error) {
	es, _, err := s.view(ctx, room)
	return int64(len(es)), err
}

func (s *tamperedLog) LogEntries(ctx context.Context, room sig.Hash, _, start, end int64) ([]store.LogEntry, error) {
	es, _, err := s.view(ctx, room)
	if err != nil || end > int64(len(es)) {
		return nil, errors.Join(err, errors.New("past the log"))
	}
	return es[start:end], nil
}

func (s *tamperedLog) LogHashes(ctx context.Context, room sig.Hash, _ int64, x []int64) ([]tlog.Hash, error) {
	_, hs, err := s.view(ctx, room)
	if err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(x))
	for i, k := range x {
		if k >= int64(len(hs)) {
			return nil, errors.New("past the log")
		}
		out[i] = hs[k]
	}
	return out, nil
}

func (s *tamperedLog) LogRef(ctx context.Context, room sig.Hash, digest sig.Hash) (int64, int64, error) {
	es, _, err := s.view(ctx, room)
	if err != nil {
		return 0, 0, err
	}
	if i := slices.IndexFunc(es, func(e store.LogEntry) bool { return e.Digest == digest }); i >= 0 {
		return 0, int64(i), nil
	}
	return 0, 0, store.ErrNotFound
}

// raisedLoads states one load one higher than the table's, at the k-th
// Steer of a room: a server that lies about a load (§9.2).
type raisedLoads struct {
	*store.MemLoads
	k, n atomic.Int64
}

func (l *raisedLoads) Steer(ctx context.Context, room sig.Hash, n int, s report.Session, now uint64,
	decide func([]uint32, uint64) (int, uint64, error)) error {
	return l.MemLoads.Steer(ctx, room, n, s, now, func(loads []uint32, at uint64) (int, uint64, error) {
		if l.n.Add(1) == l.k.Load() {
			loads[0]++
		}
		return decide(loads, at)
	})
}

// newLogEnv is newEnv over a store and table of loads the test wraps.
func newLogEnv(t *testing.T, wrap func(store.Store) store.Store, loads store.Loads) *env {
	t.Helper()
	sc, err := scenario.Build(scenario.Spec{Periods: 6})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, sc: sc, mem: store.NewMemory(), loads: store.NewLoads(), clock: new(atomic.Uint64)}
	e.st = &failStore{Store: e.mem}
	e.shared, e.sharedLoads = wrap(e.st), loads
	e.clock.Store(t0)
	e.start(nil)
	e.postRecords(sc.Records, http.StatusOK)
	return e
}

// auditOf runs the audit of the env's room, with an earlier checkpoint.
// The server is started again first, over the same store and table of
// loads: a checkpoint is signed at most once a second (checkpointEvery),
// and the audit is of the log as it stands now.
func (e *env) auditOf(previous []byte) (*audit.Report, error) {
	e.stop()
	e.start(nil)
	return audit.Run(context.Background(), client.New(), e.ts.URL, e.sc.Room.ID(), audit.Options{Previous: previous, Workers: 4})
}

// TestLogAudit (issue 16): the audit of an honest server's log holds; each
// way of tampering the issue names is caught: a decision left out of the
// log, a decision replaced, a checkpoint that forks from an earlier one,
// a stated load one higher than its recount; and a tile of entries that is
// not the tree's.
func TestLogAudit(t *testing.T) {
	tl := &tamperedLog{}
	raised := &raisedLoads{MemLoads: store.NewLoads()}
	e := newLogEnv(t, func(s store.Store) store.Store { tl.Store = s; return tl }, raised)
	leaves := e.steerMany(120)

	rep, err := e.auditOf(nil)
	if err != nil || !rep.OK() || rep.Fetched != 120 || rep.Verified != 120 || rep.Recount.LoadsMatch != 120 {
		t.Fatalf("the honest log: %v\n%v", err, rep)
	}
	seen := rep.Log.Raw

	// Left out: the server served decision 40's manifest and kept it from
	// the log. Its holder cannot place it (verify -url), and the recount
	// of the loads after it differs (its session is counted by the server,
	// not by the log).
	tl.mu.Lock()
	tl.edit = func(es []store.LogEntry) []store.LogEntry { return slices.Delete(es, 40, 41) }
	tl.mu.Unlock()
	in, err := client.New().FetchInput(context.Background(), e.ts.URL+"/v1/decisions/"+leaves[40].Digest.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Place(context.Background(), client.New(), e.ts.URL, &in); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a decision left out of the log is placed: %v", err)
	}
	rep, err = e.auditOf(nil)
	if err != nil || rep.OK() || rep.Recount.LoadsMismatch == 0 {
		t.Errorf("a decision left out: the audit holds: %v\n%v", err, rep)
	} else if first := rep.Recount.Loads[0]; first.Index < 40 {
		t.Errorf("a decision left out: the first mismatch is at leaf %d, before the gap", first.Index)
	}
	// And against the checkpoint seen before: the tree does not extend it.
	if _, err := e.auditOf(seen); err == nil || !strings.Contains(err.Error(), "fork") {
		t.Errorf("a decision left out, against the checkpoint seen before: %v", err)
	}

	// Replaced: leaf 10 names another decision (the digest of leaf 11).
	tl.mu.Lock()
	tl.edit = func(es []store.LogEntry) []store.LogEntry { es[10] = es[11]; return es }
	tl.mu.Unlock()
	if _, err := e.auditOf(seen); err == nil || !strings.Contains(err.Error(), "fork") {
		t.Errorf("a decision replaced: %v", err)
	}
	// A tile of entries that is not the tree's.
	tl.mu.Lock()
	tl.entriesOnly = true
	tl.mu.Unlock()
	if _, err := e.auditOf(nil); err == nil || !strings.Contains(err.Error(), "leaf 10 is not the tree's") {
		t.Errorf("a tile of entries not the tree's: %v", err)
	}
	tl.mu.Lock()
	tl.edit, tl.entriesOnly = nil, false
	tl.mu.Unlock()

	// A fork: another server of the same room and keys, with a history
	// of its own, audited against this one's checkpoint.
	other := newLogEnv(t, func(s store.Store) store.Store { return s }, store.NewLoads())
	other.steerMany(130)
	if _, err := other.auditOf(seen); err == nil || !strings.Contains(err.Error(), "fork") {
		t.Errorf("a forked log: %v", err)
	}

	// A stated load one higher than its recount, at the 150th decision.
	raised.k.Store(150)
	e.steerMany(40)
	rep, err = e.auditOf(seen)
	if err != nil || rep.OK() || rep.Recount.LoadsMismatch == 0 {
		t.Fatalf("a load one higher: %v\n%v", err, rep)
	}
	if m := rep.Recount.Loads[0]; m.Index != 149 || m.Pathway != 0 || m.Stated != m.Recount+1 {
		t.Errorf("a load one higher at leaf 149: the first mismatch is %+v", m)
	}
}

// TestLogRetention (issue 16 item 6): decisions pruned by retention leave
// their leaves in the tree; the audit says which leaves it could not fetch
// and why, and does not compare the loads a pruned decision's session may
// still count for.
func TestLogRetention(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	leaves := e.steerMany(120)
	if _, err := e.mem.Prune(context.Background(), 0, leaves[30].T); err != nil {
		t.Fatal(err)
	}
	rep, err := e.auditOf(nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Leaves != 120 || len(rep.Missing) != 30 || rep.Fetched != 90 || !rep.OK() {
		t.Fatalf("after pruning 30: %v", rep)
	}
	for i, m := range rep.Missing {
		if m.Index != int64(i) || m.Digest != leaves[i].Digest || !strings.Contains(m.Why, "pruned") {
			t.Errorf("missing %+v, want leaf %d, pruned", m, i)
		}
	}
	if !strings.Contains(rep.String(), "not fetched: leaves 0-29") {
		t.Errorf("the summary does not say which leaves:\n%v", rep)
	}
	// The scenario's TTL is 300 s and the clock ran 2 s: every decision
	// after the pruned ones is within their sessions' life.
	if rep.Recount.LoadsUnknown != 90 || rep.Recount.LoadsMismatch != 0 {
		t.Errorf("%d loads not compared, %d mismatches; want 90 and 0", rep.Recount.LoadsUnknown, rep.Recount.LoadsMismatch)
	}
}

// TestRestartKeepsLoads: a server whose table of loads is in memory counts
// its live sessions again from the room's log when it starts (§6.1's
// capacities hold across a restart), and the audit's recount over the
// decisions before and after the restart holds exactly (§9.2).
func TestRestartKeepsLoads(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	e.steerMany(90)
	before := statusLoads(e.status())
	if before[0]+before[1]+before[2] == 0 {
		t.Fatal("no loads before the restart")
	}
	e.stop()
	e.loads = store.NewLoads() // a restart's fresh table
	e.start(nil)
	for deadline := time.Now().Add(5 * time.Second); e.status().RestoringLoads; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still restoring the loads after 5 s")
		}
	}
	if after := statusLoads(e.status()); !slices.Equal(after, before) {
		t.Fatalf("loads %v after the restart, %v before", after, before)
	}
	e.steerMany(30)
	rep, err := e.auditOf(nil)
	if err != nil || !rep.OK() || rep.Recount.LoadsMatch != 120 {
		t.Fatalf("the audit across the restart: %v\n%v", err, rep)
	}
	// Sessions past their life are not counted again.
	e.stop()
	e.loads = store.NewLoads()
	e.clock.Add(uint64(e.sc.Policy.TTLs)*1_000_000 + 21_000_000)
	e.start(nil)
	for e.status().RestoringLoads {
		time.Sleep(5 * time.Millisecond)
	}
	if after := statusLoads(e.status()); !slices.Equal(after, []uint32{0, 0, 0}) {
		t.Errorf("loads %v once every session's life has passed", after)
	}
}
