package evidence

import (
	"testing"

	"github.com/waisteer/waisteer/policy"
)

const maxU64 = 1<<64 - 1

func horizonPolicy(period, window, lag uint64) *policy.Policy {
	return &policy.Policy{PeriodUs: period, WindowUs: window, LagUs: lag}
}

// TestRecordHorizon_5_1: the horizon of the records is one past the start a
// of the first window from the oldest decision kept on that can hold a
// record, since a record in [a, b) starts at or after a and ends after it
// starts (§5.1, §8.4). Each want is worked out by hand from §5.1's b and a.
func TestRecordHorizon_5_1(t *testing.T) {
	for _, c := range []struct {
		what          string
		p, w, l, d, h uint64
	}{
		// P = 10, W = 30, L = 5: the first window that holds a record is
		// that of t = L + P = 15, [0, 10).
		{"t = 0: the window of L + P", 10, 30, 5, 0, 1},
		{"t = L: b = 0, the window of L + P", 10, 30, 5, 5, 1},
		{"t − L < P: b = 0, the window of L + P", 10, 30, 5, 14, 1},
		{"t − L = P: [0, 10)", 10, 30, 5, 15, 1},
		{"b < W clamps a to 0", 10, 30, 5, 34, 1},
		{"b = W: [0, 30)", 10, 30, 5, 35, 1},
		{"t − L < W + P: still [0, 30)", 10, 30, 5, 44, 1},
		{"t − L = W + P, a multiple of P: [10, 40)", 10, 30, 5, 45, 11},
		{"within the period: [10, 40)", 10, 30, 5, 54, 11},
		{"the next period: [20, 50)", 10, 30, 5, 55, 21},
		{"W = P: [90, 100)", 10, 10, 0, 100, 91},
		{"no lag: [970, 1000)", 10, 30, 0, 1000, 971},
		// At the top of the clock: b = 2^64 − 6, a = b − 30.
		{"the last instant", 10, 30, 0, maxU64, 18446744073709551581},
		{"P = W = 2^64 − 1, L = 0: [0, 2^64 − 1)", maxU64, maxU64, 0, 0, 1},
		// No instant's window holds a record: keep every record.
		{"L + P past the clock", maxU64, maxU64, 1, maxU64, 0},
		{"L past the clock but one period", 10, 30, maxU64 - 9, maxU64, 0},
		{"P = 0", 0, 30, 5, 1000, 0},
		{"W = 0", 10, 0, 5, 1000, 0},
	} {
		if got := RecordHorizon(horizonPolicy(c.p, c.w, c.l), c.d); got != c.h {
			t.Errorf("%s: RecordHorizon(P=%d, W=%d, L=%d, %d) = %d, want %d", c.what, c.p, c.w, c.l, c.d, got, c.h)
		}
	}
}

// TestRecordHorizonBetween_8_4: with the oldest decision kept at d = 60 (P =
// 10, W = 30, L = 5: its window is [20, 50), §5.1), a record that ends
// between the records' horizon and the decisions' is kept, since that
// decision names it, and one that ends before the records' horizon is in no
// window from d on.
func TestRecordHorizonBetween_8_4(t *testing.T) {
	p := horizonPolicy(10, 30, 5)
	const d = 60
	h := RecordHorizon(p, d)
	if h != 21 {
		t.Fatalf("RecordHorizon(60) = %d, want 21", h)
	}
	for _, c := range []struct {
		start, end uint64
		kept       bool
	}{
		{20, 30, true},  // ends before d, named at d
		{20, 21, true},  // ends at the horizon
		{45, 50, true},  // the window's last
		{10, 20, false}, // the period before the window
		{19, 20, false}, // ends just before the horizon
	} {
		if kept := c.end >= h; kept != c.kept {
			t.Errorf("[%d, %d): kept %t, want %t", c.start, c.end, kept, c.kept)
		}
		named := false
		for tt := d; tt < d+100; tt++ { // a only moves on from d
			if a, b := refWindow(tt, 10, 30, 5); a <= int(c.start) && int(c.end) <= b {
				named = true
			}
		}
		if named != c.kept {
			t.Errorf("[%d, %d): named from %d on %t, want %t", c.start, c.end, d, named, c.kept)
		}
	}
}

// TestForgetHorizon_5_1: the index forgets what starts a period before the
// window's start a (§5.1), and nothing while a < P. Each want is worked out
// by hand from §5.1's b and a.
func TestForgetHorizon_5_1(t *testing.T) {
	for _, c := range []struct {
		what          string
		p, w, l, t, h uint64
	}{
		{"t < L", 10, 30, 5, 4, 0},
		{"t = L: b = 0", 10, 30, 5, 5, 0},
		{"b < W clamps a to 0", 10, 30, 5, 25, 0},
		{"b = W: a = 0", 10, 30, 5, 35, 0},
		{"t − L < W + P: a = 0", 10, 30, 5, 44, 0},
		{"t − L = W + P: a = P, a − P = 0", 10, 30, 5, 45, 0},
		{"a = 2P", 10, 30, 5, 55, 10},
		{"within the period", 10, 30, 5, 64, 10},
		{"no lag: [970, 1000)", 10, 30, 0, 1000, 960},
		{"the last instant: a = 2^64 − 36", 10, 30, 0, maxU64, 18446744073709551570},
		{"P = W = 2^64 − 1: a = 0", maxU64, maxU64, 0, maxU64, 0},
		{"P = 0", 0, 30, 5, 1000, 0},
	} {
		if got := ForgetHorizon(horizonPolicy(c.p, c.w, c.l), c.t); got != c.h {
			t.Errorf("%s: ForgetHorizon(P=%d, W=%d, L=%d, %d) = %d, want %d", c.what, c.p, c.w, c.l, c.t, got, c.h)
		}
	}
}

// refWindow is §5.1's window written again for small numbers: b = ⌊(t − L)
// / P⌋ × P, 0 when t < L; a = b − W, 0 when b < W; [0, 0) when P = 0.
func refWindow(t, period, window, lag int) (a, b int) {
	if period > 0 && t >= lag {
		b = (t - lag) / period * period
	}
	if b >= window {
		a = b - window
	}
	return a, b
}

// TestHorizonsBruteForce_5_1 enumerates, for small policies, every decision
// instant in a range and every record [s, e) with s < e each names (§5.1),
// and checks both horizons against what the decisions from an instant on
// can name:
//   - RecordHorizon(p, d): no record a decision at d or later names ends
//     before it (so pruning what ends before it loses nothing a kept
//     decision needs), and one that ends there is named (so it prunes
//     everything it can); 0 when nothing is named.
//   - ForgetHorizon(p, t): no record a decision at t − P or later names
//     starts before it, and, for a policy that reads (§3.3: P > 0, W a
//     multiple of P above 0), one that starts there is named.
func TestHorizonsBruteForce_5_1(t *testing.T) {
	const last = 40 // the last d and t checked
	type shape struct{ p, w, l int }
	var shapes []shape
	for p := 1; p <= 4; p++ {
		for _, w := range []int{p, 2 * p, 3 * p, p + 1, 0} { // p + 1 and 0 are policies that do not read
			for l := 0; l <= 6; l++ {
				shapes = append(shapes, shape{p, w, l})
			}
		}
	}
	shapes = append(shapes, shape{0, 3, 2})
	for _, sh := range shapes {
		reads := sh.p > 0 && sh.w > 0 && sh.w%sh.p == 0
		pol := horizonPolicy(uint64(sh.p), uint64(sh.w), uint64(sh.l))
		// Decisions at instants up to far enough past last that every
		// window that can come first from an instant ≤ last is seen.
		top := last + sh.l + sh.p + sh.w + 2
		// named[s][e]: some decision at the instant x or later names [s, e);
		// built from top down, one instant's window at a time.
		named := make([][]bool, top+1)
		for s := range named {
			named[s] = make([]bool, top+1)
		}
		minStart, minEnd := make([]int, last+1), make([]int, last+1) // -1: none named
		for x := top; x >= 0; x-- {
			a, b := refWindow(x, sh.p, sh.w, sh.l)
			for s := a; s < b; s++ {
				for e := s + 1; e <= b; e++ {
					named[s][e] = true
				}
			}
			if x > last {
				continue
			}
			minStart[x], minEnd[x] = -1, -1
			for s := 0; s <= top; s++ {
				for e := s + 1; e <= top; e++ {
					if !named[s][e] {
						continue
					}
					if minStart[x] < 0 || s < minStart[x] {
						minStart[x] = s
					}
					if minEnd[x] < 0 || e < minEnd[x] {
						minEnd[x] = e
					}
				}
			}
		}
		for d := 0; d <= last; d++ {
			h := int(RecordHorizon(pol, uint64(d)))
			switch {
			case minEnd[d] < 0 && h != 0:
				t.Fatalf("P=%d W=%d L=%d: nothing is named from %d on, RecordHorizon %d", sh.p, sh.w, sh.l, d, h)
			case minEnd[d] >= 0 && h > minEnd[d]:
				t.Fatalf("P=%d W=%d L=%d: a decision at %d or later names a record ending at %d, before RecordHorizon %d",
					sh.p, sh.w, sh.l, d, minEnd[d], h)
			case minEnd[d] >= 0 && h < minEnd[d]:
				t.Fatalf("P=%d W=%d L=%d: RecordHorizon(%d) = %d, but no record ending before %d is named",
					sh.p, sh.w, sh.l, d, h, minEnd[d])
			}
		}
		for tt := 0; tt <= last; tt++ {
			x := max(tt-sh.p, 0)
			f := int(ForgetHorizon(pol, uint64(tt)))
			if minStart[x] >= 0 && f > minStart[x] {
				t.Fatalf("P=%d W=%d L=%d: a decision at %d or later names a record starting at %d, before ForgetHorizon(%d) = %d",
					sh.p, sh.w, sh.l, x, minStart[x], tt, f)
			}
			if reads && f != minStart[x] {
				t.Fatalf("P=%d W=%d L=%d: ForgetHorizon(%d) = %d, but the earliest start named from %d on is %d",
					sh.p, sh.w, sh.l, tt, f, x, minStart[x])
			}
		}
	}
}
