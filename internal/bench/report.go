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

func (r *benchReport) write(w io.Writer) {
	o := r.o
	hc := o.halfConns()
	fmt.Fprintf(w, "waisteer bench, %s\n", r.when.Format(time.RFC3339))
	fmt.Fprintf(w, "machine      %s\n             %s\n", r.machine[0], r.machine[1])
	fmt.Fprintf(w, "disk         a 4 KiB write and fdatasync: median %s, p99 %s, p999 %s, longest %s (%d over %s)\n",
		benchDur(r.disk.pct[0]), benchDur(r.disk.pct[1]), benchDur(r.disk.pct[2]), benchDur(r.disk.pct[3]), r.disk.n, benchDur(r.disk.over))
	fmt.Fprintf(w, "load average %s before, %s after\n", r.loadAvg[0], r.loadAvg[1])
	fmt.Fprintf(w, "generator    %s for the saturated phases; the Go generator paces the half-rate phases\n", r.generator)
	if r.pinned {
		fmt.Fprintln(w, "pinning      each server on core 0 (taskset -c 0), the load generator on the other core(s)")
	} else {
		fmt.Fprintln(w, "pinning      none (fewer than 2 cores, or no taskset): the servers and the generator share the cores")
	}
	fmt.Fprintf(w, "servers      GOMAXPROCS %s (the server children's own, as each printed it: the runtime sizes it from taskset's cores)\n", r.procs())
	fmt.Fprintf(w, "load         %d players per load on keep-alive HTTP/1.1 over loopback, %s connections;\n", benchPlayersOf(o.Players, hc), benchInts(o.Conns))
	if r.wrk {
		fmt.Fprintln(w, "             wrk replays each player's RELOAD-URI (its session) with an HLS report (_HLS_pathway, _HLS_throughput);")
		fmt.Fprintln(w, "             the Go generator's players (half-rate phases): half HLS, half DASH; a quarter with CMCD; 1 in 8 at the floor tier")
		fmt.Fprintln(w, "             over a phase's turns, wrk's p50 is the mean of the turns' (by answers), its p99 and p999 the worst turn's")
	} else {
		fmt.Fprintln(w, "             players: half HLS, half DASH reports; a quarter with CMCD (query or header); 1 in 8 at the floor tier")
	}
	fmt.Fprintf(w, "             each server: %s warm-up, %s saturated (closed loop, in turns of at most %s with the signing floor), %s paced at half that rate (%d connections),\n", o.Warmup, o.Duration, benchRound, o.Duration, hc)
	fmt.Fprintln(w, "             then the signing floor paced at that same offered rate, then the durable floor (d): the signing floor that writes each")
	fmt.Fprintln(w, "             answer (the SHA-256 of what it signed and the signature, 96 bytes) to a file first, a group commit of one write and one fdatasync")
	if o.Quick {
		fmt.Fprintln(w, "             -quick: phases of about a second; the ratios are rough")
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Issue 30's table: saturated, closed loop; latency at saturation; CPU of the server's process per request")
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
	fmt.Fprintf(w, "At half the saturated rate (paced by the Go generator from each request's due time, %d connections); the floor at the same offered rate, right after\n", hc)
	half := func(name string, s *benchServed) {
		fmt.Fprintf(w, "  %-62s %9s/s  p50 %10s  p99 %10s  p999 %10s\n", name, benchRate(s.rate), benchDur(s.pct[0]), benchDur(s.pct[1]), benchDur(s.pct[2]))
	}
	half("(b) plain net/http, fixed manifest", &r.plainHalf)
	for _, room := range r.rooms {
		for _, run := range room.runs {
			half(fmt.Sprintf("waisteer serve (%s), %d pathways", run.engine, run.n), &run.half)
			half("  (c) the signing floor at that offered rate", &run.floorHalf)
			half("  (d) the durable floor at that offered rate", &run.durableHalf)
		}
	}
	if r.demo != nil && r.demoRef != nil {
		half(fmt.Sprintf("waisteer demo, at serve's (%s, %d pathways) offered rate", r.demoRef.engine, r.demoRef.n), &r.demo.half)
	}
	fmt.Fprintln(w)

	if len(r.rooms) > 0 && len(r.rooms[0].twoCores) > 0 {
		room := r.rooms[0]
		fmt.Fprintf(w, "Two cores: serve on cores 0 and 1 (taskset -c %s) with GOMAXPROCS=2, a fresh store, saturated alone at %d connections;\n", benchTwoCores, hc)
		fmt.Fprintln(w, "  the load generator then shares core 1 with it (pinned as before): its rate is not the one-core phase's, its CPU per decision is the server's own")
		for _, two := range room.twoCores {
			one := room.engine(two.engine)
			fmt.Fprintf(w, "  %-62s %9s/s  p99 %10s  CPU/req %10s (one core: %s)  cores busy %.2f of 2  GOMAXPROCS %d\n", fmt.Sprintf("waisteer serve (%s), %d pathways", two.engine, two.n),
				benchRate(two.sat[hc].rate), benchDur(two.sat[hc].pct[1]), benchDur(two.sat[hc].cpu), benchDur(one.sat[hc].cpu), two.sat[hc].busy, two.procs)
		}
		fmt.Fprintln(w)
	}

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
	fmt.Fprintln(w, "   file growth: the bbolt file's, over the steering phases; mapped ahead, it grows in steps of 16 MiB beyond its need)")
	fmt.Fprintln(w)

	fmt.Fprintf(w, "Cost per decision by stage: a CPU profile of a saturated turn of its own (%d conns, after the measured turns; the profiler's cost is in no table above),\n", hc)
	fmt.Fprintln(w, "  each sample charged to the first stage one of its frames matches, in this order; CPU samples over the turn's decisions")
	for _, run := range runs {
		if run.stages == nil {
			fmt.Fprintf(w, "  %d pathways, %s: no profile\n", run.n, run.engine)
			continue
		}
		run.stages.write(w, fmt.Sprintf("%d pathways, %s", run.n, run.engine), r.fsync, run.groupSize)
	}
	for _, room := range r.rooms {
		for _, two := range room.twoCores {
			if two.stages != nil {
				two.stages.write(w, fmt.Sprintf("%d pathways, %s, two cores (GOMAXPROCS=2)", two.n, two.engine), r.fsync, two.groupSize)
			}
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Baselines, same run, same machine")
	for _, room := range r.rooms {
		fmt.Fprintf(w, "  (a) bare Ed25519 of the %d-pathway decision (%d bytes signed), as the server and the floors sign: %s CPU; on every core at once %s;\n", room.n, len(room.msg), benchDur(room.bare), benchDur(room.bareAll))
		fmt.Fprintf(w, "      the same bytes through crypto/ed25519: %s (%.2f of it)\n", benchDur(room.bareStd), benchRatio(room.bareStd.Seconds(), room.bare.Seconds()))
		for _, run := range room.runs {
			fmt.Fprintf(w, "      %s's CPU per decision / (a) = %.2f; the floor (c)'s CPU per answer / (a) = %.2f\n", run.engine,
				benchRatio(run.sat[hc].cpu.Seconds(), room.bare.Seconds()), benchRatio(room.floorSat[hc].cpu.Seconds(), room.bare.Seconds()))
		}
	}
	fmt.Fprintln(w)

	lost, phases, storesOK := r.writeLost(w, runs)

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
		if pc := run.paced; pc != nil {
			fmt.Fprintf(w, "  %2d pathways, paced at %.0f records/s (10 000 hops at a 10 s period, modelled as %.0f POSTs/s of one record each over %d connections):\n", run.n, pc.target, pc.target, pc.conns)
			fmt.Fprintf(w, "     %s records/s, the server's CPU %s over %s = %.3f of one core, %s per record; POST p99 %s; %d failed", benchRate(pc.rate), benchDur(pc.cpu), benchDur(pc.elapsed), pc.fraction, benchDur(benchPer(pc.cpu, pc.records)), benchDur(pc.p99), pc.failed)
			if pc.err != nil {
				fmt.Fprintf(w, " (%v)", pc.err)
			}
			fmt.Fprintln(w)
			if pl := pc.plain; pl != nil {
				fmt.Fprintf(w, "     the same POSTs to the plain server (b) right after, paced and pinned alike (net/http: it reads each and answers its manifest, checks and stores nothing):\n")
				fmt.Fprintf(w, "     %s POSTs/s, its CPU %s over %s = %.3f of one core, %s per POST; %d failed", benchRate(pl.rate), benchDur(pl.cpu), benchDur(pl.elapsed), pl.fraction, benchDur(benchPer(pl.cpu, pl.records)), pl.failed)
				if pl.err != nil {
					fmt.Fprintf(w, " (%v)", pl.err)
				}
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintln(w)
	if rc := r.recount; rc != nil {
		fmt.Fprintf(w, "Start-up: bench serve (fasthttp, pinned as above) restarted on a store of %d decisions (%d bytes), each a session of its own over the TTL (300 s) before now,\n", rc.decisions, rc.bytes)
		fmt.Fprintf(w, "  made through the store API in %s (signed on every core, put in groups of %d)\n", rc.built.Round(time.Millisecond), benchBuildGroup)
		fmt.Fprintf(w, "  spawn to the first 200 on the steering route: %s\n", benchDur(rc.startup.took))
		state := "ended"
		if !rc.restoredOK {
			state = "had not ended when the bench stopped waiting"
		}
		fmt.Fprintf(w, "  the recount of live sessions (the room's status, restoring_loads) %s %s after the spawn\n", state, benchDur(rc.recount))
		ref := ""
		if r.recountRef != nil {
			ref = fmt.Sprintf(", serve's (%s, %d pathways) half-rate phase's", r.recountRef.engine, r.recountRef.n)
		}
		fmt.Fprintf(w, "  paced at %s/s%s, %d connections, fresh players: while it ran %d answers p50 %s p99 %s (%d failed); after, %d answers p50 %s p99 %s (%d failed)\n",
			benchRate(rc.rate), ref, hc, rc.during.answered, benchDur(rc.during.pct[0]), benchDur(rc.during.pct[1]), rc.during.failed, rc.after.answered, benchDur(rc.after.pct[0]), benchDur(rc.after.pct[1]), rc.after.failed)
		if rc.during.answered == 0 {
			fmt.Fprintln(w, "  (the recount had ended before the first paced phase: nothing measured while it ran; -startup-decisions more)")
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "Goals (issue 30)")
	for _, room := range r.rooms {
		for _, run := range room.runs {
			for _, c := range o.Conns {
				rateGoal(run.n, run.engine, c, run.sat[c].rate, room.floorSat[c].rate).write(w)
			}
		}
	}
	for _, room := range r.rooms {
		for _, run := range room.runs {
			for _, c := range o.Conns {
				cpuGoal(run.n, run.engine, c, run.sat[c].cpu, room.floorSat[c].cpu).write(w)
			}
		}
	}
	if len(r.rooms) > 0 {
		for _, two := range r.rooms[0].twoCores {
			if one := r.rooms[0].engine(two.engine); one != nil {
				twoCoresGoal(two.n, two.engine, two.sat[hc].cpu, one.sat[hc].cpu).write(w)
			}
		}
	}
	for _, run := range runs {
		halfGoal(run.n, run.engine, run.half.pct[1], run.floorHalf.pct[1]).write(w)
		fmt.Fprintf(w, "    %-76s = %.2f; (d)'s / (c)'s = %.2f (the disk's share)\n", "of which: p99 at half rate / the durable floor (d)'s at that rate",
			benchRatio(run.half.pct[1].Seconds(), run.durableHalf.pct[1].Seconds()), benchRatio(run.durableHalf.pct[1].Seconds(), run.floorHalf.pct[1].Seconds()))
	}
	if r.demo != nil && r.demoRef != nil {
		demoGoal(fmt.Sprintf("%s, %d pathways", r.demoRef.engine, r.demoRef.n), r.demo.half.pct[1], r.demoRef.half.pct[1]).write(w)
	}
	for _, run := range runs {
		if run.paced != nil {
			g := recordsGoal(run.n, run.paced.fraction)
			if run.paced.failed > 0 {
				g.value = math.NaN() // a failed POST fails the goal
			}
			g.write(w)
			if pl, room := run.paced.plain, r.roomOf(run); pl != nil && pl.failed == 0 && room != nil && room.check > 0 {
				floor := recordsFloor(pl.fraction, run.paced.rate, room.check)
				fmt.Fprintf(w, "    %-76s = %.3f; with its records' checks (a') = %.3f; the server's / that = %.2f\n", "of which: the plain server (b)'s CPU at the same POSTs, of one core",
					pl.fraction, floor, benchRatio(run.paced.fraction, floor))
			}
		}
	}
	if rc := r.recount; rc != nil {
		startupGoal(rc.decisions, rc.startup.took).write(w)
		recountGoal(rc.during.pct[1], rc.after.pct[1]).write(w)
	}
	fmt.Fprintf(w, "  %-78s = %d of %d (goal 0, and every store's decisions = its 200s = its log's leaves: %s)\n", "nothing lost: phases whose decisions stored != answered", lost, phases, benchMet(lost == 0 && storesOK && phases > 0))
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

// writeLost writes the section "Nothing lost" and returns the phases that
// lost a decision, the phases checked, and whether every store's
// decisions, 200s and leaves agree.
func (r *benchReport) writeLost(w io.Writer, runs []*benchRealRun) (lost, phases int, storesOK bool) {
	o := r.o
	hc := o.halfConns()
	fmt.Fprintln(w, "Nothing lost: each phase's decisions stored (the server's group commits) / manifests answered (its steering route's 200s) / answers the generator read")
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
	if len(r.rooms) > 0 {
		for _, two := range r.rooms[0].twoCores {
			check(fmt.Sprintf("%d pathways, %s, %d conns, two cores", two.n, two.engine, hc), two.sat[hc].check, two.sat[hc].failed)
		}
	}
	if r.demo != nil {
		check(fmt.Sprintf("the demo, %d conns, saturated", r.demo.conns), r.demo.sat.check, r.demo.sat.failed)
		check(fmt.Sprintf("the demo, %d conns, half rate", r.demo.conns), r.demo.half.check, r.demo.half.failed)
	}
	storesOK = true
	stores := runs
	if len(r.rooms) > 0 {
		stores = append(slices.Clone(runs), r.rooms[0].twoCores...)
	}
	for _, run := range stores {
		name := run.engine + ":"
		if run.cores == 2 {
			name = run.engine + " (2 cores):"
		}
		fmt.Fprintf(w, "  %2d pathways, %-20s decisions stored / answered / leaves logged %d / %d / %d (the store once stopped / the server's 200s / its log; the generators read %d)\n", run.n, name, run.stored, run.answered, run.leaves, run.received)
		storesOK = storesOK && nothingLost(run.answered, run.stored, run.leaves)
	}
	if r.demo != nil {
		fmt.Fprintf(w, "  the demo:                           decisions stored / answered / leaves logged %d / %d / %d\n", r.demo.stored, r.demo.answered, r.demo.leaves)
		storesOK = storesOK && nothingLost(r.demo.answered, r.demo.stored, r.demo.leaves)
	}
	fmt.Fprintln(w)
	return lost, phases, storesOK
}

// procs lists the server children's GOMAXPROCS as they printed it.
func (r *benchReport) procs() string {
	seen := map[int]bool{}
	var out []string
	for _, room := range r.rooms {
		for _, run := range room.runs {
			if !seen[run.procs] {
				seen[run.procs] = true
				out = append(out, strconv.Itoa(run.procs))
			}
		}
	}
	if len(out) == 0 {
		return "?"
	}
	return strings.Join(out, ", ")
}

// benchPer is d spread over n.
func benchPer(d time.Duration, n uint64) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
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
