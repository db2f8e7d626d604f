package restore

import (
	"context"
	"encoding/binary"
	"flag"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// TestCountAsMade: the table of loads a restart counts again from the log
// (issue 16) is the table the decisions were made through, at every clock
// reading: 900 decisions of 250 sessions (so most sessions have several,
// of which only the latest counts), over fifteen minutes (so windows, and
// with them rankings, change, and the first decisions' sessions expire
// before the last are made), with records arriving midway (so the
// decisions of one window name two evidence snapshots). The reference is the table that made
// the decisions, not the count's own arithmetic.
func TestCountAsMade(t *testing.T) {
	t.Run("memory", func(t *testing.T) { countAsMade(t, store.NewMemory()) })
	t.Run("bolt", func(t *testing.T) { // which reads each decision at its leaf's t (DecisionAt)
		st, err := store.Open(filepath.Join(t.TempDir(), "store.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		countAsMade(t, st)
	})
}

func countAsMade(t *testing.T, st store.Store) {
	sc, err := scenario.Build(scenario.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	// Each period one pathway's edge is fifty times dearer than the
	// others', a different one every three periods, so that the windows
	// of five periods rank the pathways differently as t goes on.
	dear := func(k int) func(*evidence.Record) {
		return func(r *evidence.Record) { r.Joules *= 50 }
	}
	for k := range 20 {
		for i := range 3 {
			for j := range 2 {
				if k == 8 && i == 1 && j == 1 {
					continue // arrives midway, below
				}
				var edit func(*evidence.Record)
				if j == 0 && i == (k/3)%3 {
					edit = dear(k)
				}
				if _, err := sc.AddRecord(i, j, uint64(k)*scenario.Period, uint64(k+1)*scenario.Period, edit); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	p := sc.Policy
	id, n := sc.Room.ID(), len(p.Pathways)
	ids := p.IDs()
	made := store.NewLoads()
	const grace = 20_000_000
	ctx := context.Background()
	start := uint64(4 * scenario.Period)
	seenFirst := map[uint8]bool{}
	step := uint64(15*scenario.Period) / 900
	for i := range 900 {
		if i == 450 {
			// A record of the window arrives late, dear: the evidence
			// changes within a window.
			if _, err := sc.AddRecord(1, 1, 8*scenario.Period, 9*scenario.Period, func(r *evidence.Record) { r.Joules *= 200 }); err != nil {
				t.Fatal(err)
			}
		}
		var session report.Session
		binary.LittleEndian.PutUint64(session[:], uint64(i%250)+1)
		rep := report.Report{Present: report.HasThroughput, Throughput: uint64(1_000_000 * (1 + i%7))}
		d, ev, err := steerOne(made, sc, session, start+uint64(i)*step, rep, grace)
		if err != nil {
			t.Fatal(err)
		}
		seenFirst[d.Priority[0]] = true
		_, digest := decision.AppendSigned(nil, d, sc.SteerKey)
		if err := st.PutDecisions(ctx, []store.Evidence{ev}, []store.Decision{store.Compact(d, digest, ev.Key)}); err != nil {
			t.Fatal(err)
		}
	}
	end := start + 900*step
	policyOf := func(_ context.Context, h sig.Hash) (*policy.Policy, error) { return p, nil }
	partial := false // a clock at which some sessions are live and some expired
	for _, at := range []uint64{end, end + 60_000_000, end + 200_000_000, end + 400_000_000} {
		want, err := made.Snapshot(ctx, id, n, at)
		if err != nil {
			t.Fatal(err)
		}
		again := store.NewLoads()
		lg, err := Resume(ctx, st, id, n, again)
		if err != nil {
			t.Fatal(err)
		}
		src := Source{Store: st, PolicyOf: policyOf, Grace: grace, Clock: func() uint64 { return at }}
		counted, err := Count(ctx, src, Room{ID: id, Policy: p, IDs: ids}, again, lg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := again.Snapshot(ctx, id, n, at)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, c := range want {
			sum += int(c)
		}
		if !slices.Equal(got, want) || counted != sum {
			t.Fatalf("at %d: counted %d sessions, loads %v; the table that made the decisions holds %v", at, counted, got, want)
		}
		partial = partial || sum > 0 && sum < 250
	}
	if !partial {
		t.Fatal("at no clock were some of the 250 sessions live and some expired")
	}
	if firsts := len(seenFirst); firsts < 3 {
		t.Fatalf("the decisions put %d pathways first: the test wants the rankings to differ", firsts)
	}
}

// BenchmarkCount: the recount's cost per decision, over 20 000 decisions
// (-recount.decisions) of as many sessions on the memory store and on
// bbolt (the store's own reads are the rest of a restart's). A table of
// millions of sessions outgrows the processor's caches:
//
//	go test -run=NONE -bench='Count$/bolt' -benchtime=3x ./internal/restore -recount.decisions=1000000
func BenchmarkCount(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchCount(b, store.NewMemory()) })
	b.Run("bolt", func(b *testing.B) {
		st, err := store.Open(filepath.Join(b.TempDir(), "store.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchCount(b, st)
	})
}

// recountDecisions is BenchmarkCount's count of decisions.
var recountDecisions = flag.Int("recount.decisions", 20_000, "BenchmarkCount's decisions, each a session of its own")

func benchCount(b *testing.B, st store.Store) {
	count := *recountDecisions
	src, rm, n := countStore(b, st, count)
	src.Alone = true
	ctx := context.Background()
	for b.Loop() {
		again := store.NewLoads()
		lg, err := Resume(ctx, st, rm.ID, n, again)
		if err != nil {
			b.Fatal(err)
		}
		if c, err := Count(ctx, src, rm, again, lg); err != nil || c != count {
			b.Fatalf("counted %d, %v; want %d", c, err, count)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(count), "ns/decision")
}

// countStore puts into st count decisions of as many sessions, spread over
// 200 s (so that each is live at the last: the policy's TTL is 300 s), in
// groups as the committer writes them, and returns what counts them again:
// a source whose clock is at the last, and the room.
func countStore(b *testing.B, st store.Store, count int) (Source, Room, int) {
	sc, err := scenario.Build(scenario.Spec{Periods: 10})
	if err != nil {
		b.Fatal(err)
	}
	p := sc.Policy
	made := store.NewLoads()
	ctx := context.Background()
	start, gap := uint64(8*scenario.Period), uint64(200_000_000/count)
	var rows []store.Decision
	var evs []store.Evidence
	for i := range count {
		var session report.Session
		binary.LittleEndian.PutUint64(session[:], uint64(i)+1)
		d, ev, err := steerOne(made, sc, session, start+uint64(i)*gap, report.Report{}, 0)
		if err != nil {
			b.Fatal(err)
		}
		_, digest := decision.AppendSigned(nil, d, sc.SteerKey)
		rows, evs = append(rows, store.Compact(d, digest, ev.Key)), append(evs, ev)
	}
	for len(rows) > 0 { // in groups, as the committer writes them
		k := min(len(rows), 1024)
		if err := st.PutDecisions(ctx, evs[:k], rows[:k]); err != nil {
			b.Fatal(err)
		}
		evs, rows = evs[k:], rows[k:]
	}
	src := Source{Store: st, PolicyOf: func(context.Context, sig.Hash) (*policy.Policy, error) { return p, nil },
		Clock: func() uint64 { return start + uint64(count)*gap }}
	return src, Room{ID: sc.Room.ID(), Policy: p, IDs: p.IDs()}, len(p.Pathways)
}

// BenchmarkCountBeside: how late steering is while the recount runs beside
// it on one core (issue 30: "p99 unchanged while the restart's recount
// runs"). A probe stands in for a server's requests at half its rate:
// every millisecond it is due, wakes, and works 100 µs; its lateness (woken
// less due) is taken while the recount of 200 000 sessions on bbolt runs
// with GOMAXPROCS=1, and then as long again with nothing beside it. It
// reports both p99s and their ratio.
func BenchmarkCountBeside(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), "store.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const count = 200_000
	src, rm, n := countStore(b, st, count)
	ctx := context.Background()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	probe := func(stop <-chan struct{}) []time.Duration {
		var late []time.Duration
		due := time.Now()
		for {
			select {
			case <-stop:
				return late
			default:
			}
			due = due.Add(time.Millisecond)
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
			late = append(late, time.Since(due))
			for w := time.Now(); time.Since(w) < 100*time.Microsecond; {
			}
			if now := time.Now(); now.Sub(due) > 100*time.Millisecond {
				due = now // a stall is counted once, not as a burst after it
			}
		}
	}
	p99 := func(xs []time.Duration) time.Duration {
		slices.Sort(xs)
		return xs[len(xs)*99/100]
	}
	var during, after []time.Duration
	for b.Loop() {
		again := store.NewLoads()
		lg, err := Resume(ctx, st, rm.ID, n, again)
		if err != nil {
			b.Fatal(err)
		}
		stop, got := make(chan struct{}), make(chan []time.Duration)
		go func() { got <- probe(stop) }()
		began := time.Now()
		c, err := Count(ctx, src, rm, again, lg)
		took := time.Since(began)
		close(stop)
		during = append(during, <-got...)
		if err != nil || c != count {
			b.Fatalf("counted %d, %v; want %d", c, err, count)
		}
		stop = make(chan struct{})
		go func() { got <- probe(stop) }()
		time.Sleep(took)
		close(stop)
		after = append(after, <-got...)
	}
	d, a := p99(during), p99(after)
	b.ReportMetric(float64(d.Microseconds())/1000, "ms-p99-during")
	b.ReportMetric(float64(a.Microseconds())/1000, "ms-p99-after")
	b.ReportMetric(float64(d)/float64(max(a, time.Microsecond)), "ratio")
}

// TestYieldShare: beside steering a recount works a sixteenth of the wall
// time at most (yielder: yieldWork of work, fifteen times as long asleep),
// so that the requests keep their headroom (issue 30: p99 unchanged while
// it runs); counting alone, it never sleeps.
func TestYieldShare(t *testing.T) {
	share := func(y func()) float64 {
		start := time.Now()
		var work time.Duration
		for time.Since(start) < 100*time.Millisecond {
			w := time.Now()
			for time.Since(w) < 5*time.Microsecond { // a few decisions' work
			}
			work += time.Since(w)
			y()
		}
		return float64(work) / float64(time.Since(start))
	}
	if got := share(Source{}.yielder()); got > 0.08 {
		t.Errorf("beside steering the recount worked %.2f of the time, want at most a sixteenth and a chunk", got)
	}
	if got := share(Source{Alone: true}.yielder()); got < 0.5 {
		t.Errorf("alone the recount worked %.2f of the time: it slept", got)
	}
}

// steerOne makes the session's decision at t through the table of loads,
// as the server does (Loads.Steer, the rule on the loads it holds), over
// the scenario's records, and returns it with its evidence snapshot.
func steerOne(made *store.MemLoads, sc *scenario.Scenario, session report.Session, t uint64, rep report.Report, grace uint64) (*decision.Decision, store.Evidence, error) {
	p, pd, n := sc.Policy, sc.Policy.Digest(), len(sc.Policy.Pathways)
	var d *decision.Decision
	var ev store.Evidence
	err := made.Steer(context.Background(), sc.Room.ID(), n, session, t, func(loads []uint32, at uint64) (int, uint64, error) {
		rk, err := decision.RankAt(p, pd, at, sc.Index)
		if err != nil {
			return 0, 0, err
		}
		pws := make([]evidence.Pathway, n)
		for j := range pws {
			pws[j] = rk.Evidence(j)
		}
		ev = store.EncodeEvidence(pws)
		if d, err = rk.Decision(sc.SteerKey.Public(), at, report.HLS, rep, session, loads); err != nil {
			return 0, 0, err
		}
		return int(d.Priority[0]), at + uint64(d.TTL)*1_000_000 + grace, nil
	})
	return d, ev, err
}
