package bench

// `waisteer bench -soak D` (issue 14): serve behind fasthttp over a room of
// 3 pathways on bbolt, at half its saturated rate, with its hops posting
// each period's records, for D; a line each minute, and at the end whether
// it erred, whether its p99 and its resident set held, what the store grew
// by per decision, and how long it takes to start on that store.

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
)

// Goals of the soak.
const (
	benchSoakP99Stable = 2.0  // the largest minute's p99 over the median minute's
	benchSoakRSSFlat   = 1.10 // the largest RSS over the least, minutes 2 to N
)

// benchMinute is one minute of the soak.
type benchMinute struct {
	answered, failed    uint64
	p50, p99            time.Duration
	rss, anon, fileSize int64     // anon: RssAnon, the heap's and stacks' part of rss; the rest is the store's file, mapped
	mem                 benchMem  // the runtime's account of its memory at the minute's end (/metrics)
	decisions, records  uint64    // stored so far
	commits, steer      benchHist // the server's histograms over the minute: its group commits, its steering answers
	steal               float64   // the share of the machine's CPU time its hypervisor took over the minute
	firstErr            error
}

type benchSoak struct {
	o                  Options
	generator          string
	pinned             bool
	satRate, rate      float64
	minute             time.Duration
	minutes            []benchMinute
	growth             float64 // the store's bytes per decision kept
	decisions, records uint64  // over the soak
	startup            *benchStartup
}

// soak runs the soak, writing each minute's line to w as it ends.
func (b *bencher) soak(ctx context.Context, w io.Writer) (*benchSoak, error) {
	o := b.o
	hc := o.halfConns()
	b.o.Conns = []int{hc}
	so := &benchSoak{o: o, generator: "the Go generator (paced)", pinned: b.pin.on, minute: min(time.Minute, o.Soak)}
	r, err := newBenchRoom(3, o.Players)
	if err != nil {
		return nil, err
	}
	s, err := b.startReal(ctx, r, serve.EngineFast, b.pin.serverCore(), nil, b.o.Conns)
	if err != nil {
		return nil, err
	}
	defer s.close()
	srv := s.loads[hc]
	// The saturated rate of a fresh server on an empty store is above its
	// rate once the store holds a few hundred thousand decisions, and this
	// machine's speed drifts: half of one short phase was once two thirds
	// of what the server could then do, and the soak's open-loop queue
	// grew for minutes. So the rate is the lesser of two phases, after a
	// warm-up.
	short := min(o.Duration, 5*time.Second)
	if err := b.saturate(ctx, max(o.Warmup, short), srv); err != nil {
		return nil, err
	}
	if _, err := b.served(srv); err != nil {
		return nil, err
	}
	so.satRate = math.Inf(1)
	for range 2 {
		if err := b.saturate(ctx, short, srv); err != nil {
			return nil, err
		}
		sat, err := b.served(srv)
		if err != nil {
			return nil, err
		}
		so.satRate = min(so.satRate, sat.rate)
	}
	so.rate = so.satRate / 2
	fmt.Fprintf(w, "waisteer bench -soak %s, %s\n", o.Soak, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "serve behind fasthttp, 3 pathways, bbolt; %s decisions/s saturated (the lesser of two phases of %s after a warm-up, %d conns), so paced at %s/s by the Go generator; its hops post each period's records\n",
		benchRate(so.satRate), short, hc, benchRate(so.rate))
	if so.pinned {
		fmt.Fprintln(w, "pinning: the server on core 0 (taskset -c 0), the generator on the other core(s)")
	} else {
		fmt.Fprintln(w, "pinning: none")
	}
	if o.Flight != "" {
		fmt.Fprintln(w, "flight recorder: on (-flight); its buffers are in the server's memory below")
	}
	fmt.Fprintf(w, "%-7s %9s %7s %10s %10s %9s %9s %9s %9s %9s %12s %10s %8s %12s %9s %10s %9s %6s\n", "minute", "answers", "errors", "p50", "p99", "RSS", "RssAnon", "Go kept", "Go live", "Go goal", "store bytes", "decisions", "records", "commits>25ms", "slowest", "steer>25ms", "slowest", "steal")
	start, _ := settledCounts(s.c.addr)
	file0 := benchFileSize(s.storeFile())
	_, hists0, _ := readMinute(s.c.addr)
	cpu0 := readMachineCPU()
	stopFlight := b.flightWatch(s.c, srv.l, time.Now())
	defer stopFlight()
	for k := 0; time.Duration(k)*so.minute < o.Soak && ctx.Err() == nil; k++ {
		d := min(so.minute, o.Soak-time.Duration(k)*so.minute)
		ph := srv.l.run(ctx, d, so.rate)
		counts, hists, mem := readMinute(s.c.addr)
		cpu := readMachineCPU()
		m := benchMinute{answered: ph.answered, failed: ph.failed, p50: ph.pct[0], p99: ph.pct[1], rss: s.c.rss(), anon: s.c.status("RssAnon:"), fileSize: benchFileSize(s.storeFile()), mem: mem,
			decisions: counts.stored, records: counts.records, commits: hists[0].since(hists0[0]), steer: hists[1].since(hists0[1]), steal: cpu.stealSince(cpu0), firstErr: ph.firstErr}
		hists0, cpu0 = hists, cpu
		so.minutes = append(so.minutes, m)
		fmt.Fprintf(w, "%-7d %9d %7d %10s %10s %5.0f MiB %5.0f MiB %5.0f MiB %5.0f MiB %5.0f MiB %12d %10d %8d %12d %9s %10d %9s %5.1f%%\n", k+1, m.answered, m.failed, benchDur(m.p50), benchDur(m.p99), float64(m.rss)/(1<<20), float64(m.anon)/(1<<20),
			float64(m.mem.held)/(1<<20), float64(m.mem.live)/(1<<20), float64(m.mem.goal)/(1<<20), m.fileSize, m.decisions, m.records,
			m.commits.over(benchSlowCommit), benchDur(m.commits.slowest()), m.steer.over(benchSlowCommit), benchDur(m.steer.slowest()), 100*m.steal)
		if m.firstErr != nil {
			fmt.Fprintf(w, "        first error: %v\n", m.firstErr)
		}
		b.heapProfile(s.c, fmt.Sprintf("heap-soak-%02d", k+1))
	}
	stopFlight()
	end, _ := settledCounts(s.c.addr)
	so.decisions, so.records = end.stored-start.stored, end.records-start.records
	run := &benchRealRun{}
	if err := s.finish(run); err != nil {
		return nil, err
	}
	if so.decisions > 0 {
		so.growth = float64(run.fileSize-file0) / float64(so.decisions)
	}
	if so.startup, err = b.startup(ctx, filepath.Join(s.dir, "serve.toml"), r.path, s.storeFile()); err != nil {
		return nil, fmt.Errorf("start-up: %w", err)
	}
	so.startup.decisions = run.stored
	return so, ctx.Err()
}

func (so *benchSoak) write(w io.Writer) {
	var failed uint64
	var p99s []time.Duration
	for _, m := range so.minutes {
		failed += m.failed
		p99s = append(p99s, m.p99)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Soak")
	fmt.Fprintf(w, "  %-52s = %d (goal 0: %s)\n", "errors", failed, benchMet(failed == 0 && len(so.minutes) > 0))
	sorted := slices.Clone(p99s)
	slices.Sort(sorted)
	if len(sorted) > 0 {
		ratio := benchRatio(float64(sorted[len(sorted)-1]), float64(sorted[(len(sorted)-1)/2]))
		fmt.Fprintf(w, "  %-52s = %.2f (goal <= %.2f: %s)\n", "p99 stable: the largest minute's / the median minute's", ratio, benchSoakP99Stable, benchMet(ratio <= benchSoakP99Stable))
	}
	if len(so.minutes) >= 3 {
		for _, c := range []struct {
			name string
			of   func(benchMinute) int64
		}{
			{"RSS flat: the largest / the least of minutes 2..N", func(m benchMinute) int64 { return m.rss }},
			{"RssAnon flat: the same of the heap's and stacks' part", func(m benchMinute) int64 { return m.anon }},
		} {
			lo, hi := c.of(so.minutes[1]), c.of(so.minutes[1])
			for _, m := range so.minutes[1:] {
				lo, hi = min(lo, c.of(m)), max(hi, c.of(m))
			}
			ratio := benchRatio(float64(hi), float64(lo))
			fmt.Fprintf(w, "  %-52s = %.2f (goal <= %.2f: %s)\n", c.name, ratio, benchSoakRSSFlat, benchMet(ratio <= benchSoakRSSFlat))
		}
		// Not a goal: what RssAnon follows. The runtime holds about its
		// heap's goal, which GOGC sets from what the last collection kept.
		first, last := so.minutes[1].mem, so.minutes[len(so.minutes)-1].mem
		if first.held > 0 && last.held > 0 {
			fmt.Fprintf(w, "    the runtime's, minute 2 to %d: held %.0f to %.0f MiB, its heap's live bytes %.1f to %.1f MiB (goal %.0f to %.0f MiB)\n", len(so.minutes),
				float64(first.held)/(1<<20), float64(last.held)/(1<<20), float64(first.live)/(1<<20), float64(last.live)/(1<<20), float64(first.goal)/(1<<20), float64(last.goal)/(1<<20))
		}
	} else {
		fmt.Fprintf(w, "  RSS flat: fewer than 3 minutes, not judged\n")
	}
	fmt.Fprintf(w, "  the store's growth per decision kept: %.0f bytes (%d decisions and %d records stored over the soak)\n", so.growth, so.decisions, so.records)
	if st := so.startup; st != nil {
		fmt.Fprintf(w, "  %-52s = %.2f s (goal <= 1 s: %s)\n", fmt.Sprintf("start-up on its store (%d decisions, %d bytes)", st.decisions, st.bytes), st.took.Seconds(), benchMet(st.took <= benchGoalStartup))
	}
}

// benchSlowCommit is the commit time past which the soak's minute line
// counts a group commit as slow: a p99 of hundreds of milliseconds is the
// store's when its minute has such commits, the machine's otherwise.
const benchSlowCommit = 25 * time.Millisecond

// benchHist is one of the server's latency histograms: the
// cumulative count at or below each bucket's bound, in seconds, ascending;
// +Inf last.
type benchHist struct {
	bounds []float64
	cum    []uint64
}

// The histograms the soak reads from /metrics (readMinute): a group
// commit's time, and the steering route's time to answer (which includes
// its commit's wait).
const (
	benchCommitHist = `waisteer_commit_duration_seconds_bucket{le="`
	benchSteerHist  = `waisteer_http_request_duration_seconds_bucket{route="steer",le="`
)

// readMinute reads, in one fetch of /metrics, the server's counters, its
// histograms of commits and steering answers, and its runtime's memory.
func readMinute(addr string) (benchCounts, [2]benchHist, benchMem) {
	var hs [2]benchHist
	m, err := benchGet(context.Background(), addr, "/metrics")
	if err != nil {
		return benchCounts{}, hs, benchMem{}
	}
	counts, _ := parseCounts(m)
	hs[0], hs[1] = parseHist(m, benchCommitHist), parseHist(m, benchSteerHist)
	return counts, hs, parseMem(m)
}

// benchMem is the runtime's account of the server's memory, from its
// /metrics (internal/procmem): what the last collection kept, the heap's
// goal, and what the runtime holds of the kernel's memory.
type benchMem struct {
	live, goal, held uint64
}

// parseMem reads the runtime's gauges from the text of /metrics; a line it
// cannot read is left out.
func parseMem(m []byte) benchMem {
	var mem benchMem
	for name, v := range metricSamples(m) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "waisteer_go_heap_live_bytes":
			mem.live = n
		case "waisteer_go_heap_goal_bytes":
			mem.goal = n
		case "waisteer_go_memory_held_bytes":
			mem.held = n
		}
	}
	return mem
}

// parseHist reads the buckets of one histogram from the text of /metrics:
// the lines that begin with prefix, which ends just before le's value.
func parseHist(m []byte, prefix string) benchHist {
	var h benchHist
	for line := range strings.SplitSeq(string(m), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		le, v, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		n, err2 := strconv.ParseUint(v, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		h.bounds, h.cum = append(h.bounds, bound), append(h.cum, n)
	}
	return h
}

// since is the histogram of the commits after before (the same buckets).
func (h benchHist) since(before benchHist) benchHist {
	d := benchHist{bounds: h.bounds, cum: slices.Clone(h.cum)}
	if len(before.cum) == len(h.cum) {
		for i := range d.cum {
			d.cum[i] -= min(before.cum[i], d.cum[i])
		}
	}
	return d
}

// over counts what surely took longer than t: what lies past the first
// bucket bound at or above t.
func (h benchHist) over(t time.Duration) uint64 {
	if len(h.cum) == 0 {
		return 0
	}
	total := h.cum[len(h.cum)-1]
	for i, b := range h.bounds {
		if b >= t.Seconds() {
			return total - h.cum[i]
		}
	}
	return 0
}

// slowest is the bound of the bucket of the slowest commit; 0 when there
// were none, and the largest finite bound when it is past them all.
func (h benchHist) slowest() time.Duration {
	if len(h.cum) == 0 {
		return 0
	}
	total := h.cum[len(h.cum)-1]
	if total == 0 {
		return 0
	}
	for i, b := range h.bounds {
		if h.cum[i] == total {
			if math.IsInf(b, 1) && i > 0 {
				b = h.bounds[i-1]
			}
			return time.Duration(b * float64(time.Second))
		}
	}
	return 0
}

// benchMachineCPU is the machine's CPU time from /proc/stat, in ticks: all
// of it and the part its hypervisor stole.
type benchMachineCPU struct{ total, steal uint64 }

func readMachineCPU() benchMachineCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return benchMachineCPU{}
	}
	return parseMachineCPU(string(b))
}

// parseMachineCPU reads the first line of /proc/stat (proc(5)): "cpu",
// then user, nice, system, idle, iowait, irq, softirq, steal, guest and
// guest_nice, in ticks.
func parseMachineCPU(stat string) benchMachineCPU {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return benchMachineCPU{}
	}
	var c benchMachineCPU
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		c.total += n
		if i == 7 {
			c.steal = n
		}
	}
	return c
}

// stealSince is the share of the machine's CPU time stolen since before.
func (c benchMachineCPU) stealSince(before benchMachineCPU) float64 {
	if c.total <= before.total {
		return 0
	}
	return float64(c.steal-before.steal) / float64(c.total-before.total)
}

// heapProfile writes the child's heap profile into the profile directory,
// when there is one.
func (b *bencher) heapProfile(c *benchChild, name string) {
	if b.o.Profile == "" || c.pprof == "" {
		return
	}
	if err := benchFetch(c.pprof, "/debug/pprof/heap", filepath.Join(b.o.Profile, name+".pprof")); err != nil {
		b.logf("profile: %v", err)
	}
}

// Slow answers of the soak whose execution trace bench keeps: an answer of
// the steering route over benchFlightSlow, in the server's histogram or
// from its due time in the generator's clock (a request the server did not
// read for a while is slow in the second only), seen at a poll every
// benchFlightPoll, has the flight recorder's last seconds written to the
// -flight directory, at most benchFlightMost times, the next at least
// benchFlightGap after the last.
const (
	benchFlightSlow = 50 * time.Millisecond
	benchFlightPoll = time.Second
	benchFlightMost = 6
	benchFlightGap  = 20 * time.Second
	// benchFlightSettle: the generator's answers of a run's first second
	// are not watched. A soak's runs are its minutes, and four of the
	// five traces a soak kept at a minute's first second held no wait
	// of the server's over 13 ms: the slowness was the generator's,
	// between two minutes.
	benchFlightSettle = time.Second
)

// flightWatch starts c's flight recorder and, until the returned function
// is called, keeps its trace of the seconds around each slow answer
// (flight-soak-MM-SS.trace, the soak's minute and second from start), with
// -flight.
func (b *bencher) flightWatch(c *benchChild, l *benchLoad, start time.Time) (stop func()) {
	if b.o.Flight == "" || c.pprof == "" {
		return func() {}
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Post("http://"+c.pprof+"/debug/flight", "", nil)
	if err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s", res.Status)
		}
	}
	if err != nil {
		b.logf("flight recorder: %v", err)
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(benchFlightPoll)
		defer t.Stop()
		slowNow := func() uint64 {
			_, hs, _ := readMinute(c.addr)
			return hs[1].over(benchFlightSlow) + l.slow.Load()
		}
		slow := slowNow()
		var last time.Time
		for kept := 0; kept < benchFlightMost; {
			select {
			case <-done:
				return
			case <-t.C:
			}
			n := slowNow()
			if n <= slow || time.Since(last) < benchFlightGap {
				slow = max(slow, n)
				continue
			}
			slow, last = n, time.Now()
			at := time.Since(start)
			name := filepath.Join(b.o.Flight, fmt.Sprintf("flight-soak-%02d-%02d.trace", int(at/time.Minute)+1, int(at%time.Minute/time.Second)))
			if err := benchFetch(c.pprof, "/debug/flight", name); err != nil {
				b.logf("flight recorder: %v", err)
				return
			}
			kept++
			b.logf("a steering answer over %s (the server's or the generator's clock): the trace of the seconds before it in %s", benchFlightSlow, name)
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
