// Package bench is `waisteer bench`: it measures the steering server on
// this machine and prints one report (issue 7): the real server (`waisteer bench serve`, which is
// `waisteer serve` with an optional profiling listener) on its bbolt store,
// driven over loopback by closed-loop players (load.go); and, in the
// same run, a bare Ed25519 signature of the same decision bytes, a plain
// net/http server answering a fixed manifest (`waisteer bench plain`), and
// that plain server signing a decision-sized message per request: the
// floor for any server that signs every answer. Each server is a child
// process, so that its CPU time is read from /proc apart from the load
// generator's.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
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
	Clients, Players               int
	Pathways                       []int
	WindowSizes                    []int // records in a pathway's window, for the evidence update
	Sessions                       int   // for the memory per live session
	IngestPool                     [2]int
	Profile                        string
	Engine                         string // the server's http.engine
	Quick                          bool
}

// Run runs the benchmark of o and writes its report to stdout; what it is
// doing goes to stderr.
func Run(ctx context.Context, stdout, stderr io.Writer, o Options) error {
	if o.Profile != "" {
		if err := os.MkdirAll(o.Profile, 0o755); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "waisteer-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bencher{stderr: stderr, o: o, tmp: tmp}
	rep, err := b.run(ctx)
	if err != nil {
		return err
	}
	rep.write(stdout)
	return nil
}

// NewOptions are the options of a full run, or of a smoke run of a few
// seconds (quick: short phases, few clients, 3 pathways), before the
// caller's flags change them; Finish completes them.
func NewOptions(quick bool) Options {
	o := Options{Duration: 10 * time.Second, Warmup: 2 * time.Second, Clients: 256, Players: 10000,
		Pathways: []int{3, 32}, Engine: serve.EngineFast}
	if quick {
		o.Quick = true
		o.Duration, o.Warmup, o.Ingest, o.Bare = 300*time.Millisecond, 100*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		o.EvidenceTime = 30 * time.Millisecond
		o.Clients, o.Players, o.Pathways = 4, 32, []int{3}
		o.WindowSizes, o.Sessions, o.IngestPool = []int{100, 1000}, 10_000, [2]int{64, 640}
	}
	return o
}

// Finish sets what follows from the phases' duration (the ingest phases
// are half of it), and checks the options.
func (o *Options) Finish() error {
	if !o.Quick {
		o.Ingest, o.Bare = o.Duration/2, 2*time.Second
		o.WindowSizes, o.Sessions, o.IngestPool = []int{100, 1000, 10000}, 1_000_000, [2]int{8000, 32000}
		o.EvidenceTime = 200 * time.Millisecond
	}
	if o.Engine != serve.EngineFast && o.Engine != serve.EngineStd {
		return fmt.Errorf("-engine %q: %s or %s", o.Engine, serve.EngineFast, serve.EngineStd)
	}
	if o.Clients < 1 || o.Players < 1 || o.Duration <= 0 || o.Warmup < 0 {
		return fmt.Errorf("-clients, -players and -d must be positive")
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
}

// benchReport is everything one run measured.
type benchReport struct {
	o        Options
	machine  []string
	loadAvg  [2]string
	when     time.Time
	fsync    time.Duration
	runs     []*benchRealRun
	plain    *benchServed    // (b)
	signing  []*benchServed  // (c), by run
	bare     []time.Duration // (a), on one thread
	bareAll  []time.Duration // (a), on every core at once
	evidence []benchEvidence
	sessions []benchSessions
}

// benchServed is one server under the load: saturated, then paced at half
// its saturation rate.
type benchServed struct {
	rate           float64       // answers a second, saturated
	cpu            time.Duration // the server's CPU per answer, saturated
	gen            time.Duration // the load generator's CPU per answer
	half           float64       // the paced phase's rate
	p50, p99, p999 time.Duration
	failed         uint64
	firstErr       error
}

// benchRealRun is the real server over one room.
type benchRealRun struct {
	n             int
	decisionBytes int
	manifestBytes int
	served        benchServed
	groupSize     float64
	bytesInUse    float64 // per decision, in the decision buckets
	fileBytes     float64 // per decision, the file's growth while steering
	stored        uint64
	answered      uint64
	peakRSS       int64
	ingest        []benchIngest
	msg, manifest []byte // a decision's signed message, and a manifest
	profiled      []string
}

type benchIngest struct {
	batch   int
	records uint64
	rate    float64
	cpu     time.Duration // server CPU per record
	failed  uint64
	err     error
}

type benchEvidence struct {
	window int
	perOp  time.Duration
}

type benchSessions struct {
	sessions, pathways int
	bytes              float64
}

func (b *bencher) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "bench: "+format+"\n", args...)
}

func (b *bencher) run(ctx context.Context) (*benchReport, error) {
	rep := &benchReport{o: b.o, when: time.Now().UTC(), machine: benchMachine()}
	rep.loadAvg[0] = benchLoadAvg()
	rep.fsync = benchFsync(b.tmp)

	for _, n := range b.o.Pathways {
		b.logf("steering, %d pathways", n)
		run, signing, err := b.real(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("%d pathways: %w", n, err)
		}
		rep.runs = append(rep.runs, run)
		rep.signing = append(rep.signing, signing)
		rep.bare = append(rep.bare, benchBare(run.msg, b.o.Bare))
		rep.bareAll = append(rep.bareAll, benchBareAll(run.msg, b.o.Bare))
	}
	b.logf("(b) a plain server")
	var err error
	if rep.plain, err = b.plain(ctx, rep.runs[0].manifest); err != nil {
		return nil, fmt.Errorf("the plain server: %w", err)
	}
	b.logf("evidence update and memory per session")
	for _, w := range b.o.WindowSizes {
		ev, err := benchEvidenceUpdate(w, b.o.EvidenceTime)
		if err != nil {
			return nil, fmt.Errorf("evidence update: %w", err)
		}
		rep.evidence = append(rep.evidence, ev)
	}
	for _, n := range b.o.Pathways {
		rep.sessions = append(rep.sessions, benchSessionMemory(b.o.Sessions, n))
	}
	rep.loadAvg[1] = benchLoadAvg()
	return rep, ctx.Err()
}

// The room of a run.

// benchRoom is the room a run steers: n pathways of an edge and an interior
// hop each, of two classes; the first pathway has a capacity, the last a
// share (§6.3); the policy is internal/scenario's (P = 60 s, W = 5 P,
// L = 10 s).
type benchRoom struct {
	sc      *scenario.Scenario
	path    string // the path of server_uri
	ids     []string
	initial int
	hops    [][2]int // pathway, hop
}

func newBenchRoom(n, players int) (*benchRoom, error) {
	pws := make([]scenario.Pathway, n)
	for i := range pws {
		class := evidence.ModelBased
		if i%4 == 1 {
			class = evidence.OnChipCounter
		}
		pws[i] = scenario.Pathway{
			ID: fmt.Sprintf("p%02d", i), TopTier: 2, LatencyMs: uint32(60 + 10*(i%8)), Capacity: policy.Unlimited,
			Hops: []scenario.Hop{
				{Place: policy.Edge, Class: class, Joules: uint64(20_000_000 + 700_000*((i*7)%n)), Bytes: 1_000_000_000,
					SubscriberUs: [8]uint64{0, 0, 60_000_000, 0, 0, 0, 0, 0}},
				{Place: policy.Interior, Class: class, Joules: 5_000_000, Bytes: 900_000_000},
			},
		}
	}
	pws[0].Capacity = uint32(max(players/4, 1))
	pws[n-1].MinSharePPM = 100_000
	sc, err := scenario.Build(scenario.Spec{Name: fmt.Sprintf("bench %d", n), Pathways: pws})
	if err != nil {
		return nil, err
	}
	r := &benchRoom{sc: sc, ids: sc.Policy.IDs(), initial: int(sc.Policy.Initial)}
	r.path = sc.Policy.ServerURI
	if k := strings.Index(r.path, "://"); k >= 0 {
		rest := r.path[k+3:]
		r.path = rest[max(strings.IndexByte(rest, '/'), 0):]
	}
	for i := range pws {
		for j := range pws[i].Hops {
			r.hops = append(r.hops, [2]int{i, j})
		}
	}
	return r, nil
}

// record is hop h's signed record of [start, start + P).
func (r *benchRoom) record(h int, start uint64, edit func(*evidence.Record)) []byte {
	i, j := r.hops[h][0], r.hops[h][1]
	rec := r.sc.Record(i, j, start, start+r.sc.Policy.PeriodUs)
	if edit != nil {
		edit(rec)
	}
	return evidence.SignRecord(rec, r.sc.HopKeys[i][j])
}

// periods are the records of every hop for the periods [from, to).
func (r *benchRoom) periods(from, to uint64) []byte {
	var body []byte
	for s := from; s < to; s += r.sc.Policy.PeriodUs {
		for h := range r.hops {
			body = append(body, r.record(h, s, nil)...)
		}
	}
	return body
}

func (r *benchRoom) recordsPath() string {
	return "/v1/rooms/" + r.sc.Room.ID().String() + "/records"
}

// writeFiles writes the room's files and a configuration for serve into dir.
func (r *benchRoom) writeFiles(dir, engine string) (string, error) {
	files := map[string][]byte{
		"room.cbor":   r.sc.Room.DescriptorBytes,
		"keylog.cbor": r.sc.Room.HeadBytes,
		"policy.wsp1": r.sc.PolicyBytes,
		"steer.key":   sig.MarshalPrivateKey(r.sc.SteerKey),
		"token":       []byte("bench\n"),
		"serve.toml": []byte(`listen = "127.0.0.1:0"
data_dir = "data"
operator_token_file = "token"

[http]
engine = "` + engine + `"

[[room]]
descriptor = "room.cbor"
keylog = "keylog.cbor"
policy = "policy.wsp1"
steering_key = "steer.key"
`),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "serve.toml"), nil
}

// The children.

// benchChild is a server running as a child process.
type benchChild struct {
	cmd    *exec.Cmd
	addr   string // host:port
	pprof  string // host:port of its profiling listener, or ""
	stderr *benchTail
	done   chan error
}

// benchTail keeps the last few KiB a child wrote to its standard error.
type benchTail struct {
	mu sync.Mutex
	b  []byte
}

func (t *benchTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-4<<10:]...)
	}
	return len(p), nil
}

func (t *benchTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// start runs this binary with args and waits for the line "ready URL" on
// its standard output (and "pprof URL" before it, when it profiles).
func (b *bencher) start(ctx context.Context, args ...string) (*benchChild, error) {
	cmd, err := Spawn(args...)
	if err != nil {
		return nil, err
	}
	c := &benchChild{cmd: cmd, stderr: &benchTail{}, done: make(chan error, 1)}
	cmd.Stderr = c.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
		c.done <- cmd.Wait()
	}()
	timeout := time.After(60 * time.Second)
	for c.addr == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				return nil, fmt.Errorf("%s exited before it was ready: %s", strings.Join(args, " "), c.stderr)
			}
			if u, ok := strings.CutPrefix(line, "pprof http://"); ok {
				c.pprof = u
			}
			if u, ok := strings.CutPrefix(line, "ready http://"); ok {
				c.addr = u
			}
		case <-timeout:
			c.kill()
			return nil, fmt.Errorf("%s was not ready in 60 s: %s", strings.Join(args, " "), c.stderr)
		case <-ctx.Done():
			c.kill()
			return nil, ctx.Err()
		}
	}
	return c, nil
}

func (c *benchChild) kill() {
	c.cmd.Process.Kill()
	<-c.done
}

// stop asks the child to shut down (SIGTERM: serve finishes its requests
// and writes its pending decisions) and waits for it.
func (c *benchChild) stop() error {
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("%v: %s", err, c.stderr)
		}
		return nil
	case <-time.After(60 * time.Second):
		c.kill()
		return errors.New("the child did not stop in 60 s")
	}
}

// cpu is the child's CPU time so far, user and system, from /proc; false
// where /proc does not give it.
func (c *benchChild) cpu() (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command's closing parenthesis: state is the first,
	// utime the 12th and stime the 13th (proc(5)), in clock ticks of
	// 1/100 s (USER_HZ).
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * 10 * time.Millisecond, true
}

// peakRSS is the child's peak resident set, from /proc; 0 when unknown.
func (c *benchChild) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs a phase of load and the CPU the child and the generator
// spent on it.
func measure(ctx context.Context, c *benchChild, l *benchLoad, d time.Duration, rate float64) (benchPhase, time.Duration, time.Duration, bool) {
	c0, ok0 := c.cpu()
	g0 := selfCPU()
	ph := l.run(ctx, d, rate)
	c1, ok1 := c.cpu()
	g1 := selfCPU()
	return ph, c1 - c0, g1 - g0, ok0 && ok1
}

// benchServer is one server under the load generator, and what its
// saturated rounds measured so far.
type benchServer struct {
	c        *benchChild
	l        *benchLoad
	answered uint64
	elapsed  time.Duration
	cpu, gen time.Duration
	cpuOK    bool
	failed   uint64
	firstErr error
}

func newBenchServer(c *benchChild, l *benchLoad) *benchServer {
	return &benchServer{c: c, l: l, cpuOK: true}
}

// benchRound is the longest round of saturate.
const benchRound = 2 * time.Second

// saturate drives each server at saturation (closed loop) for d in all, in
// turns of at most benchRound: whatever else the machine runs, which comes
// and goes, then weighs on each server alike.
func (b *bencher) saturate(ctx context.Context, d time.Duration, servers ...*benchServer) {
	rounds := max(1, int((d+benchRound-1)/benchRound))
	for range rounds {
		for _, s := range servers {
			ph, cpu, gen, ok := measure(ctx, s.c, s.l, d/time.Duration(rounds), 0)
			s.answered += ph.answered
			s.elapsed += ph.elapsed
			s.cpu += cpu
			s.gen += gen
			s.cpuOK = s.cpuOK && ok
			s.failed += ph.failed
			if s.firstErr == nil {
				s.firstErr = ph.firstErr
			}
		}
	}
}

// pace completes what saturate measured with a phase paced at half the
// saturated rate, for the latency.
func (b *bencher) pace(ctx context.Context, s *benchServer) (benchServed, error) {
	out := benchServed{failed: s.failed, firstErr: s.firstErr}
	if s.answered == 0 {
		return out, fmt.Errorf("no answer at saturation: %v", s.firstErr)
	}
	out.rate = float64(s.answered) / s.elapsed.Seconds()
	if s.cpuOK {
		out.cpu = s.cpu / time.Duration(s.answered)
	}
	out.gen = s.gen / time.Duration(s.answered)
	half, _, _, _ := measure(ctx, s.c, s.l, b.o.Duration, out.rate/2)
	out.half = half.rate()
	out.p50, out.p99, out.p999 = quantile(half.latencies, 0.50), quantile(half.latencies, 0.99), quantile(half.latencies, 0.999)
	out.failed += half.failed
	if out.firstErr == nil {
		out.firstErr = half.firstErr
	}
	return out, ctx.Err()
}

// profile fetches the child's CPU profile of the next d into the profile
// directory, in the background; wait waits for it and fetches its
// allocation and mutex profiles.
func (b *bencher) profile(c *benchChild, name string, d time.Duration, heaps bool) (wait func() []string) {
	if b.o.Profile == "" || c.pprof == "" {
		return func() []string { return nil }
	}
	var profiled []string
	var wg sync.WaitGroup
	wg.Go(func() {
		file := filepath.Join(b.o.Profile, "cpu-"+name+".pprof")
		secs := max(1, int((d+time.Second/2)/time.Second))
		if err := benchFetch(c.pprof, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), file); err != nil {
			b.logf("profile: %v", err)
			return
		}
		profiled = append(profiled, file)
	})
	return func() []string {
		wg.Wait()
		if heaps {
			for _, kind := range []string{"allocs", "mutex"} {
				file := filepath.Join(b.o.Profile, kind+"-"+name+".pprof")
				if err := benchFetch(c.pprof, "/debug/pprof/"+kind, file); err == nil {
					profiled = append(profiled, file)
				}
			}
		}
		return profiled
	}
}

// benchFetch writes what a GET of path on addr answers into the file name.
func benchFetch(addr, path, name string) error {
	b, err := benchGet(context.Background(), addr, path)
	if err != nil {
		return err
	}
	return os.WriteFile(name, b, 0o644)
}

// benchGet fetches target from the server at addr, which must answer 200.
func benchGet(ctx context.Context, addr, target string) ([]byte, error) {
	c := client.New()
	c.HTTP.Timeout = 15 * time.Minute // a CPU profile takes as long as it was asked to
	return c.Get(ctx, "http://"+addr+target, 1<<30)
}

// post posts records on c and returns the answer's status.
func benchPost(c *benchConn, path string, body []byte) (int, []byte, error) {
	c.req = fmt.Appendf(c.req[:0], "POST %s HTTP/1.1\r\nHost: steer.example\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", path, len(body))
	c.req = append(c.req, body...)
	return c.roundTrip()
}

// real measures the real server over a room of n pathways: it serves the
// room from a fresh bbolt store, gets a full window of records, is driven
// to saturation and then at half that rate, takes records in batches, and
// is stopped; then its file is read for the bytes each decision takes.
func (b *bencher) real(ctx context.Context, n int) (*benchRealRun, *benchServed, error) {
	r, err := newBenchRoom(n, b.o.Players)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(b.tmp, fmt.Sprintf("room-%d", n))
	cfg, err := r.writeFiles(dir, b.o.Engine)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"bench", "serve", "-c", cfg}
	if b.o.Profile != "" {
		args = append(args, "-pprof", "127.0.0.1:0")
	}
	c, err := b.start(ctx, args...)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if c != nil {
			c.kill()
		}
	}()
	run := &benchRealRun{n: n}

	// A full window of records, and the period before it (§5.1), then a
	// hop's record each period as it ends, well within the lag.
	p := r.sc.Policy
	hc := client.New()
	records := "http://" + c.addr + r.recordsPath()
	end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
	if _, err := hc.PostRecords(ctx, records, r.periods(end-p.WindowUs-p.PeriodUs, end)); err != nil {
		return nil, nil, fmt.Errorf("the window's records: %w", err)
	}
	hopCtx, hopsDone := context.WithCancel(ctx)
	hops := make(chan struct{})
	go func() {
		defer close(hops)
		for {
			now := uint64(time.Now().UnixMicro())
			next := (now/p.PeriodUs + 1) * p.PeriodUs
			select {
			case <-hopCtx.Done():
				return
			case <-time.After(time.Duration(next-now)*time.Microsecond + 500*time.Millisecond):
			}
			if _, err := hc.PostRecords(hopCtx, records, r.periods(next-p.PeriodUs, next)); err != nil && hopCtx.Err() == nil {
				b.logf("a period's records: %v", err)
			}
		}
	}()
	defer func() { hopsDone(); <-hops }()

	fileBefore := benchFileSize(filepath.Join(dir, "data", serve.StoreFile))
	l := newBenchLoad(c.addr, r.path, r.ids, r.initial, b.o.Clients, b.o.Players)
	defer l.close()
	if b.o.Warmup > 0 {
		l.run(ctx, b.o.Warmup, 0)
	}

	// A manifest and its decision, for the baselines.
	if run.manifest, err = benchGet(ctx, c.addr, r.path+"?_HLS_pathway=%22p00%22&_HLS_throughput=5000000"); err != nil {
		return nil, nil, err
	}
	l.answered.Add(1)
	// §8.1: the decision's URI is decision_uri followed by its digest.
	key := []byte(`"science.transaction.wai-decision":"`)
	i := bytes.Index(run.manifest, key)
	uri := []byte{}
	if i >= 0 {
		uri = run.manifest[i+len(key):]
		uri = uri[:max(bytes.IndexByte(uri, '"'), 0)]
	}
	if len(uri) < 2*sig.HashSize {
		return nil, nil, fmt.Errorf("a manifest without its decision: %s", run.manifest)
	}
	digest := string(uri[len(uri)-2*sig.HashSize:])
	raw, err := benchGet(ctx, c.addr, "/v1/decisions/"+digest)
	if err != nil {
		return nil, nil, err
	}
	if _, err := decision.Parse(raw); err != nil || len(raw) < sig.SignatureSize {
		return nil, nil, fmt.Errorf("the decision %s does not read: %v", digest, err)
	}
	run.decisionBytes, run.manifestBytes = len(raw), len(run.manifest)
	run.msg = append([]byte(decision.SignedPrefix), raw[:len(raw)-sig.SignatureSize]...)

	// (c), the signing floor: the plain server signing a message of the
	// decision's bytes per request, measured in turns with the server.
	b.logf("(c) a plain server signing %d bytes per request, in turns with it", len(run.msg))
	fc, fl, err := b.startPlain(ctx, run.manifest, run.msg)
	if err != nil {
		return nil, nil, fmt.Errorf("the signing floor: %w", err)
	}
	defer func() {
		fl.close()
		if fc != nil {
			fc.kill()
		}
	}()
	if b.o.Warmup > 0 {
		fl.run(ctx, b.o.Warmup, 0)
	}
	server, floor := newBenchServer(c, l), newBenchServer(fc, fl)
	g0, _ := benchGroups(c.addr)
	wait := b.profile(c, fmt.Sprintf("steer-%d", n), 2*b.o.Duration, true)
	b.saturate(ctx, b.o.Duration, server, floor)
	run.profiled = wait()
	if g1, ok := benchGroups(c.addr); ok {
		run.groupSize = (g1[0] - g0[0]) / max(g1[1]-g0[1], 1)
	}
	if run.served, err = b.pace(ctx, server); err != nil {
		return nil, nil, err
	}
	b.logf("%s decisions/s, %s of CPU each; at half rate p50 %s, p99 %s", benchRate(run.served.rate), benchDur(run.served.cpu), benchDur(run.served.p50), benchDur(run.served.p99))
	signing, err := b.pace(ctx, floor)
	if err != nil {
		return nil, nil, fmt.Errorf("the signing floor: %w", err)
	}
	fl.close()
	err = fc.stop()
	fc = nil
	if err != nil {
		return nil, nil, fmt.Errorf("the signing floor: %w", err)
	}
	fileSteered := benchFileSize(filepath.Join(dir, "data", serve.StoreFile))

	// Records: old periods, so that the evidence the decisions state
	// stays as it is; each hop's in the order of time.
	first := end - p.WindowUs - 4*p.PeriodUs - uint64(b.o.IngestPool[0]+b.o.IngestPool[1]+len(r.hops))/uint64(len(r.hops))*p.PeriodUs
	for k, batch := range []int{1, 64} {
		pool := b.o.IngestPool[k]
		var bodies [][]byte
		var body []byte
		for x := range pool {
			h := x % len(r.hops)
			body = append(body, r.record(h, first+uint64(x/len(r.hops))*p.PeriodUs, nil)...)
			if (x+1)%batch == 0 {
				bodies = append(bodies, body)
				body = nil
			}
		}
		first += uint64(pool/len(r.hops)+1) * p.PeriodUs
		wait := b.profile(c, fmt.Sprintf("ingest-%d-%d", n, batch), b.o.Ingest, false)
		run.ingest = append(run.ingest, b.ingestPhase(ctx, c, r.recordsPath(), batch, bodies))
		run.profiled = append(run.profiled, wait()...)
	}
	run.peakRSS = c.peakRSS()

	hopsDone()
	<-hops
	l.close()
	if err := c.stop(); err != nil {
		c = nil
		return nil, nil, err
	}
	c = nil
	run.answered = l.answered.Load()
	run.stored, run.bytesInUse, err = benchStored(filepath.Join(dir, "data", serve.StoreFile))
	if err != nil {
		return nil, nil, err
	}
	if run.stored > 0 {
		run.bytesInUse /= float64(run.stored)
		run.fileBytes = float64(fileSteered-fileBefore) / float64(run.stored)
	}
	return run, &signing, nil
}

// ingestPhase posts the bodies from a few hops at once until they are all
// posted or the phase's time is up.
func (b *bencher) ingestPhase(ctx context.Context, c *benchChild, path string, batch int, bodies [][]byte) benchIngest {
	in := benchIngest{batch: batch}
	var next, records, failed atomic.Uint64
	var firstErr atomic.Pointer[error]
	c0, ok0 := c.cpu()
	start := time.Now()
	deadline := start.Add(b.o.Ingest)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			conn := &benchConn{addr: c.addr}
			defer conn.close()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				k := next.Add(1) - 1
				if k >= uint64(len(bodies)) {
					return
				}
				status, body, err := benchPost(conn, path, bodies[k])
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("status %d: %s", status, bytes.TrimSpace(body))
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				records.Add(uint64(batch))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	c1, ok1 := c.cpu()
	in.records, in.failed = records.Load(), failed.Load()
	if e := firstErr.Load(); e != nil {
		in.err = *e
	}
	in.rate = float64(in.records) / elapsed.Seconds()
	if ok0 && ok1 && in.records > 0 {
		in.cpu = (c1 - c0) / time.Duration(in.records)
	}
	return in
}

// benchGroups reads the group commits' sum and count from the server's
// metrics.
func benchGroups(addr string) ([2]float64, bool) {
	var g [2]float64
	m, err := benchGet(context.Background(), addr, "/metrics")
	if err != nil {
		return g, false
	}
	found := 0
	for line := range strings.SplitSeq(string(m), "\n") {
		for k, name := range []string{"waisteer_commit_group_size_sum ", "waisteer_commit_group_size_count "} {
			if v, ok := strings.CutPrefix(line, name); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					g[k] = f
					found++
				}
			}
		}
	}
	return g, found == 2
}

func benchFileSize(name string) int64 {
	fi, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// benchStored reads a stopped server's bbolt file: the decisions it holds
// (its rows) and the bytes in use in the buckets that hold decisions (their
// rows, the index by digest, the contexts and the evidence snapshots).
func benchStored(path string) (uint64, float64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	var stored uint64
	var inUse int
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"decisions", "decision_digests", "decision_runs", "decision_run_list", "contexts", "context_ids", "snapshots", "snapshot_bodies"} {
			bk := tx.Bucket([]byte(name))
			if bk == nil {
				continue // a layout without it
			}
			s := bk.Stats()
			inUse += s.LeafInuse + s.BranchInuse
			if name == "decisions" {
				stored = uint64(s.KeyN)
			}
		}
		return nil
	})
	return stored, float64(inUse), err
}

// startPlain starts `bench plain`, answering the fixed manifest, and with
// msg signing it per request, and its load.
func (b *bencher) startPlain(ctx context.Context, manifest, msg []byte) (*benchChild, *benchLoad, error) {
	dir, err := os.MkdirTemp(b.tmp, "plain-")
	if err != nil {
		return nil, nil, err
	}
	mf := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(mf, manifest, 0o600); err != nil {
		return nil, nil, err
	}
	args := []string{"bench", "plain", "-manifest", mf}
	if msg != nil {
		sf := filepath.Join(dir, "message")
		if err := os.WriteFile(sf, msg, 0o600); err != nil {
			return nil, nil, err
		}
		args = append(args, "-sign", sf)
	}
	c, err := b.start(ctx, args...)
	if err != nil {
		return nil, nil, err
	}
	// The players read the fixed manifest's first pathway: its id is
	// whatever the manifest names.
	var ids []string
	if i := bytes.Index(manifest, benchPriorityKey); i >= 0 {
		id := manifest[i+len(benchPriorityKey):]
		ids = append(ids, string(id[:max(bytes.IndexByte(id, '"'), 0)]))
	}
	return c, newBenchLoad(c.addr, "/v1/steer", ids, 0, b.o.Clients, b.o.Players), nil
}

// plain measures (b), the plain server answering a fixed manifest.
func (b *bencher) plain(ctx context.Context, manifest []byte) (*benchServed, error) {
	c, l, err := b.startPlain(ctx, manifest, nil)
	if err != nil {
		return nil, err
	}
	if b.o.Warmup > 0 {
		l.run(ctx, b.o.Warmup, 0)
	}
	s := newBenchServer(c, l)
	b.saturate(ctx, b.o.Duration, s)
	out, err := b.pace(ctx, s)
	l.close()
	if serr := c.stop(); err == nil {
		err = serr
	}
	return &out, err
}

// benchBare is the CPU time of one bare Ed25519 signature of msg
// (crypto/ed25519, as the server's key signs), on one thread.
func benchBare(msg []byte, d time.Duration) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	c0, okc := threadCPU()
	start := time.Now()
	n := 0
	for n%16 != 0 || time.Since(start) < d {
		ed25519.Sign(key, msg)
		n++
	}
	c1, _ := threadCPU()
	if !okc {
		return time.Since(start) / time.Duration(n)
	}
	return (c1 - c0) / time.Duration(n)
}

// benchBareAll is benchBare on every core at once (GOMAXPROCS threads):
// the CPU time of a signature when, as in the server at saturation, every
// core is busy and shares its caches (and, with SMT, its execution units)
// with another.
func benchBareAll(msg []byte, d time.Duration) time.Duration {
	n := runtime.GOMAXPROCS(0)
	each := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { each[i] = benchBare(msg, d) })
	}
	wg.Wait()
	var sum time.Duration
	for _, c := range each {
		sum += c
	}
	return sum / time.Duration(n)
}

// threadCPU is the calling thread's CPU time (RUSAGE_THREAD, Linux).
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// benchEvidenceUpdate is the cost of taking one more record into a
// pathway's evidence when the pathway's window holds w records: the index
// takes it (evidence.Index.Add) and the ranking computes the pathway again
// (decision.Ranking.Refresh, §5). The pathway's two hops each hold w/2
// records that tile the window (§5.2); each record added is another of the
// same span, as a late or repeated record is.
func benchEvidenceUpdate(w int, least time.Duration) (benchEvidence, error) {
	r, err := newBenchRoom(3, 1)
	if err != nil {
		return benchEvidence{}, err
	}
	p := r.sc.Policy
	t := 1000*p.PeriodUs + p.LagUs + 1
	a, b := evidence.PolicyWindow(p, t)
	per := uint64(max(w/2, 1))
	span := (b - a) / per
	entry := func(h int, start, end uint64, sessions uint32) (evidence.Entry, error) {
		i, j := r.hops[h][0], r.hops[h][1]
		rec := r.sc.Record(i, j, start, end)
		rec.Sessions = sessions
		parsed, err := evidence.ParseRecord(evidence.SignRecord(rec, r.sc.HopKeys[i][j]))
		if err != nil {
			return evidence.Entry{}, err
		}
		return evidence.Entry{Digest: parsed.Digest(), Record: parsed}, nil
	}
	var base []evidence.Entry
	for h := range r.hops {
		if r.hops[h][0] == 0 {
			for k := range per {
				e, err := entry(h, a+k*span, a+(k+1)*span, 10)
				if err != nil {
					return benchEvidence{}, err
				}
				base = append(base, e)
			}
			continue
		}
		for s := a; s < b; s += p.PeriodUs {
			e, err := entry(h, s, s+p.PeriodUs, 10)
			if err != nil {
				return benchEvidence{}, err
			}
			base = append(base, e)
		}
	}
	k := max(w/10, 10)
	var more []evidence.Entry
	for x := range k {
		e, err := entry(x%2, a+uint64(x/2)%per*span, a+(uint64(x/2)%per+1)*span, uint32(11+x))
		if err != nil {
			return benchEvidence{}, err
		}
		more = append(more, e)
	}
	var spent time.Duration
	ops := 0
	for spent < least || ops < 100 {
		x := evidence.NewIndex()
		for _, e := range base {
			x.Add(e)
		}
		rk, err := decision.RankAt(p, p.Digest(), t, x)
		if err != nil {
			return benchEvidence{}, err
		}
		start := time.Now()
		for _, e := range more {
			if x.Add(e) {
				if rk, err = rk.Refresh(x, e.Record); err != nil {
					return benchEvidence{}, err
				}
			}
		}
		spent += time.Since(start)
		ops += len(more)
	}
	return benchEvidence{window: int(2 * per), perOp: spent / time.Duration(ops)}, nil
}

// benchSessionMemory is the heap a live session takes in the table of
// loads (store.MemLoads): the heap's growth over n sessions, each steered
// once, divided by n.
func benchSessionMemory(n, pathways int) benchSessions {
	ctx := context.Background()
	l := store.NewLoads()
	room := sig.Hash{1}
	const now = 1 << 50
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := range n {
		var s report.Session
		binary.LittleEndian.PutUint64(s[:], uint64(i)+1)
		binary.LittleEndian.PutUint64(s[8:], 0x9e3779b97f4a7c15*uint64(i+1))
		l.Steer(ctx, room, pathways, s, now, func([]uint32) (int, uint64, error) {
			return i % pathways, now + 320_000_000, nil
		})
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if got := l.Sessions(room); got != n {
		return benchSessions{sessions: n, pathways: pathways, bytes: math.NaN()}
	}
	runtime.KeepAlive(l)
	return benchSessions{sessions: n, pathways: pathways, bytes: float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)}
}

// The machine.

func benchMachine() []string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				mem = fmt.Sprintf(", %.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	kernel := runtime.GOOS
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return []string{
		fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d)%s", model, runtime.NumCPU(), runtime.GOMAXPROCS(0), mem),
		fmt.Sprintf("%s, %s %s/%s", kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH),
	}
}

func benchLoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// benchFsync is the median time of a 4 KiB write and fdatasync in dir, the
// least each durable commit costs.
func benchFsync(dir string) time.Duration {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	var ts []time.Duration
	for i := range 21 {
		start := time.Now()
		if _, err := f.WriteAt(page, int64(i)*4096); err != nil {
			return 0
		}
		if err := f.Sync(); err != nil {
			return 0
		}
		ts = append(ts, time.Since(start))
	}
	slices.Sort(ts)
	return quantile(ts, 0.5)
}
