package recount

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// pathways are scenario pathways of the ids given, with capacities.
func pathways(ids ...string) []scenario.Pathway {
	base := scenario.DefaultPathways()
	out := make([]scenario.Pathway, len(ids))
	for i, id := range ids {
		out[i] = base[i%len(base)]
		out[i].ID = id
	}
	return out
}

// build signs a policy of the pathways in the named room, edited by edit.
func build(t testing.TB, room string, ps []scenario.Pathway, edit func(p *policy.Policy)) *policy.Policy {
	t.Helper()
	sc, err := scenario.Build(scenario.Spec{Name: room, Pathways: ps, Policy: edit})
	if err != nil {
		t.Fatal(err)
	}
	return sc.Policy
}

// policySet is a room's policies for random streams: abc, abc again with
// b's capacity 0 (the health policy: same ids), acb (other order) and xy
// (other ids and count).
func policySet(t testing.TB, room string) []*policy.Policy {
	abc := pathways("a", "b", "c")
	health := pathways("a", "b", "c")
	health[1].Capacity = 0
	return []*policy.Policy{
		build(t, room, abc, nil),
		build(t, room, health, nil),
		build(t, room, pathways("a", "c", "b"), nil),
		build(t, room, pathways("x", "y"), nil),
	}
}

// sessionNo is a fixed session of a number.
func sessionNo(n int) report.Session {
	var s report.Session
	s[0], s[1], s[2], s[15] = byte(n), byte(n>>8), byte(n>>16), 0x5a
	return s
}

// decide is a decision by hand: its draw is §6.3's, its loads 0 until the
// test states them, and its priority first first, the rest in order.
func decide(p *policy.Policy, t uint64, s report.Session, first int, ttl uint32, why decision.Reason) *decision.Decision {
	n := len(p.Pathways)
	d := &decision.Decision{
		Room: p.Room, Policy: p.Digest(), T: t, Session: s, Protocol: report.HLS,
		Draw: refDraw(p.Digest(), s), Pathways: make([]decision.PathwayState, n),
		TTL: ttl, Reason: why, Priority: []uint8{uint8(first)},
	}
	for i := range n {
		if i != first {
			d.Priority = append(d.Priority, uint8(i))
		}
	}
	return d
}

// stream is a random room's log: sessions returning with TTLs of 1 to 3 s,
// some decided exactly at or one after another decision's expiry, some at
// the same T, the policy changing among set now and then, and the log's
// order (Index) T order with neighbours swapped now and then. grace is the
// expiry's grace, µs.
func stream(rng *rand.Rand, sets [][]*policy.Policy, n, sessions int, grace uint64) []Entry {
	type room struct {
		t      uint64
		policy int
		exp    []uint64 // the expiries of its decisions so far
	}
	rooms := make([]room, len(sets))
	var out []Entry
	for range n {
		r := rng.IntN(len(rooms))
		rm := &rooms[r]
		if rng.IntN(40) == 0 {
			rm.policy = rng.IntN(len(sets[r]))
		}
		p := sets[r][rm.policy]
		switch x := rng.IntN(100); {
		case x < 3:
			// The same T as the room's previous decision.
		case x < 20 && len(rm.exp) > 0:
			// At an expiry, or just before or after it.
			e := rm.exp[rng.IntN(len(rm.exp))] + uint64(rng.IntN(3)) - 1
			rm.t = max(rm.t+1, e)
		default:
			rm.t += 1 + uint64(rng.IntN(400_000))
		}
		ttl := uint32(1 + rng.IntN(3))
		s := sessionNo(r<<12 | rng.IntN(sessions))
		d := decide(p, rm.t, s, rng.IntN(len(p.Pathways)), ttl, decision.Rank)
		rm.exp = append(rm.exp, rm.t+uint64(ttl)*1_000_000+grace)
		if len(rm.exp) > 50 {
			rm.exp = rm.exp[1:]
		}
		out = append(out, Entry{Decision: d, Policy: p})
	}
	// Commit order: T order across rooms, neighbours now and then swapped.
	slices.SortStableFunc(out, func(a, b Entry) int { return cmp.Compare(a.Decision.T, b.Decision.T) })
	for k := 1; k < len(out); k++ {
		if rng.IntN(10) == 0 {
			out[k-1], out[k] = out[k], out[k-1]
		}
	}
	for k := range out {
		out[k].Index = int64(k)
	}
	return out
}

// state sets each entry's stated loads to loads(k, i).
func state(entries []Entry, loads func(k, i int) uint32) {
	for k := range entries {
		for i := range entries[k].Decision.Pathways {
			entries[k].Decision.Pathways[i].Load = loads(k, i)
		}
	}
}
