package roomsteer

import (
	"bytes"
	"context"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/policy"
)

// ChangeAnswer is the answer to an operator's change.
type ChangeAnswer struct {
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

// PutPolicy replaces the room's policy (PUT /v1/rooms/{room}/policy,
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
func (h *Room) PutPolicy(ctx context.Context, body []byte) (ChangeAnswer, *api.Error) {
	p, err := policy.Parse(body)
	if err != nil {
		return ChangeAnswer{}, api.From(err)
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	if bytes.Equal(body, h.base.Bytes()) {
		return ChangeAnswer{Room: h.id.String(), Policy: h.state.Load().digest.String(), Unchanged: true}, nil
	}
	prevBase := h.base
	_, st, aerr := h.install(ctx, p, true)
	if aerr != nil {
		return ChangeAnswer{}, aerr
	}
	h.d.Log.Info("policy replaced", "room", h.id.String(), "policy", p.Digest().String(), "previous", prevBase.Digest().String(), "steering_by", st.digest.String())
	return ChangeAnswer{Room: h.id.String(), Policy: p.Digest().String(), Previous: prevBase.Digest().String(),
		SteeringBy: st.digest.String(), Warnings: h.warnHopGaps(st)}, nil
}

// PutKeyLog installs a newer head of the room's key log (PUT
// /v1/rooms/{room}/keylog, operator): it reads and is the room's origin's,
// signed, and lists the authority (the room step, COMPANION §4.1); its seq
// is greater than the current head's (key_log_stale otherwise); the active
// policy's signer is still allowed (§3.5), and so is the steering key for
// the figures the policy's hops may sign (newState), else every decision
// made after would fail verification: both are refused 409 with the
// reason. The evidence is rebuilt under the new head, which may have
// revoked a hop.
func (h *Room) PutKeyLog(ctx context.Context, body []byte) (ChangeAnswer, *api.Error) {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	cur := h.state.Load()
	curSeq, _ := cur.keyLogSeq()
	if bytes.Equal(body, cur.head) {
		return ChangeAnswer{Room: h.id.String(), Policy: cur.digest.String(), KeyLogSeq: curSeq, Unchanged: true}, nil
	}
	st, aerr := h.installHead(ctx, body, true)
	if aerr != nil {
		return ChangeAnswer{}, aerr
	}
	seq, _ := st.keyLogSeq()
	h.d.Log.Info("key log head replaced", "room", h.id.String(), "seq", seq, "previous", curSeq)
	return ChangeAnswer{Room: h.id.String(), Policy: cur.digest.String(), KeyLogSeq: seq,
		Warnings: h.warnHopGaps(st)}, nil
}
