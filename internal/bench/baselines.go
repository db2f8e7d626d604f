package bench

import (
	"errors"
	bolt "go.etcd.io/bbolt"

	"context"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// benchGroups reads the group commits' sum and count from the server's
// metrics.
func benchGroups(addr string) ([2]float64, bool) {
	var g [2]float64
	m, err := benchGet(context.Background(), addr, "/metrics")
	if err != nil {
		return g, false
	}
	found := 0
	for line := range strings.SplitSeq(string(m), "\n") {
		for k, name := range []string{"waisteer_commit_group_size_sum ", "waisteer_commit_group_size_count "} {
			if v, ok := strings.CutPrefix(line, name); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					g[k] = f
					found++
				}
			}
		}
	}
	return g, found == 2
}

// benchGroupSize is the decisions per group commit the server at addr
// wrote since g0 (benchGroups), 0 where its metrics do not read.
func benchGroupSize(addr string, g0 [2]float64) float64 {
	g1, ok := benchGroups(addr)
	if !ok {
		return 0
	}
	return (g1[0] - g0[0]) / max(g1[1]-g0[1], 1)
}

func benchFileSize(name string) int64 {
	fi, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// benchStored reads a stopped server's bbolt file: the decisions it holds
// (its rows) and the bytes in use in the buckets that hold decisions (their
// rows, the index by digest, the contexts and the evidence snapshots).
func benchStored(path string) (uint64, float64, error) {
	stored, inUse, _, err := benchStoredLogged(path)
	return stored, inUse, err
}

// benchStoredLogged is benchStored with the leaves of the rooms' logs: the
// sum of log_sizes (a server that stopped cleanly has written every
// pending leaf).
func benchStoredLogged(path string) (uint64, float64, uint64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, 0, 0, err
	}
	defer db.Close()
	var stored, leaves uint64
	var inUse int
	err = db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket([]byte("log_sizes")); bk != nil {
			bk.ForEach(func(_, v []byte) error {
				if len(v) == 8 {
					leaves += binary.BigEndian.Uint64(v)
				}
				return nil
			})
		}
		for _, name := range []string{"decisions", "decision_digests", "decision_runs", "decision_run_list", "contexts", "context_ids", "snapshots", "snapshot_bodies", "log_tiles", "log_sizes", "key_epochs"} {
			bk := tx.Bucket([]byte(name))
			if bk == nil {
				continue // a layout without it
			}
			s := bk.Stats()
			inUse += s.LeafInuse + s.BranchInuse
			if name == "decisions" {
				stored = uint64(s.KeyN)
			}
		}
		return nil
	})
	return stored, float64(inUse), leaves, err
}

// floorSeed is the seed of the key that (a) and the floors sign with.
var floorSeed = [sig.SeedSize]byte{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}

// benchBare is the CPU time of one bare Ed25519 signature of msg, made as
// the server's key makes it (sig.PrivateKey), on one thread.
func benchBare(msg []byte, d time.Duration) time.Duration {
	key := sig.NewPrivateKey(floorSeed)
	per, _ := perOp(d, func() error {
		key.SignRaw(msg)
		return nil
	})
	return per
}

// benchBareStd is benchBare through crypto/ed25519, the same bytes by
// another library: the floor's signature until stop 48 (sig/sign.go says
// why the server no longer signs through it).
func benchBareStd(msg []byte, d time.Duration) time.Duration {
	key := ed25519.NewKeyFromSeed(floorSeed[:])
	per, _ := perOp(d, func() error {
		ed25519.Sign(key, msg)
		return nil
	})
	return per
}

// benchRecordCheck is the CPU time of what the records route does first
// with each record, on one thread: parse it and check it
// (evidence.Record.Check, its signature verified as COMPANION §2 has it).
// One core accepts at most one record per this time, whatever else the
// route costs.
func benchRecordCheck(raw []byte, room sig.Hash, d time.Duration) (time.Duration, error) {
	per, err := perOp(d, func() error {
		rec, err := evidence.ParseRecord(raw)
		if err == nil {
			err = rec.Check(room)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("the records' baseline: %w", err)
	}
	return per, nil
}

// perOp runs op on one locked thread, in multiples of 16, for at least d,
// and returns the thread's CPU time per run (the wall time where the
// thread's CPU time cannot be read); it stops at op's first error.
func perOp(d time.Duration, op func() error) (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, okc := threadCPU()
	start := time.Now()
	n := 0
	for n%16 != 0 || time.Since(start) < d {
		if err := op(); err != nil {
			return 0, err
		}
		n++
	}
	c1, _ := threadCPU()
	if !okc {
		return time.Since(start) / time.Duration(n), nil
	}
	return (c1 - c0) / time.Duration(n), nil
}

// benchBareAll is benchBare on every core at once (GOMAXPROCS threads):
// the CPU time of a signature when, as in the server at saturation, every
// core is busy and shares its caches (and, with SMT, its execution units)
// with another.
func benchBareAll(msg []byte, d time.Duration) time.Duration {
	n := runtime.GOMAXPROCS(0)
	each := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { each[i] = benchBare(msg, d) })
	}
	wg.Wait()
	var sum time.Duration
	for _, c := range each {
		sum += c
	}
	return sum / time.Duration(n)
}

// threadCPU is the calling thread's CPU time (RUSAGE_THREAD, Linux).
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// benchEvidenceUpdate is the cost of taking one more record into a
// pathway's evidence when the pathway's window holds w records: the index
// takes it (evidence.Index.Add) and the ranking computes the pathway again
// (decision.Ranking.Refresh, §5). The pathway's two hops each hold w/2
// records that tile the window (§5.2); each record added is another of the
// same span, as a late or repeated record is.
func benchEvidenceUpdate(w int, least time.Duration) (benchEvidence, error) {
	r, err := newBenchRoom(3, 1)
	if err != nil {
		return benchEvidence{}, err
	}
	p := r.sc.Policy
	t := 1000*p.PeriodUs + p.LagUs + 1
	a, b := evidence.PolicyWindow(p, t)
	per := uint64(max(w/2, 1))
	span := (b - a) / per
	entry := func(h int, start, end uint64, sessions uint32) (evidence.Entry, error) {
		i, j := r.hops[h][0], r.hops[h][1]
		rec := r.sc.Record(i, j, start, end)
		rec.Sessions = sessions
		parsed, err := evidence.ParseRecord(evidence.SignRecord(rec, r.sc.HopKeys[i][j]))
		if err != nil {
			return evidence.Entry{}, err
		}
		return evidence.Entry{Digest: parsed.Digest(), Record: parsed}, nil
	}
	var base []evidence.Entry
	for h := range r.hops {
		if r.hops[h][0] == 0 {
			for k := range per {
				e, err := entry(h, a+k*span, a+(k+1)*span, 10)
				if err != nil {
					return benchEvidence{}, err
				}
				base = append(base, e)
			}
			continue
		}
		for s := a; s < b; s += p.PeriodUs {
			e, err := entry(h, s, s+p.PeriodUs, 10)
			if err != nil {
				return benchEvidence{}, err
			}
			base = append(base, e)
		}
	}
	k := max(w/10, 10)
	var more []evidence.Entry
	for x := range k {
		e, err := entry(x%2, a+uint64(x/2)%per*span, a+(uint64(x/2)%per+1)*span, uint32(11+x))
		if err != nil {
			return benchEvidence{}, err
		}
		more = append(more, e)
	}
	var spent time.Duration
	ops := 0
	for spent < least || ops < 100 {
		x := evidence.NewIndex()
		for _, e := range base {
			x.Add(e)
		}
		rk, err := decision.RankAt(p, p.Digest(), t, x)
		if err != nil {
			return benchEvidence{}, err
		}
		start := time.Now()
		for _, e := range more {
			if x.Add(e) {
				if rk, err = rk.Refresh(x, e.Record); err != nil {
					return benchEvidence{}, err
				}
			}
		}
		spent += time.Since(start)
		ops += len(more)
	}
	return benchEvidence{window: int(2 * per), perOp: spent / time.Duration(ops)}, nil
}

// benchSessionMemory is the heap a live session takes in the table of
// loads (store.MemLoads): the heap's growth over n sessions, each steered
// once, divided by n.
func benchSessionMemory(n, pathways int) benchSessions {
	ctx := context.Background()
	l := store.NewLoads()
	room := sig.Hash{1}
	const now = 1 << 50
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := range n {
		var s report.Session
		binary.LittleEndian.PutUint64(s[:], uint64(i)+1)
		binary.LittleEndian.PutUint64(s[8:], 0x9e3779b97f4a7c15*uint64(i+1))
		l.Steer(ctx, room, pathways, s, now, func([]uint32, uint64) (int, uint64, error) {
			return i % pathways, now + 320_000_000, nil
		})
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if got := l.Sessions(room); got != n {
		return benchSessions{sessions: n, pathways: pathways, bytes: math.NaN()}
	}
	runtime.KeepAlive(l)
	return benchSessions{sessions: n, pathways: pathways, bytes: float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)}
}

// The machine.

func benchMachine() []string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				mem = fmt.Sprintf(", %.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	kernel := runtime.GOOS
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return []string{
		fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d)%s", model, runtime.NumCPU(), runtime.GOMAXPROCS(0), mem),
		fmt.Sprintf("%s, %s %s/%s", kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH),
	}
}

func benchLoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// benchFsync probes the disk in dir for d: 4 KiB writes over a file
// written as zeros beforehand, each followed by fdatasync, as the store's
// journal writes; its median is the least each durable commit costs, its
// tail what a durable answer waits for now and then.
func benchFsync(dir string, d time.Duration) benchDisk {
	var dk benchDisk
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return dk
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const size = 4 << 20
	if _, err := f.WriteAt(make([]byte, size), 0); err != nil || f.Sync() != nil {
		return dk
	}
	page := make([]byte, 4096)
	var ts []time.Duration
	began := time.Now()
	for off := int64(0); len(ts) < 21 || time.Since(began) < d; off = (off + 4096) % size {
		start := time.Now()
		if _, err := f.WriteAt(page, off); err != nil {
			return dk
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil && !errors.Is(err, syscall.EINTR) {
			return dk
		}
		ts = append(ts, time.Since(start))
	}
	slices.Sort(ts)
	return benchDisk{n: len(ts), over: time.Since(began), pct: [4]time.Duration{quantile(ts, 0.5), quantile(ts, 0.99), quantile(ts, 0.999), ts[len(ts)-1]}}
}

// benchDisk is the disk's probe: how many syncs, and their p50, p99,
// p999 and longest.
type benchDisk struct {
	n    int
	over time.Duration
	pct  [4]time.Duration
}

type benchEvidence struct {
	window int
	perOp  time.Duration
}

type benchSessions struct {
	sessions, pathways int
	bytes              float64
}
