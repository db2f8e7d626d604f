package bench

// The phases: a server under load, saturated in turns with the signing
// floor or paced at half its rate, with what its metrics say it answered
// and stored in each phase.

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchServed is one server's figures over one kind of phase.
type benchServed struct {
	rate     float64       // answers a second
	cpu      time.Duration // the server's CPU per answer
	gen      time.Duration // the load generator's CPU per answer
	busy     float64       // the server's CPU seconds over the phases' wall seconds, per core it may use
	pct      [3]time.Duration
	failed   uint64
	firstErr error
	check    benchCheck
	wrk      bool // wrk drove it
}

// benchCheck is what a server with metrics counted over some phases: the
// manifests it answered 200 on the steering route, the decisions its group
// commits stored, and the answers the generator received (wrk leaves the
// requests in flight when its time is up unread: as many as its
// connections at most).
type benchCheck struct {
	ok                         bool
	answered, stored, received uint64
	commitFailures             uint64
}

func (c *benchCheck) add(d benchCheck) {
	c.ok = d.ok
	c.answered += d.answered
	c.stored += d.stored
	c.received += d.received
	c.commitFailures += d.commitFailures
}

// lost says whether a decision answered was not stored, or one stored
// was not answered.
func (c benchCheck) lost() bool {
	return c.ok && (c.answered != c.stored || c.commitFailures != 0 || c.received > c.answered)
}

// benchServer is one server under one load, and what the phases of one
// kind measured so far.
type benchServer struct {
	name    string
	c       *benchChild
	l       *benchLoad
	script  string // the load's wrk script, "" to drive it from Go alone
	metrics bool   // the server has /metrics (waisteer's servers, not the plain ones)
	conns   int
	cores   int // the cores its child may run on; 0: serverCores

	answered uint64
	elapsed  time.Duration
	cpu, gen time.Duration
	cpuOK    bool
	failed   uint64
	firstErr error
	lat      []time.Duration // the Go generator's, merged over turns
	wrkPct   [3]float64      // wrk: p50 weighted by answers, the worst turn's p99 and p999
	wrkN     uint64
	check    benchCheck
}

func (b *bencher) newServer(name string, c *benchChild, l *benchLoad, metrics bool) (*benchServer, error) {
	s := &benchServer{name: name, c: c, l: l, metrics: metrics, conns: len(l.conns), cpuOK: true}
	if b.wrk != "" {
		var err error
		if s.script, err = l.writeWrkScript(b.tmp); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// benchCounts are a waisteer server's counters of the steering route's
// 200s that made a decision, of decisions committed, of failed commits and
// of records accepted.
type benchCounts struct{ answered, stored, failures, records uint64 }

func readCounts(addr string) (benchCounts, bool) {
	m, err := benchGet(context.Background(), addr, "/metrics")
	if err != nil {
		return benchCounts{}, false
	}
	return parseCounts(m)
}

// parseCounts reads the counters from the text of /metrics.
func parseCounts(m []byte) (benchCounts, bool) {
	var c benchCounts
	found := 0
	var pools uint64
	for name, v := range metricSamples(m) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch {
		case name == `waisteer_http_requests_total{route="steer",code="200"}`:
			c.answered = uint64(f)
		case name == "waisteer_commit_group_size_sum":
			c.stored = uint64(f)
			found++
		case name == "waisteer_commit_failures_total":
			c.failures = uint64(f)
		case strings.HasPrefix(name, "waisteer_records_total{") && strings.Contains(name, `outcome="accepted"`):
			c.records += uint64(f)
		case strings.HasPrefix(name, "waisteer_pool_manifests_total{"):
			pools += uint64(f)
		}
	}
	// A pool's manifests (the demo's) go through the steering route's
	// counter but make no decision to store.
	c.answered -= min(pools, c.answered)
	return c, found == 1
}

// settledCounts reads the counters until two reads agree and every
// decision answered is stored, or for 3 s: the answers wrk left in
// flight are still being committed when it exits.
func settledCounts(addr string) (benchCounts, bool) {
	last, ok := readCounts(addr)
	for deadline := time.Now().Add(3 * time.Second); ok && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		c, ok2 := readCounts(addr)
		if !ok2 {
			return c, false
		}
		if c == last && c.answered == c.stored {
			break
		}
		last = c
	}
	return last, ok
}

// phase runs one phase of load on s: closed loop when rate is 0 (with wrk
// when there is one), otherwise paced at rate by the Go generator.
func (b *bencher) phase(ctx context.Context, s *benchServer, d time.Duration, rate float64) (benchPhase, time.Duration, time.Duration, bool, benchCheck, error) {
	var before benchCounts
	check := benchCheck{}
	if s.metrics {
		before, check.ok = settledCounts(s.c.addr)
	}
	c0, ok0 := s.c.cpu()
	g0 := selfCPU()
	var ph benchPhase
	var gen time.Duration
	if rate == 0 && s.script != "" {
		var err error
		if ph, gen, err = b.runWrk(ctx, s.c.addr, s.script, s.conns, d); err != nil {
			return ph, 0, 0, false, check, err
		}
		s.l.answered.Add(ph.answered)
	} else {
		ph = s.l.run(ctx, d, rate)
		gen = selfCPU() - g0
	}
	c1, ok1 := s.c.cpu()
	if check.ok {
		after, ok := settledCounts(s.c.addr)
		check.ok = ok
		check.answered, check.stored, check.commitFailures = after.answered-before.answered, after.stored-before.stored, after.failures-before.failures
		check.received = ph.answered
	}
	return ph, c1 - c0, gen, ok0 && ok1, check, ctx.Err()
}

// benchRound is the longest turn of saturate.
const benchRound = 2 * time.Second

// saturate drives each server at saturation (closed loop) for d in all, in
// turns of at most benchRound: whatever else the machine runs, which comes
// and goes, then weighs on each server alike.
func (b *bencher) saturate(ctx context.Context, d time.Duration, servers ...*benchServer) error {
	rounds := max(1, int((d+benchRound-1)/benchRound))
	for range rounds {
		for _, s := range servers {
			ph, cpu, gen, ok, check, err := b.phase(ctx, s, d/time.Duration(rounds), 0)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.answered += ph.answered
			s.elapsed += ph.elapsed
			s.cpu += cpu
			s.gen += gen
			s.cpuOK = s.cpuOK && ok
			s.failed += ph.failed
			if s.firstErr == nil {
				s.firstErr = ph.firstErr
			}
			if s.script != "" {
				s.wrkPct[0] += float64(ph.pct[0]) * float64(ph.answered)
				s.wrkPct[1] = max(s.wrkPct[1], float64(ph.pct[1]))
				s.wrkPct[2] = max(s.wrkPct[2], float64(ph.pct[2]))
				s.wrkN += ph.answered
			} else {
				s.lat = append(s.lat, ph.latencies...)
			}
			s.check.add(check)
		}
	}
	return nil
}

// served takes what saturate measured on s, and clears it for the next
// kind of phase.
func (b *bencher) served(s *benchServer) (benchServed, error) {
	out := benchServed{failed: s.failed, firstErr: s.firstErr, check: s.check, wrk: s.script != ""}
	if s.answered == 0 {
		return out, fmt.Errorf("%s: no answer at saturation: %v", s.name, s.firstErr)
	}
	out.rate = float64(s.answered) / s.elapsed.Seconds()
	// The CPU is charged to the answers the server gave, which with wrk
	// include those it left in flight.
	n := s.answered
	if s.check.ok && s.check.answered > 0 {
		n = s.check.answered
	}
	if s.cpuOK {
		out.cpu = s.cpu / time.Duration(n)
		out.busy = s.cpu.Seconds() / s.elapsed.Seconds() / float64(b.coresOf(s))
	}
	out.gen = s.gen / time.Duration(s.answered)
	if s.script != "" {
		out.pct = [3]time.Duration{time.Duration(s.wrkPct[0] / float64(max(s.wrkN, 1))), time.Duration(s.wrkPct[1]), time.Duration(s.wrkPct[2])}
	} else {
		slices.Sort(s.lat)
		out.pct = [3]time.Duration{quantile(s.lat, 0.50), quantile(s.lat, 0.99), quantile(s.lat, 0.999)}
	}
	*s = benchServer{name: s.name, c: s.c, l: s.l, script: s.script, metrics: s.metrics, conns: s.conns, cores: s.cores, cpuOK: true}
	return out, nil
}

// serverCores are the cores a server child may run on.
func (b *bencher) serverCores() int {
	if b.pin.on {
		return 1
	}
	return runtime.NumCPU()
}

// coresOf are the cores s's child may run on.
func (b *bencher) coresOf(s *benchServer) int {
	if s.cores > 0 {
		return s.cores
	}
	return b.serverCores()
}

// pace is a phase paced at rate by the Go generator, for the latency.
func (b *bencher) pace(ctx context.Context, s *benchServer, rate float64) (benchServed, error) {
	ph, cpu, gen, ok, check, err := b.phase(ctx, s, b.o.Duration, rate)
	out := benchServed{rate: ph.rate(), pct: ph.pct, failed: ph.failed, firstErr: ph.firstErr, check: check}
	if ph.answered > 0 {
		if ok {
			out.cpu = cpu / time.Duration(ph.answered)
			out.busy = cpu.Seconds() / ph.elapsed.Seconds() / float64(b.coresOf(s))
		}
		out.gen = gen / time.Duration(ph.answered)
	}
	return out, err
}
