// Package overlay is the policy an energy room steers by while some of its
// pathways are down (health checks) or degraded (QoE): the operator's
// policy with each of them stated past the latency ceiling and signed by
// the room's steering key, so that §6.1 keeps them outside the limits for
// every client and every decision still verifies (§9). It decides which
// pathways are kept out, and makes the policy; the room (roomsteer) knows
// when to ask, and installs it. It reads nothing of a store or a server,
// and imports no capability.
package overlay

import (
	"slices"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// unreachableMs is the latency_ms an overlay policy states for a pathway
// down: 2^32 − 1 ms, the latency of a pathway that never answers.
const unreachableMs = 1<<32 - 1

// Policy is the policy a room steers by under the operator's policy
// base while the pathways down are down (health checks, QoE): base with
// each of them stated at latency_ms 2^32 − 1, above latency_ceiling_ms,
// and signed by k (issue 26 item 4). §6.1's latency limit holds for every
// client alike, where its capacity limit lets in the client's current
// pathway at a load of 0 even at a capacity of 0: so a pathway down is
// within the limits for no client, and no step of §6.4 but 3 (none) can
// put it first. When base's ceiling is 2^32 − 1, which no latency passes,
// the overlay's is 2^32 − 2 and any pathway stated at 2^32 − 1 is stated at
// 2^32 − 2, so that each pathway up keeps its standing. A pathway down
// already outside base's latency or quality limit is left as it is, and
// base itself is returned when every pathway down is. Capacities, shares
// and all else are the operator's. Signing is deterministic (RFC 8032):
// the same base and the same pathways down give the same bytes and digest
// on every server.
func Policy(base *policy.Policy, down map[string]bool, k sig.PrivateKey) (*policy.Policy, error) {
	var out []int
	for i, pw := range base.Pathways {
		if down[pw.ID] && pw.LatencyMs <= base.LatencyCeilingMs && pw.TopTier >= base.Floor {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return base, nil
	}
	p := *base
	p.Pathways = slices.Clone(base.Pathways)
	if p.LatencyCeilingMs == unreachableMs {
		p.LatencyCeilingMs = unreachableMs - 1
		for i := range p.Pathways {
			p.Pathways[i].LatencyMs = min(p.Pathways[i].LatencyMs, p.LatencyCeilingMs)
		}
	}
	for _, i := range out {
		p.Pathways[i].LatencyMs = unreachableMs
	}
	raw, err := policy.Sign(&p, k)
	if err != nil {
		return nil, err
	}
	return policy.Parse(raw)
}

// List is the pathways of p that are down, in p's order.
func List(p *policy.Policy, down map[string]bool) []string {
	var out []string
	for _, pw := range p.Pathways {
		if down[pw.ID] {
			out = append(out, pw.ID)
		}
	}
	return out
}

// WithDegraded adds to down the pathways degraded, unless that would leave the
// room no pathway outside down that the operator's policy base lets be
// first (mayLead): a room whose every pathway degrades steers by its
// other limits, not by none.
func WithDegraded(base *policy.Policy, down map[string]bool, degraded []string) map[string]bool {
	if len(degraded) == 0 {
		return down
	}
	left := false
	for _, pw := range base.Pathways {
		if mayLead(base, &pw) && !down[pw.ID] && !slices.Contains(degraded, pw.ID) {
			left = true
		}
	}
	if !left {
		return down
	}
	out := make(map[string]bool, len(down)+len(degraded))
	for id := range down {
		out[id] = true
	}
	for _, id := range degraded {
		out[id] = true
	}
	return out
}

// mayLead reports whether pw can be within the limits of p (§6.1) for a
// client whose current pathway it is not: its latency is at most the
// ceiling, it carries the floor tier, and its capacity is not 0.
func mayLead(p *policy.Policy, pw *policy.Pathway) bool {
	return pw.LatencyMs <= p.LatencyCeilingMs && pw.TopTier >= p.Floor && pw.Capacity != 0
}
