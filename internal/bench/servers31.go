package bench

// `waisteer bench -servers` (issue 31, "Servers that add up"): one server
// on bbolt, then one, two and three servers on one PostgreSQL that the
// bench starts as the tests start theirs (internal/pgtest), each row on a
// fresh database. Every server of a row has the same room, policy and
// keys (issue 15: servers on one database share a room), its own load
// with the connections one server alone is measured at (a wrk each where
// wrk is installed), and all are saturated at once: each server is loaded
// as one alone is, so that the rows compare a room's capacity with one,
// two and three servers (SPEC-NOTES, "Issue 31": an audience of a fixed
// size shared by more servers shrinks each one's group commits). The CPU per decision is the servers' and
// every PostgreSQL process's together, from /proc; the bytes per decision
// are each table's growth over the phase (pg_total_relation_size: the
// table, its indexes and TOAST) over the decisions it stored; what other
// servers cost a group is the excess of its round trips
// (waisteer_pg_round_trip_seconds) over one server's: no lock is shared
// since each server has its own log (schema 5), so the excess is the
// database's contention alone.
// The bench talks to the servers over HTTP only, and to PostgreSQL only
// for the tables' sizes and the decisions' count: nothing here depends on
// the layout of the log.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/pgtest"
	"github.com/waisteer/waisteer/verify/audit"
	"github.com/waisteer/waisteer/verify/recount"
)

// benchDSNEnv is the environment variable the servers of a row read their
// DSN from ([store] dsn_env).
const benchDSNEnv = "WAISTEER_BENCH_DSN"

// benchServerCounts are the rows on PostgreSQL: issue 31's one, two and
// three servers on one database.
var benchServerCounts = []int{1, 2, 3}

// benchSumCount is a histogram family's sum and count, over its series.
type benchSumCount struct {
	sum   float64
	count uint64
}

func (h benchSumCount) minus(o benchSumCount) benchSumCount {
	return benchSumCount{sum: h.sum - o.sum, count: h.count - min(o.count, h.count)}
}

// mean is the mean of the observations; 0 when there were none.
func (h benchSumCount) mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count)
}

// parseSumCount reads family's _sum and _count from the text of /metrics,
// adding up the series of every label set; false when it has neither.
func parseSumCount(m []byte, family string) (benchSumCount, bool) {
	var h benchSumCount
	found := false
	for name, v := range metricSamples(m) {
		switch base, _, _ := strings.Cut(name, "{"); base {
		case family + "_sum":
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				h.sum += f
				found = true
			}
		case family + "_count":
			var n uint64
			if _, err := fmt.Sscan(v, &n); err == nil {
				h.count += n
				found = true
			}
		}
	}
	return h, found
}

// parseCounter is the family's value in the text of /metrics, added up
// over its series; 0 when it has none.
func parseCounter(m []byte, family string) uint64 {
	var n uint64
	for name, v := range metricSamples(m) {
		var x uint64
		base, _, _ := strings.Cut(name, "{")
		if _, err := fmt.Sscan(v, &x); err == nil && base == family {
			n += x
		}
	}
	return n
}

// metricSamples yields each sample of the text of /metrics: its name
// with its labels, and its value's text.
func metricSamples(m []byte) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for line := range strings.SplitSeq(string(m), "\n") {
			name, v, ok := strings.Cut(line, " ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			if !yield(name, v) {
				return
			}
		}
	}
}

// benchServersRow is one row of issue 31's table.
type benchServersRow struct {
	servers  int
	postgres bool
	// pinned: the server on core 0, and wrk and PostgreSQL on core 1,
	// so that the server's rate is not the database's CPU taken from it
	// (issue 31: one server on PostgreSQL beside bbolt, the database on a
	// machine of its own as in production, here on a core of its own).
	pinned  bool
	conns   []int // each server's connections
	players int   // in all
	procs   int   // the servers' GOMAXPROCS, as the first printed it

	rate     float64       // the servers' answers a second, added up
	p99      time.Duration // over every answer (the Go generator), or the worst server's (wrk)
	elapsed  time.Duration
	failed   uint64
	firstErr error
	check    benchCheck // the phase: 200s (the servers' counters), decisions stored, answers read

	cpuServers, cpuPG time.Duration // over the phase
	cpuGen            time.Duration // the load generators' (wrk's and this process's)
	cpuBusy           time.Duration // the whole machine's, from /proc/stat
	cpuOK             bool
	idle, steal       float64       // the machine's shares over the phase
	probe             time.Duration // the speed probe's median over the phase (speed.go)

	tables     map[string]int64 // PostgreSQL: each table's growth over the phase, in bytes
	decisions  uint64           // PostgreSQL: the decisions' rows after the phase
	fileGrowth int64            // bbolt: the file's growth over the phase
	inUse      float64          // bbolt: the bytes in use in the decisions' buckets once stopped, per decision held

	lock, groups benchSumCount // over the phase, every server's: waisteer_pg_round_trip_seconds, waisteer_commit_group_size
	lockOK       bool
	waits        [2]uint64 // over the phase: the decisions that waited for the shared loads to be current (δ), and those refused

	// The store once its servers stopped: its decisions beside the
	// servers' 200s over their lives (and, on bbolt, its log's leaves).
	storeDecisions, lifeAnswered, leaves uint64
}

// name is the row's name in the words.
func (r *benchServersRow) name() string {
	switch {
	case r.pinned && !r.postgres:
		return "one server on bbolt, on core 0"
	case r.pinned:
		return "one server on PostgreSQL, on core 0"
	case !r.postgres:
		return "one server on bbolt"
	case r.servers == 1:
		return "one server on PostgreSQL"
	case r.servers == 2:
		return "two servers on one PostgreSQL, together"
	case r.servers == 3:
		return "three servers on one PostgreSQL, together"
	}
	return fmt.Sprintf("%d servers on one PostgreSQL, together", r.servers)
}

// cpuAtSpeed is cpuPer at the speed of the machine over the phase of ref:
// divided by how much longer the speed probe's work took over this phase
// than over ref's (speed.go); cpuPer where either is unknown.
func (r *benchServersRow) cpuAtSpeed(ref *benchServersRow) time.Duration {
	return time.Duration(float64(r.cpuPer()) / slowdown(r.probe, ref.probe))
}

// cpuPer is the CPU of the servers and PostgreSQL together per decision
// answered 200; 0 when unknown.
func (r *benchServersRow) cpuPer() time.Duration {
	if !r.cpuOK {
		return 0
	}
	return benchPer(r.cpuServers+r.cpuPG, r.check.answered)
}

// bytesPer is the store's growth over the phase per decision it stored:
// every table's on PostgreSQL, the file's on bbolt.
func (r *benchServersRow) bytesPer() float64 {
	if r.check.stored == 0 {
		return 0
	}
	if !r.postgres {
		return float64(r.fileGrowth) / float64(r.check.stored)
	}
	var total int64
	for _, g := range r.tables {
		total += g
	}
	return float64(total) / float64(r.check.stored)
}

// tableBytesPer is one table's growth per decision stored.
func (r *benchServersRow) tableBytesPer(table string) float64 {
	if r.check.stored == 0 {
		return 0
	}
	return float64(r.tables[table]) / float64(r.check.stored)
}

// tableGrowth is each table's growth from before to after; a table made
// meanwhile grew by all its size.
func tableGrowth(before, after map[string]int64) map[string]int64 {
	g := map[string]int64{}
	for name, size := range after {
		g[name] = size - before[name]
	}
	return g
}

// benchShares splits n into k shares that differ by one at most, the
// larger first.
func benchShares(n, k int) []int {
	s := make([]int, k)
	for i := range s {
		s[i] = n / k
		if i < n%k {
			s[i]++
		}
	}
	return s
}

// benchServersReport is what `bench -servers` measured.
type benchServersReport struct {
	o         Options
	when      time.Time
	machine   []string
	loadAvg   [2]string
	generator string
	wrk       bool
	pgBin     string
	engine    string
	pathways  int
	rows      []*benchServersRow
	audit     *benchServersAudit // with -audit
}

// servers runs issue 31's rows: one server on bbolt, then each count of
// benchServerCounts on one PostgreSQL, a fresh database each.
func (b *bencher) servers(ctx context.Context) (*benchServersReport, error) {
	rep := &benchServersReport{o: b.o, when: time.Now().UTC(), machine: benchMachine(), wrk: b.wrk != "",
		engine: b.o.Engines[0], pathways: b.o.Pathways[0]}
	rep.generator = "the Go generator (closed loop), one load per server"
	if rep.wrk {
		rep.generator = "wrk (" + b.wrk + "), one per server, one thread each"
	}
	rep.loadAvg[0] = benchLoadAvg()
	b.logf("PostgreSQL: a server of the bench's own, in a temporary directory")
	pg, err := pgtest.New()
	if err != nil {
		return nil, fmt.Errorf("the servers on PostgreSQL (issue 31) need a PostgreSQL the bench starts: %w", err)
	}
	defer pg.Close()
	pid, err := pg.PID()
	if err != nil {
		return nil, err
	}
	rep.pgBin = pg.Bin()
	r, err := newBenchRoom(rep.pathways, b.o.Players)
	if err != nil {
		return nil, err
	}
	row, err := b.serversRow(ctx, r, rep.engine, 1, "", 0)
	if err != nil {
		return nil, fmt.Errorf("one server on bbolt: %w", err)
	}
	rep.rows = append(rep.rows, row)
	for _, n := range benchServerCounts {
		dsn, err := pg.NewDatabase()
		if err != nil {
			return nil, err
		}
		row, err := b.serversRow(ctx, r, rep.engine, n, dsn, pid)
		if err != nil {
			return nil, fmt.Errorf("%d servers on PostgreSQL: %w", n, err)
		}
		rep.rows = append(rep.rows, row)
		// The next row's PostgreSQL CPU is its own: neither autovacuum nor
		// the checkpointer works on this row's rows during it.
		if err := benchPGDone(ctx, pg.DSN("postgres"), dsn); err != nil {
			return nil, err
		}
	}
	// One server on bbolt and on PostgreSQL again, the server on a core
	// and the database on the other (with the load generator, as issue
	// 30's harness has it): the server's rate with its database elsewhere.
	if b.pin.canPin() {
		row, err := b.pinnedRow(ctx, r, rep.engine, "", 0)
		if err != nil {
			return nil, fmt.Errorf("one server on bbolt, on core 0: %w", err)
		}
		rep.rows = append(rep.rows, row)
		dsn, err := pg.NewDatabase()
		if err != nil {
			return nil, err
		}
		if row, err = b.pinnedRow(ctx, r, rep.engine, dsn, pid); err != nil {
			return nil, fmt.Errorf("one server on PostgreSQL, on core 0: %w", err)
		}
		rep.rows = append(rep.rows, row)
		if err := benchPGDone(ctx, pg.DSN("postgres"), dsn); err != nil {
			return nil, err
		}
	}
	if b.o.Audit > 0 {
		n := benchServerCounts[len(benchServerCounts)-1]
		dsn, err := pg.NewDatabase()
		if err != nil {
			return nil, err
		}
		// Paced at half the rate the servers reached saturated: a room
		// as servers keep it, not one past what the machine can do, where
		// the shared loads fall behind their bound (SPEC-NOTES, "Issue 31").
		rate := 0.0
		if row := rep.pg(n); row != nil && !b.o.AuditSaturated {
			rate = row.rate / 2
		}
		g, err := b.startGroup(ctx, r, rep.engine, n, dsn, slices.Repeat([]int{b.o.halfConns()}, n))
		if err != nil {
			return nil, err
		}
		rep.audit, err = b.auditServers(ctx, g, r, dsn, rate)
		g.close()
		if err != nil {
			return nil, err
		}
		if err := benchPGDone(ctx, pg.DSN("postgres"), dsn); err != nil {
			return nil, err
		}
	}
	rep.loadAvg[1] = benchLoadAvg()
	return rep, ctx.Err()
}

// pinnedRow is serversRow of one server pinned to core 0, with wrk and
// (on PostgreSQL, whose postmaster is pgPID) every process of PostgreSQL
// on core 1, given back every core after.
func (b *bencher) pinnedRow(ctx context.Context, r *benchRoom, engine string, dsn string, pgPID int) (*benchServersRow, error) {
	b.pin.on = true
	defer func() { b.pin.on = false }()
	if pgPID > 0 {
		if err := b.pin.pinTree(pgPID, b.pin.loadCores()); err != nil {
			return nil, fmt.Errorf("pinning PostgreSQL: %w", err)
		}
		defer b.pin.pinTree(pgPID, fmt.Sprintf("0-%d", b.pin.ncpu-1)) //nolint:errcheck // the next row starts a database of its own
	}
	return b.serversRow(ctx, r, engine, 1, dsn, pgPID)
}

// benchGroup is the servers of a row, running.
type benchGroup struct {
	real  *benchReal // the first server: the hops post to it (startHops)
	cs    []*benchChild
	loads []*benchServer
}

// close stops the hops, closes the loads and kills the servers not stopped.
func (g *benchGroup) close() {
	if g.real != nil && g.real.hopsDone != nil {
		g.real.hopsDone()
		<-g.real.hops
		g.real.hopsDone = nil
	}
	for _, s := range g.loads {
		s.l.close()
	}
	g.loads = nil
	for _, c := range g.cs {
		if c != nil {
			c.kill()
		}
	}
	g.cs = nil
}

// startGroup starts n servers of engine over r (on bbolt when dsn is "",
// else on the database dsn), gives the first the window's records and its
// hops' (the others follow them through the database), and primes a load
// for each with its connections and its share of the players.
func (b *bencher) startGroup(ctx context.Context, r *benchRoom, engine string, n int, dsn string, conns []int) (_ *benchGroup, err error) {
	dir, err := os.MkdirTemp(b.tmp, fmt.Sprintf("servers-%d-", n))
	if err != nil {
		return nil, err
	}
	var env []string
	dsnEnv := ""
	if dsn != "" {
		dsnEnv, env = benchDSNEnv, []string{benchDSNEnv + "=" + dsn}
	}
	cfg, err := r.writeFilesOn(dir, engine, dsnEnv)
	if err != nil {
		return nil, err
	}
	g := &benchGroup{}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	cpus := "" // unpinned, but in pinnedRow
	if b.pin.on {
		cpus = b.pin.serverCore()
	}
	// One at a time: the first migrates a fresh database.
	for range n {
		c, err := b.startChildOn(ctx, benchReady, cpus, env, "bench", "serve", "-c", cfg)
		if err != nil {
			return nil, err
		}
		g.cs = append(g.cs, c)
	}
	g.real = &benchReal{r: r, engine: engine, dir: dir, c: g.cs[0], loads: map[int]*benchServer{}}
	if err := b.startHops(ctx, g.real); err != nil {
		return nil, err
	}
	players := benchShares(b.o.Players, n)
	for i, c := range g.cs {
		l := newBenchLoad(c.addr, r.path, r.ids, r.initial, conns[i], players[i])
		if err := l.prime(ctx); err != nil {
			return nil, fmt.Errorf("server %d: the players' first manifests: %w", i+1, err)
		}
		s, err := b.newServer(fmt.Sprintf("server %d", i+1), c, l, true)
		if err != nil {
			return nil, err
		}
		g.loads = append(g.loads, s)
	}
	return g, nil
}

// benchServersSnap is what a row's servers and store said at one moment.
type benchServersSnap struct {
	counts       []benchCounts
	ok           bool
	lock, groups benchSumCount
	lockOK       bool
	waits        [2]uint64 // waisteer_pg_loads_waits_total and _refused_total, every server's
	decisions    uint64
	tables       map[string]int64
	file         int64
}

// serversRow starts n servers of engine over r (on bbolt when dsn is "",
// else on the database dsn, whose postmaster is pgPID), gives the first
// the window's records and its hops' (the others follow them through the
// database), primes a load for each, warms them up together, and measures
// them saturated together for -d.
func (b *bencher) serversRow(ctx context.Context, r *benchRoom, engine string, n int, dsn string, pgPID int) (*benchServersRow, error) {
	row := &benchServersRow{servers: n, postgres: dsn != "", pinned: b.pin.on, conns: slices.Repeat([]int{b.o.halfConns()}, n)}
	b.logf("%s: starting", row.name())
	g, err := b.startGroup(ctx, r, engine, n, dsn, row.conns)
	if err != nil {
		return nil, err
	}
	defer g.close()
	row.procs = g.cs[0].procs
	for _, s := range g.loads {
		row.players += len(s.l.players)
	}
	if b.o.Warmup > 0 {
		if _, _, err := b.drive(ctx, g.loads, b.o.Warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}

	before, err := b.serversSnap(ctx, g, dsn)
	if err != nil {
		return nil, err
	}
	probe := startSpeedProbe(probeEvery)
	stats0, cpu0, self0 := readProcStats("/proc"), benchCPUTimesNow(), selfCPU()
	phs, wrkCPU, err := b.drive(ctx, g.loads, b.o.Duration)
	stats1, cpu1, self1 := readProcStats("/proc"), benchCPUTimesNow(), selfCPU()
	row.probe = probe.end()
	row.cpuGen = wrkCPU + self1 - self0
	if err != nil {
		return nil, err
	}
	after, err := b.serversSnap(ctx, g, dsn)
	if err != nil {
		return nil, err
	}
	row.measured(phs, g, before, after)
	row.cpuOK = true
	for _, c := range g.cs {
		c0, ok0 := treeCPU(stats0, c.cmd.Process.Pid)
		c1, ok1 := treeCPU(stats1, c.cmd.Process.Pid)
		row.cpuServers += c1 - c0
		row.cpuOK = row.cpuOK && ok0 && ok1
	}
	if row.postgres {
		p0, ok0 := treeCPU(stats0, pgPID)
		p1, ok1 := treeCPU(stats1, pgPID)
		row.cpuPG = p1 - p0
		row.cpuOK = row.cpuOK && ok0 && ok1
	}
	if cpu0 != nil && cpu1 != nil {
		row.idle = idleShare(*cpu0, *cpu1)
		total := float64((cpu1.busy - cpu0.busy) + (cpu1.idle - cpu0.idle) + (cpu1.steal - cpu0.steal))
		if total > 0 {
			row.steal = float64(cpu1.steal-cpu0.steal) / total
		}
		row.cpuBusy = time.Duration(cpu1.busy-cpu0.busy) * benchTick
	}
	b.logf("%s: %s answers/s, p99 %s, CPU %s per decision (servers %s, PostgreSQL %s), %.0f bytes per decision",
		row.name(), benchRate(row.rate), benchDur(row.p99), benchDur(row.cpuPer()), benchDur(benchPer(row.cpuServers, row.check.answered)),
		benchDur(benchPer(row.cpuPG, row.check.answered)), row.bytesPer())

	// The store once its servers stopped.
	for _, c := range g.cs {
		if counts, ok := settledCounts(c.addr); ok {
			row.lifeAnswered += counts.answered
		}
	}
	g.real.hopsDone()
	<-g.real.hops
	g.real.hopsDone = nil
	for k, c := range g.cs {
		err := c.stop()
		g.cs[k] = nil
		if err != nil {
			return nil, fmt.Errorf("stopping server %d: %w", k+1, err)
		}
	}
	if row.postgres {
		if row.storeDecisions, _, err = benchPGState(ctx, dsn); err != nil {
			return nil, err
		}
	} else {
		if row.storeDecisions, row.inUse, row.leaves, err = benchStoredLogged(g.real.storeFile()); err != nil {
			return nil, err
		}
		row.inUse /= float64(max(row.storeDecisions, 1))
	}
	return row, nil
}

// measured takes the phase's figures into the row.
func (row *benchServersRow) measured(phs []benchPhase, g *benchGroup, before, after benchServersSnap) {
	var lat []time.Duration
	for i, ph := range phs {
		if ph.elapsed > 0 {
			row.rate += ph.rate()
		}
		row.elapsed = max(row.elapsed, ph.elapsed)
		row.failed += ph.failed
		if row.firstErr == nil {
			row.firstErr = ph.firstErr
		}
		row.check.received += ph.answered
		if g.loads[i].script != "" {
			row.p99 = max(row.p99, ph.pct[1])
		} else {
			lat = append(lat, ph.latencies...)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		row.p99 = quantile(lat, 0.99)
	}
	row.check.ok = before.ok && after.ok
	for i := range after.counts {
		row.check.answered += after.counts[i].answered - before.counts[i].answered
		row.check.commitFailures += after.counts[i].failures - before.counts[i].failures
		if !row.postgres {
			row.check.stored += after.counts[i].stored - before.counts[i].stored
		}
	}
	if row.postgres {
		row.check.stored = after.decisions - min(before.decisions, after.decisions)
		row.decisions = after.decisions
		row.tables = tableGrowth(before.tables, after.tables)
	} else {
		row.fileGrowth = after.file - before.file
	}
	row.lock, row.lockOK = after.lock.minus(before.lock), before.lockOK && after.lockOK
	row.groups = after.groups.minus(before.groups)
	for i := range row.waits {
		row.waits[i] = after.waits[i] - min(before.waits[i], after.waits[i])
	}
}

// drive saturates every load at once for d, each by its own generator,
// and returns with the phases the CPU the wrk processes took.
func (b *bencher) drive(ctx context.Context, loads []*benchServer, d time.Duration) ([]benchPhase, time.Duration, error) {
	phs := make([]benchPhase, len(loads))
	gens := make([]time.Duration, len(loads))
	errs := make([]error, len(loads))
	var wg sync.WaitGroup
	for i, s := range loads {
		wg.Go(func() {
			if s.script != "" {
				ph, gen, err := b.runWrk(ctx, s.c.addr, s.script, s.conns, d)
				phs[i], gens[i], errs[i] = ph, gen, err
				s.l.answered.Add(ph.answered)
				return
			}
			phs[i] = s.l.run(ctx, d, 0)
		})
	}
	wg.Wait()
	var gen time.Duration
	for _, g := range gens {
		gen += g
	}
	return phs, gen, errors.Join(append(errs, ctx.Err())...)
}

// serversSnap reads each server's counters once settled, and its
// histograms, and the store's decisions and sizes.
func (b *bencher) serversSnap(ctx context.Context, g *benchGroup, dsn string) (benchServersSnap, error) {
	sn := benchServersSnap{ok: true, lockOK: true}
	for _, c := range g.cs {
		counts, ok := settledCounts(c.addr)
		sn.counts = append(sn.counts, counts)
		sn.ok = sn.ok && ok
		m, err := benchGet(ctx, c.addr, "/metrics")
		if err != nil {
			sn.ok, sn.lockOK = false, false
			continue
		}
		lock, ok := parseSumCount(m, "waisteer_pg_round_trip_seconds")
		sn.lockOK = sn.lockOK && ok
		sn.lock.sum += lock.sum
		sn.lock.count += lock.count
		groups, _ := parseSumCount(m, "waisteer_commit_group_size")
		sn.groups.sum += groups.sum
		sn.groups.count += groups.count
		sn.waits[0] += parseCounter(m, "waisteer_pg_loads_waits_total")
		sn.waits[1] += parseCounter(m, "waisteer_pg_loads_refused_total")
	}
	if dsn == "" {
		sn.lockOK = false
		sn.file = benchFileSize(g.real.storeFile())
		return sn, nil
	}
	var err error
	sn.decisions, sn.tables, err = benchPGState(ctx, dsn)
	return sn, err
}

// benchPGState counts the decisions' rows of the database dsn and reads
// the size of each table of the schema waisteer, with its indexes and
// TOAST (pg_total_relation_size).
func benchPGState(ctx context.Context, dsn string) (uint64, map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer c.Close(context.Background())
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM waisteer.decisions").Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("counting the decisions: %w", err)
	}
	rows, err := c.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
		JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = 'waisteer' AND c.relkind IN ('r', 'p')`)
	if err != nil {
		return 0, nil, fmt.Errorf("the tables' sizes: %w", err)
	}
	defer rows.Close()
	sizes := map[string]int64{}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return 0, nil, fmt.Errorf("the tables' sizes: %w", err)
		}
		sizes[name] = size
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("the tables' sizes: %w", err)
	}
	return uint64(n), sizes, nil
}

// benchPGDone drops the database of dsn, through the server's database
// admin, and has the server write its dirty pages now (CHECKPOINT).
func benchPGDone(ctx context.Context, admin, dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "DROP DATABASE "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()); err != nil {
		return fmt.Errorf("dropping a row's database: %w", err)
	}
	if _, err := c.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("PostgreSQL's checkpoint: %w", err)
	}
	return nil
}

// benchCPUTimesNow reads the machine's CPU times, or nil.
func benchCPUTimesNow() *benchCPUTimes {
	t, ok := readCPUTimes()
	if !ok {
		return nil
	}
	return &t
}

// others is the machine's CPU over the phase that neither the servers,
// PostgreSQL nor the load generators took: what else ran (other builds,
// other tests), which the rates pay for and the CPU per decision does not.
func (r *benchServersRow) others() time.Duration {
	return max(r.cpuBusy-r.cpuServers-r.cpuPG-r.cpuGen, 0)
}

// othersShare is others over the machine's CPU time in the phase, on
// cores cores.
func (r *benchServersRow) othersShare(cores int) float64 {
	if r.elapsed <= 0 || cores < 1 {
		return 0
	}
	return r.others().Seconds() / (r.elapsed.Seconds() * float64(cores))
}

// lockMean is the mean of waisteer_pg_round_trip_seconds over the phase.
func (r *benchServersRow) lockMean() time.Duration {
	return time.Duration(r.lock.mean() * float64(time.Second))
}

// benchServersAudit is the audit of a room of three servers (-servers
// -audit N, issue 31's "a three-server room of 100 000 decisions audited
// exact"), on a database of its own.
type benchServersAudit struct {
	rate     float64       // the servers' load together, requests a second
	made     time.Duration // until the room held N decisions
	took     time.Duration // the audit
	report   *audit.Report
	auditing float64 // the audit's decisions a second
	servers  int
	held     uint64
	failures uint64 // answers other than 200 while the room filled
}

// auditServers loads the servers together, paced at rate requests a
// second in all (saturated when 0), until the database holds -audit
// decisions, stops the load, and audits the room through the first server: every log's tree and checkpoint, a sample verified by §9,
// every decision read and recounted over the logs' merge, the loads within
// the shared loads' staleness (SPEC-NOTES, "One log per server and room":
// δ = 200 ms).
func (b *bencher) auditServers(ctx context.Context, g *benchGroup, r *benchRoom, dsn string, rate float64) (*benchServersAudit, error) {
	a := &benchServersAudit{servers: len(g.cs), rate: rate}
	b.logf("%d servers on one PostgreSQL, a room of their own: %s requests/s until it holds %d decisions, then audited", a.servers, benchRate(rate), b.o.Audit)
	began := time.Now()
	for ctx.Err() == nil {
		sn, err := b.serversSnap(ctx, g, dsn)
		if err != nil {
			return nil, err
		}
		if a.held = sn.decisions; a.held >= uint64(b.o.Audit) {
			break
		}
		phs := make([]benchPhase, len(g.loads))
		var wg sync.WaitGroup
		for i, s := range g.loads {
			wg.Go(func() { phs[i] = s.l.run(ctx, auditPhase, rate/float64(len(g.loads))) })
		}
		wg.Wait()
		for _, ph := range phs {
			a.failures += ph.failed
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a.made = time.Since(began)
	start := time.Now()
	rep, err := audit.Run(ctx, client.New(), "http://"+g.cs[0].addr, r.sc.Room.ID(), audit.Options{Sample: b.o.AuditSample, Seed: 1,
		Recount: recount.Options{Staleness: benchServersStaleness}})
	if err != nil {
		return nil, fmt.Errorf("the audit of %d servers' room: %w", a.servers, err)
	}
	a.took, a.report = time.Since(start), rep
	a.auditing = float64(rep.Fetched) / a.took.Seconds()
	b.logf("the audit of %d servers' room: %d decisions in %d logs, %s, ok %v", a.servers, rep.Fetched, len(rep.Logs), a.took.Round(time.Second), rep.OK())
	return a, nil
}

// benchServersStaleness is δ of the audit of servers on one database, in
// µs: the shared loads' bound (SPEC-NOTES, "Issue 15").
const benchServersStaleness = 200_000
