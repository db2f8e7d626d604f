package main

// `waisteer bench` measures the steering server on this machine and prints
// one report (issue 7): the real server (`waisteer bench serve`, which is
// `waisteer serve` with an optional profiling listener) on its bbolt store,
// driven over loopback by closed-loop players (bench_load.go); and, in the
// same run, a bare Ed25519 signature of the same decision bytes, a plain
// net/http server answering a fixed manifest (`waisteer bench plain`), and
// that plain server signing a decision-sized message per request: the
// floor for any server that signs every answer. Each server is a child
// process, so that its CPU time is read from /proc apart from the load
// generator's.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

func init() {
	register(&command{
		name:    "bench",
		summary: "measure the steering server on this machine beside a bare signature and plain servers",
		run:     runBench,
	})
	register(&command{
		name:    "bench serve",
		summary: "(for bench) waisteer serve, with an optional loopback profiling listener",
		run:     runBenchServe,
	})
	register(&command{
		name:    "bench plain",
		summary: "(for bench) a plain net/http server answering a fixed manifest, signing or not",
		run:     runBenchPlain,
	})
}

// benchSpawn makes the command of a child process: this same binary with
// args. The tests run their own binary instead.
var benchSpawn = func(args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(self, args...), nil
}

// benchOptions are bench's flags.
type benchOptions struct {
	duration, warmup, ingest, bare time.Duration
	evidenceTime                   time.Duration // the least spent measuring each evidence update
	clients, players               int
	pathways                       []int
	windowSizes                    []int // records in a pathway's window, for the evidence update
	sessions                       int   // for the memory per live session
	ingestPool                     [2]int
	profile                        string
	quick                          bool
}

func runBench(e *env, args []string) error {
	fs := newFlags(e, "bench", "[-quick] [-d DURATION] [-clients N] [-players N] [-pathways 3,32] [-profile DIR]")
	o := benchOptions{}
	fs.DurationVar(&o.duration, "d", 10*time.Second, "the `duration` of each measured phase")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "the `duration` of the warm-up before the phases of each server")
	fs.IntVar(&o.clients, "clients", 256, "concurrent clients, each one keep-alive connection: enough that the group commit, not the clients, bounds the rate")
	fs.IntVar(&o.players, "players", 10000, "players (sessions), shared among the clients")
	pathways := fs.String("pathways", "3,32", "the rooms' counts of pathways, comma-separated")
	fs.StringVar(&o.profile, "profile", "", "write the server's CPU, allocation and mutex profiles of each saturation phase into this `directory` (profiling costs the figures a little)")
	fs.BoolVar(&o.quick, "quick", false, "a smoke run of a few seconds: short phases, few clients, 3 pathways")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	for f := range strings.SplitSeq(*pathways, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 3 || n > decision.MaxPathways {
			return usagef("-pathways: %q is not a count of 3 to %d", f, decision.MaxPathways)
		}
		o.pathways = append(o.pathways, n)
	}
	o.ingest, o.bare = o.duration/2, 2*time.Second
	o.windowSizes, o.sessions, o.ingestPool = []int{100, 1000, 10000}, 1_000_000, [2]int{8000, 32000}
	o.evidenceTime = 200 * time.Millisecond
	if o.quick {
		o.duration, o.warmup, o.ingest, o.bare = 300*time.Millisecond, 100*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		o.evidenceTime = 30 * time.Millisecond
		o.clients, o.players, o.pathways = 4, 32, []int{3}
		o.windowSizes, o.sessions, o.ingestPool = []int{100, 1000}, 10_000, [2]int{64, 640}
	}
	if o.clients < 1 || o.players < 1 || o.duration <= 0 || o.warmup < 0 {
		return usagef("-clients, -players and -d must be positive")
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "waisteer-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bencher{e: e, o: o, tmp: tmp}
	rep, err := b.run(ctx)
	if err != nil {
		return err
	}
	rep.write(e.stdout)
	return nil
}

// bencher runs one benchmark.
type bencher struct {
	e   *env
	o   benchOptions
	tmp string
}

// benchReport is everything one run measured.
type benchReport struct {
	o        benchOptions
	machine  []string
	loadAvg  [2]string
	when     time.Time
	fsync    time.Duration
	runs     []*benchRealRun
	plain    *benchServed   // (b)
	signing  []*benchServed // (c), by run
	bare     []time.Duration
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
	fmt.Fprintf(b.e.stderr, "bench: "+format+"\n", args...)
}

func (b *bencher) run(ctx context.Context) (*benchReport, error) {
	rep := &benchReport{o: b.o, when: time.Now().UTC(), machine: benchMachine()}
	rep.loadAvg[0] = benchLoadAvg()
	rep.fsync = benchFsync(b.tmp)

	for _, n := range b.o.pathways {
		b.logf("steering, %d pathways", n)
		run, err := b.real(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("%d pathways: %w", n, err)
		}
		rep.runs = append(rep.runs, run)
		b.logf("(c) a plain server signing %d bytes per request", len(run.msg))
		c, err := b.plain(ctx, run.manifest, run.msg)
		if err != nil {
			return nil, fmt.Errorf("the signing floor: %w", err)
		}
		rep.signing = append(rep.signing, c)
		rep.bare = append(rep.bare, benchBare(run.msg, b.o.bare))
	}
	b.logf("(b) a plain server")
	var err error
	if rep.plain, err = b.plain(ctx, rep.runs[0].manifest, nil); err != nil {
		return nil, fmt.Errorf("the plain server: %w", err)
	}
	b.logf("evidence update and memory per session")
	for _, w := range b.o.windowSizes {
		ev, err := benchEvidenceUpdate(w, b.o.evidenceTime)
		if err != nil {
			return nil, fmt.Errorf("evidence update: %w", err)
		}
		rep.evidence = append(rep.evidence, ev)
	}
	for _, n := range b.o.pathways {
		rep.sessions = append(rep.sessions, benchSessionMemory(b.o.sessions, n))
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
func (r *benchRoom) writeFiles(dir string) (string, error) {
	files := map[string][]byte{
		"room.cbor":   r.sc.Room.DescriptorBytes,
		"keylog.cbor": r.sc.Room.HeadBytes,
		"policy.wsp1": r.sc.PolicyBytes,
		"steer.key":   sig.MarshalPrivateKey(r.sc.SteerKey),
		"token":       []byte("bench\n"),
		"serve.toml": []byte(`listen = "127.0.0.1:0"
data_dir = "data"
operator_token_file = "token"

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
	cmd, err := benchSpawn(args...)
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

// serve runs the saturated and the paced phase against a started child.
func (b *bencher) serve(ctx context.Context, c *benchChild, l *benchLoad, profile string) (benchServed, []string, error) {
	var s benchServed
	var profiled []string
	if b.o.warmup > 0 {
		l.run(ctx, b.o.warmup, 0)
	}
	var wg sync.WaitGroup
	if profile != "" && c.pprof != "" {
		// The CPU profile covers the saturated phase.
		wg.Go(func() {
			name := filepath.Join(b.o.profile, "cpu-"+profile+".pprof")
			secs := max(1, int(b.o.duration/time.Second))
			if err := benchFetch(c.pprof, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), name); err == nil {
				profiled = append(profiled, name)
			} else {
				b.logf("profile: %v", err)
			}
		})
	}
	ph, cpu, gen, ok := measure(ctx, c, l, b.o.duration, 0)
	wg.Wait()
	if profile != "" && c.pprof != "" {
		for _, kind := range []string{"allocs", "mutex"} {
			name := filepath.Join(b.o.profile, kind+"-"+profile+".pprof")
			if err := benchFetch(c.pprof, "/debug/pprof/"+kind, name); err == nil {
				profiled = append(profiled, name)
			}
		}
	}
	s.rate, s.failed, s.firstErr = ph.rate(), ph.failed, ph.firstErr
	if ph.answered == 0 {
		return s, profiled, fmt.Errorf("no answer at saturation: %v", ph.firstErr)
	}
	if ok {
		s.cpu = cpu / time.Duration(ph.answered)
	}
	s.gen = gen / time.Duration(ph.answered)
	half, _, _, _ := measure(ctx, c, l, b.o.duration, s.rate/2)
	s.half = half.rate()
	s.p50, s.p99, s.p999 = quantile(half.latencies, 0.50), quantile(half.latencies, 0.99), quantile(half.latencies, 0.999)
	s.failed += half.failed
	if s.firstErr == nil {
		s.firstErr = half.firstErr
	}
	return s, profiled, ctx.Err()
}

// benchFetch writes what a GET of path on addr answers into the file name.
func benchFetch(addr, path, name string) error {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// get makes one GET on a fresh connection and returns the body of a 200.
func benchGet(addr, target string) ([]byte, error) {
	c := &benchConn{addr: addr}
	defer c.close()
	c.req = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: steer.example\r\n\r\n", target)
	status, body, err := c.roundTrip()
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d: %s", target, status, body)
	}
	return bytes.Clone(body), err
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
func (b *bencher) real(ctx context.Context, n int) (*benchRealRun, error) {
	r, err := newBenchRoom(n, b.o.players)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.tmp, fmt.Sprintf("room-%d", n))
	cfg, err := r.writeFiles(dir)
	if err != nil {
		return nil, err
	}
	args := []string{"bench", "serve", "-c", cfg}
	if b.o.profile != "" {
		args = append(args, "-pprof", "127.0.0.1:0")
	}
	c, err := b.start(ctx, args...)
	if err != nil {
		return nil, err
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
	post := &benchConn{addr: c.addr}
	defer post.close()
	end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
	if status, body, err := benchPost(post, r.recordsPath(), r.periods(end-p.WindowUs-p.PeriodUs, end)); err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("the window's records: %d %s %v", status, body, err)
	}
	hopCtx, hopsDone := context.WithCancel(ctx)
	hops := make(chan struct{})
	go func() {
		defer close(hops)
		poster := &benchConn{addr: c.addr}
		defer poster.close()
		for {
			now := uint64(time.Now().UnixMicro())
			next := (now/p.PeriodUs + 1) * p.PeriodUs
			select {
			case <-hopCtx.Done():
				return
			case <-time.After(time.Duration(next-now)*time.Microsecond + 500*time.Millisecond):
			}
			if status, body, err := benchPost(poster, r.recordsPath(), r.periods(next-p.PeriodUs, next)); err != nil || status != http.StatusOK {
				b.logf("a period's records: %d %s %v", status, body, err)
			}
		}
	}()
	defer func() { hopsDone(); <-hops }()

	fileBefore := benchFileSize(filepath.Join(dir, "data", boltFile))
	l := newBenchLoad(c.addr, r.path, r.ids, r.initial, b.o.clients, b.o.players)
	defer l.close()
	g0, _ := benchGroups(c.addr)
	profile := ""
	if b.o.profile != "" {
		profile = fmt.Sprintf("steer-%d", n)
	}
	run.served, run.profiled, err = b.serve(ctx, c, l, profile)
	if err != nil {
		return nil, err
	}
	b.logf("%s decisions/s, %s of CPU each; at half rate p50 %s, p99 %s", benchRate(run.served.rate), benchDur(run.served.cpu), benchDur(run.served.p50), benchDur(run.served.p99))
	if g1, ok := benchGroups(c.addr); ok {
		run.groupSize = (g1[0] - g0[0]) / max(g1[1]-g0[1], 1)
	}

	// A manifest and its decision, for the baselines.
	if run.manifest, err = benchGet(c.addr, r.path+"?_HLS_pathway=%22p00%22&_HLS_throughput=5000000"); err != nil {
		return nil, err
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
		return nil, fmt.Errorf("a manifest without its decision: %s", run.manifest)
	}
	digest := string(uri[len(uri)-2*sig.HashSize:])
	raw, err := benchGet(c.addr, "/v1/decisions/"+digest)
	if err != nil {
		return nil, err
	}
	if _, err := decision.Parse(raw); err != nil || len(raw) < sig.SignatureSize {
		return nil, fmt.Errorf("the decision %s does not read: %v", digest, err)
	}
	run.decisionBytes, run.manifestBytes = len(raw), len(run.manifest)
	run.msg = append([]byte(decision.SignedPrefix), raw[:len(raw)-sig.SignatureSize]...)
	fileSteered := benchFileSize(filepath.Join(dir, "data", boltFile))

	// Records: old periods, so that the evidence the decisions state
	// stays as it is; each hop's in the order of time.
	first := end - p.WindowUs - 4*p.PeriodUs - uint64(b.o.ingestPool[0]+b.o.ingestPool[1]+len(r.hops))/uint64(len(r.hops))*p.PeriodUs
	for k, batch := range []int{1, 64} {
		pool := b.o.ingestPool[k]
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
		profile := ""
		if b.o.profile != "" {
			profile = fmt.Sprintf("ingest-%d-%d", n, batch)
		}
		in, profiled := b.ingestPhase(ctx, c, r.recordsPath(), batch, bodies, profile)
		run.ingest = append(run.ingest, in)
		run.profiled = append(run.profiled, profiled...)
	}
	run.peakRSS = c.peakRSS()

	hopsDone()
	<-hops
	l.close()
	post.close()
	if err := c.stop(); err != nil {
		c = nil
		return nil, err
	}
	c = nil
	run.answered = l.answered.Load()
	run.stored, run.bytesInUse, err = benchStored(filepath.Join(dir, "data", boltFile))
	if err != nil {
		return nil, err
	}
	if run.stored > 0 {
		run.bytesInUse /= float64(run.stored)
		run.fileBytes = float64(fileSteered-fileBefore) / float64(run.stored)
	}
	return run, nil
}

// ingestPhase posts the bodies from a few hops at once until they are all
// posted or the phase's time is up.
func (b *bencher) ingestPhase(ctx context.Context, c *benchChild, path string, batch int, bodies [][]byte, profile string) (benchIngest, []string) {
	in := benchIngest{batch: batch}
	var profiled []string
	var pwg sync.WaitGroup
	if profile != "" && c.pprof != "" {
		pwg.Go(func() {
			name := filepath.Join(b.o.profile, "cpu-"+profile+".pprof")
			secs := max(1, int(b.o.ingest/time.Second))
			if err := benchFetch(c.pprof, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), name); err == nil {
				profiled = append(profiled, name)
			}
		})
	}
	defer pwg.Wait()
	var next, records, failed atomic.Uint64
	var firstErr atomic.Pointer[error]
	c0, ok0 := c.cpu()
	start := time.Now()
	deadline := start.Add(b.o.ingest)
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
	pwg.Wait()
	return in, profiled
}

// benchGroups reads the group commits' sum and count from the server's
// metrics.
func benchGroups(addr string) ([2]float64, bool) {
	var g [2]float64
	m, err := benchGet(addr, "/metrics")
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

// plain measures `bench plain`: the fixed manifest, and with msg a
// signature of it per request.
func (b *bencher) plain(ctx context.Context, manifest, msg []byte) (*benchServed, error) {
	dir, err := os.MkdirTemp(b.tmp, "plain-")
	if err != nil {
		return nil, err
	}
	mf := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(mf, manifest, 0o600); err != nil {
		return nil, err
	}
	args := []string{"bench", "plain", "-manifest", mf}
	if msg != nil {
		sf := filepath.Join(dir, "message")
		if err := os.WriteFile(sf, msg, 0o600); err != nil {
			return nil, err
		}
		args = append(args, "-sign", sf)
	}
	c, err := b.start(ctx, args...)
	if err != nil {
		return nil, err
	}
	ids, initial := []string{}, 0
	// The players read the fixed manifest's first pathway: its id is
	// whatever the manifest names.
	if i := bytes.Index(manifest, benchPriorityKey); i >= 0 {
		id := manifest[i+len(benchPriorityKey):]
		ids = append(ids, string(id[:max(bytes.IndexByte(id, '"'), 0)]))
	}
	l := newBenchLoad(c.addr, "/v1/steer", ids, initial, b.o.clients, b.o.players)
	s, _, err := b.serve(ctx, c, l, "")
	l.close()
	if serr := c.stop(); err == nil {
		err = serr
	}
	return &s, err
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
	return quantile(sortedDurations(ts), 0.5)
}

func sortedDurations(ts []time.Duration) []time.Duration {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j] < ts[j-1]; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
	return ts
}

// The report.

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
	fmt.Fprintf(w, "load         %d clients (keep-alive HTTP/1.1 on loopback, on the same cores as the servers), %d players:\n", o.clients, benchPlayersOf(o))
	fmt.Fprintln(w, "             half HLS, half DASH reports; a quarter with CMCD (query or header); 1 in 8 at the floor tier;")
	fmt.Fprintf(w, "             each server: %s warm-up, %s saturated (closed loop), %s paced at half that rate\n", o.warmup, o.duration, o.duration)
	if o.quick {
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
	fmt.Fprintln(w, "Steering: waisteer serve on its bbolt store; each manifest is sent once its decision is fsynced (group commit)")
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

func benchPlayersOf(o benchOptions) int {
	per := max(1, (o.players+o.clients-1)/o.clients)
	return per * o.clients
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

// The children's commands.

// runBenchServe is `waisteer serve` (the same configuration, store and
// server) that prints "ready URL" once it listens, for bench; with -pprof
// it serves profiles on a loopback address, which serve never does.
func runBenchServe(e *env, args []string) error {
	fs := newFlags(e, "bench serve", "-c FILE [-pprof 127.0.0.1:PORT]")
	cfgFile := fs.String("c", "", "the configuration `file`, as serve reads it")
	pprofAddr := fs.String("pprof", "", "serve CPU, allocation and mutex profiles on this loopback `address`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *cfgFile == "" {
		return usagef("-c FILE is required, and nothing else")
	}
	logger, err := newLogger(e.stderr, "text", "warn")
	if err != nil {
		return err
	}
	cfg, err := loadServeConfig(*cfgFile, os.Getenv)
	if err != nil {
		return err
	}
	cfg.server.Logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *pprofAddr != "" {
		u, err := benchProfiles(ctx, *pprofAddr)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "pprof %s\n", u)
	}
	st, loads, err := openStore(cfg.dataDir, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		st.Close()
		return err
	}
	return serveOn(ctx, stop, logger, ln, cfg, st, loads, func(u string) { fmt.Fprintf(e.stdout, "ready %s\n", u) })
}

// benchProfiles serves the process's profiles on a loopback address until
// ctx ends: /debug/pprof/profile?seconds=N (CPU), and allocs, heap, mutex,
// block and goroutine by name.
func benchProfiles(ctx context.Context, addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return "", usagef("-pprof %q: a loopback address, such as 127.0.0.1:6060", addr)
	}
	runtime.SetMutexProfileFraction(10)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || secs < 1 || secs > 600 {
			secs = 10
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-r.Context().Done():
		}
		pprof.StopCPUProfile()
	})
	mux.HandleFunc("/debug/pprof/{name}", func(w http.ResponseWriter, r *http.Request) {
		p := pprof.Lookup(r.PathValue("name"))
		if p == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		p.WriteTo(w, 0)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	go func() { <-ctx.Done(); hs.Close() }()
	return "http://" + ln.Addr().String(), nil
}

// benchSink keeps the plain server's signatures observable.
var benchSink atomic.Uint32

// runBenchPlain is the baseline servers (b) and (c): net/http answering
// every request with a fixed manifest and, with -sign, after an Ed25519
// signature of the message the file holds.
func runBenchPlain(e *env, args []string) error {
	fs := newFlags(e, "bench plain", "-manifest FILE [-sign FILE] [-listen ADDR]")
	manifestFile := fs.String("manifest", "", "the `file` of the manifest to answer")
	signFile := fs.String("sign", "", "sign the message in this `file` for every request")
	listen := fs.String("listen", "127.0.0.1:0", "the `address` to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *manifestFile == "" {
		return usagef("-manifest FILE is required")
	}
	manifest, err := os.ReadFile(*manifestFile)
	if err != nil {
		return err
	}
	var msg []byte
	if *signFile != "" {
		if msg, err = os.ReadFile(*signFile); err != nil {
			return err
		}
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	length := strconv.Itoa(len(manifest))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg != nil {
			s := ed25519.Sign(key, msg)
			benchSink.Store(binary.LittleEndian.Uint32(s))
		}
		hd := w.Header()
		hd.Set("Content-Type", server.ManifestType)
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Length", length)
		w.Write(manifest)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: defaultReadHeaderTimeout, IdleTimeout: defaultIdleTimeout,
		ErrorLog: slog.NewLogLogger(slog.NewTextHandler(e.stderr, nil), slog.LevelWarn)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(e.stdout, "ready http://%s\n", ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
