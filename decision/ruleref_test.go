package decision

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/ruleref"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// refOutcome is what internal/ruleref, the reference written from §6 alone,
// gives for a request, as an Outcome so that it compares with ==.
func refOutcome(t testing.TB, p *policy.Policy, ev []evidence.Pathway, rp report.Report, draw uint32, loads []uint32) (Outcome, []int) {
	t.Helper()
	in, err := ruleref.FromPolicy(p, ev, rp, draw, loads)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ruleref.Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	o := Outcome{Draw: draw, N: len(p.Pathways), First: uint8(out.First), Reason: Reason(out.Reason), TTL: out.TTL}
	for i, l := range out.Limits {
		o.Limits[i] = Limits(l)
	}
	for i, v := range out.Priority {
		o.Priority[i] = uint8(v)
	}
	return o, out.Order
}

// checkAgainstRef decides the request with the production rule, both from
// the draw (DecideDrawn) and from the session (Decide), and requires the
// outcome, the order and the decision built from it to be the reference's.
func checkAgainstRef(t testing.TB, p *policy.Policy, ev []evidence.Pathway, rp report.Report, s report.Session, draw uint32, loads []uint32) Outcome {
	t.Helper()
	r, err := NewRanking(p, ruleDigest, 10, 40, ev)
	if err != nil {
		t.Fatal(err)
	}
	want, order := refOutcome(t, p, ev, rp, draw, loads)
	describe := func() string {
		return fmt.Sprintf("policy %+v\nevidence %+v\nreport %+v draw %d loads %v", *p, ev, rp, draw, loads)
	}
	got, err := r.DecideDrawn(rp, draw, loads)
	if err != nil {
		t.Fatalf("%v\n%s", err, describe())
	}
	if got != want {
		t.Fatalf("the rule gives\n%+v\nthe reference\n%+v\n%s", got, want, describe())
	}
	if o := r.Order(); !slices.Equal(toInts(o), order) {
		t.Fatalf("order %v, the reference's %v\n%s", o, order, describe())
	}

	// From the session: the draw is §6.3's, recomputed by the reference.
	sd := ruleref.Draw(ruleDigest, s)
	wantS, _ := refOutcome(t, p, ev, rp, sd, loads)
	gotS, err := r.Decide(rp, s, loads)
	if err != nil || gotS != wantS {
		t.Fatalf("from session %x the rule gives\n%+v (%v)\nthe reference\n%+v\n%s", s, gotS, err, wantS, describe())
	}
	d, err := r.Decision(sig.PublicKey{1}, 45, report.HLS, rp, s, loads)
	if err != nil {
		t.Fatal(err)
	}
	if d.Draw != sd || d.TTL != wantS.TTL || d.Reason != wantS.Reason || !slices.Equal(d.Priority, wantS.Priority[:wantS.N]) {
		t.Fatalf("the decision states draw %d ttl %d reason %v priority %v, the reference %+v", d.Draw, d.TTL, d.Reason, d.Priority, wantS)
	}
	for i := range d.Pathways {
		if d.Pathways[i].Limits != wantS.Limits[i] || d.Pathways[i].Load != loads[i] {
			t.Fatalf("pathway %d states limits %03b load %d, the reference %03b", i, d.Pathways[i].Limits, d.Pathways[i].Load, wantS.Limits[i])
		}
	}
	return got
}

func toInts(v []uint8) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// randomRequest is a random request of 1 to 6 pathways, its values drawn
// from small sets around each boundary the rule has (§6.1 to §6.4), so that
// ties and edges come up often: equal figures within a class and equal
// products across classes, loads at capacity, draws on a band's edges,
// throughputs on a tier's bitrate and buffers on min_buffer_ms.
func randomRequest(rng *rand.Rand) (*policy.Policy, []evidence.Pathway, report.Report, report.Session, uint32, []uint32) {
	pick := func(vs ...uint64) uint64 { return vs[rng.IntN(len(vs))] }
	n := 1 + rng.IntN(6)

	// Ids from few characters, some prefixes of others, so step 3 compares
	// bytewise often ("B" < "a", "a" < "a-" < "aa").
	var ids []string
	for len(ids) < n {
		id := randString(rng, "aAbB0.-_", 1, 3, false)
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	p := rulePolicy(ids...)
	nt := 1 + rng.IntN(8)
	p.Tiers = p.Tiers[:0]
	rate := uint64(0)
	for range nt {
		rate += 1 + rng.Uint64N(3000)
		p.Tiers = append(p.Tiers, rate)
	}
	p.Floor = uint8(rng.IntN(nt))
	p.LatencyCeilingMs = uint32(pick(0, 100, 1<<32-1, uint64(rng.IntN(300))))
	p.MinBufferMs = uint32(pick(0, 1, 2000, uint64(rng.IntN(10_000))))
	p.HysteresisPPM = uint32(pick(0, 1, 50_000, 999_999, 1_000_000, 1_000_000, rng.Uint64N(1_000_001)))
	p.MinTTLs = uint32(1 + rng.IntN(100))
	p.TTLs = p.MinTTLs + uint32(pick(0, uint64(rng.IntN(1000))))

	// Shares: none, some, or the whole range.
	left := uint32(1_000_000)
	for i := range p.Pathways {
		pw := &p.Pathways[i]
		// Mostly within the limits, so that the steps after 3 are taken.
		ceiling := uint64(p.LatencyCeilingMs)
		pw.LatencyMs = uint32(pick(0, ceiling, ceiling, ceiling/2, ceiling+1, ceiling-1, rng.Uint64N(300)))
		floor := uint64(p.Floor)
		pw.TopTier = uint8(pick(floor, floor, uint64(nt-1), uint64(nt-1), floor+1, floor-1, 0)) % uint8(nt)
		pw.Capacity = uint32(pick(policy.Unlimited, policy.Unlimited, policy.Unlimited, 0, 1, 3, 1<<32-2))
		switch rng.IntN(10) {
		case 0:
			pw.MinSharePPM = left
		case 1, 2:
			pw.MinSharePPM = uint32(rng.Int64N(int64(left)/4 + 1))
		}
		left -= pw.MinSharePPM
	}

	// Evidence of every status; figures from few values, so that equal
	// figures (2/4 and 1/2) and equal products in other classes are common,
	// and sometimes 128-bit.
	ev := make([]evidence.Pathway, n)
	small := func() num.U128 { return num.From64(1 + rng.Uint64N(4)) }
	wide := func() num.U128 {
		return num.U128{Lo: pick(1, 1<<64-1, 1<<64-2, rng.Uint64()), Hi: pick(0, 1<<64-1, rng.Uint64())}
	}
	classes := []evidence.Class{2, 3, 4, 5}
	if rng.IntN(2) == 0 { // one class for most figures: ranks tie, hold is weighed
		classes = []evidence.Class{classes[rng.IntN(4)]}
	}
	class := func() evidence.Class { return classes[rng.IntN(len(classes))] }
	for i := range ev {
		switch st := evidence.Status(rng.IntN(8)); {
		case st >= 1 && st <= 4:
			ev[i] = noFig(st)
		case i > 0 && rng.IntN(3) == 0: // another pathway's J and D, maybe in another class
			o := ev[rng.IntN(i)]
			if o.Status != evidence.StatusFigure {
				o = fig(5, 1, 1)
			}
			o.Class = []evidence.Class{2, 3, 4, 5}[rng.IntN(4)]
			if rng.IntN(2) == 0 {
				o.Class = class()
			}
			ev[i] = o
		case rng.IntN(4) == 0:
			ev[i] = fig128(class(), wide(), wide())
		default:
			ev[i] = fig128(class(), small(), small())
		}
	}

	// Loads at, below and above each capacity; c sometimes at its capacity.
	loads := make([]uint32, n)
	for i, pw := range p.Pathways {
		capacity := uint64(pw.Capacity)
		loads[i] = uint32(pick(0, capacity, capacity+1, capacity-1, 1<<32-1, uint64(rng.IntN(5))))
	}
	var rp report.Report
	if rng.IntN(3) > 0 {
		rp.Present |= report.HasPathway
		rp.Pathway = uint8(rng.IntN(n))
		if pw := p.Pathways[rp.Pathway]; rng.IntN(3) == 0 && pw.Capacity != policy.Unlimited {
			loads[rp.Pathway] = pw.Capacity
		}
	}
	if rng.IntN(3) == 0 {
		rp.Present |= report.HasThroughput
		tier := p.Tiers[rng.IntN(nt)]
		rp.Throughput = pick(0, 1<<64-1, tier, tier-1, tier+1, rng.Uint64N(30_000))
	}
	if rng.IntN(3) == 0 {
		rp.Present |= report.HasBuffer
		mb := uint64(p.MinBufferMs)
		rp.Buffer = pick(0, mb, mb-1, mb+1, 1<<64-1, rng.Uint64N(10_000))
	}

	// The draw: random, or on an edge of a pathway's band.
	draw := uint32(rng.IntN(DrawRange))
	if rng.IntN(2) == 0 {
		k := rng.IntN(n)
		var s uint32
		for _, pw := range p.Pathways[:k] {
			s += pw.MinSharePPM
		}
		e := s + p.Pathways[k].MinSharePPM
		draw = []uint32{s, e, e - 1, s - 1}[rng.IntN(4)]
		if draw >= DrawRange {
			draw = DrawRange - 1
		}
	}
	var s report.Session
	for i := range s {
		s[i] = byte(rng.Uint32())
	}
	return p, ev, rp, s, draw, loads
}

// TestRuleAgainstReference is §6.1 to §6.5 on random requests: the rule's
// limits, order, first pathway, reason, TTL and priority are those of the
// reference, which enumerates §6.2's orders and checks §6.4's steps in the
// text's order with math/big.
func TestRuleAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 64))
	count := 20_000
	if testing.Short() {
		count = 2000
	}
	reasons := map[Reason]int{}
	for range count {
		p, ev, rp, s, draw, loads := randomRequest(rng)
		o := checkAgainstRef(t, p, ev, rp, s, draw, loads)
		reasons[o.Reason]++
	}
	// Every step must have been taken often, or the comparison misses it
	// (hold, which needs the most to line up, is about 1 %).
	for why := Buffer; why <= None; why++ {
		if reasons[why] < count/200 {
			t.Errorf("reason %v taken %d times of %d", why, reasons[why], count)
		}
	}
	t.Logf("%d requests; reasons %v", count, reasons)
}

// TestRuleEdgesAgainstReference are hand-derived requests at the edges of the
// steps, each with the first pathway and reason the text gives; the rule and
// the reference must both give it, and agree on everything else.
func TestRuleEdgesAgainstReference(t *testing.T) {
	type edge struct {
		name  string
		setup func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32)
		first int
		why   Reason
	}
	const outside = 999_999 // a draw in no band: rulePolicy has no shares
	m := num.U128{Lo: 1<<64 - 1, Hi: 1<<64 - 1}
	edges := []edge{
		{"§6.1 c at its capacity is within, and held at its floor (step 2)", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			p.Pathways[1].Capacity = 4
			return []evidence.Pathway{fig(5, 1, 1), fig(5, 9, 1)}, rep(1, 500, -1), outside, []uint32{0, 4}
		}, 1, Floor},
		{"§6.1 another client at b's capacity does not get it: a new client at the load goes by rank", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			p.Pathways[1].Capacity = 4
			return []evidence.Pathway{fig(5, 9, 1), fig(5, 1, 1)}, rep(-1, -1, -1), outside, []uint32{0, 4}
		}, 0, Rank},
		{"§6.4 step 1 needs c within: c past the ceiling with a short buffer goes by rank", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			p.Pathways[1].LatencyMs = 101
			return []evidence.Pathway{fig(5, 9, 1), fig(5, 1, 1)}, rep(1, -1, 0), outside, []uint32{0, 0}
		}, 0, Rank},
		{"§6.4 step 3 keeps c though it is outside the limits", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			for i := range p.Pathways {
				p.Pathways[i].TopTier = 0
			}
			return []evidence.Pathway{fig(5, 1, 1), noFig(evidence.StatusStale), fig(2, 1, 1)}, rep(1, -1, 0), outside, []uint32{0, 0, 0}
		}, 1, None},
		{"§6.4 step 4 places a session on a pathway with no figure before hold", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			p.Pathways[0].MinSharePPM, p.Pathways[1].MinSharePPM = 0, 10
			return []evidence.Pathway{fig(5, 1, 1), noFig(evidence.StatusUnmetered), fig(5, 1, 1)}, rep(2, -1, -1), 0, []uint32{0, 0, 0}
		}, 1, Share},
		{"§6.3 a share of 0 is an empty band: the draw S_i is the next pathway's", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			p.Pathways[0].MinSharePPM, p.Pathways[1].MinSharePPM, p.Pathways[2].MinSharePPM = 7, 0, 1
			return []evidence.Pathway{fig(5, 1, 1), fig(5, 1, 1), fig(5, 9, 1)}, rep(-1, -1, -1), 7, []uint32{0, 0, 0}
		}, 2, Share},
		{"§6.4 step 5 at exactly the margin, near 2^128: held", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			p.HysteresisPPM = 1_000_000 // w must be below half of c's figure
			half := num.U128{Lo: 1<<64 - 1, Hi: 1<<63 - 1}
			// w: half/m; c: (2·half)/m, exactly twice: not by more than the margin.
			twice := num.U128{Lo: 1<<64 - 2, Hi: 1<<64 - 1}
			return []evidence.Pathway{fig128(4, half, m), fig128(4, twice, m)}, rep(1, -1, -1), outside, []uint32{0, 0}
		}, 1, Hold},
		{"§6.4 step 5 just past the margin, near 2^128: moved by rank", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			p.HysteresisPPM = 1_000_000
			half := num.U128{Lo: 1<<64 - 2, Hi: 1<<63 - 1}
			twice := num.U128{Lo: 1<<64 - 2, Hi: 1<<64 - 1}
			return []evidence.Pathway{fig128(4, half, m), fig128(4, twice, m)}, rep(1, -1, -1), outside, []uint32{0, 0}
		}, 0, Rank},
		{"§6.4 step 5 only against w's rank: an equal figure of a weaker class moves", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			return []evidence.Pathway{fig(5, 7, 3), fig(3, 7, 3)}, rep(1, -1, -1), outside, []uint32{0, 0}
		}, 0, Rank},
		{"§6.2 across classes the rank decides, whatever the figures", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			return []evidence.Pathway{fig(3, 1, 1_000_000), fig(2, 1<<64-1, 1), noFig(evidence.StatusEmpty)}, rep(-1, -1, -1), outside, []uint32{0, 0, 0}
		}, 1, Rank},
		{"§6.4 step 5 at rank 4: between two unknown pathways c stays", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			return []evidence.Pathway{noFig(evidence.StatusMixed), noFig(evidence.StatusStale)}, rep(1, -1, -1), outside, []uint32{0, 0}
		}, 1, Hold},
		{"§6.4 step 6: c is w", func(p *policy.Policy) ([]evidence.Pathway, report.Report, uint32, []uint32) {
			return []evidence.Pathway{fig(5, 1, 1), fig(5, 2, 1)}, rep(0, -1, -1), outside, []uint32{0, 0}
		}, 0, Rank},
	}
	for _, e := range edges {
		p := rulePolicy("a", "b", "c")
		ev, rp, draw, loads := e.setup(p)
		p.Pathways = p.Pathways[:len(ev)]
		o := checkAgainstRef(t, p, ev, rp, report.Session{}, draw, loads)
		if int(o.First) != e.first || o.Reason != e.why {
			t.Errorf("%s: first %d by %v, want %d by %v", e.name, o.First, o.Reason, e.first, e.why)
		}
	}
}
