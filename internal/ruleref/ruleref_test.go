package ruleref

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// base is a request whose every value a case overrides as it needs: F = 1,
// tiers 1000 to 8000, ceiling 100 ms, min buffer 2000 ms, h 5 %, TTLs 300
// and 10, and every pathway within the limits (latency 50, top tier 3, no
// capacity) with no share.
func base(ps ...Pathway) *Input {
	for i := range ps {
		if ps[i].ID == "" {
			ps[i].ID = string(rune('a' + i))
		}
		if ps[i].LatencyMs == 0 {
			ps[i].LatencyMs = 50
		}
		if ps[i].TopTier == 0 {
			ps[i].TopTier = 3
		}
		if ps[i].Capacity == 0 {
			ps[i].Capacity = noLimit
		}
	}
	return &Input{
		Floor: 1, Tiers: []uint64{1000, 2000, 4000, 8000},
		LatencyCeilingMs: 100, MinBufferMs: 2000, HysteresisPPM: 50_000,
		TTLs: 300, MinTTLs: 10, Pathways: ps,
		Draw: 999_999, // in no band unless a case sets shares
	}
}

func fig(class uint8, j, d int64) Pathway {
	return Pathway{Figure: true, Class: class, J: big.NewInt(j), D: big.NewInt(d)}
}

func decide(t *testing.T, in *Input) *Output {
	t.Helper()
	out, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func want(t *testing.T, out *Output, reason int, ttl uint32, priority ...int) {
	t.Helper()
	if out.Reason != reason || out.TTL != ttl || !slices.Equal(out.Priority, priority) || out.First != priority[0] {
		t.Fatalf("reason %d ttl %d priority %v, want %d %d %v", out.Reason, out.TTL, out.Priority, reason, ttl, priority)
	}
}

// TestDraw_6_3: the draw of a digest 00 01 … 1f and a session a0 … af. The
// 66 bytes hashed, written out with printf and hashed with sha256sum, give
// f9a6c55f…; f9 a6 c5 5f read little-endian is 0x5fc5a6f9 = 1 606 788 857,
// and mod 1 000 000 that is 788 857.
func TestDraw_6_3(t *testing.T) {
	var digest [32]byte
	var session [16]byte
	for i := range digest {
		digest[i] = byte(i)
	}
	for i := range session {
		session[i] = 0xa0 + byte(i)
	}
	if d := Draw(digest, session); d != 788_857 {
		t.Fatalf("draw %d, want 788857", d)
	}
}

// TestOrderAcrossClasses_6_2: equal figures in four classes are ordered by
// rank alone (step 1), and no figure comes last however cheap the pathway's
// hops were. a ModelBased 1/1, b CalibratedInstrument 9/1, c Estimator 1/1,
// d none, e OnChipCounter 1/1: b, e, a, c, d.
func TestOrderAcrossClasses_6_2(t *testing.T) {
	in := base(fig(2, 1, 1), fig(5, 9, 1), fig(3, 1, 1), Pathway{}, fig(4, 1, 1))
	out := decide(t, in)
	if !slices.Equal(out.Order, []int{1, 4, 0, 2, 3}) {
		t.Fatalf("order %v", out.Order)
	}
	want(t, out, Rank, 300, 1, 4, 0, 2, 3)
}

// TestOrderWithinClass_6_2: step 2 by cross products, step 3 by id bytewise
// for equal figures (2/4 and 1/2) and for pathways with no figure. Ids "b",
// "a", "B", "z", "y": figures 2/4, 1/2, 1/3, none, none. 1/3 is lowest; 1/2
// and 2/4 are equal, "a" < "b"; then "y" < "z".
func TestOrderWithinClass_6_2(t *testing.T) {
	ps := []Pathway{fig(4, 2, 4), fig(4, 1, 2), fig(4, 1, 3), {}, {}}
	for i, id := range []string{"b", "a", "B", "z", "y"} {
		ps[i].ID = id
	}
	out := decide(t, base(ps...))
	if !slices.Equal(out.Order, []int{2, 1, 0, 4, 3}) {
		t.Fatalf("order %v", out.Order)
	}
}

// TestSteps_6_4 walks the six steps on three pathways: a 1/1, b 104/100 and
// c with no figure, all of one class but c.
func TestSteps_6_4(t *testing.T) {
	mk := func() *Input { return base(fig(5, 1, 1), fig(5, 104, 100), Pathway{}) }

	// Step 1: c = b known and within, B = 1999 < 2000.
	in := mk()
	in.HasC, in.C, in.HasB, in.B = true, 1, true, 1999
	want(t, decide(t, in), Buffer, 10, 1, 0, 2)
	in.B = 2000 // not below: b is held by step 5 (a does not beat it by 5 %)
	want(t, decide(t, in), Hold, 300, 1, 0, 2)

	// Step 2: T = 3999 sustains tier 1 = F; T = 999 sustains none.
	in = mk()
	in.HasC, in.C, in.HasT, in.T = true, 1, true, 3999
	want(t, decide(t, in), Floor, 10, 1, 0, 2)
	in.T = 999
	want(t, decide(t, in), Floor, 10, 1, 0, 2)
	in.T = 4000 // tier 2 > F: not at the floor
	want(t, decide(t, in), Hold, 300, 1, 0, 2)

	// Step 3: every pathway past the ceiling; c when known, else the first
	// of the order, min_ttl_s either way.
	in = mk()
	for i := range in.Pathways {
		in.Pathways[i].LatencyMs = 101
	}
	want(t, decide(t, in), None, 10, 0, 1, 2)
	in.HasC, in.C = true, 2
	want(t, decide(t, in), None, 10, 2, 0, 1)

	// Step 4: c's band [0, 10) holds the draw 5; it is placed there though it
	// has no figure, and ahead of hold.
	in = mk()
	in.Pathways[2].MinSharePPM, in.Draw = 10, 5
	in.HasC, in.C = true, 1
	want(t, decide(t, in), Share, 300, 2, 0, 1)
	in.Draw = 10 // S + share is outside the band
	want(t, decide(t, in), Hold, 300, 1, 0, 2)
	in.Draw = 5
	in.Pathways[2].TopTier = 0 // the band's pathway outside the limits: no share
	want(t, decide(t, in), Hold, 300, 1, 0, 2)

	// Step 5: a beats b only by more than h. 1 × 100 × 1 050 000 =
	// 105 000 000 against 104 × 1 × 1 000 000: 105e6 < 104e6 is false, so b
	// is held; with h = 0, 100e6 < 104e6 and a wins by rank.
	in = mk()
	in.HasC, in.C = true, 1
	want(t, decide(t, in), Hold, 300, 1, 0, 2)
	in.HysteresisPPM = 0
	want(t, decide(t, in), Rank, 300, 0, 1, 2)
	// At exactly the margin: b = 105/100, 105e6 < 105e6 is false: held.
	in = mk()
	in.Pathways[1].D = big.NewInt(100)
	in.Pathways[1].J = big.NewInt(105)
	in.HasC, in.C = true, 1
	want(t, decide(t, in), Hold, 300, 1, 0, 2)
	in.Pathways[1].J = big.NewInt(106) // 105e6 < 106e6: a beats b
	want(t, decide(t, in), Rank, 300, 0, 1, 2)

	// Step 5 at rank 4: between pathways with no figure the client stays;
	// c with no figure and w with one: it moves (step 6).
	in = base(Pathway{}, Pathway{})
	in.HasC, in.C = true, 1
	want(t, decide(t, in), Hold, 300, 1, 0)
	in = mk()
	in.HasC, in.C = true, 2
	want(t, decide(t, in), Rank, 300, 0, 1, 2)
}

// TestLimitsAndPriority_6_5: the limits bits in §7.1's order, and the priority
// with the pathways within the limits ahead of the others, each group in the
// order. a 1/10 past the ceiling, b 3/1, c 2/1, d 1/1 without the floor tier,
// e at its capacity: order a, d, c, b, e.
func TestLimitsAndPriority_6_5(t *testing.T) {
	in := base(fig(5, 1, 10), fig(5, 3, 1), fig(5, 2, 1), fig(5, 1, 1), fig(5, 9, 1))
	in.Pathways[0].LatencyMs = 101
	in.Pathways[3].TopTier = 0
	in.Floor = 1
	in.Pathways[4].Capacity, in.Pathways[4].Load = 2, 2
	out := decide(t, in)
	want(t, out, Rank, 300, 2, 1, 0, 3, 4)
	if !slices.Equal(out.Limits, []uint8{6, 7, 7, 5, 3}) {
		t.Fatalf("limits %v", out.Limits)
	}
	// e as c: its load counts the client, so it is within.
	in.HasC, in.C = true, 4
	out = decide(t, in)
	if out.Limits[4] != 7 {
		t.Fatalf("c at its capacity: limits %03b", out.Limits[4])
	}
	in.Pathways[4].Load = 3
	if out = decide(t, in); out.Limits[4] != 3 {
		t.Fatalf("c past its capacity: limits %03b", out.Limits[4])
	}
}

// TestSelectionIsEnumeration: the fallback for many pathways gives the order
// the enumeration gives, on random pathways of up to MaxEnumerated.
func TestSelectionIsEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		n := 1 + rng.IntN(MaxEnumerated)
		ps := make([]Pathway, n)
		for i := range ps {
			ps[i].ID = string(rune('a' + rng.IntN(26)))
			for slices.ContainsFunc(ps[:i], func(p Pathway) bool { return p.ID == ps[i].ID }) {
				ps[i].ID += "x"
			}
			if rng.IntN(4) > 0 {
				ps[i] = Pathway{ID: ps[i].ID, Figure: true, Class: uint8(2 + rng.IntN(4)),
					J: big.NewInt(1 + rng.Int64N(4)), D: big.NewInt(1 + rng.Int64N(4))}
			}
		}
		a, err := order(ps)
		if err != nil {
			t.Fatal(err)
		}
		rel := make([][]bool, n)
		for i := range rel {
			rel[i] = make([]bool, n)
			for j := range rel[i] {
				rel[i][j] = i != j && before(&ps[i], &ps[j])
			}
		}
		b, err := orderBySelection(rel)
		if err != nil || !slices.Equal(a, b) {
			t.Fatalf("enumeration %v, selection %v %v", a, b, err)
		}
	}
}

// TestRefuses: inputs the rule is not defined on.
func TestRefuses(t *testing.T) {
	for _, in := range []*Input{
		base(),
		func() *Input { in := base(Pathway{}); in.HasC, in.C = true, 1; return in }(),
		func() *Input { in := base(Pathway{}); in.Draw = 1_000_000; return in }(),
		base(Pathway{ID: "a"}, Pathway{ID: "a"}),
		base(fig(1, 1, 1)),
		base(fig(5, 0, 1)),
		base(fig(5, 1, 0)),
	} {
		if _, err := Decide(in); err == nil {
			t.Errorf("decided %+v", in)
		}
	}
}
