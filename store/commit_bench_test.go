package store

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
	base, ev := roomRows(b)
	for _, c := range []struct {
		sync, scanned bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		sync := c.sync
		name := fmt.Sprintf("sync=%v", sync)
		var opts []Option
		if c.scanned {
			name, opts = name+"/freelist=scanned", []Option{withNoFreelistSync()}
		}
		b.Run(name, func(b *testing.B) {
			s := openTestBolt(b, "", opts...)
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

// bigStore is how many decisions BenchmarkOpenLarge stores (issue 30:
// "answering within 1 s on a store of 3.75 M decisions").
var bigStore = flag.Int("store.big", 3_750_000, "decisions in BenchmarkOpenLarge's store")

// fillStore puts count decisions of one room in groups of 1024, unsynced,
// as the committer would have over days, and closes the store.
func fillStore(b *testing.B, path string, count int, opts ...Option) {
	s, err := Open(path, opts...)
	if err != nil {
		b.Fatal(err)
	}
	putRoomDecisions(b, s, count, 1024)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// putRoomDecisions puts count decisions of one room into s in groups of
// group, unsynced: copies of one signed row, 30 µs apart, each with a
// digest of its own.
func putRoomDecisions(b *testing.B, s *Bolt, count, group int) {
	base, ev := roomRows(b)
	s.db.NoSync = true
	defer func() { s.db.NoSync = false }()
	g := make([]Decision, group)
	for next := 0; next < count; {
		g = g[:min(len(g), count-next)]
		for i := range g {
			g[i] = base[0]
			g[i].T += 30 * uint64(next)
			binary.LittleEndian.PutUint64(g[i].Digest[:], uint64(next))
			g[i].Digest = sha256.Sum256(g[i].Digest[:])
			next++
		}
		if err := s.PutDecisions(bg, ev, g); err != nil {
			b.Fatal(err)
		}
	}
}

// roomRows is one signed row of the first size case's room and the
// evidence snapshots it names.
func roomRows(b *testing.B) ([]Decision, []Evidence) {
	sc := sizeScenario(b, sizeCases[0], 8)
	base, snaps, _ := signedRows(b, sc, 1, 7*scenario.Period, 0)
	var ev []Evidence
	for _, e := range snaps {
		ev = append(ev, e)
	}
	return base, ev
}

// BenchmarkOpenLarge is Open on a store of -store.big decisions (3.75 M by
// default), its freelist written at each commit (synced, as Open sets it)
// or not (bbolt's NoFreelistSync: found at Open by walking the pages):
// the time from Open's call to a store that answers, and the file's size.
func BenchmarkOpenLarge(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []Option
	}{{"freelist=synced", nil}, {"freelist=scanned", []Option{withNoFreelistSync()}}} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "big.db")
			fillStore(b, path, *bigStore, c.opts...)
			info, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				s, err := Open(path, c.opts...)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(info.Size())/(1<<20), "MiB")
		})
	}
}

// largeStore is how many decisions BenchmarkGroupCommitLarge's store holds
// before it measures.
var largeStore = flag.Int("store.large", 1_000_000, "decisions in BenchmarkGroupCommitLarge's store")

// BenchmarkGroupCommitLarge is BenchmarkGroupCommit's write, unsynced, on
// a store that holds -store.large decisions already, where the index of
// digests has runs of several levels (each a decision is written at), for
// fan-ins of the index's merges of 8 (the default) and 16; and a lookup
// of a decision by digest (Decision), which reads the runs.
func BenchmarkGroupCommitLarge(b *testing.B) {
	const size = 32
	base, ev := roomRows(b)
	for _, fanIn := range []int{defaultIndexFanIn, 16} {
		opt := []Option{withIndex(defaultIndexFlush, defaultIndexMargin, fanIn, defaultIndexBudget), withRunBlock(runBlock)}
		path := filepath.Join(b.TempDir(), "large.db")
		fillStore(b, path, *largeStore, opt...)
		s := openTestBolt(b, path, opt...)
		s.db.NoSync = true
		g := make([]Decision, size)
		next := uint64(*largeStore)
		digestOf := func(i uint64) [32]byte {
			d := base[0].Digest
			binary.LittleEndian.PutUint64(d[:], i)
			return sha256.Sum256(d[:])
		}
		b.Run(fmt.Sprintf("fanIn=%d/commit", fanIn), func(b *testing.B) {
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			cpu0, n := cpuTime(b), 0
			for b.Loop() {
				for i := range g {
					g[i] = base[0]
					g[i].T += 30 * next
					g[i].Digest = digestOf(next)
					next++
				}
				if err := s.PutDecisions(bg, ev, g); err != nil {
					b.Fatal(err)
				}
				n += size
			}
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(n), "cpu-µs/decision")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(n), "allocs/decision")
			b.ReportMetric(float64(len(s.ix.runs)), "runs")
		})
		b.Run(fmt.Sprintf("fanIn=%d/lookup", fanIn), func(b *testing.B) {
			i := uint64(0)
			for b.Loop() {
				if _, err := s.Decision(bg, digestOf(i*7919%uint64(*largeStore))); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkHeapSinceOpen is the heap a Bolt gathers by writing: a store
// written -store.since decisions in commits of 64 (the journal's applier
// writes some 16 to 128 a commit), against the same file opened again.
// What the reopen gives back is what grew with the writes since Open:
// bbolt's freelist keeps, for each page it handed out from its free pages,
// the transaction that took it, until the page is freed again (SPEC-NOTES,
// the soak). Reported per page of the file and per decision.
func BenchmarkHeapSinceOpen(b *testing.B) {
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "since.db")
		s, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		putRoomDecisions(b, s, *sinceOpen, 64)
		if err := s.settle(bg); err != nil { // every group applied
			b.Fatal(err)
		}
		written := heap()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		s, err = Open(path)
		if err != nil {
			b.Fatal(err)
		}
		reopened := heap()
		info, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		grown := float64(written) - float64(reopened)
		b.ReportMetric(grown/(float64(info.Size())/float64(os.Getpagesize())), "heap-B/page")
		b.ReportMetric(grown/float64(*sinceOpen), "heap-B/decision")
		b.ReportMetric(float64(info.Size())/(1<<20), "MiB")
	}
}

// sinceOpen is the decisions BenchmarkHeapSinceOpen writes.
var sinceOpen = flag.Int("store.since", 500_000, "decisions BenchmarkHeapSinceOpen writes after Open")
