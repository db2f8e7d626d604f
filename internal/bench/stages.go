package bench

// The cost of a decision by stage (issue 30, "know the cost"), from a CPU
// profile of a saturated turn: each sample is charged to the first stage
// whose pattern one of its frames matches, in the order below, so that
// the stages are disjoint and add up to the profile's total; a stage's
// CPU over the turn's decisions is its cost per decision. The order puts
// what runs inside another first: the signature inside the decision, the
// rule inside the loads table's hold, the report's reading inside the
// steering route, all of it inside the HTTP engine's handler.
// /work/notes/perf-prof/cats2.sh computed the same with pprof's -focus
// and -ignore.

import (
	"fmt"
	"io"
	"regexp"
	"time"
)

// benchStage is one stage and its pattern over function names.
type benchStage struct {
	name string
	re   *regexp.Regexp
}

var benchStageList = []benchStage{
	{"signature (Ed25519 of the decision)", regexp.MustCompile(`sig\.PrivateKey\.SignRaw|ed25519\.(Sign|sign)`)},
	{"commit (group commits, the journal's applier)", regexp.MustCompile(`commit\.\(\*Decisions\)\.(Run|write|put)|store\.\(\*Bolt\)\.applier`)},
	{"log (the decision log's hasher, slog)", regexp.MustCompile(`Bolt\)\.hasher|/declog\.|log/slog\.`)},
	{"report (reading the player's report)", regexp.MustCompile(`waisteer/report\.`)},
	{"rule (the draw, the ranking's Decide)", regexp.MustCompile(`\(\*steering\)\.rule|DecideDrawn|\(\*Ranking\)\.Decide$|decision\.Draw$`)},
	{"loads (the table of sessions, its lock)", regexp.MustCompile(`store\.\(\*MemLoads\)`)},
	{"decision (build, encode, outside the above)", regexp.MustCompile(`roomsteer\.\(\*Room\)\.decide`)},
	{"steering route (manifest, commit hand-off)", regexp.MustCompile(`roomsteer\.\(\*Room\)\.ServeSteer|steerroute\.`)},
	{"HTTP (engine, system calls, adaptation)", regexp.MustCompile(`valyala/fasthttp|^net/http\.|^net\.|^internal/poll\.|^syscall\.|bufio\.`)},
	{"scheduler", regexp.MustCompile(`^runtime\.(mcall|schedule|findRunnable|netpoll|park_m|goexit0|gopark|goready|ready|wakep|stopm|startm|notesleep|futex)`)},
	{"GC (background)", regexp.MustCompile(`^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge)`)},
}

// benchFdatasync is the commit's part in fdatasync (the journal's, once
// a group; bbolt's, twice a commit of the applier: data pages, then meta).
var benchFdatasync = regexp.MustCompile(`fdatasync|Fdatasync`)

// benchStages is a turn's cost by stage.
type benchStages struct {
	decisions uint64
	total     time.Duration   // all the samples' CPU
	by        []time.Duration // by benchStageList's order; then "other"
	fdatasync time.Duration   // of the commit's, in fdatasync
	// cpu is the server's CPU over the turn as /proc counts it (0: not
	// read). The samples hold less: the profiler samples only the
	// threads that run goroutines, not the runtime's monitor (sysmon),
	// whose wakes while commits block in fdatasync cost a few per cent.
	cpu time.Duration
}

// newBenchStages charges p's CPU samples to the stages.
func newBenchStages(p *benchProfile, decisions uint64) *benchStages {
	st := &benchStages{decisions: decisions, by: make([]time.Duration, len(benchStageList)+1)}
	k := p.valueIndex("cpu")
	if k < 0 {
		return st
	}
	for _, s := range p.samples {
		v := time.Duration(s.values[k])
		st.total += v
		stage := len(benchStageList)
	find:
		for i, sg := range benchStageList {
			for _, f := range s.stack {
				if sg.re.MatchString(f) {
					stage = i
					break find
				}
			}
		}
		st.by[stage] += v
		if stage == 1 {
			for _, f := range s.stack {
				if benchFdatasync.MatchString(f) {
					st.fdatasync += v
					break
				}
			}
		}
	}
	return st
}

// perDecision is d spread over the turn's decisions.
func (st *benchStages) perDecision(d time.Duration) time.Duration {
	if st == nil || st.decisions == 0 {
		return 0
	}
	return d / time.Duration(st.decisions)
}

// benchMicros is d in µs, 0 included.
func benchMicros(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// write prints the stages of one run; fsync is the disk's probe (a 4 KiB
// write and fdatasync, median), group the decisions per group commit.
func (st *benchStages) write(w io.Writer, name string, fsync time.Duration, group float64) {
	fmt.Fprintf(w, "  %s: %d decisions, %s of CPU samples each\n", name, st.decisions, benchDur(st.perDecision(st.total)))
	if st.cpu > 0 {
		fmt.Fprintf(w, "    (the server's CPU over the turn, from /proc: %s a decision; the samples hold %.0f %% of it)\n",
			benchDur(st.perDecision(st.cpu)), 100*st.total.Seconds()/st.cpu.Seconds())
	}
	share := func(d time.Duration) float64 {
		if st.total == 0 {
			return 0
		}
		return 100 * d.Seconds() / st.total.Seconds()
	}
	for i, d := range st.by {
		label := "other (runtime, malloc outside the above)"
		if i < len(benchStageList) {
			label = benchStageList[i].name
		}
		fmt.Fprintf(w, "    %-46s %10s %5.1f %%\n", label, benchMicros(st.perDecision(d)), share(d))
		if i == 1 {
			fmt.Fprintf(w, "      %-44s %10s %5.1f %%   (the disk: a 4 KiB write and fdatasync %s median, wall; %.1f decisions per group)\n",
				"of which fdatasync, CPU", benchMicros(st.perDecision(st.fdatasync)), share(st.fdatasync), benchDur(fsync), group)
		}
	}
}
