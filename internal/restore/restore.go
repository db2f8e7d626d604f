// Package restore counts again, after a restart, the live sessions of a
// room in a table of loads held in memory that the restart emptied (issue
// 16): each session's latest decision in the room's log, so that §6.1's
// capacities and the loads an audit recounts (§9.2) hold across the
// restart. It reads the store and writes the table of loads; it imports no
// capability, and the server runs it beside steering.
package restore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// restoreChunk is how many leaves of a room's log a restore reads at once.
const restoreChunk = 4096

// Logged is a room's log at start-up: its size, and the latest t among
// its last leaves (the log is in commit order, in which a t is at most the
// committer's wait behind the latest, so the latest is among them).
type Logged struct {
	size   int64
	latest uint64
}

// Resume has a table of loads that a restart emptied read its next
// loads after the latest decision Logged, as it did before the restart
// (Loads.Steer), so that the room's decisions stay in t order however the
// clock stands; it is quick, and New runs it before serving. It returns
// the log as it found it, which Count counts the sessions of (n is the
// number of the room's pathways).
func Resume(ctx context.Context, st store.Store, id sig.Hash, n int, loads *store.MemLoads) (Logged, error) {
	// A table of loads in memory is a server's alone, on a store of one
	// server (bbolt, memory), whose room has one log, 0 (issue 31); a
	// shared store shares its table of loads instead.
	var lg Logged
	size, err := st.LogSize(ctx, id, 0)
	if err != nil || size == 0 {
		return lg, err
	}
	last, err := st.LogEntries(ctx, id, 0, max(0, size-restoreChunk), size)
	if err != nil {
		return lg, err
	}
	lg.size = size
	for _, e := range last {
		lg.latest = max(lg.latest, e.T)
	}
	_, err = loads.Snapshot(ctx, id, n, lg.latest)
	return lg, err
}

// Count counts again, in a table of loads held in memory that a
// restart emptied, the room's sessions still live: each session's latest
// decision in the room's log (issue 16), newest first, back to the first
// whose t is a session's life before now. It runs beside steering, which a
// restore of millions of sessions would otherwise hold up: a decision
// merged later than a new one for its session changes nothing (the later
// t is the latest), and until it ends the loads count fewer sessions than
// live. A session whose latest decision was under a policy of other
// pathways counts nowhere, as the install of the current one reset the
// table (§6, SPEC-NOTES); what it cannot read (a pruned decision) counts
// nowhere. It reads the log of lg, as Resume found it: the decisions
// after are the table's own. It returns how many sessions it counted.
func Count(ctx context.Context, src Source, r Room, loads *store.MemLoads, lg Logged) (int, error) {
	p := r.Policy
	life := uint64(max(p.TTLs, p.MinTTLs))*1_000_000 + src.Grace
	at := max(src.Clock(), lg.latest)
	seen := map[report.Session]struct{}{}
	rules := rules{src: src, ids: r.IDs}
	yield := src.yielder()
	rows := newRowReader(src.Store)
	counted, read := 0, 0
	for end := lg.size; end > 0; {
		start := max(0, end-restoreChunk)
		es, err := src.Store.LogEntries(ctx, r.ID, 0, start, end)
		if err != nil {
			return counted, err
		}
		rows.reset()
		for i := len(es) - 1; i >= 0; i-- {
			e := es[i]
			// A decision a second older than a life is past every
			// session's, even one committed that much late.
			if e.T+life+1_000_000 < at {
				return counted, nil
			}
			if err := ctx.Err(); err != nil {
				return counted, err
			}
			if read++; read%yieldEvery == 0 {
				yield()
			}
			row, err := rows.at(ctx, es, i)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return counted, err
			}
			// One look in seen, not two: a session already in it
			// leaves its size as it was.
			n := len(seen)
			seen[row.Session] = struct{}{}
			if len(seen) == n {
				continue
			}
			first, expires, ok, err := rules.firstOf(ctx, row)
			if err != nil {
				return counted, err
			}
			if ok && expires >= at {
				loads.Merge(r.ID, len(r.IDs), row.Session, first, row.T, expires, at)
				counted++
			}
		}
		end = start
	}
	return counted, nil
}

// decisionsAt is a store that reads a decision by the t and digest its
// log's leaf names (store.Bolt), more cheaply than by its digest alone,
// and several in one read (DecisionsAt).
type decisionsAt interface {
	DecisionAt(ctx context.Context, t uint64, digest sig.Hash) (store.Decision, error)
	DecisionsAt(ctx context.Context, es []store.LogEntry, rows []store.Decision, held []bool) ([]store.Decision, []bool, error)
}

// rowReader reads the decisions of a chunk of leaves, newest first: on a
// store that reads several at once, the leaf asked for and the
// yieldEvery-1 before it in one read, as many as a recount reads between
// two yields; otherwise, and for a decision that read did not find, one
// by one.
type rowReader struct {
	st     store.Store
	many   decisionsAt // nil: one by one
	rows   []store.Decision
	held   []bool
	lo, hi int // rows and held are those of the chunk's leaves [lo, hi)
}

func newRowReader(st store.Store) *rowReader {
	r := &rowReader{st: st}
	r.many, _ = st.(decisionsAt)
	return r
}

// reset forgets what was read of the chunk before.
func (r *rowReader) reset() { r.lo, r.hi = 0, 0 }

// at returns the decision leaf es[i] names; ErrNotFound when not held.
func (r *rowReader) at(ctx context.Context, es []store.LogEntry, i int) (store.Decision, error) {
	e := es[i]
	if r.many == nil {
		return r.st.Decision(ctx, e.Digest)
	}
	if i < r.lo || i >= r.hi {
		r.lo, r.hi = max(0, i+1-yieldEvery), i+1
		clear(r.rows) // nothing of a read is kept past the next
		var err error
		if r.rows, r.held, err = r.many.DecisionsAt(ctx, es[r.lo:r.hi], r.rows[:0], r.held[:0]); err != nil {
			r.reset()
			return store.Decision{}, err
		}
	}
	if r.held[i-r.lo] {
		return r.rows[i-r.lo], nil
	}
	// Not in the file: applied since, or pruned.
	return r.many.DecisionAt(ctx, e.T, e.Digest)
}

// yieldEvery is how many decisions a recount reads between its yields to
// the requests waiting for the core.
const yieldEvery = 16

// yielder returns what a recount calls every yieldEvery decisions, so that
// it runs beside steering rather than ahead of it (issue 30: p99 unchanged
// while it runs). The runtime reads the network for new requests when no
// goroutine is ready to run, or every 10 ms; the recount is always ready,
// so on one core a request would wait up to 10 ms for it, and requests
// would pile up behind it. So the recount works yieldWork, stepping aside
// meanwhile for the goroutines already ready, then sleeps yieldRest times
// as long, in which the runtime reads the network: it takes a sixteenth
// of the core at most, and the requests keep their headroom. On a server
// at rest it takes sixteen times as long as it could. What it adds to the
// requests' p99 grows with its share: on 3.75 M decisions at half the
// saturated rate, 4.4 and 5.0 ms while it ran at a sixteenth, 6.1 to 6.9
// at an eighth, 3.6 with a recount that only slept (bench, stop 54;
// SPEC-NOTES). A counting that measured the server's load to run faster
// at rest kept the core to itself under load (bench, 1 M decisions: p99
// 280 ms while it ran, 8 ms after); one that took a quarter of the core
// overloaded a server at half its rate (bench, 3.75 M decisions: p99
// 166 ms while it ran, 23 ms after).
func (src Source) yielder() func() {
	if src.Alone {
		return func() {}
	}
	next := time.Now().Add(yieldWork)
	return func() {
		if time.Now().Before(next) {
			runtime.Gosched()
			return
		}
		time.Sleep(yieldRest * yieldWork)
		next = time.Now().Add(yieldWork)
	}
}

// yieldWork is a recount's work between two sleeps, and yieldRest how
// many times as long each sleep is.
const (
	yieldWork = 250 * time.Microsecond
	yieldRest = 15
)

// rules gives a stored decision's first pathway and expiry by the rule
// (§6.1 to §6.5, decision.Recompute): the ranking of a policy, an
// evidence snapshot and a window, made once for the decisions that share
// them (those of one ranking, in a room's log), then its Decide on each
// decision's report, session and loads.
type rules struct {
	src      Source
	ids      []string
	policy   sig.Hash
	p        *policy.Policy
	same     bool // the policy has the current one's pathways
	evidence sig.Hash
	ev       []evidence.Pathway
	a, b     uint64
	r        *decision.Ranking
}

// firstOf is the pathway a stored decision put first and its session's
// expiry, when its policy has the current one's pathways (ok).
func (c *rules) firstOf(ctx context.Context, row store.Decision) (int, uint64, bool, error) {
	if c.p == nil || row.Policy != c.policy {
		p, err := c.src.PolicyOf(ctx, row.Policy)
		if err != nil {
			return 0, 0, false, err
		}
		c.policy, c.p, c.same, c.ev, c.r = row.Policy, p, slices.Equal(p.IDs(), c.ids), nil, nil
	}
	if !c.same {
		return 0, 0, false, nil
	}
	if c.ev == nil || row.Evidence != c.evidence {
		body, err := c.src.Store.EvidenceSnapshot(ctx, row.Evidence)
		if err != nil {
			return 0, 0, false, err
		}
		ev, err := store.DecodeEvidence(body)
		if err != nil {
			return 0, 0, false, fmt.Errorf("decision %s: evidence %s: %w", row.Digest, row.Evidence, err)
		}
		c.evidence, c.ev, c.r = row.Evidence, ev, nil
	}
	if len(c.ev) != len(c.p.Pathways) || len(row.Loads) != len(c.p.Pathways) {
		return 0, 0, false, fmt.Errorf("decision %s: %d pathways of evidence and %d loads for a policy of %d", row.Digest, len(c.ev), len(row.Loads), len(c.p.Pathways))
	}
	if a, b := evidence.PolicyWindow(c.p, row.T); c.r == nil || a != c.a || b != c.b {
		r, err := decision.NewRanking(c.p, c.policy, a, b, c.ev)
		if err != nil {
			return 0, 0, false, fmt.Errorf("decision %s: %w", row.Digest, err)
		}
		c.r, c.a, c.b = r, a, b
	}
	o, err := c.r.Decide(row.Report, row.Session, row.Loads)
	if err != nil {
		return 0, 0, false, fmt.Errorf("decision %s: %w", row.Digest, err)
	}
	return int(o.Priority[0]), row.T + uint64(o.TTL)*1_000_000 + c.src.Grace, true, nil
}

// Room is what a restore reads of a room: its id, and the policy it
// steers by and its pathways' ids.
type Room struct {
	ID     sig.Hash
	Policy *policy.Policy
	IDs    []string
}

// Source is where a restore reads decisions and their policies, and the
// server's clock and session grace (§6).
type Source struct {
	Store    store.Store
	PolicyOf func(context.Context, sig.Hash) (*policy.Policy, error)
	Grace    uint64        // µs
	Clock    func() uint64 // the room clock, µs
	// Alone counts without yielding the core: for tools and tests that
	// run nothing beside the recount.
	Alone bool
}
