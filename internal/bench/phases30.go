package bench

// The phases issue 30 added: the server on two cores, a saturated turn of
// its own under a CPU profile (the cost per stage), and records posted at
// a paced 1 000 a second.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// benchTwoCores is the cpu list of the two-core phase.
const benchTwoCores = "0,1"

// twoCores measures the server behind engine over r on two cores (issue
// 30: "with GOMAXPROCS=2, CPU per decision within 1.1x the one-core
// figure"): a fresh store, its child on cores 0 and 1 with GOMAXPROCS=2,
// saturated at the least connections. The load generator then shares
// core 1 with it (the report says so); its CPU per decision is the
// server's own, read from /proc as in the one-core phases.
func (b *bencher) twoCores(ctx context.Context, r *benchRoom, engine string, one *benchRealRun) (*benchRealRun, error) {
	hc := b.o.halfConns()
	b.logf("steering, %d pathways, behind %s, on cores %s with GOMAXPROCS=2", one.n, engine, benchTwoCores)
	s, err := b.startReal(ctx, r, engine, benchTwoCores, []string{"GOMAXPROCS=2"}, []int{hc})
	if err != nil {
		return nil, err
	}
	srv := s.loads[hc]
	srv.cores = 2
	run := &benchRealRun{n: one.n, engine: engine, storeFile: s.storeFile(), dir: s.dir, path: s.r.path, sat: map[int]*benchServed{}, cores: 2, procs: s.c.procs}
	g0, _ := benchGroups(s.c.addr)
	if err := b.saturate(ctx, b.o.Duration, srv); err != nil {
		s.close()
		return nil, err
	}
	run.groupSize = benchGroupSize(s.c.addr, g0)
	sat, err := b.served(srv)
	if err != nil {
		s.close()
		return nil, err
	}
	run.sat[hc] = &sat
	b.logf("two cores, %d conns: %s decisions/s, %s of CPU each (one core: %s)", hc, benchRate(sat.rate), benchDur(sat.cpu), benchDur(one.sat[hc].cpu))
	if run.stages, err = b.profiledTurn(ctx, s, run); err != nil {
		s.close()
		return nil, err
	}
	return run, s.finish(run)
}

// profiledTurn saturates the server at the least connections alone, for
// whole seconds of about -d, under a CPU profile of the same seconds: a
// turn of its own, after the measured ones, so that the profile spans the
// server's work alone and the profiler's cost is in no figure of the
// tables. It returns the cost per decision by stage (stages.go), and
// keeps the profiles in the profile directory when there is one.
func (b *bencher) profiledTurn(ctx context.Context, s *benchReal, run *benchRealRun) (*benchStages, error) {
	if s.c.pprof == "" {
		return nil, nil
	}
	hc := b.o.halfConns()
	srv := s.loads[hc]
	secs := max(1, int((b.o.Duration+time.Second/2)/time.Second))
	before, _ := settledCounts(s.c.addr)
	cpu0, cpuOK := s.c.cpu()
	var prof []byte
	var perr error
	var wg sync.WaitGroup
	wg.Go(func() {
		prof, perr = benchGet(ctx, s.c.pprof, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs))
	})
	time.Sleep(20 * time.Millisecond) // the profile begins as its request arrives
	err := b.saturate(ctx, time.Duration(secs)*time.Second, srv)
	wg.Wait()
	cpu1, cpuOK1 := s.c.cpu()
	b.served(srv) // clears what the turn measured: it is in no table
	if err != nil {
		return nil, err
	}
	after, _ := settledCounts(s.c.addr)
	decisions := after.answered - min(before.answered, after.answered)
	name := fmt.Sprintf("steer-%d-%s", run.n, benchFileName(s.engine))
	if run.cores == 2 {
		name += "-2cores"
	}
	if perr != nil {
		b.logf("profile: %v", perr)
		return nil, nil
	}
	if b.o.Profile != "" {
		file := filepath.Join(b.o.Profile, "cpu-"+name+".pprof")
		if err := os.WriteFile(file, prof, 0o644); err != nil {
			return nil, err
		}
		run.profiled = append(run.profiled, file)
		for _, kind := range []string{"allocs", "mutex"} {
			file := filepath.Join(b.o.Profile, kind+"-"+name+".pprof")
			if err := benchFetch(s.c.pprof, "/debug/pprof/"+kind, file); err == nil {
				run.profiled = append(run.profiled, file)
			}
		}
	}
	p, err := parseProfile(prof)
	if err != nil {
		b.logf("the CPU profile does not read: %v", err)
		return nil, nil
	}
	st := newBenchStages(p, decisions)
	if cpuOK && cpuOK1 {
		st.cpu = cpu1 - cpu0
	}
	b.logf("profiled turn: %d decisions, %s of samples each, %s of CPU from /proc", decisions, benchDur(st.perDecision(st.total)), benchDur(st.perDecision(st.cpu)))
	return st, nil
}

// benchRecordsRate is issue 30's rate of records: 10 000 hops posting a
// record each every 10 s.
const benchRecordsRate = 1000.0

// benchPaced is the records phase paced at benchRecordsRate.
type benchPaced struct {
	target, rate    float64
	conns           int
	records, failed uint64
	err             error
	elapsed         time.Duration
	cpu             time.Duration // the server's over the phase
	fraction        float64       // cpu / elapsed: the share of one core
	p99             time.Duration // a POST's, from its due time
	profiled        []string
	// plain is the plain server (b) given the same POSTs right after, at
	// the same pace, pinned as the server: what the machine charges for
	// a thousand POSTs a second to a server that checks and stores
	// nothing. nil when (b) is not running (the rooms after the first).
	plain *benchPaced
}

// recordsPaced posts benchRecordsRate records a second for -d, one record
// per POST as each hop posts its own, from IngestHops connections (each
// carrying the POSTs of many hops), each POST due at a fixed interval; it
// reads the server's CPU over the phase as a share of one core. The
// records are of periods older than any other phase's, each new. Then,
// when plain is not nil, it posts the same bodies to the plain server (b)
// the same way.
func (b *bencher) recordsPaced(ctx context.Context, s *benchReal, plain *benchServer) (*benchPaced, error) {
	r, p := s.r, s.r.sc.Policy
	d := b.o.Duration
	count := int(benchRecordsRate * d.Seconds())
	hops := uint64(len(r.hops))
	end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
	first := end - p.WindowUs - 4*p.PeriodUs - uint64(b.o.IngestPool[0]+b.o.IngestPool[1]+2*len(r.hops))/hops*p.PeriodUs
	first -= (uint64(count)/hops + 2) * p.PeriodUs
	bodies := make([][]byte, count)
	for x := range bodies {
		bodies[x] = r.record(x%len(r.hops), first+uint64(x)/hops*p.PeriodUs, nil)
	}
	conns := min(b.o.IngestHops, count)
	b.logf("records: %d at %.0f a second, one per POST, from %d connections", count, benchRecordsRate, conns)
	path := r.recordsPath()
	wait := b.profile(s.c, fmt.Sprintf("records-paced-%d", len(r.ids)), d, false)
	pc := postPaced(ctx, s.c, path, bodies, conns)
	pc.profiled = wait()
	b.logf("records at %s/s: the server's CPU %.3f of a core, POST p99 %s", benchRate(pc.rate), pc.fraction, benchDur(pc.p99))
	if plain != nil && ctx.Err() == nil {
		pc.plain = postPaced(ctx, plain.c, path, bodies, conns)
		b.logf("the same POSTs to the plain server (b): its CPU %.3f of a core", pc.plain.fraction)
	}
	return pc, ctx.Err()
}

// postPaced posts bodies to c at benchRecordsRate from conns connections,
// each POST due at a fixed interval, and reads c's CPU over it.
func postPaced(ctx context.Context, c *benchChild, path string, bodies [][]byte, conns int) *benchPaced {
	count := len(bodies)
	pc := &benchPaced{target: benchRecordsRate, conns: conns}
	interval := time.Duration(float64(conns) / benchRecordsRate * float64(time.Second))
	c0, ok0 := c.cpu()
	start := time.Now()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for ci := range conns {
		wg.Go(func() {
			conn := &benchConn{addr: c.addr}
			defer conn.close()
			due := start.Add(time.Duration(ci) * interval / time.Duration(conns))
			var mine []time.Duration
			var ok, failed uint64
			var first error
			for k := ci; k < count && ctx.Err() == nil; k += conns {
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
				}
				status, body, err := benchPost(conn, path, bodies[k])
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("status %d: %s", status, bytes.TrimSpace(body))
				}
				if err != nil {
					failed++
					if first == nil {
						first = err
					}
				} else {
					ok++
					mine = append(mine, time.Since(due))
				}
				due = due.Add(interval)
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			pc.records += ok
			pc.failed += failed
			if pc.err == nil {
				pc.err = first
			}
		})
	}
	wg.Wait()
	pc.elapsed = time.Since(start)
	c1, ok1 := c.cpu()
	pc.rate = float64(pc.records) / pc.elapsed.Seconds()
	if ok0 && ok1 {
		pc.cpu = c1 - c0
		pc.fraction = pc.cpu.Seconds() / pc.elapsed.Seconds()
	}
	slices.Sort(lat)
	pc.p99 = quantile(lat, 0.99)
	return pc
}
