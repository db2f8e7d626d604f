// Package ruleref is a brute-force reference of the extension's decision rule
// (§6), written from the text alone so that tests can hold the production rule
// (package decision) to something other than itself.
//
// It is slow on purpose and shares nothing with package decision: the order of
// §6.2 is found by trying every permutation of the pathways, every product is
// a math/big product, the six steps of §6.4 are a literal list checked in the
// text's order, and the draw of §6.3 is hashed afresh. Its inputs are plain
// values, so that a test can build them from a policy and evidence, or from
// what a decision states (§9.2).
package ruleref

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
)

// MaxEnumerated is the most pathways whose orders Decide enumerates: 7! is
// 5040 permutations, already slow enough for a reference. Above it Decide
// falls back to selection (see order).
const MaxEnumerated = 7

// Reasons of §6.4, as §7.1 numbers them.
const (
	Buffer = 1
	Floor  = 2
	Share  = 3
	Hold   = 4
	Rank   = 5
	None   = 6
)

// Bits of a pathway's limits, §7.1's order: each set when its clause of §6.1
// holds.
const (
	LimitLatency  = 1 << 0
	LimitQuality  = 1 << 1
	LimitCapacity = 1 << 2
)

// noLimit is the capacity of a pathway with no limit (§3.2, §6.1).
const noLimit = 1<<32 - 1

// million is the ppm scale of §6.3 and §6.4.
const million = 1_000_000

// Pathway is what the rule reads of one pathway: its entry in the policy
// (§3.2), its evidence (§5.3) and its load (§6).
type Pathway struct {
	ID          string
	TopTier     uint8
	LatencyMs   uint32
	Capacity    uint32
	MinSharePPM uint32

	// Figure says the pathway's status is figure (§5.3); then Class is its
	// tag (2 to 5) and J and D are above 0. Without a figure they are unused.
	Figure bool
	Class  uint8
	J, D   *big.Int

	Load uint32
}

// Input is one request's inputs to the rule (§6).
type Input struct {
	// The policy's fields the rule reads (§3.1).
	Floor            uint8
	Tiers            []uint64 // bits per second, tier 0 first
	LatencyCeilingMs uint32
	MinBufferMs      uint32
	HysteresisPPM    uint32
	TTLs, MinTTLs    uint32
	Pathways         []Pathway // in the policy's order

	// The client's report (§4): each value with whether it is known.
	HasC bool
	C    int
	HasT bool
	T    uint64
	HasB bool
	B    uint64

	// Draw is d (§6.3); see Draw.
	Draw uint32
}

// Output is what the rule gives (§6.5), with each pathway's limits.
type Output struct {
	Limits   []uint8 // per pathway, policy order
	Order    []int   // §6.2's order
	First    int
	Reason   int
	TTL      uint32
	Priority []int
}

// Draw is the client's draw (§6.3): the first four bytes of
// SHA-256("wai:steering-draw" ‖ 0x01 ‖ policy digest ‖ session) read as a
// u32, mod 1 000 000. u32 is little-endian (§2; SPEC-NOTES §6).
func Draw(policyDigest [32]byte, session [16]byte) uint32 {
	var m []byte
	m = append(m, "wai:steering-draw"...)
	m = append(m, 0x01)
	m = append(m, policyDigest[:]...)
	m = append(m, session[:]...)
	h := sha256.Sum256(m)
	return binary.LittleEndian.Uint32(h[0:4]) % million
}

// rank is §6.2's rank: 0 CalibratedInstrument (5), 1 OnChipCounter (4),
// 2 ModelBased (2), 3 Estimator (3), 4 no figure.
func rank(p *Pathway) int {
	if !p.Figure {
		return 4
	}
	switch p.Class {
	case 5:
		return 0
	case 4:
		return 1
	case 2:
		return 2
	case 3:
		return 3
	}
	panic("ruleref: a figure of no class") // check refuses it first
}

func mul(a, b *big.Int) *big.Int { return new(big.Int).Mul(a, b) }

// before is §6.2's "p comes before q": of the three, the first that tells them
// apart says so.
func before(p, q *Pathway) bool {
	// 1. rank.
	if rp, rq := rank(p), rank(q); rp != rq {
		return rp < rq
	}
	// 2. both have a figure, of one class: J_p × D_q < J_q × D_p.
	if p.Figure && q.Figure && p.Class == q.Class {
		l, r := mul(p.J, q.D), mul(q.J, p.D)
		if c := l.Cmp(r); c != 0 {
			return c < 0
		}
	}
	// 3. id, bytewise.
	return bytes.Compare([]byte(p.ID), []byte(q.ID)) < 0
}

// order is §6.2's order: the one permutation of the pathways in which every
// pathway comes before every pathway after it. Up to MaxEnumerated pathways it
// tries every permutation and fails unless exactly one qualifies, which is
// what "the order is total" promises. Above, it takes at each place the one
// remaining pathway that comes before all the others remaining, and then
// checks every pair of the result as the enumeration would.
func order(ps []Pathway) ([]int, error) {
	n := len(ps)
	// The relation on every pair, once: each permutation then costs only
	// lookups.
	rel := make([][]bool, n)
	for i := range ps {
		rel[i] = make([]bool, n)
		for j := range ps {
			if i != j {
				rel[i][j] = before(&ps[i], &ps[j])
			}
		}
	}
	if n > MaxEnumerated {
		return orderBySelection(rel)
	}
	var found [][]int
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	permute(perm, 0, func(p []int) {
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if !rel[p[i]][p[j]] {
					return
				}
			}
		}
		found = append(found, append([]int(nil), p...))
	})
	if len(found) != 1 {
		return nil, fmt.Errorf("ruleref: %d permutations satisfy §6.2, not one", len(found))
	}
	return found[0], nil
}

// orderBySelection is order for many pathways.
func orderBySelection(rel [][]bool) ([]int, error) {
	n := len(rel)
	taken := make([]bool, n)
	var out []int
	for len(out) < n {
		next := -1
		for i := range n {
			if taken[i] {
				continue
			}
			first := true
			for j := range n {
				if j != i && !taken[j] && !rel[i][j] {
					first = false
				}
			}
			if first {
				if next >= 0 {
					return nil, errors.New("ruleref: two pathways each come before all the others")
				}
				next = i
			}
		}
		if next < 0 {
			return nil, errors.New("ruleref: no pathway comes before all the others")
		}
		taken[next] = true
		out = append(out, next)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if !rel[out[i]][out[j]] {
				return nil, errors.New("ruleref: the order breaks §6.2 on a pair")
			}
		}
	}
	return out, nil
}

// permute calls f with every permutation of p[k:] (Heap's would do as well;
// swapping in place is enough).
func permute(p []int, k int, f func([]int)) {
	if k == len(p) {
		f(p)
		return
	}
	for i := k; i < len(p); i++ {
		p[k], p[i] = p[i], p[k]
		permute(p, k+1, f)
		p[k], p[i] = p[i], p[k]
	}
}

// limits is §6.1 for pathway i.
func limits(in *Input, i int) uint8 {
	p := &in.Pathways[i]
	var l uint8
	if p.LatencyMs <= in.LatencyCeilingMs {
		l |= LimitLatency
	}
	if p.TopTier >= in.Floor {
		l |= LimitQuality
	}
	isC := in.HasC && in.C == i
	if p.Capacity == noLimit || p.Load < p.Capacity || (isC && p.Load <= p.Capacity) {
		l |= LimitCapacity
	}
	return l
}

// beats is §6.4: both have a figure and
// J_w × D_x × (1 000 000 + h) < J_x × D_w × 1 000 000.
func beats(w, x *Pathway, h uint32) bool {
	if !w.Figure || !x.Figure {
		return false
	}
	l := mul(mul(w.J, x.D), big.NewInt(million+int64(h)))
	r := mul(mul(x.J, w.D), big.NewInt(million))
	return l.Cmp(r) < 0
}

// state is what the steps read.
type state struct {
	in     *Input
	within []bool
	order  []int
	w      int // -1 when no pathway is within the limits
	band   int // the pathway whose band holds the draw, -1 for none
}

func (s *state) cWithin() bool { return s.in.HasC && s.within[s.in.C] }

// atFloor is §6.4: T is known and the sustainable tier (the highest whose
// bitrate is at most T) is none or at most F.
func (s *state) atFloor() bool {
	if !s.in.HasT {
		return false
	}
	sustainable := -1
	for i, rate := range s.in.Tiers {
		if rate <= s.in.T {
			sustainable = i
		}
	}
	return sustainable == -1 || sustainable <= int(s.in.Floor)
}

func (s *state) anyWithin() bool {
	for _, ok := range s.within {
		if ok {
			return true
		}
	}
	return false
}

// step is one of §6.4's steps: its reason, when it applies, and the pathway it
// chooses.
type step struct {
	reason  int
	applies func(s *state) bool
	choice  func(s *state) int
}

// steps are §6.4's, in the text's order; the first that applies is taken.
var steps = []step{
	{Buffer, // 1.
		func(s *state) bool {
			return s.cWithin() && s.in.HasB && s.in.B < uint64(s.in.MinBufferMs)
		},
		func(s *state) int { return s.in.C }},
	{Floor, // 2.
		func(s *state) bool { return s.cWithin() && s.atFloor() },
		func(s *state) int { return s.in.C }},
	{None, // 3.
		func(s *state) bool { return !s.anyWithin() },
		func(s *state) int {
			if s.in.HasC {
				return s.in.C
			}
			return s.order[0]
		}},
	{Share, // 4.
		func(s *state) bool { return s.band >= 0 && s.within[s.band] },
		func(s *state) int { return s.band }},
	{Hold, // 5.
		func(s *state) bool {
			if !s.cWithin() || s.in.C == s.w {
				return false
			}
			c, w := &s.in.Pathways[s.in.C], &s.in.Pathways[s.w]
			if rank(c) != rank(w) {
				return false
			}
			return rank(w) == 4 || !beats(w, c, s.in.HysteresisPPM)
		},
		func(s *state) int { return s.in.C }},
	{Rank, // 6.
		func(s *state) bool { return true },
		func(s *state) int { return s.w }},
}

// check refuses inputs the rule is not defined on.
func check(in *Input) error {
	n := len(in.Pathways)
	switch {
	case n == 0:
		return errors.New("ruleref: no pathways")
	case n > 32:
		return fmt.Errorf("ruleref: %d pathways, more than §3.3 allows", n)
	case in.HasC && (in.C < 0 || in.C >= n):
		return errors.New("ruleref: c is not a pathway")
	case in.Draw >= million:
		return errors.New("ruleref: draw not below 1 000 000")
	}
	ids := map[string]bool{}
	for i := range in.Pathways {
		p := &in.Pathways[i]
		if ids[p.ID] {
			return errors.New("ruleref: two pathways share an id")
		}
		ids[p.ID] = true
		if p.Figure {
			if p.Class < 2 || p.Class > 5 {
				return errors.New("ruleref: a figure of no class")
			}
			if p.J == nil || p.D == nil || p.J.Sign() <= 0 || p.D.Sign() <= 0 {
				return errors.New("ruleref: a figure whose J or D is not above 0")
			}
		}
	}
	return nil
}

// Decide applies §6 to one request.
func Decide(in *Input) (*Output, error) {
	if err := check(in); err != nil {
		return nil, err
	}
	n := len(in.Pathways)
	out := &Output{Limits: make([]uint8, n)}
	s := &state{in: in, within: make([]bool, n), w: -1, band: -1}

	// §6.1.
	for i := range in.Pathways {
		out.Limits[i] = limits(in, i)
		s.within[i] = out.Limits[i] == LimitLatency|LimitQuality|LimitCapacity
	}

	// §6.2.
	ord, err := order(in.Pathways)
	if err != nil {
		return nil, err
	}
	s.order, out.Order = ord, ord
	for _, i := range ord {
		if s.within[i] {
			s.w = i
			break
		}
	}

	// §6.3: bands from 0 in the policy's order.
	var start uint64
	for i := range in.Pathways {
		end := start + uint64(in.Pathways[i].MinSharePPM)
		if start <= uint64(in.Draw) && uint64(in.Draw) < end {
			s.band = i
			break
		}
		start = end
	}

	// §6.4.
	for _, st := range steps {
		if st.applies(s) {
			out.First, out.Reason = st.choice(s), st.reason
			break
		}
	}

	// §6.5: the first, then those within the limits in order, then the
	// others in order.
	out.Priority = append(out.Priority, out.First)
	for _, within := range []bool{true, false} {
		for _, i := range ord {
			if i != out.First && s.within[i] == within {
				out.Priority = append(out.Priority, i)
			}
		}
	}
	switch out.Reason {
	case Buffer, Floor, None:
		out.TTL = in.MinTTLs
	default:
		out.TTL = in.TTLs
	}
	return out, nil
}
