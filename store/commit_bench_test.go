package store

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/scenario"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGroupCommit is the committer's write as a server makes it under
// load (issue 30, "bigger and cheaper group commits"): groups of 32
// decisions of one room, each t later than the last (the loads table makes
// a room's t strictly increasing), 30 µs apart, as a saturated core signs
// them. It reports the wall and the process's CPU per decision (the log's
// hasher included, which runs on a goroutine of its own) and the
// allocations per decision. sync=false sets bbolt's NoSync, so that the
// CPU of the commit is read without the disk's share.
func BenchmarkGroupCommit(b *testing.B) {
	const size = 32
	sc := sizeScenario(b, sizeCases[0], 8)
	base, snaps, _ := signedRows(b, sc, 1, 7*scenario.Period, 0)
	var ev []Evidence
	for _, e := range snaps {
		ev = append(ev, e)
	}
	for _, sync := range []bool{true, false} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			s := openTestBolt(b, "")
			s.db.NoSync = !sync
			g := make([]Decision, size)
			next := uint64(0)
			put := func() {
				for i := range g {
					g[i] = base[0]
					g[i].T += 30 * next
					binary.LittleEndian.PutUint64(g[i].Digest[:], next)
					g[i].Digest = sha256.Sum256(g[i].Digest[:])
					next++
				}
				if err := s.PutDecisions(bg, ev, g); err != nil {
					b.Fatal(err)
				}
			}
			// Past the first runs and merges of the index, and the first
			// flushes of the log: the steady state.
			for range 4096 / size {
				put()
			}
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			cpu0, start := cpuTime(b), time.Now()
			n := 0
			for b.Loop() {
				put()
				n += size
			}
			wall, cpu := time.Since(start), cpuTime(b)-cpu0
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(wall.Microseconds())/float64(n), "µs/decision")
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/decision")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(n), "allocs/decision")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(n), "B/decision")
		})
	}
}
