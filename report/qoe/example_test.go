package qoe

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestWorkedExample replays the multi-CDN seed's worked example at a tenth
// of its size, against the aggregator and a stand-in for the steering
// handler that puts a cohort's degraded pathways behind the others: 80 000
// viewers on cdn-a and cdn-b, half each, in two cohorts (fra, par), TTL 60
// s (each session asks again a TTL after its last answer, and reports its
// pathway's throughput then); at T = 8 min cdn-a's 6 000 Frankfurt viewers
// drop from 18 to 6 Mbit/s. The seed: detected within the 60 s window,
// propagated within a TTL, 120 s in all. Here: detection within 60 s, every
// affected session's next manifest moves it, the last within 120 s of the
// drop, and no session of the other cohort moves. With 5 % of sessions
// reporting 0, or 10 times their throughput, nothing moves before the drop.
// (Issue 17's must-show runs this against the real handler once the
// aggregator steers pools; this is the aggregator's part of it.)
func TestWorkedExample(t *testing.T) {
	for _, liars := range []struct {
		name string
		lie  func(uint64) uint64
	}{
		{"honest", nil},
		{"5% report 0", func(uint64) uint64 { return 0 }},
		{"5% report 10x", func(v uint64) uint64 { return 10 * v }},
	} {
		t.Run(liars.name, func(t *testing.T) { workedExample(t, liars.lie) })
	}
}

func workedExample(t *testing.T, lie func(uint64) uint64) {
	const (
		viewers = 80_000
		ttl     = 60 * time.Second
		drop    = 8 * time.Minute
		end     = 12 * time.Minute
	)
	a := newAgg(t, Config{Fraction: 0.5, MinSessions: 100, Window: time.Minute, Hold: time.Minute})
	type viewer struct {
		cohort   string
		pathway  string
		next     time.Duration // its next steering request
		liar     bool
		affected bool // on cdn-a in fra at the drop
		movedAt  time.Duration
	}
	rng := rand.New(rand.NewPCG(16, 17))
	vs := make([]viewer, viewers)
	for i := range vs {
		v := &vs[i]
		// cdn-a's Frankfurt cohort: 6 000 of its 40 000.
		v.pathway, v.cohort = "cdn-b", "par"
		if i%2 == 0 {
			v.pathway = "cdn-a"
		}
		if v.pathway == "cdn-a" && i/2 < 6000 || v.pathway == "cdn-b" && i/2 < 6000 {
			v.cohort = "fra"
		}
		v.next = time.Duration(rng.Int64N(int64(ttl)))
		v.liar = lie != nil && rng.IntN(20) == 0
	}
	throughput := func(v *viewer, at time.Duration) uint64 {
		tp := uint64(18_000_000)
		if v.pathway == "cdn-a" && v.cohort == "fra" && at >= drop {
			tp = 6_000_000
		}
		if v.liar {
			tp = lie(tp)
		}
		return tp
	}
	// The viewers due at each tick of 100 ms.
	const tick = 100 * time.Millisecond
	due := make([][]int, int((end+ttl)/tick)+1)
	for i := range vs {
		k := int(vs[i].next / tick)
		due[k] = append(due[k], i)
	}
	var detected time.Duration = -1
	var lastMoved time.Duration
	kept, otherMoved, movedBefore := 0, 0, 0
	for now := time.Duration(0); now < end; now += tick {
		if now%time.Second == 0 {
			for _, m := range a.Evaluate(t0.Add(now)) {
				if m.Degraded && detected < 0 && m.Key == (Key{"cdn-a", "fra"}) {
					detected = now
				}
				if m.Key.Cohort != "fra" {
					otherMoved++
				}
				if now < drop {
					movedBefore++
				}
			}
		}
		for _, i := range due[int(now/tick)] {
			v := &vs[i]
			if now >= drop && !v.affected && v.pathway == "cdn-a" && v.cohort == "fra" && v.movedAt == 0 {
				v.affected = true
			}
			// The request reports the pathway it is on; its answer puts
			// first the first of its cohort's order (the stand-in).
			a.Add(Key{v.pathway, v.cohort}, session(i), throughput(v, now), true, 0, false, t0.Add(now))
			order, _ := a.Order([]string{v.pathway, other(v.pathway)}, v.cohort)
			if order[0] != v.pathway {
				if v.affected && v.movedAt == 0 {
					v.movedAt, lastMoved = now, max(lastMoved, now)
				}
				if v.cohort != "fra" {
					otherMoved++
				}
				v.pathway = order[0]
			} else if v.affected && v.movedAt == 0 && detected >= 0 {
				kept++ // an answer after detection that kept it on cdn-a
			}
			v.next = now + ttl
			due[int(v.next/tick)] = append(due[int(v.next/tick)], i)
		}
	}
	if movedBefore != 0 {
		t.Fatalf("%d moves before the drop", movedBefore)
	}
	if detected < 0 {
		t.Fatal("the drop was never detected")
	}
	affected, moved := 0, 0
	for i := range vs {
		if vs[i].affected {
			affected++
			if vs[i].movedAt > 0 {
				moved++
			}
		}
	}
	t.Logf("detected %v after the drop; the last of %d affected sessions moved %v after it; %d kept on cdn-a after detection; %d moves in other cohorts",
		detected-drop, affected, lastMoved-drop, kept, otherMoved)
	if detected-drop > time.Minute || lastMoved-drop > 2*time.Minute {
		t.Errorf("detection %v and the last move %v after the drop: want within 60 s and 120 s", detected-drop, lastMoved-drop)
	}
	if affected < 5000 || moved != affected || kept != 0 || otherMoved != 0 {
		t.Errorf("%d affected, %d moved, %d kept after detection, %d other cohorts' moves", affected, moved, kept, otherMoved)
	}
}

func other(p string) string {
	if p == "cdn-a" {
		return "cdn-b"
	}
	return "cdn-a"
}
