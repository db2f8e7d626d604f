package roomsteer

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/qoewatch"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/steerroute"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/verify"
)

// A Room is one room the server steers: what the room and its operator gave
// (a State, swapped whole when the operator installs a policy or a key
// log head), the room's verified records (an evidence.Index) and the ranking
// computed from them for the current window (decision.Ranking).
//
// A steering request reads the state and the ranking through atomic
// pointers and takes no lock (issue 3 item 6): the evidence, the ranks and
// the order are computed once per window, when a record arrives or the
// window moves, under mu, and published whole.
type Room struct {
	d      Deps
	id     sig.Hash
	key    sig.PrivateKey // the steering key, which signs decisions (§3.5)
	signer sig.PublicKey

	state   atomic.Pointer[State]
	ranking atomic.Pointer[ranked]

	// mu guards index and serialises the ranking's rebuilds and refreshes
	// and the state's replacement, so that a ranking is always computed
	// from the index as it stands.
	mu    sync.Mutex
	index *evidence.Index
	// opMu serialises the operator's changes (a policy, a key log head),
	// each of which writes the store before it is published.
	opMu sync.Mutex
	// retired are the steering URIs of the policies the room steered by
	// before its current one (Server.routesMu guards it).
	retired []steerroute.Route
	// base is the operator's policy, which the room steers by unless a
	// pathway is down (install; opMu guards it).
	base *policy.Policy
	// health checks the pathways that have a check URL; nil for none.
	health *roomHealth
	// qoe is the room's steering by what its players report; nil for
	// none. qoeMu guards degraded, the pathways it moved off.
	qoe      *qoewatch.Watch
	qoeMu    sync.Mutex
	degraded []string
	// wake signals a change of health or QoE to runOverlay; nil when the
	// room has neither.
	wake chan struct{}
	// decisions is the decision prefix of the configured policy when the
	// store's active one superseded it, which New keeps routed.
	decisions string

	// unread counts the steering requests' report values that do not
	// count, by reason (issue 26 item 3).
	unread qoewatch.Unread

	// restored is set once the room's live sessions are counted again from
	// its log after a start (restore.go), or need not be.
	restored atomic.Bool

	accepted, duplicates atomic.Uint64
	fromPeers            atomic.Uint64 // records other servers of a shared store accepted, joined to this one's evidence
	offPolicy            atomic.Uint64 // records accepted whose hop is in no pathway of the policy
	refused              web.Counters[string]

	// latest keeps the sessions' latest manifests while the server has
	// budgets, and limited counts the requests over them (internal/budget).
	latest  budget.Latest[latestManifest]
	limited budget.Counts
}

// State is what a room's steering is configured with; it is immutable
// once published.
type State struct {
	room       *room.Room
	descriptor []byte
	head       []byte // nil for a room with no origin
	policy     *policy.Policy
	digest     sig.Hash // the policy's (§3.4)
	writer     *decision.ManifestWriter
	ids        []string              // the pathways' ids in the policy's order
	hops       map[sig.PublicKey]int // each hop's pathway (§3.3: a hop belongs to one)
	steer      []steerroute.Route
	decisions  string // the path (and query) prefix of the policy's decision_uri (§8.4)

	// firsts counts the decisions made under this policy by reason (§6.4,
	// 1 to 6) and first pathway.
	firsts [decision.None + 1][]atomic.Uint64

	// lengths are the Content-Length values of the policy's manifests:
	// PATHWAY-PRIORITY names each pathway once (§6.5, §8.1), so a
	// manifest's length depends only on its TTL, ttl_s or min_ttl_s.
	lengths [2]struct {
		n int
		v []string
	}
}

// pathwayOf is the index of the pathway whose hops include hop.
func (st *State) pathwayOf(hop sig.PublicKey) (int, bool) {
	i, ok := st.hops[hop]
	return i, ok
}

// contentLength is the Content-Length value of a manifest of n bytes, nil
// for a length the policy's manifests do not have.
func (st *State) contentLength(n int) []string {
	for _, l := range st.lengths {
		if l.n == n {
			return l.v
		}
	}
	return nil
}

// ranked is a ranking with what each decision made from it shares: the
// snapshot of its evidence as the store keeps it, encoded once.
type ranked struct {
	st       *State
	r        *decision.Ranking
	snapshot store.Evidence
}

// newState checks a room, a policy and the steering key together and
// returns their state. The policy must be the room's (§9.1 step 2:
// wrong_room, its signature, its signer), and the steering key must be
// allowed to sign a decision stating any figure the policy's hops may sign
// under the room's key log (§3.5, COMPANION §4.2), so that no record the
// server accepts can put a figure in a decision its key may not sign.
func newState(rm *room.Room, descriptor, head []byte, p *policy.Policy, signer sig.PublicKey) (*State, error) {
	if err := verify.PolicyOfRoom(rm, p); err != nil {
		return nil, err
	}
	if err := rm.MaySignDecision(signer, hopClasses(rm, p)); err != nil {
		return nil, api.Errorf(api.SteeringKey, "the steering key %s may not sign the decisions of policy %s under this key log: %v", signer, p.Digest(), err)
	}
	st := &State{
		room:       rm,
		descriptor: descriptor,
		head:       head,
		policy:     p,
		digest:     p.Digest(),
		writer:     decision.NewManifestWriter(p),
		ids:        p.IDs(),
		hops:       map[sig.PublicKey]int{},
	}
	for i := range p.Pathways {
		for _, hp := range p.Pathways[i].Hops {
			st.hops[hp.Key] = i
		}
	}
	var err error
	if st.steer, st.decisions, err = steerroute.OfPolicy(p); err != nil {
		return nil, err
	}
	for r := range st.firsts {
		st.firsts[r] = make([]atomic.Uint64, len(st.ids))
	}
	priority := make([]uint8, len(st.ids))
	for i := range priority {
		priority[i] = uint8(i)
	}
	for i, ttl := range []uint32{p.TTLs, p.MinTTLs} {
		n := len(st.writer.Append(nil, ttl, report.Session{}, priority, sig.Hash{}))
		st.lengths[i].n, st.lengths[i].v = n, []string{strconv.Itoa(n)}
	}
	return st, nil
}

// hopClasses lists the classes of figure that some hop of the policy may
// sign under the room's key log (COMPANION §4.2): the figures a decision
// made from the records the server accepts can state.
func hopClasses(rm *room.Room, p *policy.Policy) []evidence.Class {
	var cs []evidence.Class
	for _, c := range []evidence.Class{evidence.ModelBased, evidence.Estimator, evidence.OnChipCounter, evidence.CalibratedInstrument} {
	pathways:
		for i := range p.Pathways {
			for _, h := range p.Pathways[i].Hops {
				if rm.MaySignRecord(h.Key, c) == nil {
					cs = append(cs, c)
					break pathways
				}
			}
		}
	}
	return cs
}

// loadIndex reads the room's records from the store into a new index: each
// read, checked and authorised again under the state's key log (COMPANION
// §5, §4.2), since a key log head installed since it was stored may have
// revoked its hop. A record that no longer passes is left in the store and
// out of the evidence.
func (h *Room) loadIndex(ctx context.Context, st *State, now uint64) (*evidence.Index, error) {
	x := evidence.NewIndex()
	dropped := 0
	// From a period before the window of now (§5.1), so that a clock that
	// steps back by less than a period still finds the window's records.
	err := h.d.Store.Records(ctx, h.id, evidence.ForgetHorizon(st.policy, now), func(sr store.Record) error {
		rec, err := st.room.ReadRecord(sr.Raw)
		if err != nil {
			dropped++
			return nil
		}
		x.Add(evidence.Entry{Digest: sr.Digest, Record: rec})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if dropped > 0 {
		h.d.Log.Info("records left out of the evidence", "room", h.id.String(), "count", dropped)
	}
	return x, nil
}

// rank returns the ranking for the state st at the instant t, and the
// instant the decision is to be made at: t, or a later reading of the clock
// when another request moved the ranking on to the window that follows t's
// (requests take t before they queue for mu, and a decision must be made
// from its own instant's window, §5.1).
func (h *Room) rank(st *State, t uint64) (*ranked, uint64, error) {
	if rk := h.ranking.Load(); rk != nil && rk.st == st && rk.r.Covers(t) {
		return rk, t, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rk := h.ranking.Load()
	if rk != nil && rk.st == st {
		if rk.r.Covers(t) {
			return rk, t, nil
		}
		_, b := rk.r.Window()
		if _, tb := evidence.PolicyWindow(st.policy, t); tb < b {
			if t2 := h.d.Clock(); rk.r.Covers(t2) {
				return rk, t2, nil
			}
		}
	}
	next, err := h.build(st, t)
	if err != nil {
		return nil, 0, err
	}
	// Publish it when it is the current state's and no older than what is
	// published; otherwise it serves this request alone.
	if h.state.Load() == st && (rk == nil || rk.st != st || later(next.r, rk.r)) {
		h.ranking.Store(next)
		// A window's a never moves back as t advances (§5.1): what
		// starts a period before it is kept for a clock that steps back,
		// and the rest is in the store.
		if before := evidence.ForgetHorizon(st.policy, t); before > 0 {
			h.index.Forget(before)
		}
	}
	return next, t, nil
}

// later reports whether x's window is after y's.
func later(x, y *decision.Ranking) bool {
	_, bx := x.Window()
	_, by := y.Window()
	return bx > by
}

// build ranks the index for st at t (§5, §6.2); h.mu is held.
func (h *Room) build(st *State, t uint64) (*ranked, error) {
	r, err := decision.RankAt(st.policy, st.digest, t, h.index)
	if err != nil {
		return nil, err
	}
	return h.publishable(st, r)
}

// publishable wraps a ranking with its evidence snapshot, after checking
// that the steering key may state its figures (§3.5): newState made this
// so for every record the server accepts, and a decision the key may not
// sign is never made.
func (h *Room) publishable(st *State, r *decision.Ranking) (*ranked, error) {
	n := len(st.ids)
	ev := make([]evidence.Pathway, n)
	var classes []evidence.Class
	for i := range ev {
		ev[i] = r.Evidence(i)
		if ev[i].Status == evidence.StatusFigure {
			classes = append(classes, ev[i].Class)
		}
	}
	if err := st.room.MaySignDecision(h.signer, classes); err != nil {
		return nil, api.Errorf(api.SteeringKey, "the ranking states figures the steering key may not sign: %v", err)
	}
	return &ranked{st: st, r: r, snapshot: store.EncodeEvidence(ev)}, nil
}

// addRecords adds verified records to the index and refreshes the current
// ranking with those in its window (§5): the evidence a decision states is
// updated as soon as a record is accepted.
func (h *Room) addRecords(es []evidence.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state.Load()
	rk := h.ranking.Load()
	r := (*decision.Ranking)(nil)
	if rk != nil && rk.st == st {
		r = rk.r
	}
	changed := false
	// A record that starts before the horizon is in the window of no
	// decision from now on (§5.1): the next ranking would forget it (rank),
	// and adding it meanwhile costs an insertion before the hop's other
	// records and a refresh, for nothing. It is in the store, as the
	// records rank forgot are.
	horizon := evidence.ForgetHorizon(st.policy, h.d.Clock())
	for _, e := range es {
		if e.Record.Start < horizon {
			continue
		}
		// The key log may have changed since the record was checked.
		if st.room.MaySignRecord(e.Record.Hop, e.Record.Class) != nil {
			continue
		}
		if !h.index.Add(e) || r == nil {
			continue
		}
		next, err := r.Refresh(h.index, e.Record)
		if err != nil {
			h.d.Log.Error("refreshing the ranking", "room", h.id.String(), "err", err)
			continue
		}
		changed = changed || next != r
		r = next
	}
	if !changed {
		return
	}
	next, err := h.publishable(st, r)
	if err != nil {
		h.d.Log.Error("refreshing the ranking", "room", h.id.String(), "err", err)
		return
	}
	h.ranking.Store(next)
}

// replace publishes a new state, rebuilding the index from the store
// (a policy's window may reach further back than the last one's, and a key
// log head may revoke a hop) and the ranking for now. persist, when given,
// makes the change durable once everything else is ready, and before it is
// published.
func (h *Room) replace(ctx context.Context, st *State, persist func() error) error {
	now := h.d.Clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	x, err := h.loadIndex(ctx, st, now)
	if err != nil {
		return err
	}
	old := h.index
	h.index = x
	rk, err := h.build(st, now)
	if err == nil && persist != nil {
		err = persist()
	}
	if err != nil {
		h.index = old
		return err
	}
	h.state.Store(st)
	h.ranking.Store(rk)
	return nil
}

// keyLogSeq is the seq of the state's key log head, and false with none.
func (st *State) keyLogSeq() (uint64, bool) {
	if hd := st.room.Head(); hd != nil {
		return hd.Seq, true
	}
	return 0, false
}

// Label names the room in messages.
func (h *Room) Label() string { return "room " + h.id.String() }

// ReadsHost is false: a room's answer is the same whatever Host a request
// reached.
func (h *Room) ReadsHost() bool { return false }
