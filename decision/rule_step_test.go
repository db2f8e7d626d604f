package decision

// The rule's steps (§6.4) and the order it answers (§6.5).

import (
	"slices"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/report"
)

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
