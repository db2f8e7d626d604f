package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// operator checks the request's bearer token against the operator's, in
// constant time (of the two tokens' SHA-256, so that not even the length
// is compared in variable time).
func (s *Server) operator(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Waisteer-Server", s.name) // which of several servers on one store answered
	if len(s.token) == 0 {
		web.Refuse(w, api.Errorf(api.OperatorDisabled, "the server has no operator token: operator routes are disabled"))
		return false
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="waisteer operator"`)
		web.Refuse(w, api.Errorf(api.TokenMissing, "operator routes need Authorization: Bearer TOKEN"))
		return false
	}
	got, want := sha256.Sum256([]byte(tok)), sha256.Sum256(s.token)
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="waisteer operator", error="invalid_token"`)
		web.Refuse(w, api.Errorf(api.TokenInvalid, "the bearer token is not the operator's"))
		return false
	}
	return true
}

// operatorBody runs the checks every operator write shares and reads its
// body: the method, no query, the token, the room, a binary body within
// limit.
func (s *Server) operatorBody(w http.ResponseWriter, r *http.Request, limit int64) (*hub, []byte, bool) {
	if !web.NoQuery(w, r) || !s.operator(w, r) {
		return nil, nil, false
	}
	h, aerr := s.hubOf(r)
	if aerr == nil {
		aerr = octetStream(r)
	}
	var body []byte
	if aerr == nil {
		body, aerr = readBody(w, r, limit)
	}
	if aerr == nil && len(body) == 0 {
		aerr = api.Errorf(api.EmptyBody, "the body is empty")
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return nil, nil, false
	}
	return h, body, true
}

// changeAnswer is the answer to an operator's change.
type changeAnswer struct {
	Room      string `json:"room"`
	Policy    string `json:"policy"`
	Previous  string `json:"previous,omitempty"`
	KeyLogSeq uint64 `json:"key_log_seq,omitempty"`
	Unchanged bool   `json:"unchanged,omitempty"`
	// SteeringBy is the policy the room steers by: Policy, or while a
	// pathway's health checks fail, the policy the steering key signed
	// with that pathway's latency past the ceiling (install).
	SteeringBy string `json:"steering_by,omitempty"`
	// Warnings are what the operator should know of the change and does
	// not stop it: each hop of the policy the key log does not let sign a
	// figure (room.HopGaps).
	Warnings []string `json:"warnings,omitempty"`
}

// servePolicyPut replaces a room's policy (PUT /v1/rooms/{room}/policy,
// operator): the body is a WSP1 policy that reads (§3.3), is the room's,
// and is signed by a key §3.5 allows under the room's key log (§9.1 step
// 2); the steering key must be allowed to sign its decisions (newState). It
// is stored as the room's active policy before it is used; earlier policies
// stay available by digest.
//
// While a pathway's health checks fail, the room steers by the new
// policy with that pathway's latency past the ceiling (install). The table of loads is
// reset when the new policy's pathways differ from the old one's: a
// session's first pathway is an index into the policy it was decided
// under. Each session counts again from its next request, within one TTL
// and the grace; until then the capacities (§6.1) see fewer sessions than
// are playing.
func (s *Server) servePolicyPut(w http.ResponseWriter, r *http.Request) {
	h, body, ok := s.operatorBody(w, r, maxPolicyBody)
	if !ok {
		return
	}
	p, err := policy.Parse(body)
	if err != nil {
		web.Refuse(w, api.From(err))
		return
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	if bytes.Equal(body, h.base.Bytes()) {
		api.WriteJSON(w, http.StatusOK, changeAnswer{Room: h.id.String(), Policy: h.state.Load().digest.String(), Unchanged: true})
		return
	}
	prevBase := h.base
	_, st, aerr := s.install(r.Context(), h, p, true)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	s.log.Info("policy replaced", "room", h.id.String(), "policy", p.Digest().String(), "previous", prevBase.Digest().String(), "steering_by", st.digest.String())
	api.WriteJSON(w, http.StatusOK, changeAnswer{Room: h.id.String(), Policy: p.Digest().String(), Previous: prevBase.Digest().String(),
		SteeringBy: st.digest.String(), Warnings: s.warnHopGaps(h, st)})
}

// serveKeyLogPut installs a newer head of the room's key log (PUT
// /v1/rooms/{room}/keylog, operator): it reads and is the room's origin's,
// signed, and lists the authority (the room step, COMPANION §4.1); its seq
// is greater than the current head's (key_log_stale otherwise); the active
// policy's signer is still allowed (§3.5), and so is the steering key for
// the figures the policy's hops may sign (newState), else every decision
// made after would fail verification: both are refused 409 with the
// reason. The evidence is rebuilt under the new head, which may have
// revoked a hop.
func (s *Server) serveKeyLogPut(w http.ResponseWriter, r *http.Request) {
	h, body, ok := s.operatorBody(w, r, maxKeyLogBody)
	if !ok {
		return
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	cur := h.state.Load()
	curSeq, _ := cur.keyLogSeq()
	if bytes.Equal(body, cur.head) {
		api.WriteJSON(w, http.StatusOK, changeAnswer{Room: h.id.String(), Policy: cur.digest.String(), KeyLogSeq: curSeq, Unchanged: true})
		return
	}
	st, aerr := s.installHead(r.Context(), h, body, true)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	seq, _ := st.keyLogSeq()
	s.log.Info("key log head replaced", "room", h.id.String(), "seq", seq, "previous", curSeq)
	api.WriteJSON(w, http.StatusOK, changeAnswer{Room: h.id.String(), Policy: cur.digest.String(), KeyLogSeq: seq,
		Warnings: s.warnHopGaps(h, st)})
}

// installHead checks a key log head for the room as serveKeyLogPut says
// and installs it, storing it first when persist (a head another server
// stored is installed as it is). h.opMu is held.
func (s *Server) installHead(ctx context.Context, h *hub, body []byte, persist bool) (*roomState, *api.Error) {
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
	var put func() error
	if persist {
		put = func() error {
			if err := s.st.PutRoom(ctx, store.Room{ID: h.id, Descriptor: cur.descriptor, KeyLogHead: body}); err != nil {
				return err
			}
			// The head is in force for the decisions the log takes from
			// now (issue 16).
			return s.audit.KeepEpoch(ctx, h.id, auditRoom(h, st))
		}
	}
	if err := h.replace(ctx, st, put); err != nil {
		return nil, s.fails.Failed("installing the key log head", err)
	}
	return st, nil
}

// serveStatus answers a room's status as JSON.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) || !s.operator(w, r) {
		return
	}
	h, aerr := s.hubOf(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	out, aerr := s.roomStatus(r.Context(), h, s.clock())
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// roomStatus is a room's status now (its status route's answer), with the
// loads as of loadsAt on the room clock.
func (s *Server) roomStatus(ctx context.Context, h *hub, loadsAt uint64) (Status, *api.Error) {
	st := h.state.Load()
	rk, t, err := h.rank(st, s.clock())
	if err != nil {
		return Status{}, api.Errorf(api.Internal, "ranking: %v", err)
	}
	p := st.policy
	out := Status{
		Server: s.name,
		Room:   h.id.String(),
		Name:   st.room.Name(),
		Policy: PolicyStatus{
			Digest: st.digest.String(), Signer: p.Signer.String(),
			ServerURI: p.ServerURI, ReloadURI: p.ReloadURI, DecisionURI: p.DecisionURI,
		},
		OperatorPolicy: h.operatorPolicy().Digest().String(),
		RestoringLoads: !h.restored.Load(),
		T:              t,
		Decisions:      DecisionsStatus{ByReason: map[string]uint64{}},
		Records: RecordsStatus{
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
	loads := s.loadsNow(ctx, h, len(st.ids), loadsAt)
	for i, id := range st.ids {
		ev := rk.r.Evidence(i)
		ps := PathwayStatus{
			ID: id, Status: ev.Status.String(), Class: int(ev.Class),
			Joules: ev.Joules.String(), Delivery: ev.Delivery.String(),
			Rank: int(rk.r.Rank(i)), Records: len(ev.Records),
		}
		if hs, ok := h.pathwayHealth(id); ok {
			ps.Health = healthView(hs)
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
		out.QoE = h.qoe.view()
	}
	out.ReportsIgnored = h.unread.view()
	if s.limits != nil {
		out.Limited = limitedView(&h.limited)
	}
	return out, nil
}

// warnHopGaps logs, and returns for the operator's answer, each hop of the
// state's policy that its key log does not let sign a figure: the pathway
// stays stale, or without a figure, until the key log lists the hop with
// live/hop and its class (COMPANION §4.2), and nothing else says why.
func (s *Server) warnHopGaps(h *hub, st *roomState) []string {
	var ws []string
	for _, g := range st.room.HopGaps(st.policy) {
		w := g.String()
		s.log.Warn("a hop of the policy may not sign evidence with a figure", "room", h.id.String(), "policy", st.digest.String(), "detail", w)
		ws = append(ws, w)
	}
	return ws
}
