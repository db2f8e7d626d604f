package roomsteer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/steerroute"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
	"github.com/waisteer/waisteer/store"
)

// Config is one room the server steers.
type Config struct {
	Descriptor  []byte         // room descriptor (CBOR)
	KeyLogHead  []byte         // nil for a room with no origin
	Policy      []byte         // signed WSP1; nil to steer by the store's active policy
	SteeringKey sig.PrivateKey // signs decisions; must be allowed by COMPANION §4.2 for the policy's room
	Checks      Checks         // the pathways' health checks; none by default
	// QoE moves a pathway whose players report it degrading out of the
	// limits, as a failed health check does (issue 17 item 4); nil for
	// none. The room is one cohort.
	QoE *qoe.Config
}

// Open checks one configured room and makes its Room, with its state
// published and nothing stored yet: the descriptor and key log head pass
// the room step (COMPANION §4.1), a head stored with a greater seq than
// the configuration's wins (stored: the rooms the store holds), and the
// policy is chosen by startPolicy.
func Open(ctx context.Context, rc Config, stored map[sig.Hash]store.Room, d Deps) (*Room, error) {
	if rc.SteeringKey.IsZero() {
		return nil, errors.New("no steering key")
	}
	rm, err := room.Open(rc.Descriptor, rc.KeyLogHead)
	if err != nil {
		return nil, err
	}
	desc, head := rc.Descriptor, rc.KeyLogHead
	if rm.Head() == nil {
		head = nil // a room with no origin: a head given is not read (COMPANION §4.1)
	}
	if prev, ok := stored[rm.ID()]; ok && prev.KeyLogHead != nil && rm.Head() != nil {
		// An operator may have installed a newer head since the
		// configuration was written: the greater seq wins.
		if pr, err := room.Open(prev.Descriptor, prev.KeyLogHead); err == nil && pr.Head().Seq > rm.Head().Seq {
			// Issue 29: said, with both seqs, so that an operator who
			// restored an older file knows it is not the one in force.
			d.Log.Warn("the configured key log file is older than the head the store holds: steering by the store's (GET /v1/rooms/{room}/keylog gives it, to write into the file)",
				"room", rm.ID().String(), "file_seq", rm.Head().Seq, "stored_seq", pr.Head().Seq)
			rm, desc, head = pr, prev.Descriptor, prev.KeyLogHead
		}
	}
	p, superseded, err := startPolicy(ctx, d, rm.ID(), rc.Policy)
	if err != nil {
		return nil, err
	}
	h := &Room{d: d, id: rm.ID(), key: rc.SteeringKey, signer: rc.SteeringKey.Public(), index: evidence.NewIndex()}
	st, err := newState(rm, desc, head, p, h.signer)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", p.Digest(), err)
	}
	if superseded != nil {
		// Players may still poll the configured policy's URIs, and hold
		// manifests naming its decision_uri.
		if steer, decisions, err := steerroute.OfPolicy(superseded); err == nil {
			for _, r := range steer {
				if !slices.ContainsFunc(st.steer, r.Equal) {
					h.retired = append(h.retired, r)
				}
			}
			h.decisions = decisions
		}
	}
	h.state.Store(st)
	h.base = p
	if err := h.openChecks(rc.Checks); err != nil {
		return nil, err
	}
	if err := h.openQoE(rc.QoE); err != nil {
		return nil, err
	}
	return h, nil
}

// startPolicy chooses the policy a room starts with: the configuration's,
// unless the store already holds those bytes and has another active,
// which an operator installed after them; with none configured, the
// store's active one.
func startPolicy(ctx context.Context, d Deps, id sig.Hash, raw []byte) (use, superseded *policy.Policy, err error) {
	activeDigest, active, err := d.Store.ActivePolicy(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, nil, err
	}
	hasActive := err == nil
	if raw == nil {
		if !hasActive {
			return nil, nil, errors.New("no policy configured, and the store has none active")
		}
		use, err = policy.Parse(active)
		return use, nil, err
	}
	p, err := policy.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	if hasActive && activeDigest != p.Digest() {
		if known, err := d.Store.Policy(ctx, p.Digest()); err == nil && bytes.Equal(known, raw) {
			d.Log.Info("steering by the policy the store holds active, installed after the configured one",
				"room", id.String(), "active", activeDigest.String(), "configured", p.Digest().String())
			use, err = policy.Parse(active)
			return use, p, err
		}
	}
	return p, nil, nil
}

// installHead checks a key log head for the room as serveKeyLogPut says
// and installs it, storing it first when persist (a head another server
// stored is installed as it is). h.opMu is held.
func (h *Room) installHead(ctx context.Context, body []byte, persist bool) (*State, *api.Error) {
	cur := h.state.Load()
	curSeq, has := cur.keyLogSeq()
	if !has {
		return nil, api.Errorf(api.NoOrigin, "the room names no origin and so has no key log (COMPANION §4)")
	}
	rm, err := room.Open(cur.descriptor, body)
	if err != nil {
		return nil, api.From(err)
	}
	if seq := rm.Head().Seq; seq <= curSeq {
		return nil, api.Errorf(api.KeyLogStale, "the head's seq %d is not greater than the current %d", seq, curSeq)
	}
	if err := rm.MaySignPolicy(cur.policy.Signer); err != nil {
		return nil, api.Errorf(api.PolicySigner, "under this head the active policy's signer may not sign it (%s): %s", reason.Of(err), err)
	}
	st, err := newState(rm, cur.descriptor, body, cur.policy, h.signer)
	if err != nil {
		return nil, api.From(err)
	}
	st.firsts = cur.firsts // the same policy: its counts go on
	// The head is in force for the decisions this server's log takes from
	// now (issue 16), a head another server stored too: each log has a
	// start of every head its decisions are signed under (issue 31).
	put := func() error { return h.d.KeepEpoch(ctx, h, st) }
	if persist {
		put = func() error {
			if err := h.d.Store.PutRoom(ctx, store.Room{ID: h.id, Descriptor: cur.descriptor, KeyLogHead: body}); err != nil {
				return err
			}
			return h.d.KeepEpoch(ctx, h, st)
		}
	}
	if err := h.replace(ctx, st, put); err != nil {
		return nil, h.d.Fails.Failed("installing the key log head", err)
	}
	return st, nil
}

// Status is the room's status now (its status route's answer), with the
// loads as of loadsAt on the room clock.
func (h *Room) Status(ctx context.Context, loadsAt uint64) (view.Status, *api.Error) {
	st := h.state.Load()
	rk, t, err := h.rank(st, h.d.Clock())
	if err != nil {
		return view.Status{}, api.Errorf(api.Internal, "ranking: %v", err)
	}
	p := st.policy
	out := view.Status{
		Room: h.id.String(),
		Name: st.room.Name(),
		Policy: view.PolicyStatus{
			Digest: st.digest.String(), Signer: p.Signer.String(),
			ServerURI: p.ServerURI, ReloadURI: p.ReloadURI, DecisionURI: p.DecisionURI,
		},
		OperatorPolicy: h.OperatorPolicy().Digest().String(),
		RestoringLoads: !h.restored.Load(),
		T:              t,
		Decisions:      view.DecisionsStatus{ByReason: map[string]uint64{}},
		Records: view.RecordsStatus{
			Accepted: h.accepted.Load(), Duplicate: h.duplicates.Load(), OffPolicy: h.offPolicy.Load(), FromPeers: h.fromPeers.Load(), Refused: map[string]uint64{},
		},
	}
	if seq, ok := st.keyLogSeq(); ok {
		out.KeyLogSeq = &seq
	}
	out.Window[0], out.Window[1] = rk.r.Window()
	for _, i := range rk.r.Order() {
		out.Order = append(out.Order, st.ids[i])
	}
	loads := h.loadsAt(ctx, len(st.ids), loadsAt)
	for i, id := range st.ids {
		ev := rk.r.Evidence(i)
		ps := view.PathwayStatus{
			ID: id, Status: ev.Status.String(), Class: int(ev.Class),
			Joules: ev.Joules.String(), Delivery: ev.Delivery.String(),
			Rank: int(rk.r.Rank(i)), Records: len(ev.Records),
		}
		if hs, ok := h.pathwayHealth(id); ok {
			ps.Health = view.HealthOf(hs)
		}
		var load uint32
		if loads != nil {
			load = loads[i]
			ps.Load = &loads[i]
		}
		l := decision.PathwayLimits(p, i, false, load)
		ps.Limits = map[string]bool{
			"latency":  l&decision.LimitLatency != 0,
			"quality":  l&decision.LimitQuality != 0,
			"capacity": l&decision.LimitCapacity != 0,
		}
		for rsn := decision.Buffer; rsn <= decision.None; rsn++ {
			n := st.firsts[rsn][i].Load()
			ps.First += n
			out.Decisions.ByReason[rsn.String()] += n
			out.Decisions.Total += n
		}
		out.Pathways = append(out.Pathways, ps)
	}
	ks, vs := h.refused.Sorted()
	for i, k := range ks {
		out.Records.Refused[k] = vs[i]
	}
	h.mu.Lock()
	out.Records.InIndex = h.index.Len()
	h.mu.Unlock()
	if h.qoe != nil {
		out.QoE = h.qoe.View()
	}
	out.ReportsIgnored = h.unread.View()
	if h.d.Budgets != nil {
		out.Limited = h.limited.View()
	}
	return out, nil
}

// warnHopGaps logs, and returns for the operator's answer, each hop of the
// state's policy that its key log does not let sign a figure: the pathway
// stays stale, or without a figure, until the key log lists the hop with
// live/hop and its class (COMPANION §4.2), and nothing else says why.
func (h *Room) warnHopGaps(st *State) []string {
	var ws []string
	for _, g := range st.room.HopGaps(st.policy) {
		w := g.String()
		h.d.Log.Warn("a hop of the policy may not sign evidence with a figure", "room", h.id.String(), "policy", st.digest.String(), "detail", w)
		ws = append(ws, w)
	}
	return ws
}

// overBudget answers a room's steering request that is over budget (why):
// its session's latest manifest again when the room made it less than
// min_ttl_s ago under the policy it steers by now, else 503.
func (h *Room) overBudget(w http.ResponseWriter, why string, session report.Session, hasSession bool) {
	st := h.state.Load()
	minTTL := uint64(st.policy.MinTTLs) * 1_000_000
	if hasSession {
		if e, ok := h.latest.Get(session, h.d.Clock(), minTTL); ok && e.st == st {
			h.limited.Note(why, budget.Replayed)
			mb := answer.Buffers.Get().(*[]byte)
			m := st.writer.Append((*mb)[:0], e.ttl, session, e.prio[:e.n], e.digest)
			answer.Manifest(w, answer.HeaderManifest, nil, m, mb)
			return
		}
	}
	h.limited.Note(why, budget.Refused)
	budget.Refuse(w, st.policy.MinTTLs)
}

// latestManifest is what a room's manifest to one session was made of
// (§8.1), kept to answer it again.
type latestManifest struct {
	st     *State
	digest sig.Hash
	ttl    uint32
	n      uint8
	prio   [policy.MaxPathways]uint8
}

// keepLatest keeps the manifest of x's decision for its session, to be
// answered again if the session asks again over budget.
func (h *Room) keepLatest(x *steering, session report.Session) {
	d := &x.d
	m := latestManifest{st: x.st, digest: x.digest, ttl: d.TTL}
	m.n = uint8(copy(m.prio[:], d.Priority))
	h.latest.Put(session, x.t, m, x.t, uint64(x.st.policy.MinTTLs)*1_000_000)
}

// DecideFor makes, signs and stores a decision for a viewer the front
// redirects, as ServeSteer does for a steering request, and returns its
// priority, the session and the decision's URI (§8.4). A viewer's address
// in ctx (WithViewer) spends its budgets.
func (h *Room) DecideFor(ctx context.Context, rawQuery string, hd http.Header) ([]string, report.Session, string, error) {
	target := "/"
	if rawQuery != "" {
		target += "?" + rawQuery
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, report.Session{}, "", err
	}
	r := (&http.Request{Method: http.MethodGet, URL: u, RequestURI: target, Header: hd}).WithContext(ctx)
	q := report.ParseQuery(target)
	session, ok := q.Session()
	if !ok {
		if session, err = report.NewSession(nil); err != nil {
			return nil, session, "", err
		}
	}
	if a, viewer := ctx.Value(viewerKey{}).(netip.Addr); viewer && h.d.Budgets != nil {
		// Issue 26: each decision is signed and kept, so a viewer's
		// opening spends its address's and network's budgets as a
		// steering request does. There is no manifest to answer again.
		if why := h.d.Budgets.Admit(a, !ok, h.limitNow()); why != "" {
			h.limited.Note(why, budget.Refused)
			return nil, session, "", api.Errorf(api.OverBudget, "over the budget of decisions or new sessions of the viewer's address or network")
		}
	}
	x := steerings.Get().(*steering)
	if aerr := h.decide(r, &q, session, x); aerr != nil {
		x.release()
		return nil, session, "", aerr
	}
	if err := h.d.Commits.Commit(ctx, &x.job); err != nil {
		x.release()
		return nil, session, "", h.d.Fails.Failed("the decision could not be stored", err)
	}
	d := &x.d
	x.st.firsts[d.Reason][d.Priority[0]].Add(1)
	order := make([]string, len(d.Priority))
	for i, p := range d.Priority {
		order[i] = x.st.ids[p]
	}
	uri := decision.RecordURI(x.st.policy, x.digest)
	x.release()
	return order, session, uri, nil
}

// loadsAt is the room's loads at t, or nil when the table cannot say.
func (h *Room) loadsAt(ctx context.Context, n int, t uint64) []uint32 {
	loads, err := h.d.Loads.Snapshot(ctx, h.id, n, t)
	if err != nil {
		return nil
	}
	return loads
}

// viewerKey is the context key of a front viewer's address (a netip.Addr).
type viewerKey struct{}

// WithViewer is ctx with the address of the viewer a decision is made for
// (DecideFor), whose budgets it spends.
func WithViewer(ctx context.Context, a netip.Addr) context.Context {
	return context.WithValue(ctx, viewerKey{}, a)
}
