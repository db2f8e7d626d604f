package decision

import (
	"crypto/sha256"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
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
