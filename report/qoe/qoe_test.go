package qoe

import (
	"math/big"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/report"
)

var t0 = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

// client is a distinct IPv4 client for each i below 2^24 (10.0.0.0/8).
func client(i int) Client {
	return ClientOf(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
}

func session(i int) report.Session {
	var s report.Session
	s[0], s[1], s[2] = byte(i), byte(i>>8), byte(i>>16)
	return s
}

// TestQuantile: the nearest-rank quantile is the smallest value with at
// least q·n values at or below it, checked by brute force over random sets
// (with repeats) and the quantiles the aggregator reports.
func TestQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := rng.IntN(60) + 1
		vs := make([]uint64, n)
		for i := range vs {
			vs[i] = uint64(rng.IntN(20))
		}
		slices.Sort(vs)
		for _, q := range []float64{0.1, 0.5, 0.9, 1, float64(rng.IntN(1_000_000)+1) / 1e6} {
			want := uint64(1 << 63)
			qn := new(big.Rat).Mul(new(big.Rat).SetFrac64(int64(q*1e6+0.5), 1_000_000), big.NewRat(int64(n), 1))
			for _, v := range vs {
				at := 0
				for _, w := range vs {
					if w <= v {
						at++
					}
				}
				if new(big.Rat).SetInt64(int64(at)).Cmp(qn) >= 0 && v < want {
					want = v
				}
			}
			if got := Quantile(vs, q); got != want {
				t.Fatalf("Quantile(%v, %v) = %d, brute force %d", vs, q, got, want)
			}
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("the quantile of nothing")
	}
}

func newAgg(t *testing.T, c Config) *Aggregator {
	t.Helper()
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestOncePerWindow (issue 17 item 1): each session counts once in its
// cell, by its latest report, until that report is a window old.
func TestOncePerWindow(t *testing.T) {
	a := newAgg(t, Config{Floor: 1, Window: time.Minute})
	k := Key{"cdn-a", "fra"}
	a.Add(k, session(2), client(2), 5, true, 2000, true, t0)
	for i := range 10 {
		a.Add(k, session(1), client(1), uint64(100+i), true, 0, false, t0.Add(time.Duration(i)*time.Second))
	}
	a.Evaluate(t0.Add(30 * time.Second))
	f := a.Figures()[0]
	if f.Sessions != 2 || f.WithT != 2 || f.WithB != 1 || f.Throughput[1] != 5 || f.Throughput[2] != 109 || f.Buffer[1] != 2000 {
		t.Fatalf("figures %+v: want 2 sessions, session 1 by its latest 109", f)
	}
	// At t0 + 60 s session 2's only report is a window old; session 1's
	// latest (t0 + 9 s) is not.
	a.Evaluate(t0.Add(60 * time.Second))
	if f := a.Figures()[0]; f.Sessions != 1 || f.Throughput[1] != 109 {
		t.Fatalf("at t0 + 60 s: %+v", f)
	}
	// At t0 + 70 s no report is left: the cell, not degraded, goes.
	a.Evaluate(t0.Add(70 * time.Second))
	if fs := a.Figures(); len(fs) != 0 {
		t.Fatalf("at t0 + 70 s: %+v", fs)
	}
}

// fill gives n sessions (from first) each a report of throughput at.
func fill(a *Aggregator, k Key, first, n int, throughput uint64, at time.Time) {
	for i := range n {
		a.Add(k, session(first+i), client(first+i), throughput, true, 0, false, at)
	}
}

// TestMinimumCohort (item 1): a cohort acts only with MinSessions sessions.
func TestMinimumCohort(t *testing.T) {
	for _, n := range []int{29, 30} {
		a := newAgg(t, Config{Floor: 10_000_000, MinSessions: 30})
		fill(a, Key{"cdn-a", "fra"}, 0, n, 6_000_000, t0)
		moves := a.Evaluate(t0.Add(time.Second))
		if want := n >= 30; (len(moves) == 1) != want || a.Degraded("cdn-a", "fra") != want {
			t.Errorf("%d sessions at 6 Mbit/s under a floor of 10: moves %v", n, moves)
		}
	}
}

// TestCohortsApart (item 2): a pathway degraded in one cohort moves that
// cohort's sessions only.
func TestCohortsApart(t *testing.T) {
	a := newAgg(t, Config{Fraction: 0.5, MinSessions: 10})
	fill(a, Key{"cdn-a", "fra"}, 0, 100, 6_000_000, t0)
	fill(a, Key{"cdn-b", "fra"}, 100, 100, 18_000_000, t0)
	fill(a, Key{"cdn-a", "par"}, 200, 100, 18_000_000, t0)
	fill(a, Key{"cdn-b", "par"}, 300, 100, 17_000_000, t0)
	moves := a.Evaluate(t0.Add(time.Second))
	if len(moves) != 1 || moves[0].Key != (Key{"cdn-a", "fra"}) || !moves[0].Degraded || moves[0].Best != 18_000_000 {
		t.Fatalf("moves %v: want cdn-a off for fra alone (6 < 0.5 × 18)", moves)
	}
	if b := a.Behind(); len(b) != 1 || !slices.Equal(b["fra"].Behind, []string{"cdn-a"}) || len(b["fra"].Probing) != 0 {
		t.Errorf("behind %v: want cdn-a for fra alone", b)
	}
}

// TestLies (must show): 5 % of sessions reporting 0, or 10 times their
// throughput, move no cohort: the median is the honest sessions'.
func TestLies(t *testing.T) {
	for _, lie := range []uint64{0, 180_000_000} {
		a := newAgg(t, Config{Floor: 10_000_000, Fraction: 0.5, MinSessions: 30})
		for _, p := range []string{"cdn-a", "cdn-b"} {
			fill(a, Key{p, "fra"}, 0, 950, 18_000_000, t0)
			fill(a, Key{p, "fra"}, 950, 50, lie, t0)
		}
		// Only cdn-b's liars: cdn-a's median stays 18 against cdn-b's.
		if moves := a.Evaluate(t0.Add(time.Second)); len(moves) != 0 {
			t.Errorf("5%% reporting %d: moves %v", lie, moves)
		}
	}
}

// TestHysteresis (item 2, must show): a median that crosses the floor
// every 10 s for 10 minutes moves its cohort at most once per Hold, and
// comes back only after Hold above the floor × (1 + margin).
func TestHysteresis(t *testing.T) {
	a := newAgg(t, Config{Floor: 10_000_000, Margin: 0.2, Hold: time.Minute, MinSessions: 30, Window: 10 * time.Second})
	k := Key{"cdn-a", "fra"}
	var moves []Move
	for s := 0; s < 600; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		tp := uint64(13_000_000) // above 12, the recovery threshold
		if s/10%2 == 1 {
			tp = 9_000_000
		}
		fill(a, k, 0, 40, tp, now)
		moves = append(moves, a.Evaluate(now)...)
	}
	for i := 1; i < len(moves); i++ {
		if d := moves[i].At.Sub(moves[i-1].At); d < time.Minute {
			t.Errorf("moves %d and %d are %v apart, under the hold of 1 min", i-1, i, d)
		}
	}
	// Off at the first crossing; back needs 60 s above 12 Mbit/s, which a
	// median up 10 s at a time never has: one move in all.
	if len(moves) != 1 || !moves[0].Degraded || moves[0].At != t0.Add(10*time.Second) {
		t.Errorf("moves %v: want one, off at t0 + 10 s", moves)
	}
	// Steadily above 12 for the hold: back.
	var back []Move
	for s := 600; s < 700; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		fill(a, k, 0, 40, 13_000_000, now)
		back = append(back, a.Evaluate(now)...)
	}
	if len(back) != 1 || back[0].Degraded || back[0].At.Sub(t0) < 660*time.Second {
		t.Errorf("recovery %v: want back at t0 + 660 s or after", back)
	}
	// Above the floor but below floor × (1 + margin): it stays off.
	b := newAgg(t, Config{Floor: 10_000_000, Margin: 0.2, Hold: time.Minute, MinSessions: 30})
	fill(b, k, 0, 40, 9_000_000, t0)
	b.Evaluate(t0)
	for s := 1; s < 300; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		fill(b, k, 0, 40, 11_000_000, now)
		if m := b.Evaluate(now); len(m) != 0 {
			t.Fatalf("at 11 Mbit/s, under 12: %v", m)
		}
	}
}

// TestBadReports (must show): absurd values are ignored and counted, and
// never aggregated.
func TestBadReports(t *testing.T) {
	a := newAgg(t, Config{Floor: 10_000_000, MinSessions: 1})
	k := Key{"cdn-a", "fra"}
	a.Add(k, session(1), client(1), 1<<64-1, true, 0, false, t0)
	a.Add(k, session(2), client(2), 1, true, 1<<63, true, t0)
	a.Add(k, session(3), client(3), 0, false, 0, false, t0)
	a.Ignore("body_malformed")
	if moves := a.Evaluate(t0); len(moves) != 0 || len(a.Figures()) != 0 {
		t.Errorf("absurd reports moved %v", moves)
	}
	got := a.Ignored()
	if got["throughput_absurd"] != 1 || got["buffer_absurd"] != 1 || got["no_figure"] != 1 || got["body_malformed"] != 1 {
		t.Errorf("ignored %v", got)
	}
	for _, c := range []Config{{}, {Fraction: 1}, {Floor: 1, Fraction: -0.1}, {Floor: 1, Margin: 11}} {
		if _, err := New(c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// TestBelowLowest: apex-steering's rule, a throughput under 1.2 times the
// lowest variant's bitrate, exactly, to 2^64.
func TestBelowLowest(t *testing.T) {
	for _, c := range []struct {
		t, lowest uint64
		want      bool
	}{
		{1_199_999, 1_000_000, true}, {1_200_000, 1_000_000, false}, {0, 1, true}, {0, 0, false},
		{1<<64 - 1, 1<<64 - 1, true}, {(1<<64 - 1) / 6 * 6, (1<<64 - 1) / 6 * 5, false},
		{(1<<64-1)/6*6 - 1, (1<<64 - 1) / 6 * 5, true},
	} {
		ref := new(big.Int).Mul(big.NewInt(5), new(big.Int).SetUint64(c.t)).Cmp(new(big.Int).Mul(big.NewInt(6), new(big.Int).SetUint64(c.lowest))) < 0
		if got := BelowLowest(c.t, c.lowest); got != c.want || got != ref {
			t.Errorf("BelowLowest(%d, %d) = %v, want %v", c.t, c.lowest, got, c.want)
		}
	}
}

// TestThinComesBack: a pathway whose sessions were moved off has too few
// left to report; after Hold with too few it is given back to the probe
// share of its cohort, and if that share measures it still bad it moves off
// again, a Hold after. A cohort too small for its share to report enough
// gets it back whole after another Hold.
func TestThinComesBack(t *testing.T) {
	for _, still := range []bool{true, false} {
		a := newAgg(t, Config{Floor: 10_000_000, MinSessions: 30, Hold: time.Minute, Window: time.Minute})
		k := Key{"cdn-a", "fra"}
		fill(a, k, 0, 40, 6_000_000, t0)
		if m := a.Evaluate(t0); len(m) != 1 || !m[0].Degraded {
			t.Fatalf("off: %v", m)
		}
		var moves []Move
		for s := 1; s <= 200; s++ {
			now := t0.Add(time.Duration(s) * time.Second)
			if still && s > 130 {
				fill(a, k, 0, 40, 6_000_000, now) // the probe share, still bad
			}
			moves = append(moves, a.Evaluate(now)...)
			if s == 125 {
				if b := a.Behind()["fra"]; len(b.Behind) != 1 || len(b.Probing) != 1 {
					t.Errorf("at t0 + 125 s: %+v, want cdn-a behind and probing", b)
				}
			}
		}
		// The reports of t0 leave the window at t0 + 60 s; thin from then,
		// probed at t0 + 120 s; then off again, or back whole, at t0 + 180.
		if len(moves) != 2 || !moves[0].Degraded || !moves[0].Probing || moves[0].At != t0.Add(120*time.Second) ||
			moves[1].Degraded != still || moves[1].Probing || moves[1].At != t0.Add(180*time.Second) {
			t.Errorf("still bad %v: moves %v", still, moves)
		}
	}
}

// TestInProbe: a session is in the probe share when its first byte is
// below share × 256 (the package's rule, written out).
func TestInProbe(t *testing.T) {
	for _, c := range []struct {
		first byte
		share float64
		want  bool
	}{{0, 0.2, true}, {51, 0.2, true}, {52, 0.2, false}, {255, 1, true}, {0, 0, false}, {127, 0.5, true}, {128, 0.5, false}} {
		var s report.Session
		s[0] = c.first
		if got := InProbe(s, c.share); got != c.want {
			t.Errorf("InProbe(first %d, %v) = %v", c.first, c.share, got)
		}
	}
}

// TestPerClient (issue 26 item 2): a cell counts at most PerClient
// sessions of one client, those with its latest reports; an IPv6 client
// is its /64; a session that changes networks counts under its new one;
// and a session's expiry frees its client's place. The figures are read
// off by hand: the four latest of 1 000 sessions from one address.
func TestPerClient(t *testing.T) {
	a := newAgg(t, Config{Floor: 10_000_000, MinSessions: 30, Window: time.Minute})
	k := Key{"cdn-a", "fra"}
	home := ClientOf(netip.MustParseAddr("192.0.2.7"))
	for i := range 1000 {
		a.Add(k, session(i), home, uint64(i), true, 0, false, t0.Add(time.Duration(i)*time.Millisecond))
	}
	a.Evaluate(t0.Add(time.Second))
	f := a.Figures()[0]
	// Its four latest: 996 to 999; the median by nearest rank is the
	// 2nd of 4.
	if f.Sessions != 4 || f.Clients != 1 || f.Throughput[0] != 996 || f.Throughput[1] != 997 || f.Throughput[2] != 999 {
		t.Fatalf("one address's 1 000 sessions: %+v", f)
	}
	if got := a.Ignored()["crowded_client"]; got != 996 {
		t.Errorf("crowded_client %d, want 996", got)
	}
	// An IPv6 client is its /64; another /64 is another client.
	for i, s := range []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2::3%eth0", "2001:db8:1:3::1"} {
		a.Add(k, session(2000+i), ClientOf(netip.MustParseAddr(s)), 5, true, 0, false, t0.Add(2*time.Second))
	}
	if f := a.Figures()[0]; f.Sessions != 8 || f.Clients != 3 {
		t.Errorf("after 3 sessions of one /64 and 1 of another: %d sessions of %d clients, want 8 of 3", f.Sessions, f.Clients)
	}
	// An IPv4-mapped IPv6 address is its IPv4 address.
	if ClientOf(netip.MustParseAddr("::ffff:192.0.2.7")) != home || ParseClient("192.0.2.7:443") != home || ParseClient("[::ffff:192.0.2.7]:1") != home {
		t.Error("192.0.2.7 read three ways is not one client")
	}
	if ParseClient("") != (Client{}) || ParseClient("@") != (Client{}) {
		t.Error("an unreadable address is not the unknown client")
	}
	// Session 999 moves to another network: it counts there, and its
	// place at home is free for the next.
	away := ClientOf(netip.MustParseAddr("198.51.100.1"))
	a.Add(k, session(999), away, 999, true, 0, false, t0.Add(3*time.Second))
	a.Add(k, session(3000), home, 1, true, 0, false, t0.Add(3*time.Second))
	if f := a.Figures()[0]; f.Sessions != 9 || f.Clients != 4 {
		t.Errorf("after a session moved: %+v, want 9 sessions of 4 clients", f)
	}
	if got := a.Ignored()["crowded_client"]; got != 996 {
		t.Errorf("a moved session's place was not freed: crowded_client %d", got)
	}
	// A window later only the reports of t0 + 3 s remain, and the
	// expired sessions' places are free again.
	a.Evaluate(t0.Add(62 * time.Second))
	if f := a.Figures()[0]; f.Sessions != 2 || f.Clients != 2 {
		t.Errorf("after the window: %+v, want 2 sessions of 2 clients", f)
	}
	for i := range 3 {
		a.Add(k, session(4000+i), home, 1, true, 0, false, t0.Add(63*time.Second))
	}
	if got := a.Ignored()["crowded_client"]; got != 996 {
		t.Errorf("expired sessions held their client's places: crowded_client %d", got)
	}
}
