package store

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// sizeCase is a policy shape for the measures: n pathways of hops hops
// each, with a window of window periods (§5.1), so that each pathway names
// hops × window records.
type sizeCase struct {
	n, hops, window int
}

func (c sizeCase) String() string {
	return fmt.Sprintf("pathways=%d/names=%d", c.n, c.hops*c.window)
}

var sizeCases = []sizeCase{{3, 2, 5}, {32, 2, 5}, {32, 3, 24}}

// sizeScenario builds c's scenario with records for periods periods.
func sizeScenario(b testing.TB, c sizeCase, periods int) *scenario.Scenario {
	b.Helper()
	var pws []scenario.Pathway
	for i := range c.n {
		pw := scenario.DefaultPathways()[i%3]
		pw.ID = fmt.Sprintf("cdn-%02d", i)
		for len(pw.Hops) < c.hops {
			pw.Hops = append(pw.Hops, pw.Hops[1])
		}
		pw.Hops[0].Joules += uint64(i) * 1000
		pws = append(pws, pw)
	}
	sc, err := scenario.Build(scenario.Spec{Name: c.String(), Pathways: pws, Periods: periods, Policy: func(p *policy.Policy) {
		p.WindowUs = uint64(c.window) * p.PeriodUs
	}})
	if err != nil {
		b.Fatal(err)
	}
	return sc
}

// signedRows makes count decisions of sc at instants from first, step µs
// apart, signed, and returns their rows, their snapshots and the mean size
// of their WSD1 bytes; the bytes themselves are not kept. As a server
// does, it ranks once per window (§5.1) and encodes that window's snapshot
// once.
func signedRows(b testing.TB, sc *scenario.Scenario, count int, first, step uint64) ([]Decision, map[sig.Hash]Evidence, float64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(count), step))
	n := len(sc.Policy.Pathways)
	digest := sc.Policy.Digest()
	rows := make([]Decision, 0, count)
	snaps := map[sig.Hash]Evidence{}
	var rk *decision.Ranking
	var ev Evidence
	buf := make([]byte, 0, 1<<20)
	total := 0
	for i := range count {
		req := randomRequest(rng, n, first+uint64(i)*step)
		if rk == nil || !rk.Covers(req.T) {
			var err error
			if rk, err = decision.RankAt(sc.Policy, digest, req.T, sc.Index); err != nil {
				b.Fatal(err)
			}
			pws := make([]evidence.Pathway, n)
			for j := range pws {
				pws[j] = rk.Evidence(j)
			}
			ev = EncodeEvidence(pws)
			snaps[ev.Key] = ev
		}
		d, err := rk.Decision(sc.SteerKey.Public(), req.T, req.Protocol, req.Report, req.Session, req.Loads)
		if err != nil {
			b.Fatal(err)
		}
		raw, dg := decision.AppendSigned(buf[:0], d, sc.SteerKey)
		total += len(raw)
		rows = append(rows, Compact(d, dg, ev.Key))
	}
	return rows, snaps, float64(total) / float64(count)
}

// boltUsed is the bytes of the file's pages in use: its high-water mark
// less its free pages.
func boltUsed(b testing.TB, s *Bolt) (used, highWater int64) {
	b.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		highWater = tx.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	st := s.db.Stats()
	free := int64(st.FreePageN+st.PendingPageN) * int64(s.db.Info().PageSize)
	return highWater - free, highWater
}

// BenchmarkStoredSize measures what a stored decision costs in a Bolt file
// (issue 5: "measure bytes per stored decision"): 10 000 decisions of one
// room over 10 windows (one snapshot per 1 000 decisions), in groups of
// 128, against the size of their WSD1 bytes (§7.1). It reports the row
// (the bolt value), the snapshot, the growth of the file's pages in use per
// decision, and the ratio of the WSD1 size to that growth.
func BenchmarkStoredSize(b *testing.B) {
	const count, windows = 10_000, 10
	for _, c := range sizeCases {
		sc := sizeScenario(b, c, c.window+windows+2)
		// From the start of a window (§5.1: it moves L after a period
		// ends), so that the decisions span exactly 10.
		first := uint64(c.window+1)*scenario.Period + sc.Policy.LagUs
		rows, snaps, wsd1 := signedRows(b, sc, count, first, windows*scenario.Period/count)
		if len(snaps) != windows {
			b.Fatalf("%d snapshots, want %d", len(snaps), windows)
		}
		var snapshot int
		for _, e := range snaps {
			snapshot = len(e.Body)
		}
		rowBytes := 0
		for i := range rows {
			rowBytes += len(appendRow(nil, &row{context: 1, session: rows[i].Session, protocol: rows[i].Protocol,
				report: rows[i].Report, loads: rows[i].Loads, snapshot: 1, sig: rows[i].Sig}))
		}
		b.Run(c.String(), func(b *testing.B) {
			var perDecision, perDecisionHW float64
			for b.Loop() {
				s := openTestBolt(b, "")
				used0, hw0 := boltUsed(b, s)
				for i := 0; i < count; i += 128 {
					g := rows[i:min(i+128, count)]
					ev := []Evidence{snaps[g[0].Evidence], snaps[g[len(g)-1].Evidence]}
					if err := s.PutDecisions(bg, ev, g); err != nil {
						b.Fatal(err)
					}
				}
				used1, hw1 := boltUsed(b, s)
				perDecision = float64(used1-used0) / count
				perDecisionHW = float64(hw1-hw0) / count
			}
			b.ReportMetric(wsd1, "WSD1-bytes")
			b.ReportMetric(float64(rowBytes)/count, "row-bytes")
			b.ReportMetric(float64(snapshot), "snapshot-bytes")
			b.ReportMetric(perDecision, "used-bytes/decision")
			b.ReportMetric(perDecisionHW, "file-bytes/decision")
			b.ReportMetric(wsd1/perDecision, "ratio")
		})
	}
}

// BenchmarkPutDecisions is the durable write of groups of decisions (each
// group one bbolt update, synced): decisions/s for groups of 1, 16 and 128.
func BenchmarkPutDecisions(b *testing.B) {
	base, ev := roomRows(b)
	for _, size := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("group=%d", size), func(b *testing.B) {
			s := openTestBolt(b, "")
			g := make([]Decision, size)
			next := uint64(0)
			b.ReportAllocs()
			start := time.Now()
			puts := 0
			for b.Loop() {
				for i := range g {
					g[i] = base[0]
					g[i].T += next
					binary.LittleEndian.PutUint64(g[i].Digest[:], next)
					g[i].Digest = sha256.Sum256(g[i].Digest[:])
					next++
				}
				if err := s.PutDecisions(bg, ev, g); err != nil {
					b.Fatal(err)
				}
				puts++
			}
			b.ReportMetric(float64(puts*size)/time.Since(start).Seconds(), "decisions/s")
		})
	}
}

// BenchmarkSteer is one request's use of the table of loads (§6): read the
// room's loads and record the first pathway, for 10 000 sessions of one
// room in turn; in parallel, all in one room (its lock contended) and
// each goroutine in a room of its own.
func BenchmarkSteer(b *testing.B) {
	const n, sessions = 3, 10_000
	decideLeast := func(loads []uint32, _ uint64) (int, uint64, error) {
		first := 0
		for i, l := range loads {
			if l < loads[first] {
				first = i
			}
		}
		return first, 1 << 62, nil
	}
	b.Run("serial", func(b *testing.B) {
		l := NewLoads()
		room := hash("room")
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := l.Steer(bg, room, n, session(i%sessions), uint64(i), decideLeast); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel/one-room", func(b *testing.B) {
		l := NewLoads()
		room := hash("room")
		var clock atomic.Uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(clock.Add(1))
			for pb.Next() {
				if err := l.Steer(bg, room, n, session(i%sessions), 0, decideLeast); err != nil {
					b.Error(err)
					return
				}
				i += 7
			}
		})
	})
	b.Run("parallel/room-each", func(b *testing.B) {
		l := NewLoads()
		var rooms atomic.Uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			room := hash(fmt.Sprint("room ", rooms.Add(1)))
			i := 0
			for pb.Next() {
				if err := l.Steer(bg, room, n, session(i%sessions), 0, decideLeast); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
}

// BenchmarkRebuild is the work of serving a stored decision (§7.1, §9.2):
// Rebuild from its row and snapshot, and the whole of it from a Bolt file
// (Decision, EvidenceSnapshot, Rebuild).
func BenchmarkRebuild(b *testing.B) {
	for _, c := range sizeCases {
		sc := sizeScenario(b, c, c.window+3)
		rows, snaps, _ := signedRows(b, sc, 64, uint64(c.window+1)*scenario.Period, 1000)
		p, pd := sc.Policy, sc.Policy.Digest()
		b.Run("rebuild/"+c.String(), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := rows[i%len(rows)]
				if _, err := Rebuild(p, pd, r, snaps[r.Evidence].Body); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run("bolt/"+c.String(), func(b *testing.B) {
			s := openTestBolt(b, "")
			var ev []Evidence
			for _, e := range snaps {
				ev = append(ev, e)
			}
			if err := s.PutDecisions(bg, ev, rows); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r, err := s.Decision(bg, rows[i%len(rows)].Digest)
				if err != nil {
					b.Fatal(err)
				}
				body, err := s.EvidenceSnapshot(bg, r.Evidence)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Rebuild(p, pd, r, body); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkPrune removes 20 000 decisions in groups of chunk while a writer
// commits a group of 16 decisions at a time: it reports the decisions
// removed per second and the longest a writer's commit took meanwhile
// (issue 5: removed without stopping the service).
func BenchmarkPrune(b *testing.B) {
	const count = 20_000
	sc := sizeScenario(b, sizeCases[0], 8)
	base, snaps, _ := signedRows(b, sc, 1, 7*scenario.Period, 0)
	var ev []Evidence
	for _, e := range snaps {
		ev = append(ev, e)
	}
	rows := func(from, count int, t uint64) []Decision {
		g := make([]Decision, count)
		for i := range g {
			g[i] = base[0]
			g[i].T = t + uint64(from+i)
			binary.LittleEndian.PutUint64(g[i].Digest[:], uint64(from+i))
			g[i].Digest = sha256.Sum256(g[i].Digest[:])
		}
		return g
	}
	for _, chunk := range []int{256, defaultPruneChunk} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) {
			var rate float64
			var worst time.Duration
			for b.Loop() {
				s := openTestBolt(b, "", WithPruneChunk(chunk))
				old := rows(0, count, 0)
				for i := 0; i < count; i += 1000 {
					if err := s.PutDecisions(bg, ev, old[i:i+1000]); err != nil {
						b.Fatal(err)
					}
				}
				stop, finished := make(chan struct{}), make(chan time.Duration)
				go func() {
					var longest time.Duration
					defer func() { finished <- longest }()
					for k := 0; ; k++ {
						select {
						case <-stop:
							return
						default:
						}
						start := time.Now()
						if err := s.PutDecisions(bg, ev, rows(count+16*k, 16, 1<<40)); err != nil {
							b.Error(err)
							return
						}
						longest = max(longest, time.Since(start))
					}
				}()
				start := time.Now()
				st, err := s.Prune(bg, 1<<40, 1<<40)
				elapsed := time.Since(start)
				close(stop)
				worst = <-finished
				if err != nil || st.Decisions != count {
					b.Fatalf("pruned %+v, %v", st, err)
				}
				rate = float64(st.Decisions) / elapsed.Seconds()
			}
			b.ReportMetric(rate, "pruned/s")
			b.ReportMetric(float64(worst.Microseconds()), "worst-write-µs")
		})
	}
}

// BenchmarkLoadsGrowth is a room's table growing by -loads.growth fresh
// sessions, one Steer each, as a server's does when it gains sessions or
// when a restart's recount merges them back: the mean Steer, and the
// longest, which is the room's lock held longest while the table grew (a
// table kept in one slice copies every session it holds when it doubles).
func BenchmarkLoadsGrowth(b *testing.B) {
	const n = 3
	decide := func(loads []uint32, _ uint64) (int, uint64, error) {
		return int(loads[0]+loads[1]+loads[2]) % n, 1 << 62, nil
	}
	room := hash("room")
	for b.Loop() {
		b.StopTimer()
		l := NewLoads()
		runtime.GC()
		b.StartTimer()
		var longest time.Duration
		for i := range *loadsGrowth {
			t0 := time.Now()
			if err := l.Steer(bg, room, n, session(i), uint64(i), decide); err != nil {
				b.Fatal(err)
			}
			longest = max(longest, time.Since(t0))
		}
		b.ReportMetric(float64(longest.Microseconds()), "µs-longest")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N**loadsGrowth), "ns/steer")
}

var loadsGrowth = flag.Int("loads.growth", 4_000_000, "fresh sessions BenchmarkLoadsGrowth steers into one room")
