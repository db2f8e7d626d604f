package evidence

import (
	"bytes"
	"errors"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// hopKey is a distinct hop key per n.
func hopKey(n byte) sig.PublicKey { return sig.PublicKey{0: n, 31: 0xee} }

// testPolicy has P = 10, W = 30, L = 5 and one pathway per hop list given,
// each list's first hop an edge and the rest interior unless places say
// otherwise.
func testPolicy(basis policy.Basis, floor uint8, pathways ...[]policy.Hop) *policy.Policy {
	p := &policy.Policy{
		PeriodUs: 10, WindowUs: 30, LagUs: 5,
		Basis: basis, Floor: floor,
		Tiers: []uint64{100, 200, 400, 800},
	}
	for i, hops := range pathways {
		p.Pathways = append(p.Pathways, policy.Pathway{
			ID: string(rune('a' + i)), Base: policy.NoBase, TopTier: 3,
			Capacity: policy.Unlimited, Hops: hops,
		})
	}
	return p
}

func edge(n byte) policy.Hop     { return policy.Hop{Key: hopKey(n), Place: policy.Edge} }
func interior(n byte) policy.Hop { return policy.Hop{Key: hopKey(n), Place: policy.Interior} }

// rec is a record of hop n over [start, end) of class c with joules µJ, out
// media bytes and subscriber_us 1000 at every layer class.
func rec(n byte, start, end uint64, c Class, joules, out uint64) *Record {
	r := &Record{
		Hop: hopKey(n), Start: start, End: end, Class: c, Joules: joules, Sessions: 1,
		Tracks: []Track{
			{Kind: KindMedia, Direction: DirOut, Bytes: out},
			{Kind: KindMedia, Direction: DirIn, Bytes: 7},  // in: never delivery
			{Kind: KindOther, Direction: DirOut, Bytes: 5}, // not media: never delivery
		},
	}
	for i := range r.SubscriberUs {
		r.SubscriberUs[i] = 1000 << i
	}
	return r
}

func entry(r *Record) Entry { return Entry{Digest: r.Digest(), Record: r} }

func entries(rs ...*Record) []Entry {
	es := make([]Entry, len(rs))
	for i, r := range rs {
		es[i] = entry(r)
	}
	return es
}

// tile is hop n's records cut on P = 10 over [from, to), each of class c,
// 100 µJ and 1000 out bytes.
func tile(n byte, from, to uint64, c Class) []*Record {
	var rs []*Record
	for s := from; s < to; s += 10 {
		rs = append(rs, rec(n, s, s+10, c, 100, 1000))
	}
	return rs
}

func digests(es []Entry) []sig.Hash {
	h := make([]sig.Hash, len(es))
	for i, e := range es {
		h[i] = e.Digest
	}
	return h
}

// computeChecked is Compute, with a check that the verifier's Recompute
// over exactly the records named gives the same evidence (§9.1 step 5).
func computeChecked(t *testing.T, p *policy.Policy, i int, a, b uint64, available []Entry) (Pathway, []Entry) {
	t.Helper()
	x := NewIndex()
	for _, e := range available {
		x.Add(e)
	}
	names, err := x.Select(p, i, a, b)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := x.Compute(p, i, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ev.Records, digests(names)) {
		t.Fatalf("Compute named %v, Select %v", ev.Records, digests(names))
	}
	again, err := Recompute(p, i, a, b, names)
	if err != nil {
		t.Fatalf("Recompute refuses what Select names: %v", err)
	}
	if !equalEvidence(ev, again) {
		t.Fatalf("Compute gives %+v, Recompute %+v", ev, again)
	}
	flat, err := Compute(p, i, a, b, available)
	if err != nil || !equalEvidence(ev, flat) {
		t.Fatalf("Compute over a list gives %+v, %v; over the index %+v", flat, err, ev)
	}
	return ev, names
}

func equalEvidence(x, y Pathway) bool {
	return slices.Equal(x.Records, y.Records) && x.Status == y.Status && x.Class == y.Class &&
		x.Joules == y.Joules && x.Delivery == y.Delivery
}

// TestWindow_5_1 is §5.1: b = ⌊(t − L) / P⌋ × P, 0 when t < L; a = b − W, 0 when
// b < W.
func TestWindow_5_1(t *testing.T) {
	for _, c := range []struct{ t, p, w, l, a, b uint64 }{
		{t: 0, p: 10, w: 30, l: 5, a: 0, b: 0},    // t < L
		{t: 4, p: 10, w: 30, l: 5, a: 0, b: 0},    // t < L
		{t: 5, p: 10, w: 30, l: 5, a: 0, b: 0},    // t = L: ⌊0 / P⌋ = 0
		{t: 14, p: 10, w: 30, l: 5, a: 0, b: 0},   // t − L < P
		{t: 15, p: 10, w: 30, l: 5, a: 0, b: 10},  // b < W: a = 0
		{t: 34, p: 10, w: 30, l: 5, a: 0, b: 20},  // b < W
		{t: 35, p: 10, w: 30, l: 5, a: 0, b: 30},  // b = W
		{t: 44, p: 10, w: 30, l: 5, a: 0, b: 30},  // a period not yet over by L
		{t: 45, p: 10, w: 30, l: 5, a: 10, b: 40}, // now it is
		{t: 1000, p: 10, w: 30, l: 0, a: 970, b: 1000},
		{t: 1<<64 - 1, p: 10, w: 30, l: 0, a: 18446744073709551580, b: 18446744073709551610},
		{t: 1<<64 - 1, p: 1<<64 - 1, w: 1<<64 - 1, l: 0, a: 0, b: 1<<64 - 1},
		{t: 1<<64 - 1, p: 1<<64 - 1, w: 1<<64 - 1, l: 1, a: 0, b: 0},
		{t: 100, p: 0, w: 30, l: 5, a: 0, b: 0}, // no policy that reads has P = 0
	} {
		if a, b := Window(c.t, c.p, c.w, c.l); a != c.a || b != c.b {
			t.Errorf("Window(t=%d, P=%d, W=%d, L=%d) = [%d, %d), want [%d, %d)", c.t, c.p, c.w, c.l, a, b, c.a, c.b)
		}
	}
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1)})
	if a, b := PolicyWindow(p, 45); a != 10 || b != 40 {
		t.Errorf("PolicyWindow(45) = [%d, %d), want [10, 40)", a, b)
	}
}

// TestInWindow_5_1 is §5.1: a record is in the window when a ≤ its start and its
// end ≤ b.
func TestInWindow_5_1(t *testing.T) {
	for _, c := range []struct {
		start, end uint64
		in         bool
	}{
		{10, 20, true}, {30, 40, true}, {10, 40, true},
		{9, 20, false}, {30, 41, false}, {0, 10, false}, {40, 50, false}, {35, 45, false}, {5, 15, false},
	} {
		r := rec(1, c.start, c.end, CalibratedInstrument, 1, 1)
		if got := r.InWindow(10, 40); got != c.in {
			t.Errorf("[%d, %d) in [10, 40) = %v, want %v", c.start, c.end, got, c.in)
		}
	}
}

// TestTiling_5_2 is §5.2 and §5.3: hops whose records tile [a, b) are covered,
// and the pathway's figure is J over every record and D over its edge hops'.
func TestTiling_5_2(t *testing.T) {
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1), interior(2), edge(3)})
	var rs []*Record
	rs = append(rs, tile(1, 10, 40, OnChipCounter)...)
	rs = append(rs, tile(2, 10, 40, OnChipCounter)...)
	// Hop 3 is covered by records not cut on P (COMPANION §6: tiling).
	rs = append(rs, rec(3, 10, 13, OnChipCounter, 7, 11), rec(3, 13, 40, OnChipCounter, 9, 13))
	ev, names := computeChecked(t, p, 0, 10, 40, entries(rs...))
	if ev.Status != StatusFigure || ev.Class != OnChipCounter {
		t.Fatalf("status %d class %d, want a figure of class 4", ev.Status, ev.Class)
	}
	// J: 3 + 3 records of 100 µJ, and 7 + 9 (interior hop's joules count).
	if want := num.From64(600 + 16); ev.Joules != want {
		t.Errorf("J = %s, want %s", ev.Joules, want)
	}
	// D: edge hops only: hop 1's 3 × 1000 and hop 3's 11 + 13 (not hop 2's
	// 3 × 1000, not in-bytes, not other tracks).
	if want := num.From64(3000 + 24); ev.Delivery != want {
		t.Errorf("D = %s, want %s", ev.Delivery, want)
	}
	// §5.2: grouped by hop in the pathway's hop order, each by start.
	want := []*Record{rs[0], rs[1], rs[2], rs[3], rs[4], rs[5], rs[6], rs[7]}
	for k, e := range names {
		if e.Record != want[k] {
			t.Fatalf("name %d is [%d, %d) of hop %d", k, e.Record.Start, e.Record.End, e.Record.Hop[0])
		}
	}
	// The same records given in reverse order name the same.
	slices.Reverse(rs)
	again, _ := computeChecked(t, p, 0, 10, 40, entries(rs...))
	if !equalEvidence(ev, again) {
		t.Error("the order records arrive in changed the evidence")
	}
}

// TestStale_5_2 is §5.2: a gap, an overlap with no tiling, a record not reaching
// b, a missing hop and a = b all leave a hop uncovered, and the pathway stale
// with class 0, J 0 and D 0 (§5.4).
func TestStale_5_2(t *testing.T) {
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1), edge(2)})
	good := tile(2, 10, 40, CalibratedInstrument)
	for _, c := range []struct {
		name string
		hop1 []*Record
		a, b uint64
	}{
		{"gap", []*Record{rec(1, 10, 20, 5, 1, 1), rec(1, 30, 40, 5, 1, 1)}, 10, 40},
		{"overlap", []*Record{rec(1, 10, 20, 5, 1, 1), rec(1, 15, 30, 5, 1, 1), rec(1, 30, 40, 5, 1, 1)}, 10, 40},
		{"not reaching b", []*Record{rec(1, 10, 20, 5, 1, 1), rec(1, 20, 30, 5, 1, 1)}, 10, 40},
		{"not starting at a", []*Record{rec(1, 20, 30, 5, 1, 1), rec(1, 30, 40, 5, 1, 1)}, 10, 40},
		{"no records", nil, 10, 40},
		{"a = b", nil, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, names := computeChecked(t, p, 0, c.a, c.b, entries(append(slices.Clone(c.hop1), good...)...))
			if ev.Status != StatusStale || ev.Class != 0 || !ev.Joules.IsZero() || !ev.Delivery.IsZero() {
				t.Fatalf("got %+v, want stale with class, J and D 0", ev)
			}
			if c.a == c.b {
				if len(names) != 0 {
					t.Fatalf("a = b: %d records named, want none (none is in the window)", len(names))
				}
				return
			}
			// The hop's in-window records, by ascending start, then hop 2's
			// tiling.
			want := append(slices.Clone(c.hop1), good...)
			if len(names) != len(want) {
				t.Fatalf("%d names, want %d", len(names), len(want))
			}
			for k := range want {
				if names[k].Record != want[k] {
					t.Fatalf("name %d is [%d, %d)", k, names[k].Record.Start, names[k].Record.End)
				}
			}
		})
	}
}

// TestOutsideWindowIgnored_5_1 is §5.1: a record that is not in the window is not
// named, whether before a, after b or across either.
func TestOutsideWindowIgnored_5_1(t *testing.T) {
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1)})
	in := tile(1, 10, 40, Estimator)
	out := []*Record{
		rec(1, 0, 10, Estimator, 1, 1),   // before a
		rec(1, 40, 50, Estimator, 1, 1),  // from b
		rec(1, 5, 15, Estimator, 1, 1),   // across a
		rec(1, 35, 45, Estimator, 1, 1),  // across b
		rec(1, 0, 50, Estimator, 1, 1),   // over the whole window
		rec(1, 10, 41, Estimator, 1, 1),  // from a, past b
		rec(4, 10, 40, Unmetered, 0, 0),  // another hop's
		rec(1, 39, 40, Unmetered, 0, 10), // in the window: an overlap
	}
	ev, names := computeChecked(t, p, 0, 10, 40, entries(append(slices.Clone(out[:7]), in...)...))
	if ev.Status != StatusFigure || len(names) != 3 {
		t.Fatalf("status %d with %d names, want a figure from the 3 in the window", ev.Status, len(names))
	}
	for k, e := range names {
		if e.Record != in[k] {
			t.Fatalf("name %d is [%d, %d)", k, e.Record.Start, e.Record.End)
		}
	}
	// A record in the window is read even when it spoils the tiling: the
	// tiling is still there, so it is named and the extra one is not.
	ev, names = computeChecked(t, p, 0, 10, 40, entries(append(slices.Clone(out), in...)...))
	if ev.Status != StatusFigure || len(names) != 3 {
		t.Fatalf("status %d with %d names, want the tiling's 3", ev.Status, len(names))
	}
}

// TestStatusOrder_5_3 is §5.3's first-that-holds order: stale, unmetered, mixed,
// empty, figure.
func TestStatusOrder_5_3(t *testing.T) {
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1), interior(2)})
	cases := []struct {
		name  string
		recs  []*Record
		want  Status
		class Class
	}{
		{"figure", append(tile(1, 10, 40, ModelBased), tile(2, 10, 40, ModelBased)...), StatusFigure, ModelBased},
		{"unmetered", append(tile(1, 10, 40, ModelBased), rec(2, 10, 40, Unmetered, 0, 0)), StatusUnmetered, 0},
		// Stale wins over unmetered: the unmetered hop is also not covered.
		{"stale over unmetered", append(tile(1, 10, 40, ModelBased), rec(2, 10, 30, Unmetered, 0, 0)), StatusStale, 0},
		// Unmetered wins over mixed.
		{"unmetered over mixed", append(tile(1, 10, 40, ModelBased), rec(2, 10, 20, Unmetered, 0, 0), rec(2, 20, 40, CalibratedInstrument, 1, 1)), StatusUnmetered, 0},
		{"mixed", append(tile(1, 10, 40, ModelBased), tile(2, 10, 40, OnChipCounter)...), StatusMixed, 0},
		// Mixed within one hop.
		{"mixed in a hop", append([]*Record{rec(1, 10, 20, 2, 1, 1), rec(1, 20, 40, 3, 1, 1)}, tile(2, 10, 40, 2)...), StatusMixed, 0},
		// Mixed wins over empty.
		{"mixed over empty", append([]*Record{rec(1, 10, 40, 2, 1, 0)}, rec(2, 10, 40, 3, 1, 0)), StatusMixed, 0},
		// Empty: D = 0 though the interior hop delivered bytes.
		{"empty", append([]*Record{rec(1, 10, 40, 2, 1, 0)}, rec(2, 10, 40, 2, 1, 500)), StatusEmpty, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, _ := computeChecked(t, p, 0, 10, 40, entries(c.recs...))
			if ev.Status != c.want || ev.Class != c.class {
				t.Fatalf("status %d class %d, want %d class %d", ev.Status, ev.Class, c.want, c.class)
			}
			if c.want != StatusFigure && (!ev.Joules.IsZero() || !ev.Delivery.IsZero()) {
				t.Fatalf("no figure, but J %s and D %s stated (§5.4: they are 0)", ev.Joules, ev.Delivery)
			}
		})
	}
}

// TestBasis_5_3 is §5.3's D: basis 1 sums the bytes of media tracks out of the
// edge hops; basis 2 sums subscriber_us[c] for c from F to 7 over the edge
// hops. J sums every record's joules, the interior hops' included.
func TestBasis_5_3(t *testing.T) {
	hops := []policy.Hop{edge(1), interior(2), edge(3)}
	mk := func() []*Record {
		r1 := rec(1, 10, 40, CalibratedInstrument, 1<<63, 0)
		r1.Tracks = []Track{
			{KindMedia, DirOut, 1 << 62}, {KindMedia, DirOut, 1<<64 - 1}, {KindMedia, DirIn, 1 << 40},
			{KindOther, DirOut, 1 << 41}, {KindOther, DirIn, 1 << 42},
		}
		r2 := rec(2, 10, 40, CalibratedInstrument, 1<<64-1, 1<<50) // interior
		r2.SubscriberUs = [8]uint64{1 << 60, 1 << 60, 1 << 60, 1 << 60, 1 << 60, 1 << 60, 1 << 60, 1 << 60}
		r3 := rec(3, 10, 25, CalibratedInstrument, 3, 17)
		r4 := rec(3, 25, 40, CalibratedInstrument, 4, 19)
		r3.SubscriberUs = [8]uint64{1, 2, 4, 8, 16, 32, 64, 1<<64 - 1}
		return []*Record{r1, r2, r3, r4}
	}
	rs := mk()
	bigSum := func(vs ...uint64) *big.Int {
		s := new(big.Int)
		for _, v := range vs {
			s.Add(s, new(big.Int).SetUint64(v))
		}
		return s
	}
	wantJ := bigSum(1<<63, 1<<64-1, 3, 4)

	p1 := testPolicy(policy.PerByte, 2, hops)
	ev, _ := computeChecked(t, p1, 0, 10, 40, entries(rs...))
	if ev.Status != StatusFigure || ev.Joules.Big().Cmp(wantJ) != 0 {
		t.Fatalf("basis 1: status %d, J %s, want a figure with J %s", ev.Status, ev.Joules, wantJ)
	}
	if want := bigSum(1<<62, 1<<64-1, 17, 19); ev.Delivery.Big().Cmp(want) != 0 {
		t.Errorf("basis 1: D = %s, want %s", ev.Delivery, want)
	}

	for _, f := range []uint8{0, 2, 7} {
		p2 := testPolicy(policy.PerSecond, f, hops)
		ev, _ := computeChecked(t, p2, 0, 10, 40, entries(rs...))
		want := new(big.Int)
		for _, r := range []*Record{rs[0], rs[2], rs[3]} { // edge hops only
			for c := int(f); c < 8; c++ {
				want.Add(want, new(big.Int).SetUint64(r.SubscriberUs[c]))
			}
		}
		if ev.Status != StatusFigure || ev.Delivery.Big().Cmp(want) != 0 || ev.Joules.Big().Cmp(wantJ) != 0 {
			t.Errorf("basis 2, F = %d: status %d, J %s, D %s; want D %s", f, ev.Status, ev.Joules, ev.Delivery, want)
		}
	}

	// Basis 2 with every edge second below F: empty.
	rs = mk()
	for _, r := range []*Record{rs[0], rs[2], rs[3]} {
		r.SubscriberUs = [8]uint64{5, 5, 0, 0, 0, 0, 0, 0}
	}
	ev, _ = computeChecked(t, testPolicy(policy.PerSecond, 2, hops), 0, 10, 40, entries(rs...))
	if ev.Status != StatusEmpty {
		t.Errorf("basis 2 with no delivery at F or above: status %d, want empty", ev.Status)
	}
}

// TestJoulesNear128_5_3 is §5.3's J and D as exact u128 sums: 255 records of
// 2^64 − 1 µJ and bytes, summed past 64 bits.
func TestJoulesNear128_5_3(t *testing.T) {
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1)})
	p.WindowUs = 255 * 10
	var rs []*Record
	for s := uint64(0); s < 2550; s += 10 {
		r := rec(1, s, s+10, Estimator, 1<<64-1, 1<<64-1)
		r.Tracks = append(r.Tracks, Track{KindMedia, DirOut, 1<<64 - 1})
		rs = append(rs, r)
	}
	ev, names := computeChecked(t, p, 0, 0, 2550, entries(rs...))
	if len(names) != 255 || ev.Status != StatusFigure {
		t.Fatalf("%d names, status %d; want 255 and a figure", len(names), ev.Status)
	}
	m := new(big.Int).SetUint64(1<<64 - 1)
	if want := new(big.Int).Mul(m, big.NewInt(255)); ev.Joules.Big().Cmp(want) != 0 {
		t.Errorf("J = %s, want %s", ev.Joules, want)
	}
	if want := new(big.Int).Mul(m, big.NewInt(510)); ev.Delivery.Big().Cmp(want) != 0 {
		t.Errorf("D = %s, want %s", ev.Delivery, want)
	}
}

// TestTilingChoice_5_2 is Select's deterministic choice among tilings (§5.2
// names one tiling; which is ours): fewest records, then earliest ends, then
// lowest digest; a walk that would dead-end is not taken.
func TestTilingChoice_5_2(t *testing.T) {
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1)})
	span := func(es []Entry) [][2]uint64 {
		var s [][2]uint64
		for _, e := range es {
			s = append(s, [2]uint64{e.Record.Start, e.Record.End})
		}
		return s
	}
	for _, c := range []struct {
		name string
		recs []*Record
		want [][2]uint64
	}{
		{"fewest wins", append(tile(1, 10, 40, 5), rec(1, 10, 40, 5, 1, 1)), [][2]uint64{{10, 40}}},
		{"tie: earliest end", []*Record{rec(1, 10, 30, 5, 1, 1), rec(1, 20, 40, 5, 1, 1), rec(1, 30, 40, 5, 1, 1), rec(1, 10, 20, 5, 1, 1)},
			[][2]uint64{{10, 20}, {20, 40}}},
		{"dead end avoided", []*Record{rec(1, 10, 20, 5, 1, 1), rec(1, 10, 25, 5, 1, 1), rec(1, 25, 40, 5, 1, 1)},
			[][2]uint64{{10, 25}, {25, 40}}},
		{"tie after the first: earliest end", []*Record{rec(1, 10, 20, 5, 1, 1), rec(1, 20, 30, 5, 1, 1), rec(1, 30, 40, 5, 1, 1), rec(1, 20, 25, 5, 1, 1), rec(1, 25, 40, 5, 1, 1)},
			[][2]uint64{{10, 20}, {20, 25}, {25, 40}}},
		{"dead end later", []*Record{rec(1, 10, 20, 5, 1, 1), rec(1, 20, 30, 5, 1, 1), rec(1, 10, 15, 5, 1, 1), rec(1, 15, 30, 5, 1, 1), rec(1, 30, 40, 5, 1, 1), rec(1, 20, 35, 5, 1, 1)},
			[][2]uint64{{10, 15}, {15, 30}, {30, 40}}},
		{"no tiling: one per start, earliest end", []*Record{rec(1, 10, 28, 5, 1, 1), rec(1, 10, 20, 5, 1, 1), rec(1, 20, 25, 5, 1, 1), rec(1, 30, 40, 5, 1, 1)},
			[][2]uint64{{10, 20}, {20, 25}, {30, 40}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, names := computeChecked(t, p, 0, 10, 40, entries(c.recs...))
			if got := span(names); !slices.Equal(got, c.want) {
				t.Fatalf("named %v, want %v", got, c.want)
			}
		})
	}

	// Two records with one start and one end: the lower digest.
	r1, r2 := rec(1, 10, 40, 5, 1, 1), rec(1, 10, 40, 5, 2, 1)
	lo, hi := entry(r1), entry(r2)
	if bytes.Compare(lo.Digest[:], hi.Digest[:]) > 0 {
		lo, hi = hi, lo
	}
	for _, order := range [][]Entry{{lo, hi}, {hi, lo}} {
		_, names := computeChecked(t, p, 0, 10, 40, order)
		if len(names) != 1 || names[0].Digest != lo.Digest {
			t.Fatalf("named %v, want the lower digest %s alone", digests(names), lo.Digest)
		}
	}
}

// TestNamedCap_7_1 is §7.1's u8 count: at most 255 records are named under a
// pathway; with more, the first 255 in §5.2's order are named and the pathway
// is stale (§12: naming fewer never makes a pathway look cheaper).
func TestNamedCap_7_1(t *testing.T) {
	// One hop of 300 periods.
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1)})
	p.WindowUs = 3000
	rs := tile(1, 0, 3000, CalibratedInstrument)
	ev, names := computeChecked(t, p, 0, 0, 3000, entries(rs...))
	if ev.Status != StatusStale || len(names) != MaxNamed || names[254].Record != rs[254] {
		t.Fatalf("300 records: status %d, %d names; want stale and the first 255", ev.Status, len(names))
	}
	// Two hops of 200: hop 1's 200 and hop 2's first 55.
	p = testPolicy(policy.PerByte, 0, []policy.Hop{edge(1), edge(2)})
	p.WindowUs = 2000
	rs = append(tile(1, 0, 2000, 5), tile(2, 0, 2000, 5)...)
	ev, names = computeChecked(t, p, 0, 0, 2000, entries(rs...))
	if ev.Status != StatusStale || len(names) != MaxNamed || names[254].Record != rs[254] {
		t.Fatalf("2 × 200 records: status %d, %d names; want stale and the first 255", ev.Status, len(names))
	}
	// Exactly 255 across hops: covered.
	p.WindowUs = 850
	rs = append(append(tile(1, 0, 850, 5), tile(2, 0, 850, 5)...), rec(1, 0, 850, 5, 1, 1))
	rs = append(rs, tile(3, 0, 850, 5)...)
	p.Pathways[0].Hops = append(p.Pathways[0].Hops, interior(3))
	ev, names = computeChecked(t, p, 0, 0, 850, entries(rs...))
	if ev.Status != StatusFigure || len(names) != 1+85+85 {
		t.Fatalf("status %d, %d names; want a figure from 171", ev.Status, len(names))
	}
	// Recompute refuses more than 255 names.
	many := make([]Entry, 256)
	for k := range many {
		many[k] = entry(rec(1, uint64(k), uint64(k)+1, 5, 1, 1))
	}
	if _, err := Recompute(p, 0, 0, 850, many); reason.Of(err) != reason.DecisionInvalid {
		t.Fatalf("256 names: %v, want decision_invalid", err)
	}
}

// TestRecomputeRefuses_9_1 is §9.1 step 4's checks, which Recompute makes of the
// records it is given before computing from them.
func TestRecomputeRefuses_9_1(t *testing.T) {
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1), edge(2)}, []policy.Hop{edge(3)})
	h1 := tile(1, 10, 40, 5)
	h2 := tile(2, 10, 40, 5)
	ok := entries(append(slices.Clone(h1), h2...)...)
	if ev, err := Recompute(p, 0, 10, 40, ok); err != nil || ev.Status != StatusFigure {
		t.Fatalf("the tiling: %v, %v", ev, err)
	}
	for _, c := range []struct {
		name  string
		named []Entry
		code  reason.Code
	}{
		{"another pathway's hop", entries(append(slices.Clone(h1), rec(3, 10, 40, 5, 1, 1))...), reason.EvidenceNotOnPathway},
		{"outside the window", entries(append(slices.Clone(h1), rec(2, 0, 40, 5, 1, 1))...), reason.EvidenceOutsideWindow},
		{"later hop first", entries(append(slices.Clone(h2), h1...)...), reason.DecisionInvalid},
		{"same start twice", entries(h1[0], rec(1, 10, 20, 5, 2, 1)), reason.DecisionInvalid},
		{"descending start", entries(h1[1], h1[0]), reason.DecisionInvalid},
	} {
		if _, err := Recompute(p, 0, 10, 40, c.named); reason.Of(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if _, err := Recompute(p, 2, 10, 40, nil); err == nil || reason.Of(err) != "" {
		t.Errorf("pathway 2 of 2: %v, want a plain error", err)
	}
	var re *reason.Error
	if _, err := Recompute(p, 0, 10, 40, []Entry{{}}); err == nil || errors.As(err, &re) {
		t.Errorf("a nil record: %v, want a plain error", err)
	}
}

// TestIndex_7_2: Add keeps one copy of a digest (§7.2: no digest named twice),
// Forget drops what starts before an instant, InWindow is §5.1's test.
func TestIndex_7_2(t *testing.T) {
	x := NewIndex()
	rs := tile(1, 0, 100, 5)
	for _, r := range rs {
		if !x.Add(entry(r)) {
			t.Fatal("a new record was not added")
		}
	}
	if x.Add(entry(rs[3])) || x.Add(Entry{Digest: rs[3].Digest(), Record: rec(1, 30, 40, 5, 100, 1000)}) {
		t.Fatal("a digest held already was added again")
	}
	if x.Add(Entry{}) {
		t.Fatal("a nil record was added")
	}
	if x.Len() != 10 {
		t.Fatalf("Len = %d, want 10", x.Len())
	}
	if got := x.InWindow(hopKey(1), 25, 60); len(got) != 3 || got[0].Record != rs[3] || got[2].Record != rs[5] {
		t.Fatalf("InWindow(25, 60) gave %d records", len(got))
	}
	if n := x.Forget(35); n != 4 || x.Len() != 6 {
		t.Fatalf("Forget(35) dropped %d, Len %d; want 4 and 6", n, x.Len())
	}
	if got := x.InWindow(hopKey(1), 0, 100); len(got) != 6 || got[0].Record != rs[4] {
		t.Fatalf("after Forget, %d records from %d", len(got), got[0].Record.Start)
	}
	if n := x.Forget(1000); n != 6 || x.Len() != 0 {
		t.Fatalf("Forget(1000) dropped %d, Len %d", n, x.Len())
	}
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1)})
	if _, err := x.Compute(p, 1, 0, 10); err == nil {
		t.Fatal("pathway 1 of 1 computed")
	}
}

// TestSelectAgainstBruteForce_5_2 checks Select's tiling search on random
// records against an enumeration of every tiling (§5.2), and that what it
// names always recomputes to what it computed (§9.1 step 5).
func TestSelectAgainstBruteForce_5_2(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	p := testPolicy(policy.PerByte, 0, []policy.Hop{edge(1), interior(2)})
	for iter := range 5000 {
		a := uint64(rnd.IntN(3))
		b := a + uint64(rnd.IntN(8))
		var rs []*Record
		for range rnd.IntN(14) {
			s := uint64(rnd.IntN(10))
			e := s + 1 + uint64(rnd.IntN(4))
			rs = append(rs, rec(1, s, e, 5, uint64(rnd.IntN(3)+1), uint64(rnd.IntN(3))))
		}
		rs = append(rs, rec(2, a, max(b, a+1), 5, 1, 1))
		es := entries(rs...)
		ev, names := computeChecked(t, p, 0, a, b, es)

		var hop1 []Entry
		for _, e := range names {
			if e.Record.Hop == hopKey(1) {
				hop1 = append(hop1, e)
			}
		}
		best := bruteTiling(es, a, b)
		if best == nil {
			if ev.Status != StatusStale {
				t.Fatalf("iter %d: no tiling of hop 1, but status %d", iter, ev.Status)
			}
			continue
		}
		if !slices.Equal(digests(hop1), digests(best)) {
			t.Fatalf("iter %d: window [%d, %d): named %v, want %v", iter, a, b, spans(hop1), spans(best))
		}
	}
}

func spans(es []Entry) [][2]uint64 {
	var s [][2]uint64
	for _, e := range es {
		s = append(s, [2]uint64{e.Record.Start, e.Record.End})
	}
	return s
}

// bruteTiling enumerates every tiling of [a, b) by hop 1's in-window records
// and returns the one Select documents: fewest, then earliest ends record by
// record, then lowest digests; nil when none.
func bruteTiling(es []Entry, a, b uint64) []Entry {
	var best []Entry
	better := func(x, y []Entry) bool {
		if len(x) != len(y) {
			return len(x) < len(y)
		}
		for k := range x {
			if x[k].Record.End != y[k].Record.End {
				return x[k].Record.End < y[k].Record.End
			}
			if c := bytes.Compare(x[k].Digest[:], y[k].Digest[:]); c != 0 {
				return c < 0
			}
		}
		return false
	}
	var walk func(at uint64, path []Entry)
	walk = func(at uint64, path []Entry) {
		if at == b && len(path) > 0 {
			if best == nil || better(path, best) {
				best = slices.Clone(path)
			}
			return
		}
		for _, e := range es {
			r := e.Record
			if r.Hop == hopKey(1) && r.InWindow(a, b) && r.Start == at {
				walk(r.End, append(path, e))
			}
		}
	}
	walk(a, nil)
	return best
}
