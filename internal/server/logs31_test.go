package server

import (
	"cmp"
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

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/verify/audit"
)

// A room steered by several servers, each appending to a log of its own
// (issue 31; SPEC-NOTES "One log per server and room"), without
// PostgreSQL: each server runs on a memory store of its own, whose one
// log is that server's log of the room, and the audited server runs on
// manyLogs, which lists the others' logs beside its own as one store's
// logs, and finds their decisions as a shared store would. The servers
// share one table of loads, so the recount over the merge is exact.

// numbered is one server's store whose one log (its log 0) is log n of
// the room: what the server signs and keeps of its log names n, as on a
// shared store.
type numbered struct {
	store.Store
	n      int64
	server string
}

func (s *numbered) Logs(ctx context.Context, room sig.Hash) ([]store.LogInfo, error) {
	ls, err := s.Store.Logs(ctx, room)
	if err != nil || len(ls) == 0 {
		return nil, err
	}
	return []store.LogInfo{{N: s.n, Server: s.server, Size: ls[0].Size}}, nil
}

func (s *numbered) OwnLog(ctx context.Context, room sig.Hash) (store.LogInfo, error) {
	li, err := s.Store.OwnLog(ctx, room)
	return store.LogInfo{N: s.n, Server: s.server, Size: li.Size}, err
}

func (s *numbered) LogSize(ctx context.Context, room sig.Hash, n int64) (int64, error) {
	if n != s.n {
		return 0, nil
	}
	return s.Store.LogSize(ctx, room, 0)
}

func (s *numbered) LogEntries(ctx context.Context, room sig.Hash, n, start, end int64) ([]store.LogEntry, error) {
	if n != s.n {
		return nil, fmt.Errorf("no log %d", n)
	}
	return s.Store.LogEntries(ctx, room, 0, start, end)
}

func (s *numbered) LogHashes(ctx context.Context, room sig.Hash, n int64, x []int64) ([]tlog.Hash, error) {
	if n != s.n {
		return nil, fmt.Errorf("no log %d", n)
	}
	return s.Store.LogHashes(ctx, room, 0, x)
}

func (s *numbered) LogRef(ctx context.Context, room sig.Hash, digest sig.Hash) (int64, int64, error) {
	_, i, err := s.Store.LogRef(ctx, room, digest)
	return s.n, i, err
}

func (s *numbered) PutKeyEpoch(ctx context.Context, room sig.Hash, e store.KeyEpoch) error {
	if e.Log != s.n {
		return fmt.Errorf("an epoch of log %d, not this server's %d", e.Log, s.n)
	}
	e.Log = 0
	return s.Store.PutKeyEpoch(ctx, room, e)
}

func (s *numbered) KeyEpochs(ctx context.Context, room sig.Hash) ([]store.KeyEpoch, error) {
	es, err := s.Store.KeyEpochs(ctx, room)
	for i := range es {
		es[i].Log = s.n
	}
	return es, err
}

// aLog is one server's log as manyLogs shows it.
type aLog struct {
	n      int64
	server string // "<host> <pid>"
	st     store.Store
	// edit, when set, changes the leaves the log shows: with entriesOnly
	// the tiles of entries only, else the tree too (a store that holds
	// other leaves).
	edit        func([]store.LogEntry) []store.LogEntry
	entriesOnly bool
	sealed      bool
}

// manyLogs is a store whose rooms have several logs: its own (the
// numbered store it embeds, logs[0]) and the other servers'.
type manyLogs struct {
	store.Store
	mu   sync.Mutex
	logs []*aLog // by number; logs[0] is this server's
}

func (m *manyLogs) log(n int64) (*aLog, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.logs {
		if l.n == n {
			return l, true
		}
	}
	return nil, false
}

// set changes a log's edit or seal under the lock.
func (m *manyLogs) set(n int64, f func(*aLog)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.logs {
		if l.n == n {
			f(l)
		}
	}
}

// view is a log's leaves and the stored hashes of its tree as shown.
func (m *manyLogs) view(ctx context.Context, room sig.Hash, l *aLog) ([]store.LogEntry, []tlog.Hash, error) {
	size, err := l.st.LogSize(ctx, room, l.n)
	if err != nil {
		return nil, nil, err
	}
	es, err := l.st.LogEntries(ctx, room, l.n, 0, size)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	edit, entriesOnly := l.edit, l.entriesOnly
	m.mu.Unlock()
	shown, tree := es, es
	if edit != nil {
		shown = edit(slices.Clone(es))
		if !entriesOnly {
			tree = shown
		}
	}
	hs, err := store.AppendLog(0, leafBytes(tree), nil)
	return shown, hs, err
}

func (m *manyLogs) Logs(ctx context.Context, room sig.Hash) ([]store.LogInfo, error) {
	var out []store.LogInfo
	for _, l := range slices.Clone(m.logs) {
		es, _, err := m.view(ctx, room, l)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		out = append(out, store.LogInfo{N: l.n, Server: l.server, Size: int64(len(es)), Sealed: l.sealed})
		m.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b store.LogInfo) int { return cmp.Compare(a.N, b.N) })
	return out, nil
}

func (m *manyLogs) LogSize(ctx context.Context, room sig.Hash, n int64) (int64, error) {
	l, ok := m.log(n)
	if !ok {
		return 0, nil
	}
	es, _, err := m.view(ctx, room, l)
	return int64(len(es)), err
}

func (m *manyLogs) LogEntries(ctx context.Context, room sig.Hash, n, start, end int64) ([]store.LogEntry, error) {
	l, ok := m.log(n)
	if !ok {
		return nil, fmt.Errorf("no log %d", n)
	}
	es, _, err := m.view(ctx, room, l)
	if err != nil || start < 0 || start > end || end > int64(len(es)) {
		return nil, errors.Join(err, errors.New("past the log"))
	}
	return es[start:end], nil
}

func (m *manyLogs) LogHashes(ctx context.Context, room sig.Hash, n int64, x []int64) ([]tlog.Hash, error) {
	l, ok := m.log(n)
	if !ok {
		return nil, fmt.Errorf("no log %d", n)
	}
	_, hs, err := m.view(ctx, room, l)
	if err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(x))
	for i, k := range x {
		if k < 0 || k >= int64(len(hs)) {
			return nil, errors.New("past the log")
		}
		out[i] = hs[k]
	}
	return out, nil
}

func (m *manyLogs) LogRef(ctx context.Context, room sig.Hash, digest sig.Hash) (int64, int64, error) {
	for _, l := range m.logs {
		es, _, err := m.view(ctx, room, l)
		if err != nil {
			return 0, 0, err
		}
		if i := slices.IndexFunc(es, func(e store.LogEntry) bool { return e.Digest == digest }); i >= 0 {
			return l.n, int64(i), nil
		}
	}
	return 0, 0, store.ErrNotFound
}

func (m *manyLogs) KeyEpochs(ctx context.Context, room sig.Hash) ([]store.KeyEpoch, error) {
	var out []store.KeyEpoch
	for _, l := range m.logs {
		es, err := l.st.KeyEpochs(ctx, room)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	slices.SortFunc(out, func(a, b store.KeyEpoch) int { return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Log, b.Log)) })
	return out, nil
}

// Decision and EvidenceSnapshot find another server's decisions too, as a
// shared store does.
func (m *manyLogs) Decision(ctx context.Context, digest sig.Hash) (store.Decision, error) {
	for _, l := range m.logs {
		d, err := l.st.Decision(ctx, digest)
		if !errors.Is(err, store.ErrNotFound) {
			return d, err
		}
	}
	return store.Decision{}, store.ErrNotFound
}

func (m *manyLogs) EvidenceSnapshot(ctx context.Context, key sig.Hash) ([]byte, error) {
	for _, l := range m.logs {
		b, err := l.st.EvidenceSnapshot(ctx, key)
		if !errors.Is(err, store.ErrNotFound) {
			return b, err
		}
	}
	return nil, store.ErrNotFound
}

// tiedLoads states, while tie is set, the instant before the one its
// table read the loads at: a decision of this server at the t of the
// room's previous decision, made by the server of a lower log (equal ts
// across servers, which the merge orders by log).
type tiedLoads struct {
	*store.MemLoads
	tie atomic.Bool
}

func (l *tiedLoads) Steer(ctx context.Context, room sig.Hash, n int, s report.Session, now uint64,
	decide func([]uint32, uint64) (int, uint64, error)) error {
	return l.MemLoads.Steer(ctx, room, n, s, now, func(loads []uint32, at uint64) (int, uint64, error) {
		if l.tie.Load() {
			at--
		}
		return decide(loads, at)
	})
}

// rooms31 is three servers of one room: a, audited, on log 1; b on log 2,
// whose decisions each take the t of a's just before; c on log 3.
type rooms31 struct {
	a, b, c *env
	ml      *manyLogs
	tied    *tiedLoads
	leaves  map[*env][]store.LogEntry // each server's decisions, in order
	reloads []string
}

func newRooms31(t *testing.T) *rooms31 {
	t.Helper()
	shared := store.NewLoads()
	r := &rooms31{tied: &tiedLoads{MemLoads: shared}, leaves: map[*env][]store.LogEntry{}}
	var b, c *numbered
	r.b = newLogEnv(t, func(s store.Store) store.Store { b = &numbered{Store: s, n: 2, server: "host-b 102"}; return b }, r.tied)
	r.c = newLogEnv(t, func(s store.Store) store.Store { c = &numbered{Store: s, n: 3, server: "host-c 103"}; return c }, shared)
	r.a = newLogEnv(t, func(s store.Store) store.Store {
		a := &numbered{Store: s, n: 1, server: "host-a 101"}
		r.ml = &manyLogs{Store: a, logs: []*aLog{
			{n: 1, server: a.server, st: a},
			{n: 2, server: b.server, st: b},
			{n: 3, server: c.server, st: c},
		}}
		return r.ml
	}, shared)
	return r
}

// steer makes n decisions, by a, b, c in turn, every fourth a reload of an
// earlier session through whichever server's turn it is; each of b's takes
// the t of a's just before it.
func (r *rooms31) steer(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		e := []*env{r.a, r.b, r.c}[i%3]
		target := "/v1/steer"
		if i%4 == 3 {
			target = path(t, r.reloads[(i*7)%len(r.reloads)])
		}
		r.tied.tie.Store(e == r.b)
		m := e.steer(target, nil)
		r.reloads = append(r.reloads, m.Reload)
		d, err := decision.Parse(e.fetch(path(t, m.Decision)))
		if err != nil {
			t.Fatal(err)
		}
		r.leaves[e] = append(r.leaves[e], store.LogEntry{Digest: d.Digest(), T: d.T})
	}
	r.tied.tie.Store(false)
}

// auditA audits the room through a, started again first (a checkpoint is
// signed at most once a second).
func (r *rooms31) auditA(previous []byte) (*audit.Report, error) {
	return r.a.auditOf(previous)
}

// TestLogsAudit (issue 31, SPEC-NOTES "One log per server and room"): a
// room of three servers' logs is served log by log and audited whole: each
// log's checkpoint names its origin and server, epochs start at other
// indexes in other logs, the merge by (t, log, index) counts the ties, and
// the recount over it is exact.
func TestLogsAudit(t *testing.T) {
	r := newRooms31(t)
	r.steer(t, 30)
	// Head 2 installed on a after its 10th decision, on b after its 20th;
	// c keeps head 1.
	head2, _, _, err := roomGrant(r.a)
	if err != nil {
		t.Fatal(err)
	}
	if resp, b := r.a.put("keylog", head2); resp.StatusCode != 200 {
		t.Fatalf("PUT keylog on a: %d %s", resp.StatusCode, b)
	}
	r.steer(t, 30)
	if resp, b := r.b.put("keylog", head2); resp.StatusCode != 200 {
		t.Fatalf("PUT keylog on b: %d %s", resp.StatusCode, b)
	}
	r.steer(t, 30)

	rep, err := r.auditA(nil)
	if err != nil {
		t.Fatalf("the audit of three logs: %v", err)
	}
	// 90 decisions, 30 by each server; each of b's 30 ties with a's.
	if !rep.OK() || len(rep.Logs) != 3 || rep.Leaves != 90 || rep.Fetched != 90 || rep.Verified != 90 || rep.Ties != 30 ||
		rep.Recount.LoadsMatch != 90 || rep.Recount.EqualT != 30 || len(rep.Duplicates) != 0 || !rep.Listed {
		t.Fatalf("the audit of three logs:\n%v", rep)
	}
	for i, want := range []struct {
		n      int64
		server string
		leaves []store.LogEntry
		epochs [][2]int64 // seq, from
	}{
		{1, "host-a 101", r.leaves[r.a], [][2]int64{{1, 0}, {2, 10}}},
		{2, "host-b 102", r.leaves[r.b], [][2]int64{{1, 0}, {2, 20}}},
		{3, "host-c 103", r.leaves[r.c], [][2]int64{{1, 0}}},
	} {
		l := rep.Logs[i]
		if l.N != want.n || l.Server != want.server || l.Checkpoint.Size != 30 || l.Checkpoint.Root != mth(leafBytes(want.leaves)) {
			t.Errorf("log %d: %s, %d leaves: want log %d of %s, RFC 6962's root of its server's 30 decisions", i, l.Name(), l.Checkpoint.Size, want.n, want.server)
		}
		var got [][2]int64
		for _, e := range l.Epochs {
			got = append(got, [2]int64{int64(e.Seq), e.From})
		}
		if !slices.Equal(got, want.epochs) {
			t.Errorf("%s: epochs %v, want %v", l.Name(), got, want.epochs)
		}
	}
	if s := rep.String(); !strings.Contains(s, "3 logs of 90 decisions") || !strings.Contains(s, "30 ties of t across logs") ||
		!strings.Contains(s, "log 2 (server host-b 102), open: 30 decisions") {
		t.Errorf("the summary:\n%s", s)
	}

	// The list of logs, and each log's checkpoint bound to its origin.
	room := r.a.sc.Room.ID()
	var listed []view.Log
	if err := json.Unmarshal(r.a.fetchAny("/v1/rooms/"+r.a.room()+"/logs"), &listed); err != nil {
		t.Fatal(err)
	}
	if want := []view.Log{{Log: 1, Server: "host-a 101", Size: 30}, {Log: 2, Server: "host-b 102", Size: 30}, {Log: 3, Server: "host-c 103", Size: 30}}; !slices.Equal(listed, want) {
		t.Errorf("/logs lists %+v, want %+v", listed, want)
	}
	cp2 := r.a.fetchAny("/v1/rooms/" + r.a.room() + "/logs/2/checkpoint")
	keys := []sig.PublicKey{r.a.sc.SteerKey.Public()}
	if c, _, err := declog.OpenLog(cp2, room, 2, keys); err != nil || c.Server != "host-b 102" || c.Size != 30 {
		t.Errorf("log 2's checkpoint: %+v, %v", c, err)
	}
	for _, n := range []int64{0, 1, 3} {
		if _, _, err := declog.OpenLog(cp2, room, n, keys); err == nil {
			t.Errorf("log 2's checkpoint opens as log %d's", n)
		}
	}
}

// TestLogsRoutes (issue 31): /logs/{n}/ serves log n as /log/ serves log
// 0; a log's number is read strictly; a decision asked of a log that does
// not hold it is answered with the route of the one that does; verify
// -url places a decision of log 2 in log 2.
func TestLogsRoutes(t *testing.T) {
	r := newRooms31(t)
	r.steer(t, 12)
	base := "/v1/rooms/" + r.a.room()
	bLeaf := r.leaves[r.b][2]
	for _, c := range []struct {
		target string
		status int
		code   string
	}{
		{"/logs/01/checkpoint", 400, "bad_log_request"},
		{"/logs/-1/checkpoint", 400, "bad_log_request"},
		{"/logs/+1/checkpoint", 400, "bad_log_request"},
		{"/logs/1x/tile/0/000", 400, "bad_log_request"},
		{"/logs/1000000000000000000/epochs", 400, "bad_log_request"},
		{"/logs/99999999999999999999999/epochs", 400, "bad_log_request"},
		{"/logs/7/checkpoint", 404, "not_found"},
		{"/logs/0/checkpoint", 404, "not_found"}, // a room of logs 1 to 3
		{"/logs/2/tile/entries/000", 404, "not_found"},
		{"/logs/2/tile/0/x", 400, "bad_log_request"},
		{"/logs/2/consistency?from=5&size=9", 404, "not_found"},
		{"/logs/2/inclusion/" + r.leaves[r.a][0].Digest.String(), 404, "not_found"},
		{"/logs/2/checkpoint?x=1", 400, "query_not_allowed"},
		{"/logs?x=1", 400, "query_not_allowed"},
		// issue 16's route of a room with no log 0 (a shared store made
		// after issue 31): not found, naming the list.
		{"/log/checkpoint", 404, "not_found"},
	} {
		resp, b := r.a.get(base + c.target)
		wantError(t, c.target, resp, b, c.status, c.code)
	}
	// A decision of log 1 asked of log 2: the answer names its route.
	if _, b := r.a.get(base + "/logs/2/inclusion/" + r.leaves[r.a][0].Digest.String()); !strings.Contains(string(b), "/logs/1/inclusion/") {
		t.Errorf("a decision of log 1 asked of log 2: %s", b)
	}
	// The same proof as /log/ gives log 0's, and the tiles by the same
	// paths (C2SP tlog-tiles), of log 2's leaves.
	var p declog.Inclusion
	if err := json.Unmarshal(r.a.fetchAny(base+"/logs/2/inclusion/"+bLeaf.Digest.String()+"?size=4"), &p); err != nil {
		t.Fatal(err)
	}
	if p.Log != 2 || p.Index != 2 || tlog.CheckRecord(p.Proof, 4, mth(leafBytes(r.leaves[r.b][:4])), 2, tlog.RecordHash(bLeaf.Leaf())) != nil {
		t.Errorf("log 2's inclusion of its leaf 2: %+v", p)
	}
	if es, err := declog.ParseBundle(r.a.fetchAny(base+"/logs/2/tile/entries/000.p/4"), 4); err != nil || !slices.Equal(es, r.leaves[r.b]) {
		t.Errorf("log 2's tile of entries: %v", err)
	}

	// issue 16's route of a decision in log 2: with no size, a redirect
	// to log 2's route; with a size (log 0's, which the room has not), a
	// 404 naming it.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(r.a.ts.URL + base + "/log/inclusion/" + bLeaf.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := base + "/logs/2/inclusion/" + bLeaf.Digest.String(); resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != want {
		t.Errorf("/log/inclusion of log 2's decision: %d to %q, want 307 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	resp, b := r.a.get(base + "/log/inclusion/" + bLeaf.Digest.String() + "?size=1")
	wantError(t, "/log/inclusion?size=1 of log 2's decision", resp, b, 404, "not_found")
	if !strings.Contains(string(b), "/logs/2/inclusion/") {
		t.Errorf("the 404 does not name log 2's route: %s", b)
	}

	// verify -url: the decision is placed in log 2, under its head there.
	in, err := client.New().FetchInput(context.Background(), r.a.ts.URL+"/v1/decisions/"+bLeaf.Digest.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := audit.Place(context.Background(), client.New(), r.a.ts.URL, &in)
	if err != nil || pl.Log.N != 2 || pl.Index != 2 || pl.Epoch == nil || pl.Epoch.Seq != 1 {
		t.Fatalf("Place of log 2's leaf 2: %+v, %v", pl, err)
	}
	// The dashboard's inspector names the log too.
	if code, ins, body := r.a.inspect(bLeaf.Digest.String()); code != 200 || ins.Log == nil || ins.Log.Log != 2 || ins.Log.Index != 2 {
		t.Errorf("the inspector's place of log 2's leaf 2: %d %s", code, body)
	}
}

// TestLogsAuditFails (issue 31): a leaf of log 2 tampered fails the audit
// naming log 2 and its server; a log that grew after it was seen sealed,
// one no longer listed, and a digest in two logs (counted once).
func TestLogsAuditFails(t *testing.T) {
	r := newRooms31(t)
	r.steer(t, 30)
	rep, err := r.auditA(nil)
	if err != nil || !rep.OK() {
		t.Fatalf("the honest room: %v\n%v", err, rep)
	}

	// A tile of entries of log 2 that is not its tree's: leaf 5 replaced.
	r.ml.set(2, func(l *aLog) {
		l.edit = func(es []store.LogEntry) []store.LogEntry { es[5] = es[6]; return es }
		l.entriesOnly = true
	})
	if _, err := r.auditA(nil); err == nil || !strings.Contains(err.Error(), "log 2 (server host-b 102): tile/entries/0: leaf 5 is not the tree's") {
		t.Errorf("a tampered leaf of log 2: %v", err)
	}
	r.ml.set(2, func(l *aLog) { l.edit, l.entriesOnly = nil, false })

	// The state of one checkpoint per log, kept and read again.
	rep, err = r.auditA(nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := rep.State()
	st, err := audit.ParseState(kept)
	if err != nil || len(st.Logs) != 3 || st.Logs[2].Log != 3 || st.Logs[2].Sealed {
		t.Fatalf("the state kept: %+v, %v", st, err)
	}
	r.steer(t, 6)
	if rep, err = r.auditA(kept); err != nil || !rep.OK() || len(rep.Previous) != 3 || rep.Leaves != 36 {
		t.Fatalf("against the state kept: %v\n%v", err, rep)
	}

	// Log 3 sealed: its checkpoint is signed at its size at once; once
	// seen sealed it may not grow.
	r.ml.set(3, func(l *aLog) { l.sealed = true })
	rep, err = r.auditA(kept)
	if err != nil || !rep.OK() || !rep.Logs[2].Sealed {
		t.Fatalf("log 3 sealed: %v\n%v", err, rep)
	}
	sealedState := rep.State()
	r.steer(t, 3) // c appends to its sealed log: a store that lies
	if _, err := r.auditA(sealedState); err == nil || !strings.Contains(err.Error(), "log 3 (server host-c 103)") || !strings.Contains(err.Error(), "sealed at 12") {
		t.Errorf("a sealed log that grew: %v", err)
	}
	r.ml.set(3, func(l *aLog) { l.sealed = false })

	// A log seen before and no longer listed.
	r.ml.mu.Lock()
	three := r.ml.logs[2]
	r.ml.logs = r.ml.logs[:2]
	r.ml.mu.Unlock()
	if _, err := r.auditA(kept); err == nil || !strings.Contains(err.Error(), "log 3, seen before, is not listed") {
		t.Errorf("a log no longer listed: %v", err)
	}
	r.ml.mu.Lock()
	r.ml.logs = append(r.ml.logs, three)
	r.ml.mu.Unlock()

	// A decision in two logs: log 3's tree ends with log 2's first leaf
	// again. It counts once, at log 2 (its t is the earlier place).
	r.ml.set(3, func(l *aLog) {
		l.edit = func(es []store.LogEntry) []store.LogEntry { return append(es, r.leaves[r.b][0]) }
	})
	rep, err = r.auditA(nil)
	if err != nil {
		t.Fatal(err)
	}
	c3 := rep.Logs[2].Checkpoint.Size
	if want := (audit.Duplicate{Digest: r.leaves[r.b][0].Digest, Log: 3, Index: c3 - 1, FirstLog: 2, FirstIndex: 0}); len(rep.Duplicates) != 1 || rep.Duplicates[0] != want ||
		rep.Fetched != int(rep.Leaves)-1 || !rep.OK() {
		t.Errorf("a decision in two logs: %+v, want %+v\n%v", rep.Duplicates, want, rep)
	}
}

// TestFollowedHeadStarts (issue 31: each log has a start for every head
// its decisions are signed under): a head another server of a shared
// store installed, which this one installs as it is (internal/follow),
// starts in this server's own log at its size then, with the handover of
// that log under the head before; the audit of the room holds after.
func TestFollowedHeadStarts(t *testing.T) {
	r := newRooms31(t)
	r.steer(t, 15) // 5 decisions each
	head2, _, _, err := roomGrant(r.a)
	if err != nil {
		t.Fatal(err)
	}
	fr, ok := followRooms{r.c.srv}.Room(r.c.sc.Room.ID())
	if !ok {
		t.Fatal("c has no room to follow")
	}
	release := fr.Hold()
	seq, aerr := fr.InstallHead(context.Background(), head2)
	release()
	if aerr != nil || seq != 2 {
		t.Fatalf("c installs head 2 as followed: %d, %v", seq, aerr)
	}
	r.steer(t, 6)
	es, err := r.ml.KeyEpochs(context.Background(), r.a.sc.Room.ID())
	if err != nil {
		t.Fatal(err)
	}
	var c3 []store.KeyEpoch
	for _, e := range es {
		if e.Log == 3 {
			c3 = append(c3, e)
		}
	}
	if len(c3) != 2 || c3[1].Seq != 2 || c3[1].From != 5 || c3[1].Handover == nil {
		var got []string
		for _, e := range c3 {
			got = append(got, fmt.Sprintf("seq %d from %d (handover of %d bytes)", e.Seq, e.From, len(e.Handover)))
		}
		t.Fatalf("log 3's epochs %v: want head 2 from c's 5 decisions, with a handover", got)
	}
	h, _, err := declog.OpenLog(c3[1].Handover, r.a.sc.Room.ID(), 3, []sig.PublicKey{r.a.sc.SteerKey.Public()})
	if err != nil || h.Size != 5 || h.Server != "host-c 103" || h.Root != mth(leafBytes(r.leaves[r.c][:5])) || *h.Keys != (declog.Epoch{Seq: 1, From: 0}) {
		t.Fatalf("log 3's handover %+v, %v: want its 5 leaves under head 1", h, err)
	}
	rep, err := r.auditA(nil)
	if err != nil || !rep.OK() || rep.Logs[2].HeadAt(5).Seq != 2 || rep.Logs[2].HeadAt(4).Seq != 1 || rep.Logs[0].HeadAt(6).Seq != 1 {
		t.Fatalf("the audit after c followed head 2: %v\n%v", err, rep)
	}
}
