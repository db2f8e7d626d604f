package bench

// The report of `waisteer bench -servers`: issue 31's table, the bytes by
// table, the waits on a room's log, what was lost, and the goals.

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Goals of issue 31 ("Goals").
const (
	benchGoalServersRate = 1.0 // two and three servers together answer at least what one answers
	benchGoalServersCPU  = 1.2 // CPU per decision (servers and PostgreSQL) with three servers <= 1.2 x one's
	benchGoalPGRate      = 0.8 // one server on PostgreSQL >= 0.8 x its rate on bbolt
	benchGoalPGBytes     = 400 // bytes per decision in PostgreSQL, tables and indexes together
)

// serversRateGoal: n servers' answers a second together over one server's,
// both on PostgreSQL.
func serversRateGoal(n int, together, one float64) benchGoal {
	return benchGoal{name: fmt.Sprintf("servers: %s together, answers/s / one server's on PostgreSQL", benchServersWord(n)),
		value: benchRatio(together, one), op: ">=", target: benchGoalServersRate}
}

// serversCPUGoal: the CPU per decision of n servers and PostgreSQL over
// one server's and PostgreSQL's.
func serversCPUGoal(n int, together, one time.Duration) benchGoal {
	return benchGoal{name: fmt.Sprintf("servers: CPU per decision (servers + PostgreSQL), %s / one's", benchServersWord(n)),
		value: benchRatio(together.Seconds(), one.Seconds()), op: "<=", target: benchGoalServersCPU}
}

// pgRateGoal: one server's answers a second on PostgreSQL over on bbolt.
func pgRateGoal(pg, bolt float64) benchGoal {
	return benchGoal{name: "PostgreSQL: one server's answers/s / one server's on bbolt",
		value: benchRatio(pg, bolt), op: ">=", target: benchGoalPGRate}
}

// pgBytesGoal: the tables' growth per decision stored (all but the live
// sessions'), with n servers, at the decisions the table held.
func pgBytesGoal(n int, decisions uint64, bytes float64) benchGoal {
	return benchGoal{name: fmt.Sprintf("PostgreSQL: bytes per decision, %s, %d held (tables and indexes together)", benchServersWord(n), decisions),
		value: bytes, unit: "bytes", op: "<=", target: benchGoalPGBytes}
}

func benchServersWord(n int) string {
	switch n {
	case 1:
		return "one server"
	case 2:
		return "two servers"
	case 3:
		return "three servers"
	}
	return fmt.Sprintf("%d servers", n)
}

// benchMarkdownTable writes rows (the first the header) as a markdown
// table, each column as wide as its widest cell, the first to the left,
// the others to the right.
func benchMarkdownTable(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				b.WriteString(" " + c + pad + " |")
			} else {
				b.WriteString(" " + pad + c + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(rows[0])
	var b strings.Builder
	b.WriteString("|")
	for i, n := range widths {
		if i == 0 {
			b.WriteString(strings.Repeat("-", n+2) + "|")
		} else {
			b.WriteString(strings.Repeat("-", n+1) + ":|")
		}
	}
	fmt.Fprintln(w, b.String())
	for _, r := range rows[1:] {
		line(r)
	}
}

// bolt and pg are the rows on bbolt and the row of n servers on PostgreSQL.
func (r *benchServersReport) bolt() *benchServersRow {
	for _, row := range r.rows {
		if !row.postgres && !row.pinned {
			return row
		}
	}
	return nil
}

func (r *benchServersReport) pg(n int) *benchServersRow {
	for _, row := range r.rows {
		if row.postgres && row.servers == n && !row.pinned {
			return row
		}
	}
	return nil
}

// pinnedRow is the row on core 0 on PostgreSQL (pg) or on bbolt.
func (r *benchServersReport) pinnedRow(pg bool) *benchServersRow {
	for _, row := range r.rows {
		if row.pinned && row.postgres == pg {
			return row
		}
	}
	return nil
}

// tableRows are issue 31's table: each row's answers a second (with its
// ratio to bbolt's, or to one server's), p99, CPU per decision, bytes per
// decision, the mean round trip of a group's batches, and the machine's
// idle share.
func (r *benchServersReport) tableRows() [][]string {
	out := [][]string{{"", "answers/s", "p99", "CPU per decision: servers + PostgreSQL", "bytes per decision", "round trip per batch", "CPU idle"}}
	bolt, one := r.bolt(), r.pg(1)
	for _, row := range r.rows {
		rate := benchRate(row.rate)
		switch {
		case row.pinned && row.postgres && r.pinnedRow(false) != nil:
			rate += fmt.Sprintf(" (%.2f of bbolt on core 0)", benchRatio(row.rate, r.pinnedRow(false).rate))
		case row.pinned:
		case row.postgres && row.servers == 1 && bolt != nil:
			rate += fmt.Sprintf(" (%.2f of bbolt)", benchRatio(row.rate, bolt.rate))
		case row.postgres && row.servers > 1 && one != nil:
			rate += fmt.Sprintf(" (%.2f of one)", benchRatio(row.rate, one.rate))
		}
		cpu := benchDur(row.cpuPer())
		if row.postgres && row.cpuOK {
			cpu = fmt.Sprintf("%s + %s = %s", benchDur(benchPer(row.cpuServers, row.check.answered)), benchDur(benchPer(row.cpuPG, row.check.answered)), cpu)
		} else if row.cpuOK {
			cpu += " (the server)"
		}
		// On bbolt the bytes in use first: the file, mapped ahead, grows in
		// steps of bbolt's AllocSize beyond what it needs, so that a short
		// phase's growth reads 0 or a step (store.Open).
		var bytes string
		if row.postgres {
			bytes = fmt.Sprintf("%.0f", row.bytesPer())
		} else {
			bytes = fmt.Sprintf("%.0f in use (file grew %.0f)", row.inUse, row.bytesPer())
		}
		lock := "n/a"
		if row.lockOK && row.lock.count > 0 {
			lock = benchDur(row.lockMean())
			if one != nil && row != one && one.lockOK && one.lock.count > 0 {
				lock += fmt.Sprintf(" (%+.2f ms)", (row.lockMean()-one.lockMean()).Seconds()*1000)
			}
		}
		idle := "n/a"
		if !math.IsNaN(row.idle) && row.elapsed > 0 {
			idle = fmt.Sprintf("%.0f %%", 100*row.idle)
		}
		out = append(out, []string{row.name(), rate, benchDur(row.p99), cpu, bytes, lock, idle})
	}
	return out
}

// tables are the tables that grew in some row on PostgreSQL, by name.
func (r *benchServersReport) tables() []string {
	var names []string
	for _, row := range r.rows {
		for name, g := range row.tables {
			if g != 0 && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// projection is what n servers on machines of cores cores each, beside a
// PostgreSQL of cores cores, would reach from this machine's CPU per
// decision of the servers (s) and of PostgreSQL (p): the servers' bound,
// n·cores/s, or PostgreSQL's, cores/p, whichever is less, and which it is.
func projection(n, cores int, s, p time.Duration) (float64, string) {
	if s <= 0 || p <= 0 {
		return math.NaN(), "unknown"
	}
	servers := float64(n*cores) / s.Seconds()
	pg := float64(cores) / p.Seconds()
	if servers <= pg {
		return servers, "the servers' CPU"
	}
	return pg, "PostgreSQL's CPU"
}

func (r *benchServersReport) write(w io.Writer) {
	o := r.o
	fmt.Fprintf(w, "waisteer bench -servers, %s\n", r.when.Format(time.RFC3339))
	fmt.Fprintf(w, "machine      %s\n             %s\n", r.machine[0], r.machine[1])
	fmt.Fprintf(w, "load average %s before, %s after\n", r.loadAvg[0], r.loadAvg[1])
	fmt.Fprintf(w, "PostgreSQL   %s, started by the bench in a temporary directory (internal/pgtest), a fresh database for each row\n", r.pgBin)
	fmt.Fprintf(w, "generator    %s; %d connections a server, as one server alone\n", r.generator, o.halfConns())
	fmt.Fprintln(w, "pinning      none: the servers, PostgreSQL and the load generators share the machine's cores, as issue 31 measured;")
	fmt.Fprintln(w, "             but in the rows \"on core 0\": the server on core 0 alone, wrk and PostgreSQL on core 1 (taskset)")
	procs := 0
	if len(r.rows) > 0 {
		procs = r.rows[0].procs
	}
	fmt.Fprintf(w, "servers      waisteer serve (%s, GOMAXPROCS %d), a room of %d pathways; on PostgreSQL each server is a process of its own\n", r.engine, procs, r.pathways)
	fmt.Fprintln(w, "             with the same room, policy and keys; the hops post each period's records to the first, the others follow them")
	fmt.Fprintf(w, "load         %d players in all, each on one server, replaying its RELOAD-URI with its report; each row: %s warm-up,\n", benchPlayersOf(o.Players, o.halfConns()), o.Warmup)
	fmt.Fprintf(w, "             then %s with every server saturated at once (closed loop)\n", o.Duration)
	if o.Quick {
		fmt.Fprintln(w, "             -quick: phases of about a second; the ratios are rough")
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Issue 31's table: the servers together, saturated; answers/s added up over the servers; p99 over every answer")
	if r.wrk {
		fmt.Fprintln(w, "  (wrk: the worst server's p99); CPU per decision: the servers' processes and every process of PostgreSQL (from /proc)")
	} else {
		fmt.Fprintln(w, "  (the Go generator's, merged); CPU per decision: the servers' processes and every process of PostgreSQL (from /proc)")
	}
	fmt.Fprintln(w, "  over the decisions answered 200; bytes per decision: the store's growth over the phase over the decisions it stored, every")
	fmt.Fprintln(w, "  table and index (a session's entry is its decision's row since schema 6); on bbolt the bytes in use per decision held, once")
	fmt.Fprintln(w, "  stopped, and in brackets the file's growth over the phase per decision; round trip per batch: waisteer_pg_round_trip_seconds'")
	fmt.Fprintln(w, "  mean, every server's groups (two batches a group); no server waits for another's commit, each appending to its own log;")
	fmt.Fprintln(w, "  in brackets, the rows' excess over one server's: what the others cost a group in the database's contention")
	benchMarkdownTable(w, r.tableRows())
	var busy []string
	for _, row := range r.rows {
		if f := row.othersShare(runtime.NumCPU()); f > 0.10 {
			busy = append(busy, fmt.Sprintf("%s %.0f %%", row.name(), 100*f))
		}
	}
	if len(busy) > 0 {
		fmt.Fprintln(w, "  Other work took this share of the machine's CPU during the phases (the rates are lower by it, the CPU per decision is not):")
		fmt.Fprintf(w, "    %s\n", strings.Join(busy, "; "))
	}
	fmt.Fprintln(w)

	if names := r.tables(); len(names) > 0 {
		fmt.Fprintln(w, "Bytes per decision by table: pg_total_relation_size (the table, its indexes and TOAST), grown over the phase / decisions stored in it")
		head := []string{"table"}
		var pgRows []*benchServersRow
		for _, row := range r.rows {
			if row.postgres && !row.pinned {
				pgRows = append(pgRows, row)
				head = append(head, benchServersWord(row.servers))
			}
		}
		rows := [][]string{head}
		for _, name := range names {
			line := []string{"waisteer." + name}
			for _, row := range pgRows {
				line = append(line, fmt.Sprintf("%.1f", row.tableBytesPer(name)))
			}
			rows = append(rows, line)
		}
		total := []string{"all the tables"}
		stored, held := []string{"decisions stored over the phase"}, []string{"decisions held after it"}
		for _, row := range pgRows {
			total = append(total, fmt.Sprintf("%.1f", row.bytesPer()))
			stored = append(stored, fmt.Sprintf("%d", row.check.stored))
			held = append(held, fmt.Sprintf("%d", row.decisions))
		}
		benchMarkdownTable(w, append(rows, total, stored, held))
		if bolt := r.bolt(); bolt != nil {
			fmt.Fprintf(w, "  bbolt: the file grew %d bytes over %d decisions: %.0f per decision (mapped ahead, it grows in steps of 16 MiB beyond its need:\n  a short phase reads 0 or a step);\n", bolt.fileGrowth, bolt.check.stored, bolt.bytesPer())
			fmt.Fprintf(w, "  once stopped, %.0f bytes in use per decision held in the buckets of decisions, their index, contexts, snapshots and the log\n", bolt.inUse)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "Each row's phase: the servers' connections, decisions per group commit, and the machine's CPU seconds over the phase: the servers',")
	fmt.Fprintln(w, "  PostgreSQL's, the load generators', and the rest (what else ran on the machine: the rates pay for it, the CPU per decision does not);")
	fmt.Fprintln(w, "  on PostgreSQL, the decisions that waited for the shared loads to be current (δ: the follower's and the flusher's lag within 100 ms),")
	fmt.Fprintln(w, "  and those refused for it")
	for _, row := range r.rows {
		waits := ""
		if row.postgres {
			waits = fmt.Sprintf("; δ waits %d, refused %d", row.waits[0], row.waits[1])
		}
		fmt.Fprintf(w, "  %-44s connections %-10s decisions per group %5.1f  CPU over %s: servers %s, PostgreSQL %s, generators %s, the rest %s; steal %.0f %%%s\n", row.name(),
			benchJoinInts(row.conns), row.groups.mean(), benchSeconds(row.elapsed), benchSeconds(row.cpuServers), benchSeconds(row.cpuPG), benchSeconds(row.cpuGen),
			benchSeconds(row.others()), 100*row.steal, waits)
	}
	fmt.Fprintln(w)

	if ref := r.pg(1); ref != nil && ref.probe > 0 {
		fmt.Fprintf(w, "The machine's speed: the CPU of %d Ed25519 signatures of 1260 bytes (speed.go's probe, every %s on a thread of its own), the median\n", probeSigns, probeEvery)
		fmt.Fprintln(w, "  over each phase beside its median over one server's on PostgreSQL, and each row's CPU per decision at the speed of that phase")
		fmt.Fprintln(w, "  (its CPU per decision / that factor): the same work reads as more CPU when the machine is kept busier")
		for _, row := range r.rows {
			fmt.Fprintf(w, "  %-44s probe %9s (%.2f of one server's)  CPU per decision %9s, at one server's speed %9s\n", row.name(),
				benchDur(row.probe), slowdown(row.probe, ref.probe), benchDur(row.cpuPer()), benchDur(row.cpuAtSpeed(ref)))
		}
		fmt.Fprintln(w)
	}

	lost, phases := 0, 0
	storesOK := true
	fmt.Fprintln(w, "Nothing lost: each phase's decisions stored (rows counted in waisteer.decisions; on bbolt the group commits) / answered 200 (the servers' counters) / answers the generators read")
	for _, row := range r.rows {
		if !row.check.ok {
			fmt.Fprintf(w, "  %-44s the servers' counters did not read\n", row.name())
			storesOK = false
			continue
		}
		phases++
		mark := "ok"
		if row.check.lost() {
			lost++
			mark = "LOST"
		}
		fmt.Fprintf(w, "  %-44s %8d / %8d / %8d  failed %d  %s\n", row.name(), row.check.stored, row.check.answered, row.check.received, row.failed, mark)
	}
	for _, row := range r.rows {
		if row.postgres {
			fmt.Fprintf(w, "  %-44s once stopped: decisions in the database / the servers' 200s over their lives %d / %d\n", row.name(), row.storeDecisions, row.lifeAnswered)
			storesOK = storesOK && row.lifeAnswered > 0 && row.storeDecisions == row.lifeAnswered
		} else {
			fmt.Fprintf(w, "  %-44s once stopped: decisions stored / answered / leaves logged %d / %d / %d\n", row.name(), row.storeDecisions, row.lifeAnswered, row.leaves)
			storesOK = storesOK && nothingLost(row.lifeAnswered, row.storeDecisions, row.leaves)
		}
	}
	for _, row := range r.rows {
		if row.firstErr != nil {
			fmt.Fprintf(w, "  %s: the first failure: %v\n", row.name(), row.firstErr)
		}
	}
	fmt.Fprintln(w)

	if three := r.pg(3); three != nil && three.cpuOK && three.check.answered > 0 {
		s, p := benchPer(three.cpuServers, three.check.answered), benchPer(three.cpuPG, three.check.answered)
		fmt.Fprintf(w, "Arithmetic from the three servers' CPU per decision (servers %s, PostgreSQL %s), for machines of 16 cores,\n", benchDur(s), benchDur(p))
		fmt.Fprintln(w, "  PostgreSQL on one of them; CPU alone, not measured: it leaves out the waits on the room's log, the disk and the network")
		for _, n := range []int{3, 10} {
			rate, bound := projection(n, 16, s, p)
			fmt.Fprintf(w, "  %2d servers: %s decisions/s, bound by %s\n", n, benchRate(rate), bound)
		}
		fmt.Fprintln(w)
	}

	audited := r.audit
	if a := audited; a != nil {
		if a.rate > 0 {
			fmt.Fprintf(w, "The audit (-audit %d): %d servers on a database of their own, loaded together at %s requests/s (half the row's saturated rate,\n",
				o.Audit, a.servers, benchRate(a.rate))
			fmt.Fprintf(w, "  the Go generator, paced) for %s, until their room held %d decisions (%d answers not 200); then `waisteer audit` through\n",
				a.made.Round(time.Second), a.held, a.failures)
		} else {
			fmt.Fprintf(w, "The audit (-audit %d -audit-saturated): %d servers on a database of their own, loaded together saturated (the Go generator,\n",
				o.Audit, a.servers)
			fmt.Fprintf(w, "  closed loop) for %s, until their room held %d decisions (%d answers not 200); then `waisteer audit` through\n",
				a.made.Round(time.Second), a.held, a.failures)
		}
		fmt.Fprintf(w, "  the first server, δ %d ms, %d decisions verified by WAI §9 in full:\n", benchServersStaleness/1000, o.AuditSample)
		for _, l := range strings.Split(strings.TrimRight(a.report.String(), "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
		fmt.Fprintf(w, "  the audit took %s (%s decisions/s)\n\n", a.took.Round(time.Millisecond), benchRate(a.auditing))
	}

	fmt.Fprintln(w, "Goals (issue 31)")
	bolt, one := r.bolt(), r.pg(1)
	if one != nil {
		for _, n := range benchServerCounts[1:] {
			if row := r.pg(n); row != nil {
				serversRateGoal(n, row.rate, one.rate).write(w)
			}
		}
		if three := r.pg(3); three != nil {
			serversCPUGoal(3, three.cpuPer(), one.cpuPer()).write(w)
			if three.probe > 0 && one.probe > 0 {
				g := serversCPUGoal(3, three.cpuAtSpeed(one), one.cpuPer())
				g.name = "servers: the same, at one server's speed (the probe)"
				g.write(w)
			}
		}
		if bolt != nil {
			pgRateGoal(one.rate, bolt.rate).write(w)
		}
	}
	if pg, bolt := r.pinnedRow(true), r.pinnedRow(false); pg != nil && bolt != nil {
		g := pgRateGoal(pg.rate, bolt.rate)
		g.name = "PostgreSQL on a core of its own: one server's answers/s on core 0 / on bbolt"
		g.write(w)
	}
	for _, row := range r.rows {
		if row.postgres && !row.pinned {
			pgBytesGoal(row.servers, row.decisions, row.bytesPer()).write(w)
		}
	}
	fmt.Fprintf(w, "  %-78s = %d of %d (goal 0, and every store's decisions = its servers' 200s: %s)\n", "nothing lost: phases whose decisions stored != answered", lost, phases, benchMet(lost == 0 && storesOK && phases > 0))
	if a := audited; a != nil {
		outcome := "exact"
		if !a.report.OK() {
			outcome = "MISMATCH"
		}
		fmt.Fprintf(w, "  %-78s = %s (goal exact: %s)\n", fmt.Sprintf("audit: the %d servers' room of %d decisions in %d logs", a.servers, a.report.Fetched, len(a.report.Logs)),
			outcome, benchMet(a.report.OK() && a.report.Fetched >= o.Audit))
	}
}

func benchJoinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, "+")
}

func benchSeconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
