package audit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/verify"
	"github.com/waisteer/waisteer/verify/recount"
)

// Options are an audit's settings.
type Options struct {
	// Sample is how many decisions are verified by §9 in full (their
	// records fetched), drawn at random; 0 verifies every one. Every
	// decision is fetched, read and recounted whatever Sample is.
	Sample int
	// Seed draws the sample.
	Seed uint64
	// Previous is what an auditor saw before, or nil: a state as
	// AppendState writes it (a checkpoint of each log), or issue 16's one
	// signed checkpoint of log 0 (ParseState). Each log must extend the
	// checkpoint seen of it, and a log seen sealed must be as it was.
	Previous []byte
	// Recount is the recount's settings (verify/recount).
	Recount recount.Options
	// Workers is how many fetches run at once; 0 is client.Workers.
	Workers int
}

// Missing is a leaf whose decision the audit could not fetch.
type Missing struct {
	Log    int64 // the log that holds the leaf
	Index  int64
	Digest sig.Hash
	Why    string
}

// Refused is a decision that the audit's checks refuse.
type Refused struct {
	Log    int64 // the log that holds its leaf
	Index  int64
	Digest sig.Hash
	Code   string
	Where  string
	Err    string
}

// Duplicate is a decision whose digest is the leaf of two places in the
// room's logs: it counts once, at the first in the merge's order, and the
// later is reported here (SPEC-NOTES "One log per server and room": two
// servers may make the same bytes).
type Duplicate struct {
	Digest     sig.Hash
	Log, Index int64 // the later leaf, left out
	FirstLog   int64 // the leaf that counts
	FirstIndex int64
}

// Report is what an audit found.
type Report struct {
	// Logs are the room's logs, by number, each checked (issue 31); Log
	// is the first of them, the room's one log when it has one (nil for
	// a room with none).
	Logs []*Log
	Log  *Log
	// Listed is false when the server has no list of logs (a server of
	// issue 16): its log 0 was audited alone.
	Listed bool
	// Previous are the checkpoints seen before that the logs extend.
	Previous []declog.Checkpoint
	Leaves   int64 // the leaves of every log
	Tiles    int   // tiles fetched and checked
	// Ties counts the leaves, in the merge of the logs by (t, log, index),
	// whose t is the previous leaf's from another log.
	Ties       int
	Duplicates []Duplicate
	Fetched    int // decisions fetched
	Missing    []Missing
	Verified   int // decisions verified by §9 in full
	Refused    []Refused
	Recount    *recount.Report
}

// OK reports whether the audit found nothing wrong. Decisions it could
// not fetch are said (Missing), not failed: retention prunes them.
func (r *Report) OK() bool {
	return len(r.Refused) == 0 && r.Recount != nil && r.Recount.OK()
}

// State is what an auditor keeps for the next audit: the checkpoint of
// each log checked, and whether it was sealed (AppendState's JSON).
func (r *Report) State() []byte {
	var s State
	for _, l := range r.Logs {
		s.Logs = append(s.Logs, SeenLog{Log: l.N, Sealed: l.Sealed, Checkpoint: string(l.Raw)})
	}
	return AppendState(nil, s)
}

// LeafName names a leaf in messages: "leaf 7" in a room of log 0 alone,
// "leaf 7 of log 3 (server host pid)" in one of several logs.
func (r *Report) LeafName(n, index int64) string {
	if len(r.Logs) <= 1 && n == 0 {
		return fmt.Sprintf("leaf %d", index)
	}
	for _, l := range r.Logs {
		if l.N == n {
			return fmt.Sprintf("leaf %d of %s", index, l.Name())
		}
	}
	return fmt.Sprintf("leaf %d of log %d", index, n)
}

// serverLog is /logs' entry (view.Log).
type serverLog struct {
	Log    int64  `json:"log"`
	Server string `json:"server"`
	Size   int64  `json:"size"`
	Sealed bool   `json:"sealed"`
}

// listLogs fetches the room's logs (issue 31, parseLogs); a server with
// no list (issue 16's, which answers the route not_found) has log 0
// alone, and listed is false.
func listLogs(ctx context.Context, c *client.Client, base string, roomID sig.Hash) (logs []serverLog, listed bool, err error) {
	b, err := c.Get(ctx, base+"/v1/rooms/"+roomID.String()+"/logs", client.MaxJSONBytes)
	if e := client.ErrorOf(err); e != nil && api.IsNotFound(e) && e.Code != api.RoomNotFound {
		return []serverLog{{Log: 0}}, false, nil
	}
	if err != nil {
		return nil, false, &Failure{Where: "logs", Err: err}
	}
	if logs, err = parseLogs(b); err != nil {
		return nil, false, &Failure{Where: "logs", Err: err}
	}
	return logs, true, nil
}

// parseLogs reads the list of a room's logs: one JSON array of view.Log's
// objects with no other member, by strictly ascending number, each of a
// size not below 0 and, but log 0, of a server that reads
// (declog.ParseServer).
func parseLogs(b []byte) ([]serverLog, error) {
	var logs []serverLog
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&logs); err != nil {
		return nil, fmt.Errorf("the list of logs does not read: %v", clipErr(err))
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("the list of logs has more after its array")
	}
	for i, l := range logs {
		if l.Log < 0 || i > 0 && l.Log <= logs[i-1].Log || l.Size < 0 {
			return nil, fmt.Errorf("log %d of %d leaves is not after the one before, by ascending number", l.Log, l.Size)
		}
		if l.Log > 0 {
			if _, _, err := declog.ParseServer(l.Server); err != nil {
				return nil, fmt.Errorf("log %d: %v", l.Log, err)
			}
		}
	}
	return logs, nil
}

// ref is one leaf of the room: its log, its index there, and it.
type ref struct {
	l     *Log
	index int64
	leaf  store.LogEntry
}

// Run audits room's logs at base (the server's scheme and host): each log's
// tree, then every decision of their merge by (t, log, index), the room's
// order (SPEC-NOTES "One log per server and room").
func Run(ctx context.Context, c *client.Client, base string, roomID sig.Hash, o Options) (*Report, error) {
	workers := o.Workers
	if workers <= 0 {
		workers = client.Workers
	}
	desc, err := c.Get(ctx, base+"/v1/rooms/"+roomID.String()+"/descriptor", api.MaxDescriptorBytes)
	if err != nil {
		return nil, &Failure{Where: "room", Err: err}
	}
	var seen State
	if o.Previous != nil {
		if seen, err = ParseState(o.Previous); err != nil {
			return nil, &Failure{Where: "previous checkpoint", Err: err}
		}
	}
	listing, listed, err := listLogs(ctx, c, base, roomID)
	if err != nil {
		return nil, err
	}
	rep := &Report{Listed: listed}
	heads := headCache{}
	var refs []ref
	for _, li := range listing {
		l, err := fetchLog(ctx, c, base, roomID, desc, li.Log, heads)
		if err != nil {
			return nil, l.of(err)
		}
		l.Sealed = li.Sealed
		prev, leaves, tiles, err := l.audit(ctx, c, li, seen, workers)
		if err != nil {
			return nil, l.of(err)
		}
		if prev != nil {
			rep.Previous = append(rep.Previous, *prev)
		}
		rep.Logs = append(rep.Logs, l)
		rep.Leaves += int64(len(leaves))
		rep.Tiles += tiles
		for i, e := range leaves {
			refs = append(refs, ref{l: l, index: int64(i), leaf: e})
		}
	}
	for _, s := range seen.Logs {
		if !slices.ContainsFunc(listing, func(li serverLog) bool { return li.Log == s.Log }) {
			return nil, fail("logs", "log %d, seen before, is not listed: a log is never removed", s.Log)
		}
	}
	if len(rep.Logs) > 0 {
		rep.Log = rep.Logs[0]
	}

	// The room's order: by t, equal ts (possible only across servers) by
	// log, then index. A digest met again counts once, at its first.
	slices.SortFunc(refs, func(a, b ref) int {
		return cmp.Or(cmp.Compare(a.leaf.T, b.leaf.T), cmp.Compare(a.l.N, b.l.N), cmp.Compare(a.index, b.index))
	})
	first := make(map[sig.Hash]ref, len(refs))
	merged := refs[:0:0]
	for _, r := range refs {
		if f, ok := first[r.leaf.Digest]; ok {
			rep.Duplicates = append(rep.Duplicates, Duplicate{Digest: r.leaf.Digest, Log: r.l.N, Index: r.index, FirstLog: f.l.N, FirstIndex: f.index})
			continue
		}
		first[r.leaf.Digest] = r
		if k := len(merged); k > 0 && merged[k-1].leaf.T == r.leaf.T && merged[k-1].l != r.l {
			rep.Ties++
		}
		merged = append(merged, r)
	}

	// The decisions, every one read and its place checked; a sample
	// verified in full.
	sample := map[int]bool{}
	if o.Sample > 0 && o.Sample < len(merged) {
		rng := rand.New(rand.NewPCG(o.Seed, 16))
		for _, i := range rng.Perm(len(merged))[:o.Sample] {
			sample[i] = true
		}
	}
	a := &auditor{c: c, base: base, roomID: roomID, desc: desc, policies: map[sig.Hash]*policy.Policy{}, rawPolicies: map[sig.Hash][]byte{}, records: map[sig.Hash][]byte{}, opened: map[opened]openedRoom{}}
	entries := make([]recount.Entry, len(merged))
	type result struct {
		missing *Missing
		refused *Refused
		full    bool
	}
	results := make([]result, len(merged))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				full := o.Sample == 0 || sample[i]
				e, m, rf := a.check(ctx, merged[i], full)
				entries[i], results[i] = e, result{m, rf, full && m == nil && rf == nil}
			}
		})
	}
	for i := range merged {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var held []recount.Entry
	ro := o.Recount
	for i, r := range results {
		switch {
		case r.missing != nil:
			rep.Missing = append(rep.Missing, *r.missing)
			ro.Unheld = append(ro.Unheld, merged[i].leaf.T)
		case r.refused != nil:
			rep.Refused = append(rep.Refused, *r.refused)
		default:
			rep.Fetched++
			held = append(held, entries[i])
			if r.full {
				rep.Verified++
			}
		}
	}
	if rep.Recount, err = recount.Recount(held, ro); err != nil {
		return nil, err
	}
	return rep, nil
}

// audit checks one log against what the server lists of it and what the
// auditor saw of it before (consistency; a log seen sealed is as it was),
// then fetches its leaves, each checked against the tree. It returns the
// checkpoint seen before, if any.
func (l *Log) audit(ctx context.Context, c *client.Client, li serverLog, seen State, workers int) (*declog.Checkpoint, []store.LogEntry, int, error) {
	size := l.Checkpoint.Size
	if l.N > 0 && l.Server != li.Server {
		return nil, nil, 0, fail("checkpoint", "it names server %q, and the list of logs %q", l.Server, li.Server)
	}
	if li.Sealed && size != li.Size {
		return nil, nil, 0, fail("checkpoint", "a checkpoint of %d leaves, and the log is listed sealed at %d", size, li.Size)
	}
	var prev *declog.Checkpoint
	if s, ok := seen.seen(l.N); ok {
		p, err := l.previous([]byte(s.Checkpoint))
		if err != nil {
			return nil, nil, 0, err
		}
		if err := l.CheckConsistent(ctx, c, p); err != nil {
			return nil, nil, 0, &Failure{Where: "previous checkpoint", Err: err}
		}
		if s.Sealed && (!li.Sealed || size != p.Size) {
			return nil, nil, 0, fail("previous checkpoint", "the log was sealed at %d leaves, and is now %s at %d", p.Size, map[bool]string{false: "open", true: "sealed"}[li.Sealed], size)
		}
		prev = &p
	}
	leaves, tiles, err := l.fetchLeaves(ctx, c, workers)
	if err != nil {
		return nil, nil, 0, err
	}
	return prev, leaves, tiles, nil
}

// previous opens the checkpoint an auditor saw before of this log, signed
// under the head it names.
func (l *Log) previous(b []byte) (declog.Checkpoint, error) {
	named, err := declog.PeekLog(b, l.RoomID, l.N)
	if err != nil {
		return named, &Failure{Where: "previous checkpoint", Err: err}
	}
	under, err := l.roomOf(named.Keys, "previous checkpoint")
	if err != nil {
		return named, err
	}
	c, _, err := openUnder(b, under, l.N)
	if err != nil {
		return c, &Failure{Where: "previous checkpoint", Err: err}
	}
	return c, nil
}

// tileReader fetches tiles from the server for tlog's checks.
type tileReader struct {
	ctx context.Context
	c   *client.Client
	l   *Log
	mu  sync.Mutex
	got map[tlog.Tile][]byte
	n   int
}

func (r *tileReader) Height() int { return declog.Height }

func (r *tileReader) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		r.mu.Lock()
		b, ok := r.got[t]
		r.mu.Unlock()
		if !ok {
			var err error
			if b, err = r.c.Get(r.ctx, r.l.url(declog.TilePath(t)), int64(t.W)*(2+store.LogEntrySize)); err != nil {
				return nil, err
			}
			r.mu.Lock()
			r.got[t] = b
			r.n++
			r.mu.Unlock()
		}
		out[i] = b
	}
	return out, nil
}

func (r *tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// fetchLeaves fetches every tile of entries of the checkpoint's tree, and
// the tiles of hashes over them, and checks that each leaf is the tree's:
// the hashes of a tile of entries' leaves are the hashes the tree's tiles
// hold for them, each tile of hashes checked against the checkpoint's root
// (tlog.TileHashReader).
func (l *Log) fetchLeaves(ctx context.Context, c *client.Client, workers int) ([]store.LogEntry, int, error) {
	n := l.Checkpoint.Size
	tr := &tileReader{ctx: ctx, c: c, l: l, got: map[tlog.Tile][]byte{}}
	hr := tlog.TileHashReader(tlog.Tree{N: n, Hash: l.Checkpoint.Root}, tr)
	leaves := make([]store.LogEntry, n)
	tiles := int((n + declog.Width - 1) / declog.Width)
	errs := make([]error, tiles)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range next {
				errs[k] = l.checkTile(ctx, c, hr, int64(k), leaves)
			}
		})
	}
	for k := range tiles {
		next <- k
	}
	close(next)
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			return nil, 0, fail(fmt.Sprintf("tile/entries/%d", k), "%v", err)
		}
	}
	return leaves, tiles + tr.n, nil
}

// checkTile fetches the k-th tile of entries and checks its leaves
// against the tree.
func (l *Log) checkTile(ctx context.Context, c *client.Client, hr tlog.HashReader, k int64, leaves []store.LogEntry) error {
	first := k * declog.Width
	w := int(min(declog.Width, int64(len(leaves))-first))
	t := tlog.Tile{H: declog.Height, L: declog.EntriesLevel, N: k, W: w}
	b, err := c.Get(ctx, l.url(declog.TilePath(t)), int64(w)*(2+store.LogEntrySize))
	if err != nil {
		return err
	}
	es, err := declog.ParseBundle(b, w)
	if err != nil {
		return err
	}
	idx := make([]int64, w)
	for i := range idx {
		idx[i] = tlog.StoredHashIndex(0, first+int64(i))
	}
	hs, err := hr.ReadHashes(idx)
	if err != nil {
		return fmt.Errorf("the tree's hashes of these leaves: %v", err)
	}
	for i, e := range es {
		if tlog.RecordHash(e.Leaf()) != hs[i] {
			return fmt.Errorf("leaf %d is not the tree's: its hash is not the one the checkpoint's tree holds", first+int64(i))
		}
		leaves[first+int64(i)] = e
	}
	return nil
}

// auditor fetches and checks decisions, keeping the policies and records
// they share.
type auditor struct {
	c           *client.Client
	base        string
	roomID      sig.Hash
	desc        []byte
	mu          sync.Mutex
	policies    map[sig.Hash]*policy.Policy
	rawPolicies map[sig.Hash][]byte
	records     map[sig.Hash][]byte
	opened      map[opened]openedRoom
}

// check fetches the decision of a leaf and checks it: its bytes are the
// leaf's digest, its t the leaf's and its room the log's; its signer may
// sign it under the head in force at its index in its log (§3.5; issue
// 31: each log has its own starts); in full, §9 with that head.
func (a *auditor) check(ctx context.Context, r ref, full bool) (recount.Entry, *Missing, *Refused) {
	i, leaf := r.index, r.leaf
	refuse := func(code, where, format string, args ...any) *Refused {
		return &Refused{Log: r.l.N, Index: i, Digest: leaf.Digest, Code: code, Where: where, Err: fmt.Sprintf(format, args...)}
	}
	missing := func(why string) *Missing {
		return &Missing{Log: r.l.N, Index: i, Digest: leaf.Digest, Why: why}
	}
	raw, err := a.c.Get(ctx, a.base+"/v1/decisions/"+leaf.Digest.String(), api.MaxDecisionBytes)
	if api.IsNotFound(err) {
		return recount.Entry{}, missing("the server holds it no longer (pruned by retention, or never stored)"), nil
	}
	if err != nil {
		return recount.Entry{}, missing(err.Error()), nil
	}
	if len(raw) < sig.SignatureSize || sig.Digest(raw[:len(raw)-sig.SignatureSize]) != leaf.Digest {
		return recount.Entry{}, nil, refuse("digest_mismatch", "decision", "the server answered bytes that are not the decision the leaf names")
	}
	d, err := decision.Parse(raw)
	if err != nil {
		return recount.Entry{}, nil, refuse(string(reason.Of(err)), "decision", "%v", err)
	}
	if d.T != leaf.T || d.Room != a.roomID {
		return recount.Entry{}, nil, refuse("log_mismatch", "decision", "the decision is of room %s at t %d, and its leaf says room %s at t %d", d.Room, d.T, a.roomID, leaf.T)
	}
	p, rawPolicy, err := a.policy(ctx, d.Policy)
	if err != nil {
		return recount.Entry{}, nil, refuse("record_missing", verify.PlacePolicy, "its policy: %v", err)
	}
	in := verify.Input{Descriptor: a.desc, Policy: rawPolicy, Decision: raw}
	if e := r.l.HeadAt(i); e != nil {
		in.KeyLogHead = e.Head
	}
	if full {
		if in.Records, err = a.recordsOf(ctx, d); err != nil {
			return recount.Entry{}, missing("its records: " + err.Error()), nil
		}
		if _, err := verify.Verify(in); err != nil {
			var re *reason.Error
			if errors.As(err, &re) {
				return recount.Entry{}, nil, refuse(string(re.Code), re.Place, "%v", err)
			}
			return recount.Entry{}, nil, refuse("internal", "", "%v", err)
		}
	} else if err := a.stated(in); err != nil {
		var re *reason.Error
		if errors.As(err, &re) {
			return recount.Entry{}, nil, refuse(string(re.Code), re.Place, "%v", err)
		}
		return recount.Entry{}, nil, refuse("internal", "", "%v", err)
	}
	return recount.Entry{Log: r.l.N, Index: i, Decision: d, Policy: p}, nil, nil
}

// stated checks what a decision states without its records (§9.1 steps 1
// to 3 and 6), the room and policy checked once per head and policy.
func (a *auditor) stated(in verify.Input) error {
	k := opened{head: string(in.KeyLogHead), policy: string(in.Policy)}
	a.mu.Lock()
	o, ok := a.opened[k]
	a.mu.Unlock()
	if !ok {
		o.rm, o.p, o.err = verify.RoomAndPolicy(in)
		a.mu.Lock()
		a.opened[k] = o
		a.mu.Unlock()
	}
	if o.err != nil {
		return o.err
	}
	_, err := verify.Stated(o.rm, o.p, in.Decision)
	return err
}

type opened struct{ head, policy string }

type openedRoom struct {
	rm  *room.Room
	p   *policy.Policy
	err error
}

func (a *auditor) policy(ctx context.Context, digest sig.Hash) (*policy.Policy, []byte, error) {
	a.mu.Lock()
	p, ok := a.policies[digest]
	raw := a.rawPolicies[digest]
	a.mu.Unlock()
	if ok {
		return p, raw, nil
	}
	raw, err := a.c.Get(ctx, a.base+"/v1/policies/"+digest.String(), api.MaxPolicyBytes)
	if err != nil {
		return nil, nil, err
	}
	if p, err = policy.Parse(raw); err != nil {
		return nil, nil, err
	}
	if p.Digest() != digest {
		return nil, nil, fmt.Errorf("the server answered a policy whose digest is %s", p.Digest())
	}
	a.mu.Lock()
	a.policies[digest], a.rawPolicies[digest] = p, raw
	a.mu.Unlock()
	return p, raw, nil
}

// recordsOf fetches the records the decision names, each once per audit; a
// record the server does not hold is left out, for §9 to refuse.
func (a *auditor) recordsOf(ctx context.Context, d *decision.Decision) ([][]byte, error) {
	var out [][]byte
	for _, pw := range d.Pathways {
		for _, h := range pw.Records {
			a.mu.Lock()
			b, ok := a.records[h]
			a.mu.Unlock()
			if !ok {
				var err error
				b, err = a.c.Get(ctx, a.base+"/v1/records/"+h.String(), api.MaxRecordBytes)
				if api.IsNotFound(err) {
					continue
				}
				if err != nil {
					return nil, err
				}
				a.mu.Lock()
				a.records[h] = b
				a.mu.Unlock()
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// String is the report's summary, for a command to print.
func (r *Report) String() string {
	var b bytes.Buffer
	switch {
	case len(r.Logs) == 0:
		b.WriteString("the room has no log of decisions yet\n")
	case len(r.Logs) == 1 && r.Logs[0].N == 0:
		l := r.Logs[0]
		fmt.Fprintf(&b, "room %s: a log of %d decisions, root %x, signed by %s", l.RoomID, l.Checkpoint.Size, l.Checkpoint.Root[:], l.Signer)
		if k := l.Checkpoint.Keys; k != nil {
			fmt.Fprintf(&b, " under key log head %d (from leaf %d)", k.Seq, k.From)
		}
		fmt.Fprintf(&b, "\n  the tree checks: %d tiles fetched; %d key log heads, each handover consistent\n", r.Tiles, len(l.Epochs))
	default:
		fmt.Fprintf(&b, "room %s: %d logs of %d decisions in all\n", r.Logs[0].RoomID, len(r.Logs), r.Leaves)
		for _, l := range r.Logs {
			state := "open"
			if l.Sealed {
				state = "sealed"
			}
			fmt.Fprintf(&b, "  %s, %s: %d decisions, root %x, signed by %s", l.Name(), state, l.Checkpoint.Size, l.Checkpoint.Root[:], l.Signer)
			if k := l.Checkpoint.Keys; k != nil {
				fmt.Fprintf(&b, " under key log head %d (from leaf %d)", k.Seq, k.From)
			}
			fmt.Fprintf(&b, "; %d key log heads\n", len(l.Epochs))
		}
		fmt.Fprintf(&b, "  the trees check: %d tiles fetched, each handover consistent; merged by (t, log, index): %d ties of t across logs", r.Tiles, r.Ties)
		if len(r.Duplicates) > 0 {
			d := r.Duplicates[0]
			fmt.Fprintf(&b, ", %d decisions in two places, counted once (the first: %s, %s and %s)", len(r.Duplicates), d.Digest, r.LeafName(d.FirstLog, d.FirstIndex), r.LeafName(d.Log, d.Index))
		}
		b.WriteString("\n")
	}
	if !r.Listed {
		b.WriteString("  the server lists no logs (issue 16's routes): its log 0 is audited alone\n")
	}
	for _, p := range r.Previous {
		if len(r.Logs) == 1 && p.Log == 0 {
			fmt.Fprintf(&b, "  consistent with the checkpoint seen before (%d decisions)\n", p.Size)
		} else {
			fmt.Fprintf(&b, "  %s: consistent with the checkpoint seen before (%d decisions)\n", logName(p.Log, p.Server), p.Size)
		}
	}
	fmt.Fprintf(&b, "  decisions: %d fetched and read, %d verified by §9 in full, %d refused, %d not fetched\n", r.Fetched, r.Verified, len(r.Refused), len(r.Missing))
	if len(r.Refused) > 0 {
		f := r.Refused[0]
		fmt.Fprintf(&b, "  first refused: %s, decision %s: %s at %s: %s\n", r.LeafName(f.Log, f.Index), f.Digest, f.Code, f.Where, f.Err)
	}
	if len(r.Missing) > 0 {
		byLog := map[int64][]int64{}
		var logs []int64
		for _, m := range r.Missing {
			if _, ok := byLog[m.Log]; !ok {
				logs = append(logs, m.Log)
			}
			byLog[m.Log] = append(byLog[m.Log], m.Index)
		}
		slices.Sort(logs)
		var parts []string
		for _, n := range logs {
			idx := byLog[n]
			slices.Sort(idx)
			part := "leaves " + ranges(idx)
			if len(r.Logs) > 1 || n != 0 {
				part += " of log " + strconv.FormatInt(n, 10)
			}
			parts = append(parts, part)
		}
		fmt.Fprintf(&b, "  not fetched: %s (%s)\n", strings.Join(parts, "; "), r.Missing[0].Why)
	}
	if r.Recount != nil {
		fmt.Fprintf(&b, "  %s\n", r.Recount)
	}
	if r.OK() {
		b.WriteString("  outcome: every check holds\n")
	} else {
		b.WriteString("  outcome: MISMATCH\n")
	}
	return b.String()
}

// ranges writes ascending indices as runs: "3-7, 9".
func ranges(xs []int64) string {
	var b bytes.Buffer
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", xs[i], xs[j])
		} else {
			fmt.Fprintf(&b, "%d", xs[i])
		}
		i = j + 1
	}
	return b.String()
}
