package bench

// The report of `waisteer bench`.

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Goals of issue 7.
const (
	benchGoalCPU  = 2.0  // CPU per decision ≤ 2 × a bare signature of its bytes
	benchGoalRate = 0.75 // decisions/s ≥ 0.75 × the signing floor's
)

func (r *benchReport) write(w io.Writer) {
	o := r.o
	fmt.Fprintf(w, "waisteer bench, %s\n", r.when.Format(time.RFC3339))
	fmt.Fprintf(w, "machine      %s\n             %s\n", r.machine[0], r.machine[1])
	fmt.Fprintf(w, "disk         a 4 KiB write and fdatasync: median %s\n", benchDur(r.fsync))
	fmt.Fprintf(w, "load average %s before, %s after\n", r.loadAvg[0], r.loadAvg[1])
	fmt.Fprintf(w, "load         %d clients (keep-alive HTTP/1.1 on loopback, on the same cores as the servers), %d players:\n", o.Clients, benchPlayersOf(o))
	fmt.Fprintln(w, "             half HLS, half DASH reports; a quarter with CMCD (query or header); 1 in 8 at the floor tier;")
	fmt.Fprintf(w, "             each server: %s warm-up, %s saturated (closed loop; the server and (c) in turns of at most %s), %s paced at half that rate\n", o.Warmup, o.Duration, benchRound, o.Duration)
	if o.Quick {
		fmt.Fprintln(w, "             -quick: a smoke run; these figures mean little")
	}
	fmt.Fprintln(w)

	col := func(f func(*benchRealRun) string) string {
		var s []string
		for _, run := range r.runs {
			s = append(s, fmt.Sprintf("%-22s", f(run)))
		}
		return strings.Join(s, " ")
	}
	fmt.Fprintf(w, "Steering: waisteer serve behind %s on its bbolt store; each manifest is sent once its decision is fsynced (group commit)\n", r.o.Engine)
	fmt.Fprintf(w, "  %-34s %s\n", "", col(func(run *benchRealRun) string { return fmt.Sprintf("%d pathways", run.n) }))
	fmt.Fprintf(w, "  %-34s %s\n", "decision (WSD1) / manifest bytes", col(func(run *benchRealRun) string { return fmt.Sprintf("%d / %d", run.decisionBytes, run.manifestBytes) }))
	fmt.Fprintf(w, "  %-34s %s\n", "decisions/s at saturation", col(func(run *benchRealRun) string { return benchRate(run.served.rate) }))
	fmt.Fprintf(w, "  %-34s %s\n", "server CPU per decision", col(func(run *benchRealRun) string { return benchDur(run.served.cpu) }))
	fmt.Fprintf(w, "  %-34s %s\n", "load generator CPU per request", col(func(run *benchRealRun) string { return benchDur(run.served.gen) }))
	fmt.Fprintf(w, "  %-34s %s\n", "latency p50 at half rate", col(func(run *benchRealRun) string {
		return fmt.Sprintf("%s (at %s/s)", benchDur(run.served.p50), benchRate(run.served.half))
	}))
	fmt.Fprintf(w, "  %-34s %s\n", "latency p99 / p999 at half rate", col(func(run *benchRealRun) string {
		return benchDur(run.served.p99) + " / " + benchDur(run.served.p999)
	}))
	fmt.Fprintf(w, "  %-34s %s\n", "decisions per group commit", col(func(run *benchRealRun) string { return fmt.Sprintf("%.1f", run.groupSize) }))
	fmt.Fprintf(w, "  %-34s %s\n", "bytes stored per decision", col(func(run *benchRealRun) string { return fmt.Sprintf("%.0f", run.bytesInUse) }))
	fmt.Fprintf(w, "  %-34s %s\n", "file growth per decision", col(func(run *benchRealRun) string { return fmt.Sprintf("%.0f", run.fileBytes) }))
	fmt.Fprintf(w, "  %-34s %s\n", "decisions stored / answered", col(func(run *benchRealRun) string { return fmt.Sprintf("%d / %d", run.stored, run.answered) }))
	fmt.Fprintf(w, "  %-34s %s\n", "failed requests", col(func(run *benchRealRun) string { return strconv.FormatUint(run.served.failed, 10) }))
	fmt.Fprintf(w, "  %-34s %s\n", "server peak RSS", col(func(run *benchRealRun) string { return fmt.Sprintf("%.0f MiB", float64(run.peakRSS)/(1<<20)) }))
	fmt.Fprintln(w, "  (bytes stored: in use in the buckets of decisions, their index by digest, contexts and evidence snapshots;")
	fmt.Fprintln(w, "   file growth: the bbolt file's, over the steering phases)")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Baselines, same run, same machine, same load generator")
	fmt.Fprintf(w, "  %-34s %s\n", "(a) bare Ed25519 of the decision", col(func(run *benchRealRun) string {
		return benchDur(r.bare[r.index(run)]) + " CPU"
	}))
	fmt.Fprintf(w, "  %-34s %s\n", "    the same on every core at once", col(func(run *benchRealRun) string {
		return benchDur(r.bareAll[r.index(run)]) + " CPU"
	}))
	fmt.Fprintf(w, "  %-34s %s\n", "(c) plain + signature: answers/s", col(func(run *benchRealRun) string { return benchRate(r.signing[r.index(run)].rate) }))
	fmt.Fprintf(w, "  %-34s %s\n", "    server CPU per answer", col(func(run *benchRealRun) string { return benchDur(r.signing[r.index(run)].cpu) }))
	fmt.Fprintf(w, "  %-34s %s\n", "    p50 / p99 / p999 at half rate", col(func(run *benchRealRun) string {
		c := r.signing[r.index(run)]
		return benchDur(c.p50) + " / " + benchDur(c.p99) + " / " + benchDur(c.p999)
	}))
	b := r.plain
	fmt.Fprintf(w, "  (b) plain net/http, fixed manifest:  %s answers/s, server CPU %s per answer, p50 / p99 / p999 at half rate %s / %s / %s\n",
		benchRate(b.rate), benchDur(b.cpu), benchDur(b.p50), benchDur(b.p99), benchDur(b.p999))
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Goals (issue 7)")
	for i, run := range r.runs {
		cpuRatio := benchRatio(run.served.cpu.Seconds(), r.bare[i].Seconds())
		rateRatio := benchRatio(run.served.rate, r.signing[i].rate)
		fmt.Fprintf(w, "  %2d pathways: CPU per decision / bare signature = %.2f (goal <= %.2f: %s)\n", run.n, cpuRatio, benchGoalCPU, benchMet(cpuRatio <= benchGoalCPU))
		fmt.Fprintf(w, "  %2d pathways: decisions/s / signing floor (c)   = %.2f (goal >= %.2f: %s)\n", run.n, rateRatio, benchGoalRate, benchMet(rateRatio >= benchGoalRate))
	}
	for i, run := range r.runs {
		fmt.Fprintf(w, "  (%d pathways: CPU per decision / a signature on every core at once = %.2f, for comparison; the goal is of one thread's)\n",
			run.n, benchRatio(run.served.cpu.Seconds(), r.bareAll[i].Seconds()))
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Records in: POST /v1/rooms/{room}/records from 8 hops at once, each record's signature checked, stored durably before the answer")
	for _, run := range r.runs {
		for _, in := range run.ingest {
			fmt.Fprintf(w, "  %2d pathways, %2d records per POST: %s records/s, server CPU %s per record (%d records", run.n, in.batch, benchRate(in.rate), benchDur(in.cpu), in.records)
			if in.failed > 0 {
				fmt.Fprintf(w, ", %d POSTs failed: %v", in.failed, in.err)
			}
			fmt.Fprintln(w, ")")
		}
	}
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
	for _, run := range r.runs {
		for _, name := range run.profiled {
			fmt.Fprintf(w, "profile: %s\n", name)
		}
	}
}

func (r *benchReport) index(run *benchRealRun) int {
	for i, x := range r.runs {
		if x == run {
			return i
		}
	}
	return 0
}

func benchPlayersOf(o Options) int {
	per := max(1, (o.Players+o.Clients-1)/o.Clients)
	return per * o.Clients
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
