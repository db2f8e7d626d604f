package bench

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGoalsIssue31: each goal's ratio and verdict, worked by hand from
// issue 31's "Goals" (two and three servers together answer at least what
// one answers; CPU per decision with three servers within 1.2x one's; one
// server on PostgreSQL at least 0.8x its rate on bbolt; at most 400 bytes
// per decision). The first rows are the issue's own measurement: one
// server on bbolt 8 900, on PostgreSQL 3 700, two together 2 303, three
// 1 380; 1 150 bytes a decision.
func TestGoalsIssue31(t *testing.T) {
	us := time.Microsecond
	for _, c := range []struct {
		g     benchGoal
		ratio float64 // by hand
		met   bool
	}{
		{serversRateGoal(2, 2303, 3700), 0.6224, false}, // 2303 / 3700
		{serversRateGoal(3, 1380, 3700), 0.3730, false}, // 1380 / 3700
		{serversRateGoal(2, 3700, 3700), 1, true},       // equal is met
		{serversRateGoal(3, 3663, 3700), 0.99, false},   // 3663 / 3700 = 0.99 < 1
		{serversRateGoal(3, 5550, 3700), 1.5, true},
		{serversCPUGoal(3, 120*us, 100*us), 1.2, true},   // at the bound
		{serversCPUGoal(3, 121*us, 100*us), 1.21, false}, // past it
		{serversCPUGoal(3, 250*us, 100*us), 2.5, false},
		{pgRateGoal(3700, 8900), 0.4157, false}, // 3700 / 8900
		{pgRateGoal(8000, 10000), 0.8, true},    // at the bound
		{pgRateGoal(7990, 10000), 0.799, false},
		{pgBytesGoal(1, 1_000_000, 1150), 1150, false},
		{pgBytesGoal(3, 1_000_000, 371), 371, true},
		{pgBytesGoal(3, 1_000_000, 400), 400, true},
		{pgBytesGoal(3, 1_000_000, 400.5), 400.5, false},
		{pgBytesGoal(2, 0, 0), 0, false}, // nothing stored: not met
	} {
		if math.Abs(c.g.value-c.ratio) > 0.0001 || c.g.holds() != c.met {
			t.Errorf("%s = %.4f (%v), want %.4f (%v)", c.g.name, c.g.value, c.g.holds(), c.ratio, c.met)
		}
	}
	if g := serversRateGoal(2, 5000, 0); !math.IsNaN(g.value) || g.holds() {
		t.Errorf("a rate over one server's of 0: %v %v", g.value, g.holds())
	}
	if g := serversCPUGoal(3, 100*us, 0); g.holds() {
		t.Errorf("a CPU over one server's unknown CPU: met")
	}
}

// TestParseProcStat: proc(5)'s stat line, utime + stime + cutime + cstime
// (the 14th to 17th fields) and the parent (the 4th), counted after the
// command's last ')' (PostgreSQL's backends name themselves with spaces
// and parentheses).
func TestParseProcStat(t *testing.T) {
	for _, c := range []struct {
		line  string
		ppid  int
		ticks uint64
	}{
		// utime 11, stime 12, cutime 13, cstime 14: 50.
		{"4242 (waisteer) S 17 4242 17 0 -1 4194560 500 0 0 0 11 12 13 14 20 0 9 0 123 456 789", 17, 50},
		{"4301 (postgres: waisteer t3 127.0.0.1(43210) idle) S 4300 4300 4300 0 -1 4194368 90 0 0 0 700 300 0 0 20 0 1 0 5 6 7", 4300, 1000},
		{"1 (a) b)) R 0 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0", 0, 10},
	} {
		st, err := parseProcStat([]byte(c.line))
		if err != nil || st.ppid != c.ppid || st.ticks != c.ticks {
			t.Errorf("%q: %+v %v, want ppid %d, %d ticks", c.line, st, err, c.ppid, c.ticks)
		}
	}
	for _, bad := range []string{
		"",
		"12 no parenthesis S 1 2 3",
		"12 (short) S 1 2 3 4 5 6 7 8 9 10 11 12",     // 14 fields after ')'
		"12 (x) S one 2 3 4 5 6 7 8 9 10 11 12 13 14", // the parent is no number
		"12 (x) S 1 2 3 4 5 6 7 8 9 10 11 -12 13 14",  // a negative time
		"12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 1e3 14",
	} {
		if st, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q read as %+v", bad, st)
		}
	}
}

// benchStatLine is a stat line of pid with parent ppid and the four CPU
// times.
func benchStatLine(pid, ppid int, comm string, u, s, cu, cs int) string {
	return strings.Join([]string{itoa(pid), "(" + comm + ")", "S", itoa(ppid), "1 1 0 -1 0 0 0 0 0", itoa(u), itoa(s), itoa(cu), itoa(cs), "20 0 1 0 0 0 0"}, " ")
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestTreeCPU reads a /proc of several processes: a postmaster (100) with
// three children, one of which has a child of its own, beside a server
// (200) and an unrelated process; entries that are no process, or whose
// stat does not read, are left out. Sums by hand, in ticks of 10 ms.
func TestTreeCPU(t *testing.T) {
	proc := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Join(proc, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if text != "" {
			if err := os.WriteFile(filepath.Join(proc, name, "stat"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("100", benchStatLine(100, 1, "postgres", 5, 5, 40, 10)) // 60: its own and its waited-for children's
	write("101", benchStatLine(101, 100, "postgres: checkpointer", 1, 2, 0, 0))
	write("102", benchStatLine(102, 100, "postgres: waisteer t1 127.0.0.1(5) idle", 300, 100, 0, 0))
	write("103", benchStatLine(103, 100, "postgres: autovacuum launcher", 7, 0, 3, 0))
	write("104", benchStatLine(104, 103, "postgres: autovacuum worker", 20, 5, 0, 0)) // a grandchild
	write("200", benchStatLine(200, 1, "waisteer", 900, 100, 0, 0))
	write("201", benchStatLine(201, 1, "wrk", 50, 50, 0, 0))
	write("self", benchStatLine(999, 1, "bench", 1, 1, 1, 1)) // not a process id
	write("300", "")                                          // no stat: ended meanwhile
	write("301", "garbage")
	stats := readProcStats(proc)
	pids := make([]int, 0, len(stats))
	for pid := range stats {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	if !slices.Equal(pids, []int{100, 101, 102, 103, 104, 200, 201}) {
		t.Fatalf("processes read: %v", pids)
	}
	// 100: 60; 101: 3; 102: 400; 103: 10; 104: 25; in all 498 ticks.
	if d, ok := treeCPU(stats, 100); !ok || d != 4980*time.Millisecond {
		t.Errorf("PostgreSQL's tree: %v %v, want 4.98 s", d, ok)
	}
	if d, ok := treeCPU(stats, 200); !ok || d != 10*time.Second {
		t.Errorf("the server: %v %v, want 10 s", d, ok)
	}
	if d, ok := treeCPU(stats, 103); !ok || d != 350*time.Millisecond {
		t.Errorf("a subtree: %v %v, want 0.35 s", d, ok)
	}
	if _, ok := treeCPU(stats, 4242); ok {
		t.Errorf("a process not in /proc read")
	}
	// A loop of parents (impossible in /proc) ends.
	loop := map[int]procStat{1: {ppid: 2, ticks: 1}, 2: {ppid: 1, ticks: 2}}
	if d, ok := treeCPU(loop, 1); !ok || d != 30*time.Millisecond {
		t.Errorf("a loop: %v %v", d, ok)
	}
	if readProcStats(filepath.Join(proc, "none")) != nil {
		t.Errorf("a missing /proc read")
	}
}

// TestCPUTimes: /proc/stat's cpu line; the idle share is idle and iowait
// over every time, stolen time included, between two readings.
func TestCPUTimes(t *testing.T) {
	before, err := parseCPUTimes([]byte("cpu  100 10 50 800 40 5 5 10 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"))
	if err != nil || before != (benchCPUTimes{busy: 170, idle: 840, steal: 10}) {
		t.Fatalf("%+v %v", before, err)
	}
	after, err := parseCPUTimes([]byte("cpu  250 10 100 880 60 5 5 30 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	// busy +200, idle +100, steal +20: 100 / 320.
	if got := idleShare(before, after); math.Abs(got-0.3125) > 1e-9 {
		t.Errorf("idle share %v, want 0.3125", got)
	}
	if got := idleShare(after, after); !math.IsNaN(got) {
		t.Errorf("no time passed: %v", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 3 4 5 6 7 x\n"} {
		if _, err := parseCPUTimes([]byte(bad)); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}

// TestParseSumCount: a histogram family's _sum and _count from /metrics,
// added up over its label sets; a family whose name begins another's is
// not mixed with it; a family missing is said so.
func TestParseSumCount(t *testing.T) {
	m := []byte(`# HELP waisteer_pg_round_trip_seconds Time of a batch of a group commit.
# TYPE waisteer_pg_round_trip_seconds histogram
waisteer_pg_round_trip_seconds_bucket{le="0.001"} 3
waisteer_pg_round_trip_seconds_bucket{le="+Inf"} 8
waisteer_pg_round_trip_seconds_sum 0.024
waisteer_pg_round_trip_seconds_count 8
waisteer_pg_round_trip_seconds_total_sum 99
waisteer_commit_group_size_sum{room="a"} 100
waisteer_commit_group_size_count{room="a"} 4
waisteer_commit_group_size_sum{room="b"} 20
waisteer_commit_group_size_count{room="b"} 1
`)
	h, ok := parseSumCount(m, "waisteer_pg_round_trip_seconds")
	if !ok || math.Abs(h.sum-0.024) > 1e-12 || h.count != 8 || h.mean() != 0.003 {
		t.Errorf("lock: %+v %v", h, ok)
	}
	g, ok := parseSumCount(m, "waisteer_commit_group_size")
	if !ok || g.sum != 120 || g.count != 5 || g.mean() != 24 {
		t.Errorf("groups: %+v %v", g, ok)
	}
	if _, ok := parseSumCount(m, "waisteer_pg_group_commit_seconds"); ok {
		t.Errorf("a missing family read")
	}
	d := h.minus(benchSumCount{sum: 0.004, count: 3})
	if math.Abs(d.sum-0.02) > 1e-12 || d.count != 5 || math.Abs(d.mean()-0.004) > 1e-12 {
		t.Errorf("over a phase: %+v", d)
	}
	if (benchSumCount{}).mean() != 0 {
		t.Errorf("the mean of nothing")
	}
}

// TestBytesPerDecision: each table's growth over the phase over the
// decisions stored in it; the total, and without the live sessions' rows;
// a table made during the phase grew by its whole size. bbolt's is its
// file's growth. Sums by hand.
func TestBytesPerDecision(t *testing.T) {
	before := map[string]int64{"decisions": 8192 * 100, "log_tiles": 8192 * 4, "steers": 8192 * 50, "rooms": 16384}
	after := map[string]int64{"decisions": 8192*100 + 3_400_000, "log_tiles": 8192*4 + 340_000, "steers": 8192*50 + 1_600_000, "rooms": 16384, "logs": 8192}
	g := tableGrowth(before, after)
	want := map[string]int64{"decisions": 3_400_000, "log_tiles": 340_000, "steers": 1_600_000, "rooms": 0, "logs": 8192}
	if len(g) != len(want) {
		t.Fatalf("growth %v", g)
	}
	for k, v := range want {
		if g[k] != v {
			t.Errorf("%s grew %d, want %d", k, g[k], v)
		}
	}
	row := &benchServersRow{postgres: true, servers: 3, tables: g, check: benchCheck{ok: true, stored: 10_000, answered: 10_000}}
	for _, c := range []struct {
		got, want float64
	}{
		{row.tableBytesPer("decisions"), 340},
		{row.tableBytesPer("log_tiles"), 34},
		{row.tableBytesPer("steers"), 160},
		{row.tableBytesPer("logs"), 0.8192},
		{row.bytesPer(), 534.8192}, // (3 400 000 + 340 000 + 1 600 000 + 8 192) / 10 000
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%v, want %v", c.got, c.want)
		}
	}
	bolt := &benchServersRow{fileGrowth: 4 << 20, check: benchCheck{stored: 16384}}
	if bolt.bytesPer() != 256 {
		t.Errorf("bbolt: %v", bolt.bytesPer())
	}
	if (&benchServersRow{postgres: true, tables: g}).bytesPer() != 0 {
		t.Errorf("bytes per decision with none stored")
	}
}

// TestServersMeasured: a phase's figures from two snapshots of three
// servers and their generators: answers/s added up, the p99 over every
// answer (Go) or the worst server's (wrk), the 200s and commit failures
// added over the servers, the decisions stored counted in the table, and
// "answers 200 = decisions stored" (issue 30's "nothing lost", per phase).
func TestServersMeasured(t *testing.T) {
	ms := time.Millisecond
	lat := func(base time.Duration, n int) []time.Duration {
		var l []time.Duration
		for i := range n {
			l = append(l, base+time.Duration(i)*time.Microsecond)
		}
		return l
	}
	phs := []benchPhase{
		{answered: 1000, elapsed: time.Second, latencies: lat(ms, 100)},
		{answered: 2000, elapsed: 2 * time.Second, latencies: lat(2*ms, 100), failed: 1, firstErr: errors.New("reset")},
		{answered: 3000, elapsed: time.Second, latencies: lat(50*ms, 3)},
	}
	g := &benchGroup{loads: []*benchServer{{}, {}, {}}}
	snap := func(answered []uint64, decisions uint64) benchServersSnap {
		s := benchServersSnap{ok: true, lockOK: true, decisions: decisions, lock: benchSumCount{sum: float64(decisions) / 1e6, count: decisions / 10},
			tables: map[string]int64{"decisions": int64(decisions) * 300}}
		for _, a := range answered {
			s.counts = append(s.counts, benchCounts{answered: a, stored: a})
		}
		return s
	}
	row := &benchServersRow{postgres: true, servers: 3}
	row.measured(phs, g, snap([]uint64{10, 20, 30}, 60), snap([]uint64{1010, 2020, 3030}, 6060))
	// 1000/1 + 2000/2 + 3000/1 = 5 000 a second; 203 latencies, the
	// 99th percentile by nearest rank is the 201st (0.99 × 203 = 200.97):
	// the first of 50 ms.
	if row.rate != 5000 || row.p99 != 50*ms || row.elapsed != 2*time.Second || row.failed != 1 || row.firstErr == nil {
		t.Errorf("rate %v p99 %v elapsed %v failed %d", row.rate, row.p99, row.elapsed, row.failed)
	}
	if row.check != (benchCheck{ok: true, answered: 6000, stored: 6000, received: 6000}) || row.check.lost() {
		t.Errorf("check %+v", row.check)
	}
	if row.tables["decisions"] != 6000*300 || row.decisions != 6060 || row.lock.count != 600 || math.Abs(row.lock.sum-0.006) > 1e-12 {
		t.Errorf("tables %v decisions %d lock %+v", row.tables, row.decisions, row.lock)
	}
	// A decision answered and not stored is lost.
	lost := &benchServersRow{postgres: true, servers: 3}
	lost.measured(phs, g, snap([]uint64{10, 20, 30}, 60), snap([]uint64{1010, 2020, 3030}, 6059))
	if !lost.check.lost() {
		t.Errorf("5 999 stored of 6 000 answered: not lost (%+v)", lost.check)
	}
	// wrk: the worst server's p99.
	g.loads[0].script, g.loads[1].script, g.loads[2].script = "a.lua", "b.lua", "c.lua"
	phs[0].pct[1], phs[1].pct[1], phs[2].pct[1] = 3*ms, 9*ms, 4*ms
	w := &benchServersRow{postgres: true, servers: 3}
	w.measured(phs, g, snap([]uint64{0, 0, 0}, 0), snap([]uint64{1000, 2000, 3000}, 6000))
	if w.p99 != 9*ms {
		t.Errorf("wrk's p99: %v, want the worst server's 9 ms", w.p99)
	}
	// bbolt: stored by the group commits, bytes by the file.
	b := &benchServersRow{servers: 1}
	bs := func(a uint64, file int64) benchServersSnap {
		return benchServersSnap{ok: true, counts: []benchCounts{{answered: a, stored: a}}, file: file}
	}
	b.measured(phs[:1], &benchGroup{loads: []*benchServer{{}}}, bs(0, 1<<20), bs(1000, 1<<20+256_000))
	if b.check.stored != 1000 || b.bytesPer() != 256 || b.check.lost() {
		t.Errorf("bbolt: %+v %v", b.check, b.bytesPer())
	}
}

// TestBenchShares: connections and players split over the servers, the
// larger shares first, adding up to the whole.
func TestBenchShares(t *testing.T) {
	for _, c := range []struct {
		n, k int
		want []int
	}{
		{64, 1, []int{64}}, {64, 2, []int{32, 32}}, {64, 3, []int{22, 21, 21}}, {10000, 3, []int{3334, 3333, 3333}}, {2, 3, []int{1, 1, 0}},
	} {
		if got := benchShares(c.n, c.k); !slices.Equal(got, c.want) {
			t.Errorf("%d over %d: %v, want %v", c.n, c.k, got, c.want)
		}
	}
}

// TestProjection: n servers of 16 cores beside a PostgreSQL of 16, from
// the CPU per decision: 3 servers at 120 µs reach 3·16/120 µs = 400 000 a
// second, PostgreSQL at 100 µs 160 000: PostgreSQL bounds it; one server
// alone, 133 333, is its own bound.
func TestProjection(t *testing.T) {
	us := time.Microsecond
	if r, bound := projection(3, 16, 120*us, 100*us); math.Abs(r-160_000) > 1e-6 || bound != "PostgreSQL's CPU" {
		t.Errorf("3 servers: %v %s", r, bound)
	}
	if r, bound := projection(1, 16, 120*us, 100*us); math.Abs(r-133_333.3333) > 1e-3 || bound != "the servers' CPU" {
		t.Errorf("1 server: %v %s", r, bound)
	}
	if r, _ := projection(3, 16, 0, 100*us); !math.IsNaN(r) {
		t.Errorf("no CPU measured: %v", r)
	}
}

// TestServersTable: issue 31's table as the report prints it, from rows
// set by hand: a markdown table, the first column to the left, the others
// to the right; each rate beside bbolt's or one server's; the CPU per
// decision split into the servers' and PostgreSQL's; the bytes without
// and with the sessions' rows; the wait on the log beside one server's.
// Then the goal lines.
func TestServersTable(t *testing.T) {
	var b strings.Builder
	benchMarkdownTable(&b, [][]string{{"", "a", "bb"}, {"row one", "1", "22"}, {"µ", "333", "4"}})
	want := "|         |   a | bb |\n|---------|----:|---:|\n| row one |   1 | 22 |\n| µ       | 333 |  4 |\n"
	if b.String() != want {
		t.Errorf("markdown:\n%s\nwant\n%s", b.String(), want)
	}

	us := time.Microsecond
	row := func(n int, pg bool, rate float64, answered uint64, servers, pgCPU time.Duration, lockMs float64) *benchServersRow {
		r := &benchServersRow{servers: n, postgres: pg, rate: rate, p99: 20 * time.Millisecond, elapsed: 10 * time.Second, idle: 0.25,
			cpuServers: servers, cpuPG: pgCPU, cpuOK: true, conns: benchShares(64, n), decisions: answered,
			check: benchCheck{ok: true, answered: answered, stored: answered, received: answered}, storeDecisions: answered, lifeAnswered: answered}
		if pg {
			r.tables = map[string]int64{"decisions": int64(answered) * 340, "log_tiles": int64(answered) * 34}
			r.lock, r.lockOK = benchSumCount{sum: lockMs / 1000 * 100, count: 100}, true
		} else {
			r.fileGrowth, r.inUse, r.leaves = int64(answered)*300, 280, answered
		}
		return r
	}
	rep := &benchServersReport{o: NewOptions(false), machine: []string{"m", "k"}, engine: "fasthttp", pathways: 3, pgBin: "/usr/lib/postgresql/15/bin", rows: []*benchServersRow{
		row(1, false, 10000, 100_000, 1000*1000*us, 0, 0),             // 10 µs a decision
		row(1, true, 4000, 40_000, 4000*1000*us, 2000*1000*us, 1),     // 100 + 50 µs
		row(2, true, 3000, 30_000, 3000*1000*us, 2100*1000*us, 2.5),   // 100 + 70 µs
		row(3, true, 4400, 44_000, 4400*1000*us, 3080*1000*us, 3.25)}} // 100 + 70 µs
	// The pair on core 0: the server's rate with PostgreSQL on the other.
	pinnedBolt, pinnedPG := row(1, false, 5000, 50_000, 500*1000*us, 0, 0), row(1, true, 5500, 55_000, 5500*1000*us/2, 1100*1000*us, 1)
	pinnedBolt.pinned, pinnedPG.pinned = true, true
	rep.rows = append(rep.rows, pinnedBolt, pinnedPG)
	cells := rep.tableRows()
	for i, want := range [][]string{
		{"one server on bbolt", "10,000", "20.00 ms", "10.0 µs (the server)", "280 in use (file grew 300)", "n/a", "25 %"},
		{"one server on PostgreSQL", "4,000 (0.40 of bbolt)", "20.00 ms", "100.0 µs + 50.0 µs = 150.0 µs", "374", "1.00 ms", "25 %"},
		{"two servers on one PostgreSQL, together", "3,000 (0.75 of one)", "20.00 ms", "100.0 µs + 70.0 µs = 170.0 µs", "374", "2.50 ms (+1.50 ms)", "25 %"},
		{"three servers on one PostgreSQL, together", "4,400 (1.10 of one)", "20.00 ms", "100.0 µs + 70.0 µs = 170.0 µs", "374", "3.25 ms (+2.25 ms)", "25 %"},
		{"one server on bbolt, on core 0", "5,000", "20.00 ms", "10.0 µs (the server)", "280 in use (file grew 300)", "n/a", "25 %"},
		// 5 500 / 5 000; 50 + 20 µs
		{"one server on PostgreSQL, on core 0", "5,500 (1.10 of bbolt on core 0)", "20.00 ms", "50.0 µs + 20.0 µs = 70.0 µs", "374", "1.00 ms (+0.00 ms)", "25 %"},
	} {
		if !slices.Equal(cells[i+1], want) {
			t.Errorf("row %d:\n%q\nwant\n%q", i+1, cells[i+1], want)
		}
	}
	var out strings.Builder
	rep.write(&out)
	report := out.String()
	goals := map[string][2]string{}
	line := regexp.MustCompile(`(?m)^  (.+?) += ([0-9.]+|NaN|\+Inf)(?: bytes)? \(goal [^:]*: (met|NOT met)\)$`)
	for _, m := range line.FindAllStringSubmatch(report, -1) {
		goals[m[1]] = [2]string{m[2], m[3]}
	}
	for name, want := range map[string][2]string{
		"servers: two servers together, answers/s / one server's on PostgreSQL":                   {"0.75", "NOT met"},
		"servers: three servers together, answers/s / one server's on PostgreSQL":                 {"1.10", "met"},
		"servers: CPU per decision (servers + PostgreSQL), three servers / one's":                 {"1.13", "met"}, // 170 / 150
		"PostgreSQL: one server's answers/s / one server's on bbolt":                              {"0.40", "NOT met"},
		"PostgreSQL: bytes per decision, one server, 40000 held (tables and indexes together)":    {"374.00", "met"},
		"PostgreSQL: bytes per decision, three servers, 44000 held (tables and indexes together)": {"374.00", "met"},
		"PostgreSQL on a core of its own: one server's answers/s on core 0 / on bbolt":            {"1.10", "met"},
	} {
		if got, ok := goals[name]; !ok || got != want {
			t.Errorf("goal %q: %v (%v), want %v\n%s", name, got, ok, want, report)
		}
	}
	if !regexp.MustCompile(`(?m)^  nothing lost: phases whose decisions stored != answered += 0 of 6 \(goal .*: met\)$`).MatchString(report) {
		t.Errorf("nothing lost is not met:\n%s", report)
	}
	for _, want := range []string{
		"| waisteer.decisions              |      340.0 |       340.0 |         340.0 |",
		"| all the tables                  |      374.0 |       374.0 |         374.0 |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the bytes by table have no %q:\n%s", want, report)
		}
	}
	// 3 servers: servers 48 cores / 100 µs = 480 000, PostgreSQL 16 / 70 µs = 228 571.
	if !strings.Contains(report, "   3 servers: 228,571 decisions/s, bound by PostgreSQL's CPU") {
		t.Errorf("the arithmetic:\n%s", report)
	}
	if strings.Contains(report, "at one server's speed") {
		t.Errorf("a report without the speed probe prints its figures:\n%s", report)
	}

	// The machine's speed (speed.go): the probe took 100 µs over one
	// server's phase on PostgreSQL, and 125 µs over three servers': their
	// 170 µs a decision is 136 µs at one server's speed, 0.91 of one
	// server's 150 (the raw ratio stays 1.13).
	rep.rows[1].probe, rep.rows[3].probe = 100*us, 125*us
	out.Reset()
	rep.write(&out)
	report = out.String()
	clear(goals)
	for _, m := range line.FindAllStringSubmatch(report, -1) {
		goals[m[1]] = [2]string{m[2], m[3]}
	}
	for name, want := range map[string][2]string{
		"servers: CPU per decision (servers + PostgreSQL), three servers / one's": {"1.13", "met"},
		"servers: the same, at one server's speed (the probe)":                    {"0.91", "met"},
	} {
		if got, ok := goals[name]; !ok || got != want {
			t.Errorf("goal %q: %v (%v), want %v\n%s", name, got, ok, want, report)
		}
	}
	if !regexp.MustCompile(`(?m)^  three servers on one PostgreSQL, together +probe +125\.0 µs \(1\.25 of one server's\)  CPU per decision +170\.0 µs, at one server's speed +136\.0 µs$`).MatchString(report) {
		t.Errorf("the three servers' speed line:\n%s", report)
	}
}

// TestSpeedProbe: the median of the probe's samples (the middle one, or
// the mean of the middle two), and the slowdown of a phase against the
// reference's, 1 where either is unknown. The probe itself, run briefly,
// takes samples of some CPU each.
func TestSpeedProbe(t *testing.T) {
	us := time.Microsecond
	for _, c := range []struct {
		xs   []time.Duration
		want time.Duration
	}{
		{nil, 0}, {[]time.Duration{7 * us}, 7 * us}, {[]time.Duration{9 * us, 1 * us, 5 * us}, 5 * us}, {[]time.Duration{4 * us, 1 * us, 9 * us, 2 * us}, 3 * us},
	} {
		if got := medianDuration(c.xs); got != c.want {
			t.Errorf("median of %v: %v, want %v", c.xs, got, c.want)
		}
	}
	for _, c := range []struct {
		phase, ref time.Duration
		want       float64
	}{
		{125 * us, 100 * us, 1.25}, {80 * us, 100 * us, 0.8}, {0, 100 * us, 1}, {100 * us, 0, 1},
	} {
		if got := slowdown(c.phase, c.ref); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("slowdown(%v, %v) = %v, want %v", c.phase, c.ref, got, c.want)
		}
	}
	p := startSpeedProbe(time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if m := p.end(); m <= 0 || len(p.samples) == 0 {
		t.Errorf("the probe took %d samples, median %v", len(p.samples), m)
	}
}

// FuzzParseProcStat: a stat line of any bytes reads or is refused, never
// panics; what reads has the times of the four fields it names.
func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte(benchStatLine(100, 1, "postgres: waisteer t1 127.0.0.1(5) idle", 5, 5, 40, 10)))
	f.Add([]byte("1 () R 0"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseProcStat(b)
		if err != nil {
			return
		}
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		var sum uint64
		for _, v := range fields[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += uint64(n)
		}
		if st.ticks != sum {
			t.Fatalf("%q: %d ticks, the fields add up to %d", b, st.ticks, sum)
		}
	})
}

// FuzzParseCPUTimes: /proc/stat of any bytes reads or is refused, never
// panics.
func FuzzParseCPUTimes(f *testing.F) {
	f.Add([]byte("cpu  100 10 50 800 40 5 5 10 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"))
	f.Add([]byte("cpu 1 2 3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := parseCPUTimes(b); err == nil {
			idleShare(c, c)
		}
	})
}

// FuzzParseSumCount: /metrics of any bytes never panics; a family not
// named in it is not found.
func FuzzParseSumCount(f *testing.F) {
	f.Add([]byte("waisteer_pg_round_trip_seconds_sum 0.024\nwaisteer_pg_round_trip_seconds_count 8\n"))
	f.Add([]byte("x_sum{a=\"b\"} NaN\nx_count 1e30\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseSumCount(b, "waisteer_pg_round_trip_seconds")
		if _, ok := parseSumCount(b, "absent_family_of_the_fuzzer"); ok && !bytes.Contains(b, []byte("absent_family_of_the_fuzzer_")) {
			t.Fatalf("%q: a family not in it was found", b)
		}
	})
}

// TestOthers: the machine's busy CPU over a phase less the servers',
// PostgreSQL's and the generators' is what else ran; never below 0 (the
// readings are of ticks, taken a moment apart).
func TestOthers(t *testing.T) {
	s := time.Second
	if got := (&benchServersRow{cpuBusy: 20 * s, cpuServers: 8 * s, cpuPG: 5 * s, cpuGen: 3 * s}).others(); got != 4*s {
		t.Errorf("20 - 8 - 5 - 3 = %v, want 4 s", got)
	}
	if got := (&benchServersRow{cpuBusy: 15 * s, cpuServers: 8 * s, cpuPG: 5 * s, cpuGen: 3 * s}).others(); got != 0 {
		t.Errorf("15 - 16: %v, want 0", got)
	}
	// 4 s of 10 s on 2 cores: 0.2 of the machine.
	if got := (&benchServersRow{elapsed: 10 * s, cpuBusy: 20 * s, cpuServers: 8 * s, cpuPG: 5 * s, cpuGen: 3 * s}).othersShare(2); math.Abs(got-0.2) > 1e-12 {
		t.Errorf("share %v, want 0.2", got)
	}
}

// parseCounter adds a counter's series up, and skips comments, other
// families (one whose name begins with it included) and unreadable values:
// the bench's δ waits (issue 31) are every server's sum.
func TestParseCounter(t *testing.T) {
	m := []byte(`# HELP waisteer_pg_loads_waits_total Decisions that waited.
# TYPE waisteer_pg_loads_waits_total counter
waisteer_pg_loads_waits_total 7
waisteer_pg_loads_waits_total{room="a"} 5
waisteer_pg_loads_waits_totally 100
waisteer_pg_loads_waits_total{room="b"} x
waisteer_pg_loads_refused_total 2
`)
	if got := parseCounter(m, "waisteer_pg_loads_waits_total"); got != 12 {
		t.Errorf("waits %d, want 7 + 5 = 12", got)
	}
	if got := parseCounter(m, "waisteer_pg_loads_refused_total"); got != 2 {
		t.Errorf("refused %d, want 2", got)
	}
	if got := parseCounter(m, "waisteer_absent_total"); got != 0 {
		t.Errorf("an absent family: %d, want 0", got)
	}
}
