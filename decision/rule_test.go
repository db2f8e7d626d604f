package decision

import (
	"crypto/sha256"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/ruleref"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

var ruleDigest = sig.Hash{0: 0x5e, 1: 0xed, 31: 0x01}

// rulePolicy has one pathway per id, each within every limit by default:
// latency 50 ≤ 100, top tier 3 ≥ F = 1, no capacity limit, no share.
func rulePolicy(ids ...string) *policy.Policy {
	p := &policy.Policy{
		PeriodUs: 10, WindowUs: 30, LagUs: 5,
		Basis: policy.PerByte, Floor: 1,
		LatencyCeilingMs: 100, MinBufferMs: 2000, HysteresisPPM: 50_000,
		TTLs: 300, MinTTLs: 10,
		Tiers: []uint64{1000, 2000, 4000, 8000},
	}
	for i, id := range ids {
		p.Pathways = append(p.Pathways, policy.Pathway{
			ID: id, Base: policy.NoBase, TopTier: 3, LatencyMs: 50, Capacity: policy.Unlimited,
			Hops: []policy.Hop{{Key: sig.PublicKey{0: byte(i + 1)}, Place: policy.Edge}},
		})
	}
	return p
}

func fig(c evidence.Class, j, d uint64) evidence.Pathway {
	return evidence.Pathway{Status: evidence.StatusFigure, Class: c, Joules: num.From64(j), Delivery: num.From64(d)}
}

func fig128(c evidence.Class, j, d num.U128) evidence.Pathway {
	return evidence.Pathway{Status: evidence.StatusFigure, Class: c, Joules: j, Delivery: d}
}

func noFig(s evidence.Status) evidence.Pathway { return evidence.Pathway{Status: s} }

func mustRank(t *testing.T, p *policy.Policy, ev ...evidence.Pathway) *Ranking {
	t.Helper()
	r, err := NewRanking(p, ruleDigest, 10, 40, ev)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rep is a report; a negative value is absent.
func rep(c int, throughput, buffer int64) report.Report {
	var r report.Report
	if c >= 0 {
		r.Present |= report.HasPathway
		r.Pathway = uint8(c)
	}
	if throughput >= 0 {
		r.Present |= report.HasThroughput
		r.Throughput = uint64(throughput)
	}
	if buffer >= 0 {
		r.Present |= report.HasBuffer
		r.Buffer = uint64(buffer)
	}
	return r
}

func mustDecide(t *testing.T, r *Ranking, rp report.Report, s report.Session, loads ...uint32) Outcome {
	t.Helper()
	if loads == nil {
		loads = make([]uint32, len(r.order))
	}
	o, err := r.Decide(rp, s, loads)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func expect(t *testing.T, o Outcome, first int, why Reason) {
	t.Helper()
	if int(o.First) != first || o.Reason != why {
		t.Fatalf("first %d for reason %d, want %d for reason %d", o.First, o.Reason, first, why)
	}
	if o.Priority[0] != o.First {
		t.Fatalf("priority %v does not begin with the first pathway %d", o.Priority[:o.N], o.First)
	}
}

// TestLimitsLatency_6_1 is §6.1 latency: latency_ms ≤ latency_ceiling_ms.
func TestLimitsLatency_6_1(t *testing.T) {
	p := rulePolicy("a")
	for _, c := range []struct {
		ms   uint32
		want bool
	}{{0, true}, {100, true}, {101, false}, {1<<32 - 1, false}} {
		p.Pathways[0].LatencyMs = c.ms
		if got := PathwayLimits(p, 0, false, 0)&LimitLatency != 0; got != c.want {
			t.Errorf("latency %d against a ceiling of 100: %v, want %v", c.ms, got, c.want)
		}
	}
}

// TestLimitsQuality_6_1 is §6.1 quality: top_tier ≥ F.
func TestLimitsQuality_6_1(t *testing.T) {
	p := rulePolicy("a")
	p.Floor = 2
	for _, c := range []struct {
		top  uint8
		want bool
	}{{0, false}, {1, false}, {2, true}, {3, true}} {
		p.Pathways[0].TopTier = c.top
		if got := PathwayLimits(p, 0, false, 0)&LimitQuality != 0; got != c.want {
			t.Errorf("top tier %d with F = 2: %v, want %v", c.top, got, c.want)
		}
	}
}

// TestLimitsCapacity_6_1 is §6.1 capacity: 2^32 − 1 is no limit; otherwise load <
// capacity, or, for c, load ≤ capacity (c's load counts the client).
func TestLimitsCapacity_6_1(t *testing.T) {
	p := rulePolicy("a")
	for _, c := range []struct {
		capacity, load uint32
		current, want  bool
	}{
		{policy.Unlimited, 1<<32 - 1, false, true}, // no limit, whatever the load
		{policy.Unlimited, 1<<32 - 1, true, true},
		{10, 9, false, true},
		{10, 10, false, false}, // at capacity: full for a new client
		{10, 10, true, true},   // at capacity: c's load counts this client
		{10, 11, true, false},
		{0, 0, false, false},
		{0, 0, true, true},
		{1<<32 - 2, 1<<32 - 2, true, true},
		{1<<32 - 2, 1<<32 - 1, true, false},
		{1<<32 - 2, 1<<32 - 2, false, false},
	} {
		p.Pathways[0].Capacity = c.capacity
		if got := PathwayLimits(p, 0, c.current, c.load)&LimitCapacity != 0; got != c.want {
			t.Errorf("capacity %d, load %d, current %v: %v, want %v", c.capacity, c.load, c.current, got, c.want)
		}
	}
	// Through Decide: the same load is within for c and not for another.
	p = rulePolicy("a", "b")
	p.Pathways[0].Capacity, p.Pathways[1].Capacity = 5, 5
	r := mustRank(t, p, fig(5, 1, 1), fig(5, 1, 1))
	o := mustDecide(t, r, rep(1, -1, -1), report.Session{}, 5, 5)
	if o.Limits[0] != LimitLatency|LimitQuality || o.Limits[1] != Within {
		t.Fatalf("limits %v, want a without capacity and b (c) within", o.Limits[:2])
	}
}

// TestOrderRank_6_2 is §6.2 step 1: the rank decides before any figure, and a
// pathway with no figure comes after every pathway with one.
func TestOrderRank_6_2(t *testing.T) {
	p := rulePolicy("e", "d", "c", "b", "a", "z")
	r := mustRank(t, p,
		fig(evidence.Estimator, 1, 1_000_000),          // rank 3, the cheapest figure
		fig(evidence.ModelBased, 2, 1),                 // rank 2
		fig(evidence.OnChipCounter, 3, 1),              // rank 1
		fig(evidence.CalibratedInstrument, 1<<64-1, 1), // rank 0, the dearest
		noFig(evidence.StatusUnmetered),                // rank 4
		fig(evidence.CalibratedInstrument, 1<<64-1, 2), // rank 0, cheaper
	)
	if got, want := r.Order(), []uint8{5, 3, 2, 1, 0, 4}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	for i, want := range []uint8{3, 2, 1, 0, 4, 0} {
		if r.Rank(i) != want {
			t.Errorf("rank of pathway %d is %d, want %d", i, r.Rank(i), want)
		}
	}
}

// TestOrderFigureAndID_6_2 is §6.2 steps 2 and 3: within a class the lower figure
// first by exact cross products; equal figures, and pathways with no figure,
// by id bytewise.
func TestOrderFigureAndID_6_2(t *testing.T) {
	p := rulePolicy("b", "a", "c", "B", "y", "x")
	r := mustRank(t, p,
		fig(5, 2, 4),                // 1/2
		fig(5, 1, 2),                // 1/2, id "a" < "b"
		fig(5, 1, 3),                // 1/3, the lowest
		fig(5, 3, 6),                // 1/2, id "B" < "a" bytewise
		noFig(evidence.StatusStale), // by id only
		noFig(evidence.StatusEmpty), // by id only: "x" < "y"
	)
	if got, want := r.Order(), []uint8{2, 3, 1, 0, 5, 4}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestOrderNear128_6_2 is §6.2 step 2 with J and D near 2^128: the products pass
// 128 bits (and the figures differ by less than 2^-127), and must compare as
// math/big compares them.
func TestOrderNear128_6_2(t *testing.T) {
	m := num.U128{Lo: 1<<64 - 1, Hi: 1<<64 - 1}
	m1 := num.U128{Lo: 1<<64 - 2, Hi: 1<<64 - 1}
	m2 := num.U128{Lo: 1<<64 - 3, Hi: 1<<64 - 1}
	cases := []struct{ jp, dp, jq, dq num.U128 }{
		{m, m1, m1, m2}, // M/(M−1) < (M−1)/(M−2)
		{m1, m2, m, m1},
		{m, m1, m1, m},
		{m, m, m1, m1}, // equal figures: by id
		{m, num.From64(1), m1, num.From64(1)},
		{num.From64(1), m, num.From64(1), m1},
	}
	for k, c := range cases {
		p := rulePolicy("q", "p")
		r := mustRank(t, p, fig128(4, c.jq, c.dq), fig128(4, c.jp, c.dp))
		lhs := new(big.Int).Mul(c.jp.Big(), c.dq.Big())
		rhs := new(big.Int).Mul(c.jq.Big(), c.dp.Big())
		pFirst := lhs.Cmp(rhs) < 0 || lhs.Cmp(rhs) == 0 // tie: "p" < "q"
		if got := r.Order()[0] == 1; got != pFirst {
			t.Errorf("case %d: p first = %v, want %v", k, got, pFirst)
		}
	}
}

// TestOrderAgainstBig_6_2 is a property test of §6.2 step 2 and §6.4's beats
// against math/big, on random 128-bit J and D.
func TestOrderAgainstBig_6_2(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	word := func() uint64 {
		switch rnd.IntN(4) {
		case 0:
			return 0
		case 1:
			return 1<<64 - 1 - uint64(rnd.IntN(3))
		}
		return rnd.Uint64()
	}
	u := func() num.U128 {
		for {
			v := num.U128{Lo: word(), Hi: word()}
			if !v.IsZero() {
				return v
			}
		}
	}
	p := rulePolicy("q", "p")
	for k := range 10000 {
		ep, eq := fig128(2, u(), u()), fig128(2, u(), u())
		if k%7 == 0 { // equal figures, scaled
			eq = fig128(2, ep.Delivery, ep.Joules)
			ep, eq = fig128(2, ep.Joules, ep.Delivery), fig128(2, eq.Delivery, eq.Joules)
		}
		r := mustRank(t, p, eq, ep)
		l := new(big.Int).Mul(ep.Joules.Big(), eq.Delivery.Big())
		rr := new(big.Int).Mul(eq.Joules.Big(), ep.Delivery.Big())
		want := l.Cmp(rr)
		if want == 0 {
			want = -1 // by id: "p" < "q"
		}
		if got := r.compare(1, 0); got != want {
			t.Fatalf("compare(p, q) = %d, want %d for p %s/%s, q %s/%s", got, want, ep.Joules, ep.Delivery, eq.Joules, eq.Delivery)
		}

		h := uint32(rnd.IntN(1_000_001))
		if k%10 == 0 {
			h = []uint32{0, 1_000_000, 1<<32 - 1}[k/10%3]
		}
		lhs := new(big.Int).Mul(l, big.NewInt(1_000_000+int64(h)))
		rhs := new(big.Int).Mul(rr, big.NewInt(1_000_000))
		if got := Beats(&ep, &eq, h); got != (lhs.Cmp(rhs) < 0) {
			t.Fatalf("Beats(p, q, %d) = %v for p %s/%s, q %s/%s", h, got, ep.Joules, ep.Delivery, eq.Joules, eq.Delivery)
		}
	}
}

// TestBeatsMargin_6_4 is §6.4's beats at the margins: h = 0 (any lower figure
// beats, an equal one does not) and h = 1 000 000 (only a figure below half).
func TestBeatsMargin_6_4(t *testing.T) {
	for _, c := range []struct {
		h      uint32
		jw, dw uint64
		jx, dx uint64
		beats  bool
	}{
		{0, 99, 100, 1, 1, true},
		{0, 100, 100, 1, 1, false},
		{0, 2, 2, 1, 1, false},
		{1_000_000, 1, 2, 1, 1, false}, // exactly half: 1·1·2e6 = 1·2·1e6
		{1_000_000, 49, 100, 1, 1, true},
		{1_000_000, 50, 100, 1, 1, false},
		{50_000, 100, 105, 1, 1, false}, // exactly 1/1.05: not by more than the margin
		{50_000, 99, 105, 1, 1, true},
	} {
		w, x := fig(3, c.jw, c.dw), fig(3, c.jx, c.dx)
		if got := Beats(&w, &x, c.h); got != c.beats {
			t.Errorf("h %d: %d/%d beats %d/%d = %v, want %v", c.h, c.jw, c.dw, c.jx, c.dx, got, c.beats)
		}
	}
	m := num.U128{Lo: 1<<64 - 1, Hi: 1<<64 - 1}
	w, x := fig128(3, m, m), fig128(3, m, m)
	x.Joules.Hi = 1<<64 - 1
	x.Joules.Lo = 1<<64 - 2
	// w = 1, x just below 1: w does not beat x, x beats w with h = 0 only.
	if Beats(&w, &x, 0) || !Beats(&x, &w, 0) || Beats(&x, &w, 1) {
		t.Error("near 2^128 the 320-bit products must decide")
	}
	if Beats(&w, &w, 0) {
		t.Error("a pathway beats itself")
	}
	st := noFig(evidence.StatusStale)
	if Beats(&st, &w, 0) || Beats(&w, &st, 0) {
		t.Error("beats without two figures")
	}
}

// drawByHand is §6.3's draw, written out without Draw's code.
func drawByHand(digest sig.Hash, s report.Session) uint32 {
	m := []byte("wai:steering-draw")
	m = append(m, 0x01)
	m = append(m, digest[:]...)
	m = append(m, s[:]...)
	h := sha256.Sum256(m)
	v := uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16 | uint32(h[3])<<24
	return v % 1_000_000
}

// TestDraw_6_3 is §6.3's draw: SHA-256 over the domain, 0x01, the policy digest
// and the session; the first four bytes little-endian, mod 1 000 000.
func TestDraw_6_3(t *testing.T) {
	if n := len("wai:steering-draw") + 1 + 32 + 16; n != 66 {
		t.Fatalf("the draw hashes %d bytes", n)
	}
	seen := map[uint32]bool{}
	for k := range 1000 {
		s := report.Session{0: byte(k), 1: byte(k >> 8), 15: 0xa5}
		d := Draw(ruleDigest, s)
		if want := drawByHand(ruleDigest, s); d != want {
			t.Fatalf("session %x: draw %d, want %d", s, d, want)
		}
		if d >= 1_000_000 {
			t.Fatalf("draw %d", d)
		}
		seen[d] = true
	}
	if len(seen) < 990 {
		t.Fatalf("%d distinct draws of 1000", len(seen))
	}
	other := ruleDigest
	other[5] ^= 1
	if Draw(other, report.Session{}) == Draw(ruleDigest, report.Session{}) {
		t.Error("the draw does not depend on the policy digest")
	}
}

// TestBands_6_3 is §6.3's bands: pathway i's is [S_i, S_i + min_share_ppm_i);
// S_i is in band i and S_i + share is not.
func TestBands_6_3(t *testing.T) {
	p := rulePolicy("a", "b", "c", "d")
	p.Pathways[0].MinSharePPM = 100
	p.Pathways[1].MinSharePPM = 0
	p.Pathways[2].MinSharePPM = 250
	p.Pathways[3].MinSharePPM = 999_650
	for _, c := range []struct {
		d    uint32
		i    int
		inAt bool
	}{
		{0, 0, true}, {99, 0, true}, {100, 2, true}, {349, 2, true}, {350, 3, true},
		{999_999, 3, true},
	} {
		i, ok := Band(p, c.d)
		if ok != c.inAt || i != c.i {
			t.Errorf("draw %d: band %d %v, want %d %v", c.d, i, ok, c.i, c.inAt)
		}
	}
	p.Pathways[3].MinSharePPM = 10
	for _, d := range []uint32{360, 999_999} {
		if i, ok := Band(p, d); ok {
			t.Errorf("draw %d past every band is in band %d", d, i)
		}
	}
	p.Pathways[0].MinSharePPM = 1_000_000
	if i, ok := Band(p, 999_999); !ok || i != 0 {
		t.Errorf("a share of the whole range: %d %v", i, ok)
	}
}

// sessionDrawing finds a session whose draw is above lo: tests that place a
// draw on a band's edge set the shares around it.
func sessionDrawing(lo uint32) (report.Session, uint32) {
	for k := 0; ; k++ {
		s := report.Session{0: byte(k), 1: byte(k >> 8), 2: byte(k >> 16)}
		if d := Draw(ruleDigest, s); d > lo {
			return s, d
		}
	}
}

// TestShareEdge_6_4 is §6.4 step 4 with the draw exactly on a band's edge: S_i is
// in band i, S_i + share is not.
func TestShareEdge_6_4(t *testing.T) {
	s, d := sessionDrawing(10)
	p := rulePolicy("a", "b", "c")
	ev := []evidence.Pathway{fig(5, 1, 1), fig(5, 2, 1), fig(5, 3, 1)}

	// Band of b is [d, d+1): S_b = d.
	p.Pathways[0].MinSharePPM, p.Pathways[1].MinSharePPM = d, 1
	o := mustDecide(t, mustRank(t, p, ev...), rep(-1, -1, -1), s)
	expect(t, o, 1, Share)
	if o.Draw != d || o.TTL != p.TTLs {
		t.Fatalf("draw %d ttl %d", o.Draw, o.TTL)
	}

	// Band of b is [d−1, d): S_b + share = d is not in it, nor in c's
	// empty band; the rule ranks.
	p.Pathways[0].MinSharePPM, p.Pathways[1].MinSharePPM = d-1, 1
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(-1, -1, -1), s), 0, Rank)

	// Band of a is [0, d): d is not in it, it is in c's [d, d+5).
	p.Pathways[0].MinSharePPM, p.Pathways[1].MinSharePPM, p.Pathways[2].MinSharePPM = d, 0, 5
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(-1, -1, -1), s), 2, Share)

	// The band's pathway not within the limits: no share, the rule ranks.
	p.Pathways[2].LatencyMs = 101
	o = mustDecide(t, mustRank(t, p, ev...), rep(-1, -1, -1), s)
	expect(t, o, 0, Rank)
	if !slices.Equal(o.Priority[:3], []uint8{0, 1, 2}) {
		t.Fatalf("priority %v", o.Priority[:3])
	}
}

// TestSustainable_6_4 is §6.4's sustainable tier and floor.
func TestSustainable_6_4(t *testing.T) {
	tiers := []uint64{1000, 2000, 4000, 8000}
	for _, c := range []struct {
		tput uint64
		tier int
		ok   bool
	}{{0, 0, false}, {999, 0, false}, {1000, 0, true}, {1999, 0, true}, {2000, 1, true}, {7999, 2, true}, {8000, 3, true}, {1<<64 - 1, 3, true}} {
		if tier, ok := Sustainable(tiers, c.tput); tier != c.tier || ok != c.ok {
			t.Errorf("T %d: tier %d %v, want %d %v", c.tput, tier, ok, c.tier, c.ok)
		}
	}
	p := rulePolicy("a") // F = 1
	for _, c := range []struct {
		r     report.Report
		floor bool
	}{
		{rep(0, -1, -1), false}, // T unknown: never at the floor
		{rep(0, 500, -1), true}, // none sustainable
		{rep(0, 1000, -1), true},
		{rep(0, 2000, -1), true}, // tier 1 = F
		{rep(0, 3999, -1), true},
		{rep(0, 4000, -1), false}, // tier 2 > F
	} {
		if got := AtFloor(p, c.r); got != c.floor {
			t.Errorf("T %d present %v: at floor %v, want %v", c.r.Throughput, c.r.Present&report.HasThroughput != 0, got, c.floor)
		}
	}
}

// TestStepBuffer_6_4 is §6.4 step 1: c known and within the limits, B known and
// below min_buffer_ms: c, with the TTL min_ttl_s (§6.5).
func TestStepBuffer_6_4(t *testing.T) {
	p := rulePolicy("a", "b")
	r := mustRank(t, p, fig(5, 1, 1), fig(5, 9, 1))
	o := mustDecide(t, r, rep(1, 8000, 1999), report.Session{})
	expect(t, o, 1, Buffer)
	if o.TTL != p.MinTTLs {
		t.Fatalf("ttl %d, want min_ttl_s", o.TTL)
	}
	// B = min_buffer_ms is not below it.
	expect(t, mustDecide(t, r, rep(1, 8000, 2000), report.Session{}), 0, Rank)
	// B unknown.
	expect(t, mustDecide(t, r, rep(1, 8000, -1), report.Session{}), 0, Rank)
	// c not within the limits: step 1 does not apply (nor 2 nor 5).
	p.Pathways[1].TopTier = 0
	r = mustRank(t, p, fig(5, 1, 1), fig(5, 9, 1))
	expect(t, mustDecide(t, r, rep(1, 500, 0), report.Session{}), 0, Rank)
}

// TestStepFloor_6_4 is §6.4 step 2: c known and within the limits, at its floor:
// c, with min_ttl_s.
func TestStepFloor_6_4(t *testing.T) {
	p := rulePolicy("a", "b")
	r := mustRank(t, p, fig(5, 1, 1), fig(5, 9, 1))
	o := mustDecide(t, r, rep(1, 3999, 5000), report.Session{})
	expect(t, o, 1, Floor)
	if o.TTL != p.MinTTLs {
		t.Fatalf("ttl %d, want min_ttl_s", o.TTL)
	}
	expect(t, mustDecide(t, r, rep(1, 999, -1), report.Session{}), 1, Floor) // none sustainable
	expect(t, mustDecide(t, r, rep(1, 4000, -1), report.Session{}), 0, Rank) // above the floor
	expect(t, mustDecide(t, r, rep(-1, 999, -1), report.Session{}), 0, Rank) // no c
	// Buffer comes first.
	expect(t, mustDecide(t, r, rep(1, 999, 0), report.Session{}), 1, Buffer)
	// c at its capacity is within (its load counts it), so it is held.
	p.Pathways[1].Capacity = 3
	r = mustRank(t, p, fig(5, 1, 1), fig(5, 9, 1))
	expect(t, mustDecide(t, r, rep(1, 999, -1), report.Session{}, 0, 3), 1, Floor)
	// Past it, it is not.
	expect(t, mustDecide(t, r, rep(1, 999, -1), report.Session{}, 0, 4), 0, Rank)
}

// TestStepNone_6_4 is §6.4 step 3: no pathway within the limits: c when known
// (within or not), otherwise the first of the order; min_ttl_s.
func TestStepNone_6_4(t *testing.T) {
	p := rulePolicy("b", "a", "c")
	for i := range p.Pathways {
		p.Pathways[i].LatencyMs = 200
	}
	p.Pathways[0].MinSharePPM = 1_000_000 // a band holds every draw: no share
	r := mustRank(t, p, noFig(evidence.StatusStale), noFig(evidence.StatusStale), noFig(evidence.StatusEmpty))
	o := mustDecide(t, r, rep(-1, -1, -1), report.Session{})
	expect(t, o, 1, None) // "a", by id
	if o.TTL != p.MinTTLs || !slices.Equal(o.Priority[:3], []uint8{1, 0, 2}) {
		t.Fatalf("ttl %d priority %v", o.TTL, o.Priority[:3])
	}
	o = mustDecide(t, r, rep(2, 999, 0), report.Session{})
	expect(t, o, 2, None)
	if !slices.Equal(o.Priority[:3], []uint8{2, 1, 0}) {
		t.Fatalf("priority %v", o.Priority[:3])
	}
}

// TestStepShare_6_4 is §6.4 step 4: the draw in a band of a pathway within the
// limits places the session there whatever its evidence, before hold.
func TestStepShare_6_4(t *testing.T) {
	p := rulePolicy("a", "b", "c")
	p.Pathways[2].MinSharePPM = 1_000_000
	r := mustRank(t, p, fig(5, 1, 1), fig(5, 1, 1), noFig(evidence.StatusUnmetered))
	o := mustDecide(t, r, rep(1, 8000, 5000), report.Session{9})
	expect(t, o, 2, Share)
	if o.TTL != p.TTLs || !slices.Equal(o.Priority[:3], []uint8{2, 0, 1}) {
		t.Fatalf("ttl %d priority %v", o.TTL, o.Priority[:3])
	}
	// Buffer and floor come before it.
	expect(t, mustDecide(t, r, rep(1, 8000, 0), report.Session{9}), 1, Buffer)
	expect(t, mustDecide(t, r, rep(1, 0, 5000), report.Session{9}), 1, Floor)
}

// TestStepHold_6_4 is §6.4 step 5: c known and within, not w, of w's rank, and
// the rank is 4 or w does not beat c.
func TestStepHold_6_4(t *testing.T) {
	p := rulePolicy("a", "b", "c")
	p.HysteresisPPM = 50_000
	// a: 100/105, b: 1 (c's figure), c: a ModelBased figure.
	ev := []evidence.Pathway{fig(4, 100, 105), fig(4, 1, 1), fig(2, 1, 1000)}
	r := mustRank(t, p, ev...)
	o := mustDecide(t, r, rep(1, 8000, 5000), report.Session{})
	expect(t, o, 1, Hold) // a is lower, but not by more than 5 %
	if o.TTL != p.TTLs || !slices.Equal(o.Priority[:3], []uint8{1, 0, 2}) {
		t.Fatalf("ttl %d priority %v", o.TTL, o.Priority[:3])
	}
	// a by more than the margin: it moves.
	ev[0] = fig(4, 99, 105)
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(1, 8000, 5000), report.Session{}), 0, Rank)
	// h = 0: any lower figure moves it; an equal one holds it (c = "b" is
	// after "a" by id, so w is a).
	p.HysteresisPPM = 0
	ev[0] = fig(4, 104, 105)
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(1, 8000, 5000), report.Session{}), 0, Rank)
	ev[0] = fig(4, 105, 105)
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(1, 8000, 5000), report.Session{}), 1, Hold)
	// h = 1 000 000: half is not enough.
	p.HysteresisPPM = 1_000_000
	ev[0] = fig(4, 1, 2)
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(1, 8000, 5000), report.Session{}), 1, Hold)
	ev[0] = fig(4, 1, 3)
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(1, 8000, 5000), report.Session{}), 0, Rank)
	// c of another rank than w: not held, whatever the figures.
	p.HysteresisPPM = 1_000_000
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(2, 8000, 5000), report.Session{}), 0, Rank)
	// c = w: rank.
	expect(t, mustDecide(t, mustRank(t, p, ev...), rep(0, 8000, 5000), report.Session{}), 0, Rank)
	// c not within the limits: not held.
	p.Pathways[1].LatencyMs = 101
	ev[0] = fig(4, 1, 1)
	o = mustDecide(t, mustRank(t, p, ev...), rep(1, 8000, 5000), report.Session{})
	expect(t, o, 0, Rank)
	if !slices.Equal(o.Priority[:3], []uint8{0, 2, 1}) {
		t.Fatalf("priority %v: the pathway outside the limits last", o.Priority[:3])
	}
}

// TestStepHoldRank4_6_4 is §6.4 step 5 at rank 4: between two pathways with no
// figure the client stays; a pathway with a figure within the limits moves
// it at once (step 6).
func TestStepHoldRank4_6_4(t *testing.T) {
	p := rulePolicy("a", "b", "c")
	r := mustRank(t, p, noFig(evidence.StatusStale), noFig(evidence.StatusMixed), noFig(evidence.StatusEmpty))
	o := mustDecide(t, r, rep(2, 8000, 5000), report.Session{})
	expect(t, o, 2, Hold)
	if !slices.Equal(o.Priority[:3], []uint8{2, 0, 1}) {
		t.Fatalf("priority %v", o.Priority[:3])
	}
	r = mustRank(t, p, noFig(evidence.StatusStale), fig(3, 1<<64-1, 1), noFig(evidence.StatusEmpty))
	expect(t, mustDecide(t, r, rep(2, 8000, 5000), report.Session{}), 1, Rank)
}

// TestStepRank_6_5 is §6.4 step 6 and §6.5's priority: w first, then the
// pathways within the limits in the order, then the others in the order.
func TestStepRank_6_5(t *testing.T) {
	p := rulePolicy("a", "b", "c", "d", "e")
	p.Pathways[0].LatencyMs = 101 // a: the lowest figure, past the ceiling
	p.Pathways[3].TopTier = 0     // d: without the floor tier
	r := mustRank(t, p, fig(5, 1, 10), fig(5, 3, 1), fig(5, 2, 1), fig(5, 1, 1), noFig(evidence.StatusStale))
	if got := r.Order(); !slices.Equal(got, []uint8{0, 3, 2, 1, 4}) {
		t.Fatalf("order %v", got)
	}
	o := mustDecide(t, r, rep(-1, -1, -1), report.Session{})
	expect(t, o, 2, Rank)
	if want := []uint8{2, 1, 4, 0, 3}; !slices.Equal(o.Priority[:5], want) {
		t.Fatalf("priority %v, want %v", o.Priority[:5], want)
	}
	if o.TTL != p.TTLs || o.N != 5 {
		t.Fatalf("ttl %d n %d", o.TTL, o.N)
	}
	for i, want := range []Limits{LimitQuality | LimitCapacity, Within, Within, LimitLatency | LimitCapacity, Within} {
		if o.Limits[i] != want {
			t.Errorf("pathway %d limits %03b, want %03b", i, o.Limits[i], want)
		}
	}
	for i := o.N; i < MaxPathways; i++ {
		if o.Limits[i] != 0 || o.Priority[i] != 0 {
			t.Fatal("entries past N are not 0")
		}
	}
}

// TestWindowEdges_5_1 builds rankings at instants with b < W and with t < L
// (§5.1): with t < L no record is in the window and every pathway is stale;
// with b < W the window is [0, b).
func TestWindowEdges_5_1(t *testing.T) {
	p := rulePolicy("a", "b")
	x := evidence.NewIndex()
	add := func(hop byte, s, e uint64, c evidence.Class) *evidence.Record {
		r := &evidence.Record{Hop: sig.PublicKey{0: hop}, Start: s, End: e, Class: c, Joules: 7,
			Tracks: []evidence.Track{{Kind: evidence.KindMedia, Direction: evidence.DirOut, Bytes: 3}}}
		x.Add(evidence.Entry{Digest: r.Digest(), Record: r})
		return r
	}
	add(1, 0, 10, 4)
	add(2, 0, 10, 4)
	add(2, 10, 20, 4)

	r, err := RankAt(p, ruleDigest, 4, x) // t < L
	if err != nil {
		t.Fatal(err)
	}
	if a, b := r.Window(); a != 0 || b != 0 {
		t.Fatalf("t < L: window [%d, %d)", a, b)
	}
	for i := range 2 {
		if ev := r.Evidence(i); ev.Status != evidence.StatusStale || len(ev.Records) != 0 {
			t.Fatalf("t < L: pathway %d %+v", i, ev)
		}
	}

	r, err = RankAt(p, ruleDigest, 15, x) // b = 10 < W = 30: [0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := r.Window(); a != 0 || b != 10 {
		t.Fatalf("b < W: window [%d, %d)", a, b)
	}
	for i := range 2 {
		if ev := r.Evidence(i); ev.Status != evidence.StatusFigure || len(ev.Records) != 1 {
			t.Fatalf("b < W: pathway %d %+v", i, ev)
		}
	}
	// [0, 20) at t = 25: a is stale, b has a figure and comes first.
	r, err = RankAt(p, ruleDigest, 25, x)
	if err != nil {
		t.Fatal(err)
	}
	if r.Evidence(0).Status != evidence.StatusStale || r.Evidence(1).Status != evidence.StatusFigure || r.Order()[0] != 1 {
		t.Fatalf("[0, 20): %+v %+v", r.Evidence(0), r.Evidence(1))
	}
	// A record for a arrives: Refresh recomputes a alone.
	rec := add(1, 10, 20, 4)
	r2, err := r.Refresh(x, rec)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Evidence(0).Status != evidence.StatusFigure || r.Evidence(0).Status != evidence.StatusStale {
		t.Fatal("Refresh did not recompute the pathway, or changed the old ranking")
	}
	if r2.Order()[0] != 0 { // a: 14/3 = b: 14/3, by id
		t.Fatalf("order after Refresh %v", r2.Order())
	}
	// A record outside the window, or of no pathway, changes nothing.
	if r3, _ := r2.Refresh(x, add(1, 20, 30, 4)); r3 != r2 {
		t.Fatal("a record outside the window made a new ranking")
	}
	if r3, _ := r2.Refresh(x, add(9, 0, 10, 4)); r3 != r2 {
		t.Fatal("a record of no pathway made a new ranking")
	}
	if !r2.Covers(25) || !r2.Covers(34) || r2.Covers(35) || r2.Covers(24) {
		t.Fatal("Covers")
	}
}

// TestDecisionAndRecompute_9_1: the decision the server builds (§7.1) is what
// the verifier recomputes (§9.1 step 6); a changed output is
// decision_mismatch, or unknown_preferred when it puts first a pathway with
// no figure while the rule's first has one.
func TestDecisionAndRecompute_9_1(t *testing.T) {
	p := rulePolicy("a", "b", "c")
	p.Pathways[2].MinSharePPM = 300_000
	ev := []evidence.Pathway{fig(5, 5, 1), fig(5, 2, 1), noFig(evidence.StatusUnmetered)}
	ev[0].Records = []sig.Hash{{1}, {2}}
	r := mustRank(t, p, ev...)
	signer := sig.PublicKey{0xab}
	for k := range 200 {
		s := report.Session{0: byte(k), 1: 0x77}
		reports := []report.Report{rep(-1, -1, -1), rep(0, 8000, 5000), rep(2, 100, 100), rep(1, -1, 3000)}
		rp := reports[k%len(reports)]
		loads := []uint32{uint32(k), 3, 0}
		d, err := r.Decision(signer, 45, report.DASH, rp, s, loads)
		if err != nil {
			t.Fatal(err)
		}
		if d.Room != p.Room || d.Signer != signer || d.Policy != ruleDigest || d.T != 45 || d.Session != s ||
			d.Protocol != report.DASH || d.Report != rp || len(d.Pathways) != 3 || d.Pathways[1].Load != 3 ||
			!slices.Equal(d.Pathways[0].Records, ev[0].Records) {
			t.Fatalf("decision fields %+v", d)
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("the decision breaks §7.2: %v", err)
		}
		// What it states is the reference's output, not only what the
		// verifier's copy of the rule recomputes.
		want, _ := refOutcome(t, p, ev, rp, ruleref.Draw(ruleDigest, s), loads)
		if d.Draw != want.Draw || d.TTL != want.TTL || d.Reason != want.Reason || !slices.Equal(d.Priority, want.Priority[:3]) {
			t.Fatalf("session %x: the decision states %d %d %v %v, the reference %+v", s, d.Draw, d.TTL, d.Reason, d.Priority, want)
		}
		if err := CheckOutput(p, ruleDigest, d); err != nil {
			t.Fatalf("session %x: %v", s, err)
		}
		o, err := Recompute(p, ruleDigest, d)
		if err != nil || o.Draw != d.Draw || o.Reason != d.Reason || o.TTL != d.TTL || !slices.Equal(o.Priority[:3], d.Priority) {
			t.Fatalf("Recompute %+v, %v", o, err)
		}

		// Every change of the output is refused.
		for _, mutate := range []func(*Decision){
			func(d *Decision) { d.Draw = (d.Draw + 1) % 1_000_000 },
			func(d *Decision) { d.TTL++ },
			func(d *Decision) { d.Reason = d.Reason%6 + 1 },
			func(d *Decision) { d.Pathways[1].Limits ^= LimitCapacity },
			func(d *Decision) { d.Priority[1], d.Priority[2] = d.Priority[2], d.Priority[1] },
		} {
			m := *d
			m.Pathways = slices.Clone(d.Pathways)
			m.Priority = slices.Clone(d.Priority)
			mutate(&m)
			if code := reason.Of(CheckOutput(p, ruleDigest, &m)); code != reason.DecisionMismatch && code != reason.UnknownPreferred {
				t.Fatalf("a changed output: %q", code)
			}
		}
		// A changed input is refused when the rule gives another output
		// for it: another session, another draw.
		m := *d
		m.Session[3]++
		if Draw(ruleDigest, m.Session) != d.Draw {
			if code := reason.Of(CheckOutput(p, ruleDigest, &m)); code != reason.DecisionMismatch && code != reason.UnknownPreferred {
				t.Fatalf("another session: %q", code)
			}
		}
	}

	// unknown_preferred: the stated first is c (no figure) when the rule's
	// first is b (a figure).
	outside, _ := sessionDrawing(300_000) // past c's band [0, 300 000)
	d, err := r.Decision(signer, 45, report.HLS, rep(-1, -1, -1), outside, []uint32{0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if d.Reason != Rank || d.Priority[0] != 1 {
		t.Fatalf("reason %d first %d, want b by rank", d.Reason, d.Priority[0])
	}
	d.Priority = []uint8{2, 1, 0}
	if code := reason.Of(CheckOutput(p, ruleDigest, d)); code != reason.UnknownPreferred {
		t.Fatalf("no figure preferred: %q, want unknown_preferred", code)
	}
	d.Priority = []uint8{0, 1, 2}
	if code := reason.Of(CheckOutput(p, ruleDigest, d)); code != reason.DecisionMismatch {
		t.Fatalf("a figure preferred wrongly: %q, want decision_mismatch", code)
	}
	// A decision of another count of pathways, or stating a figure with D 0.
	d.Pathways = d.Pathways[:2]
	if code := reason.Of(CheckOutput(p, ruleDigest, d)); code != reason.DecisionInvalid {
		t.Fatalf("2 pathways of 3: %q", code)
	}
	// t outside the ranking's window.
	if _, err := r.Decision(signer, 55, report.HLS, rep(-1, -1, -1), report.Session{}, []uint32{0, 0, 0}); err == nil {
		t.Fatal("a decision at t of another window")
	}
}

// TestRankingRefuses_7_2: evidence a decision could not state (§7.2), loads and
// reports the rule cannot take.
func TestRankingRefuses_7_2(t *testing.T) {
	p := rulePolicy("a", "b")
	bad := []evidence.Pathway{
		fig(5, 1, 0), fig(5, 0, 1), fig(0, 1, 1), fig(1, 1, 1), fig(6, 1, 1),
		{Status: 5}, {Status: evidence.StatusStale, Class: 5}, {Status: evidence.StatusMixed, Joules: num.From64(1)},
		{Status: evidence.StatusEmpty, Delivery: num.From64(1)},
	}
	for _, ev := range bad {
		if _, err := NewRanking(p, ruleDigest, 0, 0, []evidence.Pathway{fig(5, 1, 1), ev}); err == nil {
			t.Errorf("evidence %+v accepted", ev)
		}
		r := mustRank(t, p, fig(5, 1, 1), fig(5, 1, 1))
		if _, err := r.With(1, ev); err == nil {
			t.Errorf("With %+v accepted", ev)
		}
	}
	if _, err := NewRanking(p, ruleDigest, 0, 0, []evidence.Pathway{fig(5, 1, 1)}); err == nil {
		t.Error("evidence for 1 pathway of 2")
	}
	if _, err := NewRanking(rulePolicy(), ruleDigest, 0, 0, nil); err == nil {
		t.Error("a policy of no pathways")
	}
	ids := make([]string, 33)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	if _, err := NewRanking(rulePolicy(ids...), ruleDigest, 0, 0, make([]evidence.Pathway, 33)); err == nil {
		t.Error("a policy of 33 pathways")
	}
	r := mustRank(t, p, fig(5, 1, 1), fig(5, 1, 1))
	for _, c := range []struct {
		rp    report.Report
		loads []uint32
	}{
		{rep(-1, -1, -1), []uint32{0}},
		{rep(2, -1, -1), []uint32{0, 0}},
		{report.Report{Present: 8}, []uint32{0, 0}},
	} {
		if _, err := r.Decide(c.rp, report.Session{}, c.loads); err == nil {
			t.Errorf("report %+v loads %v decided", c.rp, c.loads)
		}
	}
	if _, err := r.With(2, fig(5, 1, 1)); err == nil {
		t.Error("With pathway 2 of 2")
	}
}
