package recount

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// hand is a decision of a hand-made stream and the loads it states.
type hand struct {
	p     *policy.Policy
	t     uint64
	s     int
	first int
	ttl   uint32
	loads []uint32
}

// entriesOf makes the hand-made stream's entries, their Index their place,
// and gives them in reverse, so that the recount must sort them.
func entriesOf(hs []hand) []Entry {
	out := make([]Entry, len(hs))
	for k, h := range hs {
		d := decide(h.p, h.t, sessionNo(h.s), h.first, h.ttl, decision.Rank)
		for i, l := range h.loads {
			d.Pathways[i].Load = l
		}
		out[len(hs)-1-k] = Entry{Index: int64(k), Decision: d, Policy: h.p}
	}
	return out
}

func mustRecount(t *testing.T, entries []Entry, o Options) *Report {
	t.Helper()
	r, err := Recount(entries, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestExpiryAndResets_6_9_2 is a stream counted by hand. §6: a session
// counts on its latest decision's first pathway; SPEC-NOTES "Session
// expiry": until T + TTL + grace inclusive, and a decision's loads count its
// own session on its previous first pathway (§6.1); "The loads survive a
// policy of the same pathways"; "A policy of other pathways resets the loads".
func TestExpiryAndResets_6_9_2(t *testing.T) {
	abc := build(t, "hand", pathways("a", "b", "c"), nil)
	healthPs := pathways("a", "b", "c")
	healthPs[1].Capacity = 0
	health := build(t, "hand", healthPs, nil)
	xy := build(t, "hand", pathways("x", "y"), nil)
	if health.Digest() == abc.Digest() {
		t.Fatal("the health policy is the operator's")
	}
	const grace = 500_000
	A, B, C, D, E, F, G := 1, 2, 3, 4, 5, 6, 7
	hs := []hand{
		{abc, 1_000_000, A, 0, 1, []uint32{0, 0, 0}},    // A until 2 500 000
		{abc, 2_500_000, B, 1, 1, []uint32{1, 0, 0}},    // A's expiry is T: it counts; B until 4 000 000
		{abc, 2_500_001, C, 2, 2, []uint32{0, 1, 0}},    // A's expiry is T − 1: it does not; C until 5 000 001
		{abc, 2_500_002, B, 2, 1, []uint32{0, 1, 1}},    // B counts on b, its previous first; B until 4 000 002
		{health, 3_000_000, D, 0, 1, []uint32{0, 0, 2}}, // same ids: kept; D until 4 500 000
		{abc, 4_000_002, E, 0, 1, []uint32{1, 0, 2}},    // B's expiry is T: D on a, B and C on c
		{abc, 4_000_003, F, 1, 1, []uint32{2, 0, 1}},    // B gone: D and E on a, C on c
		{xy, 4_100_000, G, 0, 1, []uint32{0, 0}},        // other ids: emptied
		{abc, 4_200_000, C, 0, 1, []uint32{0, 0, 0}},    // other ids again: C's decision before is forgotten
	}
	r := mustRecount(t, entriesOf(hs), Options{Grace: grace})
	if r.LoadsMatch != len(hs) || r.LoadsMismatch != 0 || r.LoadsStale != 0 {
		t.Fatalf("loads: %d match, %d stale, %d not; want all %d to match: %v", r.LoadsMatch, r.LoadsStale, r.LoadsMismatch, len(hs), r.Loads)
	}
	if r.Resets != 2 || r.Rooms != 1 || r.EqualT != 0 || r.Decisions != len(hs) {
		t.Errorf("resets %d rooms %d equal t %d decisions %d, want 2 1 0 %d", r.Resets, r.Rooms, r.EqualT, r.Decisions, len(hs))
	}
	if !r.OK() {
		t.Errorf("not OK: %s", r)
	}

	// Off by one at either side of the boundary is caught where it is.
	hs[1].loads = []uint32{0, 0, 0} // as if an expiry equal to T did not count
	hs[6].loads = []uint32{2, 0, 2} // as if B, expired at T − 1, still counted
	entries := entriesOf(hs)
	r = mustRecount(t, entries, Options{Grace: grace})
	if r.LoadsMismatch != 2 || r.LoadsMatch != len(hs)-2 || len(r.Loads) != 2 {
		t.Fatalf("loads: %d match, %d not (%v); want 2 not", r.LoadsMatch, r.LoadsMismatch, r.Loads)
	}
	d1 := entries[len(hs)-1-1].Decision
	want := []LoadMismatch{
		{At: At{Index: 1, Digest: d1.Digest(), T: 2_500_000}, Pathway: 0, ID: "a", Stated: 0, Recount: 1},
		{At: At{Index: 6, Digest: entries[len(hs)-1-6].Decision.Digest(), T: 4_000_003}, Pathway: 2, ID: "c", Stated: 2, Recount: 1},
	}
	if !slices.Equal(r.Loads, want) {
		t.Errorf("mismatches %+v, want %+v", r.Loads, want)
	}
	if r.OK() {
		t.Error("OK with two loads wrong")
	}
	if s := r.String(); !strings.Contains(s, `leaf 1, decision `+d1.Digest().String()+`, t 2500000, pathway 0 "a" states 0, the recount is 1`) ||
		!strings.Contains(s, "7 exact, 2 not") || !strings.HasSuffix(s, "do not hold.") {
		t.Errorf("summary: %s", s)
	}

	// Every load one higher: every decision is off on each pathway, and
	// the examples stop at Examples, the first decision's pathways first.
	hs[1].loads = []uint32{1, 0, 0}
	hs[6].loads = []uint32{2, 0, 1}
	for k := range hs {
		for i := range hs[k].loads {
			hs[k].loads[i]++
		}
	}
	r = mustRecount(t, entriesOf(hs), Options{Grace: grace})
	if r.LoadsMismatch != len(hs) || len(r.Loads) != Examples {
		t.Fatalf("%d decisions off, %d examples; want %d and %d", r.LoadsMismatch, len(r.Loads), len(hs), Examples)
	}
	for j, want := range []struct {
		index   int64
		pathway int
	}{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 1}, {2, 2}, {3, 0}} {
		if m := r.Loads[j]; m.Index != want.index || m.Pathway != want.pathway || m.Stated != m.Recount+1 {
			t.Errorf("example %d: %+v, want leaf %d pathway %d one higher", j, m, want.index, want.pathway)
		}
	}
}

// TestDefaultGrace_6 is SPEC-NOTES "Session expiry": the server's grace is
// 20 s unless configured, so a session of TTL 1 s decided at 0 counts at
// 21 000 000 µs and not at 21 000 001.
func TestDefaultGrace_6(t *testing.T) {
	ab := build(t, "grace", pathways("a", "b"), nil)
	hs := []hand{
		{ab, 0, 1, 0, 1, []uint32{0, 0}},
		{ab, 21_000_000, 2, 1, 1, []uint32{1, 0}},
		{ab, 21_000_001, 3, 1, 1, []uint32{0, 1}},
	}
	r := mustRecount(t, entriesOf(hs), Options{})
	if r.LoadsMatch != 3 || r.Options.Grace != 20_000_000 || r.Options.Z != 5 {
		t.Errorf("%d match with grace %d and Z %g: %v", r.LoadsMatch, r.Options.Grace, r.Options.Z, r.Loads)
	}
}

// TestStalenessByHand is SPEC-NOTES "Loads across servers" with δ = 100 ms:
// a load missing a placement within δ is accepted, one missing it later is
// not, and one missing a keep just before an expiry is accepted.
func TestStalenessByHand(t *testing.T) {
	ab := build(t, "stale", pathways("a", "b"), nil)
	const grace, delta = 500_000, 100_000
	hs := []hand{
		{ab, 1_000_000, 1, 0, 1, []uint32{0, 0}}, // server Y places 1 on a, until 2 500 000
		{ab, 1_050_000, 2, 1, 1, []uint32{0, 0}}, // server X has not seen it: 1 change within δ
		{ab, 1_200_000, 3, 1, 1, []uint32{0, 1}}, // X still has not, 200 ms on: not accepted
	}
	r := mustRecount(t, entriesOf(hs), Options{Grace: grace, Staleness: delta})
	if r.LoadsMatch != 1 || r.LoadsStale != 1 || r.LoadsMismatch != 1 {
		t.Fatalf("loads: %d match, %d stale, %d not; want 1 1 1", r.LoadsMatch, r.LoadsStale, r.LoadsMismatch)
	}
	if m := r.Loads[0]; m.Index != 2 || m.Pathway != 0 || m.Stated != 0 || m.Recount != 1 || m.Changes != 0 {
		t.Errorf("mismatch %+v, want leaf 2 pathway 0 stated 0 recount 1 with no change", m)
	}
	// Exactly, the second is a mismatch too.
	if r := mustRecount(t, entriesOf(hs), Options{Grace: grace}); r.LoadsMismatch != 2 {
		t.Errorf("exactly: %d mismatches, want 2", r.LoadsMismatch)
	}

	hs = []hand{
		{ab, 1_000_000, 1, 0, 1, []uint32{0, 0}}, // until 2 500 000
		{ab, 2_450_000, 1, 0, 1, []uint32{1, 0}}, // Y keeps 1 on a, 50 ms before its expiry
		{ab, 2_520_000, 2, 1, 1, []uint32{0, 0}}, // X missed the keep and dropped 1 at 2 500 001
	}
	r = mustRecount(t, entriesOf(hs), Options{Grace: grace, Staleness: delta})
	if r.LoadsMismatch != 0 || r.LoadsStale != 1 {
		t.Errorf("a keep missed: %d stale, %d not (%v); want 1 0", r.LoadsStale, r.LoadsMismatch, r.Loads)
	}
}

// roomSets are two rooms' policies for random streams.
func roomSets(t testing.TB) [][]*policy.Policy {
	return [][]*policy.Policy{policySet(t, "room one"), policySet(t, "room two")}
}

// TestLoadsAgainstReference_9_2 compares the recount with the brute-force
// reference over random streams (§6, §9.2, SPEC-NOTES "Session expiry", "A
// policy of other pathways resets the loads", "The loads survive a policy of the same
// pathways"): loads stated as the reference counts them all match, and
// loads moved by one from it are each caught, the first in T order first.
func TestLoadsAgainstReference_9_2(t *testing.T) {
	sets := roomSets(t)
	const grace = 500_000
	var atExpiry, pastExpiry, resets, equalT int
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 16))
		entries := stream(rng, sets, 1500, 15, grace)
		ref := reference(entries, grace, 0)
		state(entries, func(k, i int) uint32 { return ref[k].loads[i] })
		r := mustRecount(t, entries, Options{Grace: grace})
		wantResets, wantEqual := 0, 0
		for _, o := range ref {
			wantResets += b2i(o.reset)
			wantEqual += b2i(o.equalT)
		}
		if r.LoadsMatch != len(entries) || r.Rooms != 2 || r.Resets != wantResets || r.EqualT != wantEqual {
			t.Fatalf("seed %d: %d of %d match (%v), %d rooms, %d resets (want %d), %d equal t (want %d)",
				seed, r.LoadsMatch, len(entries), r.Loads, r.Rooms, r.Resets, wantResets, r.EqualT, wantEqual)
		}
		resets += wantResets
		equalT += wantEqual
		a, p := boundaries(entries, grace)
		atExpiry += a
		pastExpiry += p

		// Each of some decisions states one load one off.
		off := map[int]int{} // entry → its pathway off
		for k := range entries {
			if rng.IntN(30) != 0 {
				continue
			}
			i := rng.IntN(len(entries[k].Decision.Pathways))
			l := &entries[k].Decision.Pathways[i].Load
			if *l > 0 && rng.IntN(2) == 0 {
				*l--
			} else {
				*l++
			}
			off[k] = i
		}
		r = mustRecount(t, entries, Options{Grace: grace})
		if r.LoadsMismatch != len(off) || r.LoadsMatch != len(entries)-len(off) {
			t.Fatalf("seed %d: %d mismatches, want %d", seed, r.LoadsMismatch, len(off))
		}
		var first []int // the entries off, in the server's order
		for k := range off {
			first = append(first, k)
		}
		slices.SortFunc(first, func(a, b int) int { return ref[a].pos - ref[b].pos })
		first = first[:min(len(first), Examples)]
		if len(r.Loads) != len(first) {
			t.Fatalf("seed %d: %d examples, want %d", seed, len(r.Loads), len(first))
		}
		for j, k := range first {
			e, i := entries[k], off[k]
			want := LoadMismatch{
				At:      At{Index: e.Index, Digest: e.Decision.Digest(), T: e.Decision.T},
				Pathway: i, ID: e.Policy.Pathways[i].ID,
				Stated: e.Decision.Pathways[i].Load, Recount: ref[k].loads[i],
			}
			if r.Loads[j] != want {
				t.Errorf("seed %d: example %d is %+v, want %+v", seed, j, r.Loads[j], want)
			}
		}
	}
	// The streams reach what the test is for.
	if atExpiry == 0 || pastExpiry == 0 || resets == 0 || equalT == 0 {
		t.Errorf("the streams had %d decisions at an expiry, %d one after, %d resets, %d equal t", atExpiry, pastExpiry, resets, equalT)
	}
}

// boundaries counts the decisions whose T is an earlier decision's expiry
// in their room, and one after it.
func boundaries(entries []Entry, grace uint64) (at, past int) {
	exp := map[[2]uint64]bool{}
	for _, e := range entries {
		d := e.Decision
		exp[[2]uint64{uint64(d.Room[0]), d.T + uint64(d.TTL)*1_000_000 + grace}] = true
	}
	for _, e := range entries {
		d := e.Decision
		at += b2i(exp[[2]uint64{uint64(d.Room[0]), d.T}])
		past += b2i(exp[[2]uint64{uint64(d.Room[0]), d.T - 1}])
	}
	return at, past
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestStalenessAgainstReference is the package doc's reading of δ
// (SPEC-NOTES "Loads across servers", "Issue 16: the audit's recount")
// against the reference: loads off the recount by at most the changes
// within δ are accepted, and one more is caught.
func TestStalenessAgainstReference(t *testing.T) {
	sets := roomSets(t)
	const grace, delta = 500_000, 300_000
	changed := 0
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 17))
		entries := stream(rng, sets, 1200, 12, grace)
		ref := reference(entries, grace, delta)
		stale := 0
		for k := range entries {
			moved := false
			for i := range entries[k].Decision.Pathways {
				l, c := ref[k].loads[i], uint32(ref[k].changes[i])
				changed += b2i(c > 0)
				s := l
				switch rng.IntN(3) {
				case 0:
					s = l + c
				case 1:
					if l >= c {
						s = l - c
					}
				}
				entries[k].Decision.Pathways[i].Load = s
				moved = moved || s != l
			}
			stale += b2i(moved)
		}
		o := Options{Grace: grace, Staleness: delta}
		r := mustRecount(t, entries, o)
		if r.LoadsMismatch != 0 || r.LoadsStale != stale || r.LoadsMatch != len(entries)-stale {
			t.Fatalf("seed %d: %d match, %d stale (want %d), %d not: %v", seed, r.LoadsMatch, r.LoadsStale, stale, r.LoadsMismatch, r.Loads)
		}

		// One more than the changes, either way, on one pathway.
		off := map[int]int{}
		for k := range entries {
			if rng.IntN(20) != 0 {
				continue
			}
			i := rng.IntN(len(entries[k].Decision.Pathways))
			l, c := ref[k].loads[i], uint32(ref[k].changes[i])
			if l >= c+1 && rng.IntN(2) == 0 {
				entries[k].Decision.Pathways[i].Load = l - c - 1
			} else {
				entries[k].Decision.Pathways[i].Load = l + c + 1
			}
			off[k] = i
		}
		r = mustRecount(t, entries, o)
		if r.LoadsMismatch != len(off) {
			t.Fatalf("seed %d: %d mismatches, want %d", seed, r.LoadsMismatch, len(off))
		}
		firstK := -1
		for k := range off {
			if firstK < 0 || ref[k].pos < ref[firstK].pos {
				firstK = k
			}
		}
		if firstK >= 0 {
			i := off[firstK]
			m := r.Loads[0]
			if m.Index != entries[firstK].Index || m.Pathway != i || m.Recount != ref[firstK].loads[i] || m.Changes != ref[firstK].changes[i] {
				t.Errorf("seed %d: first mismatch %+v, want leaf %d pathway %d recount %d changes %d",
					seed, m, entries[firstK].Index, i, ref[firstK].loads[i], ref[firstK].changes[i])
			}
		}
	}
	if changed == 0 {
		t.Error("no pathway had a change within δ")
	}
}

// TestLogOrder is §9.2's "over the whole stream": the recount sorts, so
// the entries' order does not matter, only their T and index.
func TestLogOrder(t *testing.T) {
	sets := roomSets(t)
	rng := rand.New(rand.NewPCG(7, 7))
	entries := stream(rng, sets, 800, 10, 500_000)
	ref := reference(entries, 500_000, 0)
	state(entries, func(k, i int) uint32 { return ref[k].loads[i] })
	// A few loads off, so that the examples are compared too.
	entries[100].Decision.Pathways[0].Load += 3
	entries[500].Decision.Pathways[1].Load += 1
	a := mustRecount(t, entries, Options{Grace: 500_000})
	shuffled := slices.Clone(entries)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b := mustRecount(t, shuffled, Options{Grace: 500_000})
	if a.String() != b.String() || !slices.Equal(a.Loads, b.Loads) || a.LoadsMismatch != 2 {
		t.Errorf("in the log's order:\n%s\nshuffled:\n%s", a, b)
	}
}

// TestDraws_6_3: each stated draw is §6.3's for its policy and session; one
// changed is caught where it is.
func TestDraws_6_3(t *testing.T) {
	sets := roomSets(t)
	rng := rand.New(rand.NewPCG(3, 3))
	entries := stream(rng, sets, 500, 40, 500_000)
	if r := mustRecount(t, entries, Options{Grace: 500_000}); r.DrawsMismatch != 0 {
		t.Fatalf("%d draws wrong: %v", r.DrawsMismatch, r.Draws)
	}
	k := 321
	d := entries[k].Decision
	want := d.Draw
	d.Draw = (d.Draw + 1) % 1_000_000
	r := mustRecount(t, entries, Options{Grace: 500_000})
	if r.DrawsMismatch != 1 || len(r.Draws) != 1 {
		t.Fatalf("%d draws wrong, want 1", r.DrawsMismatch)
	}
	if m := r.Draws[0]; m.Index != entries[k].Index || m.Digest != d.Digest() || m.T != d.T || m.Stated != d.Draw || m.Draw != want {
		t.Errorf("draw mismatch %+v, want leaf %d stated %d draw %d", m, entries[k].Index, d.Draw, want)
	}
	if r.OK() {
		t.Error("OK with a draw wrong")
	}
}

// sharePolicy has pathways a, b and c, a's band 5 % and b's 10 % (§6.3).
func sharePolicy(t testing.TB) *policy.Policy {
	ps := pathways("a", "b", "c")
	ps[0].MinSharePPM = 50_000
	ps[1].MinSharePPM = 100_000
	return build(t, "shares", ps, nil)
}

// sharesOf decides each session once, as §6.4 would with every pathway
// within the limits: share to its band's pathway, otherwise rank to c.
func sharesOf(p *policy.Policy, sessions []report.Session) []Entry {
	var out []Entry
	for k, s := range sessions {
		first, why := 2, decision.Rank
		if b := refBand(p, refDraw(p.Digest(), s)); b >= 0 {
			first, why = b, decision.Share
		}
		out = append(out, Entry{Index: int64(k), Decision: decide(p, uint64(k)*1000, s, first, 300, why), Policy: p})
	}
	return out
}

// TestShares_6_3: over 2 000 random sessions the bands hold about their
// shares; over 2 000 sessions ground so that none falls in b's band of 10 %,
// b's count, 0 against 200 ± 5·√(2000·0.1·0.9) ≈ 67.08, is caught.
func TestShares_6_3(t *testing.T) {
	p := sharePolicy(t)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() report.Session {
		var s report.Session
		for i := range s {
			s[i] = byte(rng.Uint32())
		}
		return s
	}
	var fair, ground []report.Session
	for len(fair) < 2000 {
		fair = append(fair, random())
	}
	for len(ground) < 2000 {
		if s := random(); refBand(p, refDraw(p.Digest(), s)) != 1 {
			ground = append(ground, s)
		}
	}

	entries := sharesOf(p, fair)
	// Each session decided twice: n counts sessions, not decisions.
	again := sharesOf(p, fair)
	for k := range again {
		again[k].Index += int64(len(fair))
		again[k].Decision.T += 10_000_000_000
	}
	entries = append(entries, again...)
	var inBand [3]int
	for _, s := range fair {
		if b := refBand(p, refDraw(p.Digest(), s)); b >= 0 {
			inBand[b]++
		}
	}
	r := mustRecount(t, entries, Options{})
	if len(r.Bands) != 2 || r.BandsOutside != 0 || r.SharesMismatch != 0 {
		t.Fatalf("fair: %d bands, %d outside, %d share placements wrong: %+v", len(r.Bands), r.BandsOutside, r.SharesMismatch, r.Bands)
	}
	for j, want := range []BandShare{
		{Policy: p.Digest(), Pathway: 0, ID: "a", SharePPM: 50_000, Sessions: 2000, InBand: inBand[0], Placed: inBand[0],
			Expected: 100, Bound: 5 * math.Sqrt(2000*0.05*0.95)},
		{Policy: p.Digest(), Pathway: 1, ID: "b", SharePPM: 100_000, Sessions: 2000, InBand: inBand[1], Placed: inBand[1],
			Expected: 200, Bound: 5 * math.Sqrt(2000*0.1*0.9)},
	} {
		got := r.Bands[j]
		want.Within = math.Abs(float64(want.InBand)-want.Expected) <= want.Bound
		if !want.Within {
			t.Fatalf("the fair sessions' band %d holds %d, outside the bound: a bad seed", j, want.InBand)
		}
		if math.Abs(got.Bound-want.Bound) > 1e-9 || math.Abs(got.Expected-want.Expected) > 1e-9 {
			t.Errorf("band %d: expected %g ± %g, want %g ± %g", j, got.Expected, got.Bound, want.Expected, want.Bound)
		}
		got.Bound, got.Expected = want.Bound, want.Expected
		if got != want {
			t.Errorf("band %d: %+v, want %+v", j, got, want)
		}
	}
	if math.Abs(r.Bands[1].Bound-67.082) > 0.001 {
		t.Errorf("b's bound %g, want 67.082", r.Bands[1].Bound)
	}

	r = mustRecount(t, sharesOf(p, ground), Options{})
	if b := r.Bands[1]; b.InBand != 0 || b.Within || r.BandsOutside != 1 || r.OK() {
		t.Errorf("ground: b %+v, %d outside, OK %v; want b outside alone", b, r.BandsOutside, r.OK())
	}
	if !r.Bands[0].Within {
		t.Errorf("ground: a %+v outside", r.Bands[0])
	}
	if !strings.Contains(r.String(), `pathway 1 "b" of 100000 ppm, 0 of 2000 sessions in its band`) {
		t.Errorf("the summary does not name b: %s", r)
	}
	// A wider bound lets even that pass.
	if r := mustRecount(t, sharesOf(p, ground), Options{Z: 20}); r.BandsOutside != 0 {
		t.Errorf("Z 20: %d outside", r.BandsOutside)
	}
}

// TestShareBound_6_3 is the bound at its edge: for n = 2 000 sessions and
// b's p = 0.1, n·p = 200 and 5·√(n·p·(1 − p)) = 5·√180 ≈ 67.08, so 133 and
// 267 sessions in b's band are within it and 132 and 268 are not.
func TestShareBound_6_3(t *testing.T) {
	p := sharePolicy(t)
	var in, out []report.Session
	for n := 0; len(in) < 268 || len(out) < 2000; n++ {
		s := sessionNo(n)
		if refBand(p, refDraw(p.Digest(), s)) == 1 {
			in = append(in, s)
		} else {
			out = append(out, s)
		}
	}
	for _, c := range []struct {
		k      int
		within bool
	}{{132, false}, {133, true}, {200, true}, {267, true}, {268, false}} {
		sessions := append(slices.Clone(in[:c.k]), out[:2000-c.k]...)
		r := mustRecount(t, sharesOf(p, sessions), Options{})
		if b := r.Bands[1]; b.Sessions != 2000 || b.InBand != c.k || b.Within != c.within {
			t.Errorf("%d in b's band: %+v, want within %v", c.k, b, c.within)
		}
	}
}

// TestSharePlacement_6_4 is §6.4 step 4: a decision of reason share has its
// first pathway the band that holds its draw.
func TestSharePlacement_6_4(t *testing.T) {
	p := sharePolicy(t)
	var inB, inNone report.Session
	for n := 0; inB == (report.Session{}) || inNone == (report.Session{}); n++ {
		s := sessionNo(n)
		switch refBand(p, refDraw(p.Digest(), s)) {
		case 1:
			inB = s
		case -1:
			inNone = s
		}
	}
	for _, c := range []struct {
		name   string
		s      report.Session
		first  int
		why    decision.Reason
		bad    bool
		band   int
		inBand bool
	}{
		{"in b's band, share to b", inB, 1, decision.Share, false, 0, false},
		{"in b's band, rank to a", inB, 0, decision.Rank, false, 0, false},
		{"in b's band, share to a", inB, 0, decision.Share, true, 1, true},
		{"in no band, share to b", inNone, 1, decision.Share, true, 0, false},
		{"in no band, share to c", inNone, 2, decision.Share, true, 0, false},
	} {
		d := decide(p, 5_000_000, c.s, c.first, 300, c.why)
		r := mustRecount(t, []Entry{{Index: 9, Decision: d, Policy: p}}, Options{})
		if got := r.SharesMismatch == 1; got != c.bad {
			t.Errorf("%s: %d mismatches", c.name, r.SharesMismatch)
			continue
		}
		if c.bad {
			want := ShareMismatch{At: At{Index: 9, Digest: d.Digest(), T: 5_000_000}, First: c.first, Band: c.band, InBand: c.inBand}
			if r.Shares[0] != want {
				t.Errorf("%s: %+v, want %+v", c.name, r.Shares[0], want)
			}
		}
		if c.why == decision.Share && r.Bands[1].Placed != 1-b2i(c.first != 1) {
			t.Errorf("%s: b placed %d", c.name, r.Bands[1].Placed)
		}
	}
}

// TestInputs: an entry the recount cannot read is refused by its place.
func TestInputs(t *testing.T) {
	ab := build(t, "inputs", pathways("a", "b"), nil)
	abc := build(t, "inputs", pathways("a", "b", "c"), nil)
	other := build(t, "other room", pathways("a", "b"), nil)
	good := func() *decision.Decision { return decide(ab, 1, sessionNo(1), 0, 1, decision.Rank) }
	for _, c := range []struct {
		name string
		e    Entry
		want string
	}{
		{"no decision", Entry{Policy: ab}, "no decision"},
		{"no policy", Entry{Decision: good()}, "no decision or no policy"},
		{"another policy", Entry{Decision: good(), Policy: abc}, "names policy"},
		{"another room", Entry{Decision: func() *decision.Decision { d := good(); d.Policy = other.Digest(); return d }(), Policy: other}, "is of room"},
		{"a pathway short", Entry{Decision: func() *decision.Decision { d := good(); d.Pathways = d.Pathways[:1]; return d }(), Policy: ab}, "states 1 pathways"},
		{"no priority", Entry{Decision: func() *decision.Decision { d := good(); d.Priority = nil; return d }(), Policy: ab}, "no first pathway"},
		{"first past the count", Entry{Decision: func() *decision.Decision { d := good(); d.Priority[0] = 2; return d }(), Policy: ab}, "no first pathway"},
		{"expiry past the clock", Entry{Decision: func() *decision.Decision { d := good(); d.T = math.MaxUint64 - 1_000_000; return d }(), Policy: ab}, "expiry passes"},
	} {
		c.e.Index = 41
		_, err := Recount([]Entry{{Index: 40, Decision: good(), Policy: ab}, c.e}, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "entry 1 (leaf 41)") {
			t.Errorf("%s: %v, want %q at entry 1 (leaf 41)", c.name, err, c.want)
		}
	}
	if r := mustRecount(t, nil, Options{}); r.Decisions != 0 || !r.OK() {
		t.Errorf("no entries: %s", r)
	}
}
