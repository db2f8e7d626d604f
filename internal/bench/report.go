package bench

// The report of `waisteer bench`.

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Goals of issue 14.
const (
	benchGoalRate    = 1.0                   // durable signed decisions/s >= 1.0 x the signing floor's
	benchGoalBusy    = 0.90                  // the server's core saturated at saturation
	benchGoalCPU     = 1.5                   // CPU per decision <= 1.5 x a bare signature of its bytes
	benchGoalEngines = 1.25                  // net/http's CPU per decision <= 1.25 x fasthttp's
	benchGoalHalfP99 = 5 * time.Millisecond  // p99 at half the saturated rate
	benchGoalSatP99  = 20 * time.Millisecond // p99 at saturation, at the least connections
	benchGoalDemoP99 = 10 * time.Millisecond // the demo's p99 under that load, strictly under
	benchGoalRecords = 15_000.0              // records/s, one per POST, from 64 hops
	benchGoalStartup = time.Second           // from spawn to the first 200, on the run's biggest store
)

func (r *benchReport) write(w io.Writer) {
	o := r.o
	hc := o.halfConns()
	fmt.Fprintf(w, "waisteer bench, %s\n", r.when.Format(time.RFC3339))
	fmt.Fprintf(w, "machine      %s\n             %s\n", r.machine[0], r.machine[1])
	fmt.Fprintf(w, "disk         a 4 KiB write and fdatasync: median %s\n", benchDur(r.fsync))
	fmt.Fprintf(w, "load average %s before, %s after\n", r.loadAvg[0], r.loadAvg[1])
	fmt.Fprintf(w, "generator    %s for the saturated phases; the Go generator paces the half-rate phases\n", r.generator)
	if r.pinned {
		fmt.Fprintln(w, "pinning      each server on core 0 (taskset -c 0), the load generator on the other core(s)")
	} else {
		fmt.Fprintln(w, "pinning      none (fewer than 2 cores, or no taskset): the servers and the generator share the cores")
	}
	fmt.Fprintf(w, "load         %d players per load on keep-alive HTTP/1.1 over loopback, %s connections;\n", benchPlayersOf(o.Players, hc), benchInts(o.Conns))
	if r.wrk {
		fmt.Fprintln(w, "             wrk replays each player's RELOAD-URI (its session) with an HLS report (_HLS_pathway, _HLS_throughput);")
		fmt.Fprintln(w, "             the Go generator's players (half-rate phases): half HLS, half DASH; a quarter with CMCD; 1 in 8 at the floor tier")
		fmt.Fprintln(w, "             over a phase's turns, wrk's p50 is the mean of the turns' (by answers), its p99 and p999 the worst turn's")
	} else {
		fmt.Fprintln(w, "             players: half HLS, half DASH reports; a quarter with CMCD (query or header); 1 in 8 at the floor tier")
	}
	fmt.Fprintf(w, "             each server: %s warm-up, %s saturated (closed loop, in turns of at most %s with the signing floor), %s paced at half that rate (%d connections)\n", o.Warmup, o.Duration, benchRound, o.Duration, hc)
	if o.Quick {
		fmt.Fprintln(w, "             -quick: phases of about a second; the ratios are rough")
	}
	fmt.Fprintln(w)

	// The table of issue 14.
	fmt.Fprintln(w, "Issue 14's table: saturated, closed loop; latency at saturation; CPU of the server's process per request")
	row := func(name string, conns int, s *benchServed) {
		fmt.Fprintf(w, "  %-62s %5d %9s/s %10s %10s %10s   %4.2f\n", name, conns, benchRate(s.rate), benchDur(s.pct[0]), benchDur(s.pct[1]), benchDur(s.cpu), s.busy)
	}
	fmt.Fprintf(w, "  %-62s %5s %11s %10s %10s %10s   %s\n", "server", "conns", "req/s", "p50", "p99", "CPU/req", "core busy")
	row("(b) plain net/http, fixed manifest", hc, &r.plain)
	for _, room := range r.rooms {
		row(fmt.Sprintf("(c) signing floor: net/http signing %d B, storing nothing", len(room.msg)), hc, room.floorSat[hc])
		for _, run := range room.runs {
			row(fmt.Sprintf("waisteer serve (%s), %d pathways", run.engine, run.n), hc, run.sat[hc])
		}
	}
	if r.demo != nil {
		row("waisteer demo (its own process, its hops posting)", r.demo.conns, &r.demo.sat)
	}
	for _, c := range o.Conns {
		if c == hc {
			continue
		}
		fmt.Fprintf(w, "  the same, %d connections: floor / waisteer\n", c)
		for _, room := range r.rooms {
			row(fmt.Sprintf("(c) the signing floor, %d pathways' decision", room.n), c, room.floorSat[c])
			for _, run := range room.runs {
				row(fmt.Sprintf("waisteer serve (%s), %d pathways", run.engine, run.n), c, run.sat[c])
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "At half the saturated rate (paced by the Go generator from each request's due time, %d connections)\n", hc)
	half := func(name string, s *benchServed) {
		fmt.Fprintf(w, "  %-62s %9s/s  p50 %10s  p99 %10s  p999 %10s\n", name, benchRate(s.rate), benchDur(s.pct[0]), benchDur(s.pct[1]), benchDur(s.pct[2]))
	}
	half("(b) plain net/http, fixed manifest", &r.plainHalf)
	for _, room := range r.rooms {
		half(fmt.Sprintf("(c) the signing floor, %d pathways' decision", room.n), &room.floorHalf)
		for _, run := range room.runs {
			half(fmt.Sprintf("waisteer serve (%s), %d pathways", run.engine, run.n), &run.half)
		}
	}
	if r.demo != nil {
		half("waisteer demo", &r.demo.half)
	}
	fmt.Fprintln(w)

	var runs []*benchRealRun
	for _, room := range r.rooms {
		runs = append(runs, room.runs...)
	}
	col := func(f func(*benchRealRun) string) string {
		var s []string
		for _, run := range runs {
			s = append(s, fmt.Sprintf("%-22s", f(run)))
		}
		return strings.Join(s, " ")
	}
	fmt.Fprintln(w, "Steering: waisteer serve on its bbolt store; each manifest is sent once its decision is fsynced (group commit)")
	fmt.Fprintf(w, "  %-34s %s\n", "", col(func(run *benchRealRun) string { return fmt.Sprintf("%d pathways, %s", run.n, run.engine) }))
	fmt.Fprintf(w, "  %-34s %s\n", "decision (WSD1) / manifest bytes", col(func(run *benchRealRun) string {
		room := r.roomOf(run)
		return fmt.Sprintf("%d / %d", room.decisionBytes, room.manifestBytes)
	}))
	fmt.Fprintf(w, "  %-34s %s\n", "load generator CPU per request", col(func(run *benchRealRun) string { return benchDur(run.sat[hc].gen) }))
	fmt.Fprintf(w, "  %-34s %s\n", "decisions per group commit", col(func(run *benchRealRun) string { return fmt.Sprintf("%.1f", run.groupSize) }))
	fmt.Fprintf(w, "  %-34s %s\n", "bytes stored per decision", col(func(run *benchRealRun) string { return fmt.Sprintf("%.0f", run.bytesInUse) }))
	fmt.Fprintf(w, "  %-34s %s\n", "file growth per decision", col(func(run *benchRealRun) string { return fmt.Sprintf("%.0f", run.fileBytes) }))
	fmt.Fprintf(w, "  %-34s %s\n", "failed requests", col(func(run *benchRealRun) string { return strconv.FormatUint(run.failed(), 10) }))
	fmt.Fprintf(w, "  %-34s %s\n", "server peak RSS", col(func(run *benchRealRun) string { return fmt.Sprintf("%.0f MiB", float64(run.peakRSS)/(1<<20)) }))
	fmt.Fprintln(w, "  (bytes stored: in use in the buckets of decisions, their index by digest, contexts and evidence snapshots;")
	fmt.Fprintln(w, "   file growth: the bbolt file's, over the steering phases)")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Baselines, same run, same machine")
	for _, room := range r.rooms {
		fmt.Fprintf(w, "  (a) bare Ed25519 of the %d-pathway decision (%d bytes signed): %s CPU; on every core at once %s\n", room.n, len(room.msg), benchDur(room.bare), benchDur(room.bareAll))
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Nothing lost: each phase's decisions stored (the server's group commits) / manifests answered (its steering route's 200s) / answers the generator read")
	lost, phases := 0, 0
	check := func(name string, c benchCheck, failed uint64) {
		if !c.ok {
			return
		}
		phases++
		mark := "ok"
		if c.lost() {
			lost++
			mark = "LOST"
		}
		fmt.Fprintf(w, "  %-62s %8d / %8d / %8d  failed %d  %s\n", name, c.stored, c.answered, c.received, failed, mark)
	}
	for _, run := range runs {
		for _, c := range o.Conns {
			check(fmt.Sprintf("%d pathways, %s, %d conns, saturated", run.n, run.engine, c), run.sat[c].check, run.sat[c].failed)
		}
		check(fmt.Sprintf("%d pathways, %s, %d conns, half rate", run.n, run.engine, hc), run.half.check, run.half.failed)
	}
	if r.demo != nil {
		check(fmt.Sprintf("the demo, %d conns, saturated", r.demo.conns), r.demo.sat.check, r.demo.sat.failed)
		check(fmt.Sprintf("the demo, %d conns, half rate", r.demo.conns), r.demo.half.check, r.demo.half.failed)
	}
	storesOK := true
	for _, run := range runs {
		fmt.Fprintf(w, "  %2d pathways, %-8s decisions stored / answered %d / %d (the store once stopped / the server's 200s; the generators read %d)\n", run.n, run.engine+":", run.stored, run.answered, run.received)
		storesOK = storesOK && run.stored == run.answered && run.stored > 0
	}
	if r.demo != nil {
		fmt.Fprintf(w, "  the demo:            decisions stored / answered %d / %d\n", r.demo.stored, r.demo.answered)
		storesOK = storesOK && r.demo.stored == r.demo.answered
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "Records in: POST /v1/rooms/{room}/records from %d hops at once, each record's signature checked, stored durably before the answer\n", o.IngestHops)
	for _, room := range r.rooms {
		fmt.Fprintf(w, "  (a') a record's parse and check (its signature verified), %d pathways' room, one thread: %s CPU: one core's ceiling %s records/s\n", room.n, benchDur(room.check), benchRate(1/room.check.Seconds()))
	}
	for _, run := range runs {
		for _, in := range run.ingest {
			fmt.Fprintf(w, "  %2d pathways, %2d records per POST: %s records/s, server CPU %s per record (%d records", run.n, in.batch, benchRate(in.rate), benchDur(in.cpu), in.records)
			if in.failed > 0 {
				fmt.Fprintf(w, ", %d POSTs failed: %v", in.failed, in.err)
			}
			fmt.Fprintln(w, ")")
		}
	}
	fmt.Fprintln(w)
	if st := r.startup; st != nil {
		fmt.Fprintf(w, "Start-up: bench serve restarted on the run's biggest store (%d decisions, %d bytes): %s from spawn to the first 200 on the steering route\n", st.decisions, st.bytes, benchDur(st.took))
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "Goals (issue 14)")
	goal := func(name string, v float64, unit, op string, target float64, ok bool) {
		u := ""
		if unit != "" {
			u = " " + unit
		}
		fmt.Fprintf(w, "  %-62s = %.2f%s (goal %s %s%s: %s)\n", name, v, u, op, strconv.FormatFloat(target, 'f', -1, 64), u, benchMet(ok))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	least := math.Inf(1)
	for _, room := range r.rooms {
		for _, run := range room.runs {
			for _, c := range o.Conns {
				ratio := benchRatio(run.sat[c].rate, room.floorSat[c].rate)
				goal(fmt.Sprintf("rate, %d pathways, %s, %d conns: decisions/s / floor (c)", run.n, run.engine, c), ratio, "", ">=", benchGoalRate, ratio >= benchGoalRate)
				least = min(least, run.sat[c].busy)
			}
		}
	}
	goal("rate: the server's core busy at saturation, least of the phases", least, "", ">=", benchGoalBusy, least >= benchGoalBusy)
	for _, room := range r.rooms {
		for _, run := range room.runs {
			ratio := benchRatio(run.sat[hc].cpu.Seconds(), room.bare.Seconds())
			goal(fmt.Sprintf("CPU, %d pathways, %s: per decision / bare signature (a)", run.n, run.engine), ratio, "", "<=", benchGoalCPU, ratio <= benchGoalCPU)
		}
		if fast, std := room.engine("fasthttp"), room.engine("net/http"); fast != nil && std != nil {
			ratio := benchRatio(std.sat[hc].cpu.Seconds(), fast.sat[hc].cpu.Seconds())
			goal(fmt.Sprintf("CPU, %d pathways: net/http / fasthttp per decision", room.n), ratio, "", "<=", benchGoalEngines, ratio <= benchGoalEngines)
		}
	}
	for _, run := range runs {
		goal(fmt.Sprintf("latency, %d pathways, %s: p99 at half rate", run.n, run.engine), ms(run.half.pct[1]), "ms", "<=", ms(benchGoalHalfP99), run.half.pct[1] > 0 && run.half.pct[1] <= benchGoalHalfP99)
		goal(fmt.Sprintf("latency, %d pathways, %s: p99 at saturation, %d conns", run.n, run.engine, hc), ms(run.sat[hc].pct[1]), "ms", "<=", ms(benchGoalSatP99), run.sat[hc].pct[1] > 0 && run.sat[hc].pct[1] <= benchGoalSatP99)
	}
	if d := r.demo; d != nil {
		goal(fmt.Sprintf("the demo: p99 at saturation, %d conns, its hops posting", d.conns), ms(d.sat.pct[1]), "ms", "<", ms(benchGoalDemoP99), d.sat.pct[1] > 0 && d.sat.pct[1] < benchGoalDemoP99)
	}
	for _, run := range runs {
		for _, in := range run.ingest {
			if in.batch == 1 {
				goal(fmt.Sprintf("records, %d pathways: records/s, 1 per POST from %d hops", run.n, o.IngestHops), in.rate, "", ">=", benchGoalRecords, in.rate >= benchGoalRecords && in.failed == 0)
				if room := r.roomOf(run); room != nil && room.check > 0 {
					fmt.Fprintf(w, "  %-62s   (that rate x a record's check (a') = %.2f of a core: one core can check %s records/s and do nothing else)\n", "", in.rate*room.check.Seconds(), benchRate(1/room.check.Seconds()))
				}
			}
		}
	}
	if st := r.startup; st != nil {
		goal(fmt.Sprintf("start-up: spawn to first 200 on %d decisions, %d bytes", st.decisions, st.bytes), st.took.Seconds(), "s", "<=", benchGoalStartup.Seconds(), st.took <= benchGoalStartup)
	}
	fmt.Fprintf(w, "  %-62s = %d of %d (goal 0, and every store's decisions = its 200s: %s)\n", "nothing lost: phases whose decisions stored != answered", lost, phases, benchMet(lost == 0 && storesOK && phases > 0))
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Evidence update after a record (evidence.Index.Add + decision.Ranking.Refresh, in process), by the records of its pathway in the window")
	for _, ev := range r.evidence {
		fmt.Fprintf(w, "  %6d records: %s per record\n", ev.window, benchDur(ev.perOp))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Memory per live session (store.MemLoads, in process: the heap's growth over the sessions, each steered once)")
	for _, s := range r.sessions {
		fmt.Fprintf(w, "  %d sessions, %d pathways: %.0f bytes per session\n", s.sessions, s.pathways, s.bytes)
	}
	for _, run := range runs {
		for _, name := range run.profiled {
			fmt.Fprintf(w, "profile: %s\n", name)
		}
	}
}

// roomOf is the room a run steered.
func (r *benchReport) roomOf(run *benchRealRun) *benchRoomRun {
	for _, room := range r.rooms {
		if slices.Contains(room.runs, run) {
			return room
		}
	}
	return nil
}

// engine is the room's run behind engine, or nil.
func (room *benchRoomRun) engine(engine string) *benchRealRun {
	for _, run := range room.runs {
		if run.engine == engine {
			return run
		}
	}
	return nil
}

// failed counts the requests of every phase that failed.
func (run *benchRealRun) failed() uint64 {
	n := run.half.failed
	for _, s := range run.sat {
		n += s.failed
	}
	return n
}

func benchInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, " and ")
}

func benchPlayersOf(players, clients int) int {
	per := max(1, (players+clients-1)/clients)
	return per * clients
}

func benchRatio(x, y float64) float64 {
	if y == 0 {
		return math.NaN()
	}
	return x / y
}

func benchMet(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func benchRate(r float64) string {
	s := strconv.FormatFloat(math.Round(r), 'f', 0, 64)
	// Thousands apart, for the eye.
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func benchDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "n/a"
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
