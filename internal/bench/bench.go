// Package bench is `waisteer bench`: it measures the steering server on
// this machine and prints one report against issue 30's table and goals
// (goals.go: each a ratio beside the signing floor, and whether it holds):
// the real server (`waisteer bench serve`, which is `waisteer serve` with
// an optional profiling listener) on its bbolt store behind each HTTP
// engine, over rooms of 3 and 32 pathways, at 64 and 256 connections; in
// the same run and in turns with it, the signing floor (a plain net/http
// server signing a decision-sized message per request, `waisteer bench
// plain -sign`), the plain server answering a fixed manifest, a bare
// Ed25519 signature of the decision's bytes, and `waisteer demo` in its
// own process with its hops posting. Each server is a child process,
// pinned to core 0 where the machine allows, so that its CPU time is read
// from /proc apart from the load generator's (wrk where it is installed,
// else the Go generator of load.go). Issue 30 added the server on two
// cores (phases30.go), the floor paced at each server's half rate and
// beside it the durable floor (durable.go), records
// paced at 1 000 a second, a start-up on a store built through the store
// API with the recount's p99 (startup30.go), and the cost per stage from a
// CPU profile (pprof.go, stages.go). Issue 31 added -servers
// (servers31.go): one server on bbolt beside one, two and three servers on
// one PostgreSQL that the bench starts, saturated together, with the CPU
// of the servers and PostgreSQL per decision (proc.go) and the bytes per
// decision by table.
package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/serve"
)

// Spawn makes the command of a child process: this same binary with
// args. The tests run their own binary instead.
var Spawn = func(args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(self, args...), nil
}

// Options are bench's flags.
type Options struct {
	Duration, Warmup, Ingest, Bare time.Duration
	EvidenceTime                   time.Duration // the least spent measuring each evidence update
	Conns                          []int         // connections of the saturated phases; the least is also paced at half rate
	Players                        int
	Pathways                       []int
	Engines                        []string // the servers' HTTP engines (serve's http.engine)
	WindowSizes                    []int    // records in a pathway's window, for the evidence update
	Sessions                       int      // for the memory per live session
	IngestPool                     [2]int   // records to post, one per POST and 64 per POST
	IngestHops                     int      // hops posting at once
	Profile                        string
	Generator                      string // GeneratorAuto, GeneratorWrk or GeneratorGo
	Soak                           time.Duration
	// Flight, with Soak, is a directory for the server's execution trace
	// of the seconds before each slow steering answer (soak.go).
	Flight             string
	Audit, AuditSample int // decisions to make then audit, and the audit's sample (issue 16)
	// AuditSaturated loads the audited room of -servers unpaced, past what
	// the machine can do, rather than at half the saturated rate: δ held
	// under overload (issue 31).
	AuditSaturated   bool
	Servers          bool   // issue 31's table instead: one server on bbolt, 1, 2 and 3 on one PostgreSQL (servers31.go)
	StartupDecisions int    // the start-up's store (issue 30: 3.75 M)
	Results          string // a results file whose run (or soak) section gets the report (results.go)
	Command          string // the command line, for the results file
	Quick            bool
}

// Run runs the benchmark of o and writes its report to stdout; what it is
// doing goes to stderr.
func Run(ctx context.Context, stdout, stderr io.Writer, o Options) error {
	for _, dir := range []string{o.Profile, o.Flight} {
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
	}
	tmp, err := os.MkdirTemp("", "waisteer-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bencher{stderr: stderr, o: o, tmp: tmp, pin: newBenchPin(), began: time.Now()}
	switch o.Generator {
	case GeneratorWrk, GeneratorAuto:
		if path, err := exec.LookPath("wrk"); err == nil {
			b.wrk = path
		} else if o.Generator == GeneratorWrk {
			return fmt.Errorf("-generator wrk: %v", err)
		}
	}
	if o.Servers {
		// Issue 31 measured the servers, PostgreSQL and the load sharing
		// the machine's cores: nothing is pinned, and PostgreSQL, which
		// would inherit this process's affinity, is started unpinned.
		b.pin.on = false
	}
	if err := b.pin.pinSelf(); err != nil {
		b.logf("pinning the load generator: %v; nothing pinned", err)
		b.pin.unpinSelf()
		b.pin.on = false
	}
	defer b.pin.unpinSelf()
	if o.Audit > 0 && !o.Servers {
		return b.audit(ctx, stdout)
	}
	var out bytes.Buffer
	section := ResultsRun
	if o.Servers {
		section = ResultsServers
		rep, err := b.servers(ctx)
		if err != nil {
			return err
		}
		rep.write(io.MultiWriter(stdout, &out))
	} else if o.Soak > 0 {
		section = ResultsSoak
		s, err := b.soak(ctx, io.MultiWriter(stdout, &out))
		if err != nil {
			return err
		}
		s.write(io.MultiWriter(stdout, &out))
	} else {
		rep, err := b.run(ctx)
		if err != nil {
			return err
		}
		rep.write(io.MultiWriter(stdout, &out))
	}
	if o.Results != "" {
		return writeResults(o.Results, section, o.Command, time.Since(b.began), out.Bytes())
	}
	return nil
}

// NewOptions are the options of a full run, or of a quick run (quick:
// phases of about a second, 64 connections, 3 pathways, both engines),
// before the caller's flags change them; Finish completes them.
func NewOptions(quick bool) Options {
	o := Options{Duration: 10 * time.Second, Warmup: 3 * time.Second, Conns: []int{64, 256}, Players: 10000,
		Pathways: []int{3, 32}, Engines: []string{serve.EngineFast, serve.EngineStd}, Generator: GeneratorAuto, IngestHops: 64,
		StartupDecisions: 3_750_000}
	if quick {
		o.Quick = true
		o.Duration, o.Warmup, o.Ingest, o.Bare = time.Second, 300*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
		o.EvidenceTime = 30 * time.Millisecond
		o.Conns, o.Players, o.Pathways = []int{64}, 640, []int{3}
		o.WindowSizes, o.Sessions, o.IngestPool = []int{100, 1000}, 10_000, [2]int{6000, 12800}
		o.StartupDecisions = 50_000
	}
	return o
}

// Finish sets what follows from the phases' duration (the records phases
// are half of it), and checks the options.
func (o *Options) Finish() error {
	if !o.Quick {
		o.Ingest, o.Bare = o.Duration/2, 2*time.Second
		o.WindowSizes, o.Sessions = []int{100, 1000, 10000}, 1_000_000
		// Enough records that the phase's time, not its pool, ends it at
		// the rates of issue 14 (signing them costs the generator about
		// 20 µs each).
		secs := max(1, int(o.Ingest/time.Second))
		o.IngestPool = [2]int{min(30_000*secs, 300_000), min(64*1000*secs, 640_000)}
		o.EvidenceTime = 200 * time.Millisecond
	}
	for _, e := range o.Engines {
		if e != serve.EngineFast && e != serve.EngineStd {
			return fmt.Errorf("-engines %q: %s or %s", e, serve.EngineFast, serve.EngineStd)
		}
	}
	if len(o.Engines) == 0 || len(o.Conns) == 0 || len(o.Pathways) == 0 {
		return fmt.Errorf("-engines, -conns and -pathways need one value at least")
	}
	for _, c := range o.Conns {
		if c < 1 {
			return fmt.Errorf("-conns: %d is not a count of connections", c)
		}
	}
	if o.Players < 1 || o.Duration <= 0 || o.Warmup < 0 || o.Soak < 0 || o.IngestHops < 1 {
		return fmt.Errorf("-players and -d must be positive")
	}
	// A TTL (300 s) holds at most one decision a µs.
	if o.StartupDecisions < 1 || o.StartupDecisions > 300_000_000 {
		return fmt.Errorf("-startup-decisions: %d is not a count of 1 to 300000000", o.StartupDecisions)
	}
	switch o.Generator {
	case GeneratorAuto, GeneratorWrk, GeneratorGo:
	default:
		return fmt.Errorf("-generator %q: %s, %s or %s", o.Generator, GeneratorAuto, GeneratorWrk, GeneratorGo)
	}
	for _, n := range o.Pathways {
		if n < 3 || n > decision.MaxPathways {
			return fmt.Errorf("-pathways: %d is not a count of 3 to %d", n, decision.MaxPathways)
		}
	}
	return nil
}

// bencher runs one benchmark.
type bencher struct {
	stderr io.Writer
	o      Options
	tmp    string
	pin    *benchPin
	wrk    string // wrk's path when it drives the saturated phases, else ""
	began  time.Time
}

func (b *bencher) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "bench: %5.1fs "+format+"\n", append([]any{time.Since(b.began).Seconds()}, args...)...)
}

// halfConns is the count of connections of the phases paced at half rate.
func (o *Options) halfConns() int { return slices.Min(o.Conns) }

// generator names the load generator of the saturated phases.
func (b *bencher) generator() string {
	if b.wrk != "" {
		return "wrk (" + b.wrk + ", one thread)"
	}
	return "the Go generator (closed loop)"
}
