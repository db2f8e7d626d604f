package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	// Previous is a signed checkpoint of the log an auditor saw before,
	// or nil: the log must extend it.
	Previous []byte
	// Recount is the recount's settings (verify/recount).
	Recount recount.Options
	// Workers is how many fetches run at once; 0 is client.Workers.
	Workers int
}

// Missing is a leaf whose decision the audit could not fetch.
type Missing struct {
	Index  int64
	Digest sig.Hash
	Why    string
}

// Refused is a decision that the audit's checks refuse.
type Refused struct {
	Index  int64
	Digest sig.Hash
	Code   string
	Where  string
	Err    string
}

// Report is what an audit found.
type Report struct {
	Log      *Log
	Previous *declog.Checkpoint // the earlier checkpoint the log extends
	Leaves   int64
	Tiles    int // tiles fetched and checked
	Fetched  int // decisions fetched
	Missing  []Missing
	Verified int // decisions verified by §9 in full
	Refused  []Refused
	Recount  *recount.Report
}

// OK reports whether the audit found nothing wrong. Decisions it could
// not fetch are said (Missing), not failed: retention prunes them.
func (r *Report) OK() bool {
	return len(r.Refused) == 0 && r.Recount != nil && r.Recount.OK()
}

// Run audits room's log at base (the server's scheme and host).
func Run(ctx context.Context, c *client.Client, base string, roomID sig.Hash, o Options) (*Report, error) {
	workers := o.Workers
	if workers <= 0 {
		workers = client.Workers
	}
	desc, err := c.Get(ctx, base+"/v1/rooms/"+roomID.String()+"/descriptor", api.MaxDescriptorBytes)
	if err != nil {
		return nil, &Failure{Where: "room", Err: err}
	}
	l, err := FetchLog(ctx, c, base, roomID, desc)
	if err != nil {
		return nil, err
	}
	rep := &Report{Log: l, Leaves: l.Checkpoint.Size}
	if o.Previous != nil {
		prev, err := l.previous(o.Previous)
		if err != nil {
			return nil, err
		}
		if err := l.CheckConsistent(ctx, c, prev); err != nil {
			return nil, &Failure{Where: "previous checkpoint", Err: err}
		}
		rep.Previous = &prev
	}
	leaves, tiles, err := l.fetchLeaves(ctx, c, workers)
	if err != nil {
		return nil, err
	}
	rep.Tiles = tiles

	// The decisions, every one read and its place checked; a sample
	// verified in full.
	sample := map[int64]bool{}
	if o.Sample > 0 && int64(o.Sample) < int64(len(leaves)) {
		rng := rand.New(rand.NewPCG(o.Seed, 16))
		for _, i := range rng.Perm(len(leaves))[:o.Sample] {
			sample[int64(i)] = true
		}
	}
	a := &auditor{c: c, l: l, policies: map[sig.Hash]*policy.Policy{}, rawPolicies: map[sig.Hash][]byte{}, records: map[sig.Hash][]byte{}, opened: map[opened]openedRoom{}}
	entries := make([]recount.Entry, len(leaves))
	type result struct {
		missing *Missing
		refused *Refused
		full    bool
	}
	results := make([]result, len(leaves))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				full := o.Sample == 0 || sample[int64(i)]
				e, m, rf := a.check(ctx, int64(i), leaves[i], full)
				entries[i], results[i] = e, result{m, rf, full && m == nil && rf == nil}
			}
		})
	}
	for i := range leaves {
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
	for i, r := range results {
		switch {
		case r.missing != nil:
			rep.Missing = append(rep.Missing, *r.missing)
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
	ro := o.Recount
	for _, m := range rep.Missing {
		ro.Unheld = append(ro.Unheld, leaves[m.Index].T)
	}
	if rep.Recount, err = recount.Recount(held, ro); err != nil {
		return nil, err
	}
	return rep, nil
}

// previous opens the checkpoint an auditor saw before, signed under the
// head it names.
func (l *Log) previous(b []byte) (declog.Checkpoint, error) {
	named, err := declog.Peek(b, l.RoomID)
	if err != nil {
		return named, &Failure{Where: "previous checkpoint", Err: err}
	}
	under, err := l.roomOf(named.Keys, "previous checkpoint")
	if err != nil {
		return named, err
	}
	c, _, err := openUnder(b, under)
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
			if b, err = r.c.Get(r.ctx, r.l.url("/log/"+declog.TilePath(t)), int64(t.W)*(2+store.LogEntrySize)); err != nil {
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
	b, err := c.Get(ctx, l.url("/log/"+declog.TilePath(t)), int64(w)*(2+store.LogEntrySize))
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
	l           *Log
	mu          sync.Mutex
	policies    map[sig.Hash]*policy.Policy
	rawPolicies map[sig.Hash][]byte
	records     map[sig.Hash][]byte
	opened      map[opened]openedRoom
}

// check fetches the decision of leaf i and checks it: its bytes are the
// leaf's digest, its t the leaf's and its room the log's; its signer may
// sign it under the head in force at i (§3.5); in full, §9 with that head.
func (a *auditor) check(ctx context.Context, i int64, leaf store.LogEntry, full bool) (recount.Entry, *Missing, *Refused) {
	refuse := func(code, where, format string, args ...any) *Refused {
		return &Refused{Index: i, Digest: leaf.Digest, Code: code, Where: where, Err: fmt.Sprintf(format, args...)}
	}
	raw, err := a.c.Get(ctx, a.l.Base+"/v1/decisions/"+leaf.Digest.String(), api.MaxDecisionBytes)
	if api.IsNotFound(err) {
		return recount.Entry{}, &Missing{Index: i, Digest: leaf.Digest, Why: "the server holds it no longer (pruned by retention, or never stored)"}, nil
	}
	if err != nil {
		return recount.Entry{}, &Missing{Index: i, Digest: leaf.Digest, Why: err.Error()}, nil
	}
	if len(raw) < sig.SignatureSize || sig.Digest(raw[:len(raw)-sig.SignatureSize]) != leaf.Digest {
		return recount.Entry{}, nil, refuse("digest_mismatch", "decision", "the server answered bytes that are not the decision the leaf names")
	}
	d, err := decision.Parse(raw)
	if err != nil {
		return recount.Entry{}, nil, refuse(string(reason.Of(err)), "decision", "%v", err)
	}
	if d.T != leaf.T || d.Room != a.l.RoomID {
		return recount.Entry{}, nil, refuse("log_mismatch", "decision", "the decision is of room %s at t %d, and its leaf says room %s at t %d", d.Room, d.T, a.l.RoomID, leaf.T)
	}
	p, rawPolicy, err := a.policy(ctx, d.Policy)
	if err != nil {
		return recount.Entry{}, nil, refuse("record_missing", verify.PlacePolicy, "its policy: %v", err)
	}
	in := verify.Input{Descriptor: a.l.Descriptor, Policy: rawPolicy, Decision: raw}
	if e := a.l.HeadAt(i); e != nil {
		in.KeyLogHead = e.Head
	}
	if full {
		if in.Records, err = a.recordsOf(ctx, d); err != nil {
			return recount.Entry{}, &Missing{Index: i, Digest: leaf.Digest, Why: "its records: " + err.Error()}, nil
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
	return recount.Entry{Index: i, Decision: d, Policy: p}, nil, nil
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
	raw, err := a.c.Get(ctx, a.l.Base+"/v1/policies/"+digest.String(), api.MaxPolicyBytes)
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
				b, err = a.c.Get(ctx, a.l.Base+"/v1/records/"+h.String(), api.MaxRecordBytes)
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
	l := r.Log
	fmt.Fprintf(&b, "room %s: a log of %d decisions, root %x, signed by %s", l.RoomID, l.Checkpoint.Size, l.Checkpoint.Root[:], l.Signer)
	if k := l.Checkpoint.Keys; k != nil {
		fmt.Fprintf(&b, " under key log head %d (from leaf %d)", k.Seq, k.From)
	}
	fmt.Fprintf(&b, "\n  the tree checks: %d tiles fetched; %d key log heads, each handover consistent\n", r.Tiles, len(l.Epochs))
	if r.Previous != nil {
		fmt.Fprintf(&b, "  consistent with the checkpoint seen before (%d decisions)\n", r.Previous.Size)
	}
	fmt.Fprintf(&b, "  decisions: %d fetched and read, %d verified by §9 in full, %d refused, %d not fetched\n", r.Fetched, r.Verified, len(r.Refused), len(r.Missing))
	if len(r.Refused) > 0 {
		f := r.Refused[0]
		fmt.Fprintf(&b, "  first refused: leaf %d, decision %s: %s at %s: %s\n", f.Index, f.Digest, f.Code, f.Where, f.Err)
	}
	if len(r.Missing) > 0 {
		idx := make([]int64, 0, len(r.Missing)) // ascending: Run lists them by leaf
		for _, m := range r.Missing {
			idx = append(idx, m.Index)
		}
		fmt.Fprintf(&b, "  not fetched: leaves %s (%s)\n", ranges(idx), r.Missing[0].Why)
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
