package roomsteer

import (
	"net/http"
	"slices"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/overlay"
	"github.com/waisteer/waisteer/internal/qoewatch"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report/qoe"
)

// An energy room's QoE (issue 17 item 4): the room is one cohort, and a
// pathway its players report degrading is kept out of the limits exactly
// as a pathway whose health checks fail (roomhealth.go): the room steers
// by a policy its steering key signs, the operator's but for that
// pathway's latency_ms, above the ceiling (overlay.Policy), so that it is
// first for no client, one reporting it as current included (issue 26
// item 4), and every decision still verifies (§9). The per-client rule has
// no place in a room: a decision's order is §6's.

// openQoE makes the room's QoE watch: the steering key must be allowed to
// sign the room's policies, as for health checks.
func (h *Room) openQoE(c *qoe.Config) error {
	if c == nil {
		return nil
	}
	st := h.state.Load()
	if err := st.room.MaySignPolicy(h.signer); err != nil {
		return api.Errorf(api.SteeringKey, "the room steers by QoE, and the steering key %s, which signs the policy a degraded pathway calls for, may not sign the room's policies: %v", h.signer, err)
	}
	agg, err := qoe.New(*c)
	if err != nil {
		return err
	}
	wake := h.overlayWake()
	h.qoe = qoewatch.New(agg, h.Label(), func(behind map[string]qoe.Moved) {
		// A room's policy holds for every session: a pathway being probed
		// is given back to all of them.
		m := behind[""]
		h.qoeMu.Lock()
		h.degraded = slices.DeleteFunc(slices.Clone(m.Behind), func(id string) bool { return slices.Contains(m.Probing, id) })
		h.qoeMu.Unlock()
		wake()
	})
	return nil
}

// qoeDown adds to down the pathways the QoE moved off (overlay.WithDegraded).
func (h *Room) qoeDown(base *policy.Policy, down map[string]bool) map[string]bool {
	if h.qoe == nil {
		return down
	}
	h.qoeMu.Lock()
	degraded := slices.Clone(h.degraded)
	h.qoeMu.Unlock()
	return overlay.WithDegraded(base, down, degraded)
}

// ReportsTo is where a CMCD event report posted to the room's steering
// route goes: its QoE watch, nil when it steers by none.
func (h *Room) ReportsTo(*http.Request) (*qoewatch.Watch, []string, string) {
	if h.qoe == nil {
		return nil, nil, ""
	}
	return h.qoe, h.state.Load().ids, ""
}
