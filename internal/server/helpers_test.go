package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/fastserve"
	"github.com/waisteer/waisteer/internal/fuzzing"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/verify"
)

const testToken = "operator-secret"

// t0 is the default test instant: the window of the default scenario's
// policy at t0 is [P, 6P) (§5.1: b = ⌊(t − L)/P⌋ × P = 6P, a = b − 5P).
const t0 = 6*scenario.Period + 10_000_000 + 1_000_000

// failStore is a store whose writes can be made to fail.
type failStore struct {
	store.Store
	failDecisions, failRecords atomic.Bool
	// panicDecisions and panicRecord make PutDecisions and Record panic
	// (issue 26: a panic in a loop or a route, recovered).
	panicDecisions, panicRecord atomic.Bool
	delay                       atomic.Int64 // ns each PutDecisions and PutRecords takes, as a disk's fsync would
	groups, decisions           atomic.Int64 // PutDecisions calls and the decisions they wrote
	recordGroups, records       atomic.Int64 // PutRecords calls and the records they were given
	// failHeld, when set, makes the next PutDecisions wait until the
	// channel is closed and then fail: a group that fails after the
	// requests after it were decided.
	failHeld atomic.Pointer[chan struct{}]
	held     atomic.Int64 // PutDecisions calls waiting on failHeld
}

var errDisk = errors.New("disk full")

func (f *failStore) PutDecisions(ctx context.Context, ev []store.Evidence, ds []store.Decision) error {
	if f.panicDecisions.Load() {
		var m map[int]int
		m[len(ds)]++ // a nil map: as a store's bug would panic
	}
	if f.failDecisions.Load() {
		return errDisk
	}
	if held := f.failHeld.Swap(nil); held != nil {
		f.held.Add(1)
		<-*held
		return errDisk
	}
	time.Sleep(time.Duration(f.delay.Load()))
	f.groups.Add(1)
	f.decisions.Add(int64(len(ds)))
	return f.Store.PutDecisions(ctx, ev, ds)
}

func (f *failStore) Record(ctx context.Context, d sig.Hash) ([]byte, error) {
	if f.panicRecord.Load() {
		panic("the store's bug")
	}
	return f.Store.Record(ctx, d)
}

func (f *failStore) PutRecords(ctx context.Context, rs []store.Record) ([]bool, error) {
	if f.failRecords.Load() {
		return nil, errDisk
	}
	time.Sleep(time.Duration(f.delay.Load()))
	f.recordGroups.Add(1)
	f.records.Add(int64(len(rs)))
	return f.Store.PutRecords(ctx, rs)
}

// env is a server over a built scenario, behind a real HTTP listener.
type env struct {
	t   testing.TB
	sc  *scenario.Scenario
	mem *store.Memory
	st  *failStore
	// shared, when set, is the store the server runs on instead of st: a
	// store several servers share (shared_test.go).
	shared      store.Store
	sharedLoads store.Loads // with shared: the table of loads the servers share
	loads       *store.MemLoads
	clock       *atomic.Uint64
	srv         *Server
	ts          *testFront
}

// testEngine is the HTTP server the tests run the server behind: TestMain
// runs every test of the package behind each one that `waisteer serve` runs
// (fasthttp through FastServer, net/http through Handler).
var testEngine = "fasthttp"

// oneEngine runs the package's tests behind one engine only: a CPU
// profile of a benchmark (-cpuprofile) is then that engine's, where the
// second round would leave none.
var oneEngine = flag.String("engine", "", "run the tests behind this engine only (fasthttp or net/http); \"\" both")

// TestMain runs the package's tests once behind each engine (testEngine).
// A fuzzing run (-fuzz) is one round: the fuzz targets call the handlers
// themselves, and the fuzzing engine's processes expect one. The fuzz
// targets post signed records and policies, and each steering request signs
// a decision: the inputs found are kept as found (fuzzing.SignedInputs).
func TestMain(m *testing.M) {
	flag.Parse()
	if err := fuzzing.SignedInputs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// A panic recovered in a server's loop or route is printed with its
	// stack whatever the test's logger discards, and fails the run unless
	// a test caused it on purpose (expectPanics; issue 26).
	guard.Seen = func(e *guard.PanicError) { fmt.Fprintf(os.Stderr, "recovered: %v\n%s\n", e, e.Stack) }
	code := 0
	for _, engine := range []string{"fasthttp", "net/http"} {
		if *oneEngine != "" && *oneEngine != engine {
			continue
		}
		testEngine = engine
		fmt.Printf("--- the server behind %s\n", engine)
		if c := m.Run(); c != 0 {
			code = c
		}
		if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
			break
		}
	}
	if n, want := guard.Total(), expectedPanics.Load(); n != want {
		fmt.Fprintf(os.Stderr, "FAIL: %d panics recovered in the servers' loops and routes, %d of them caused on purpose\n", n, want)
		code = 1
	}
	closePG()
	os.Exit(code)
}

// expectedPanics counts the panics tests cause on purpose (expectPanics).
var expectedPanics atomic.Uint64

// expectPanics says that the test causes n panics in a server's loops or
// routes on purpose.
func expectPanics(n uint64) { expectedPanics.Add(n) }

// noPanics fails t, once it has ended and its servers are closed, when a
// server's loop or route recovered a panic the test did not cause on
// purpose (issue 26: such a panic is a test failure, never a silent
// exit). Tests run one at a time: the count is the test's.
func noPanics(t testing.TB) {
	before := guard.Total() - expectedPanics.Load()
	t.Cleanup(func() {
		if n := guard.Total() - expectedPanics.Load() - before; n != 0 {
			t.Errorf("%d panics recovered in the server's loops or routes (printed above with their stacks)", n)
		}
	})
}

// testFront is the server behind a real listener on loopback.
type testFront struct {
	URL    string
	client *http.Client
	close  func()
}

func (f *testFront) Client() *http.Client { return f.client }
func (f *testFront) Close()               { f.close() }

// serveTest serves srv behind testEngine.
func serveTest(t testing.TB, srv *Server) *testFront {
	if testEngine == "net/http" {
		ts := httptest.NewServer(srv.Handler())
		return &testFront{URL: ts.URL, client: ts.Client(), close: ts.Close}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := srv.FastServer(FastLimits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10})
	done := make(chan struct{})
	go func() { defer close(done); fs.Serve(fastserve.Listener(ln)) }() // as serve serves it
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	return &testFront{URL: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr}, close: func() {
		tr.CloseIdleConnections()
		fs.Shutdown()
		ln.Close() // Shutdown closes it only once Serve has begun
		<-done
	}}
}

// newEnv builds spec and serves it; the store starts empty (records are
// posted by the test) unless post is set, in which case every record the
// scenario signed is posted first.
func newEnv(t testing.TB, spec scenario.Spec, post bool) *env {
	t.Helper()
	sc, err := scenario.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	noPanics(t)
	e := &env{t: t, sc: sc, mem: store.NewMemory(), loads: store.NewLoads(), clock: new(atomic.Uint64)}
	e.st = &failStore{Store: e.mem}
	e.clock.Store(t0)
	e.start(nil)
	if post {
		e.postRecords(sc.Records, http.StatusOK)
	}
	return e
}

// start (re)starts the server over the env's store, with cfg edited by
// edit when given.
func (e *env) start(edit func(*Config)) {
	e.t.Helper()
	cfg := Config{
		Rooms: []roomsteer.Config{{
			Descriptor: e.sc.Room.DescriptorBytes, KeyLogHead: e.sc.Room.HeadBytes,
			Policy: e.sc.PolicyBytes, SteeringKey: e.sc.SteerKey,
		}},
		OperatorToken: testToken,
		Clock:         e.clock.Load,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	var st store.Store = e.st
	if e.shared != nil {
		st = e.shared
	}
	var loads store.Loads = e.loads
	if e.sharedLoads != nil {
		loads = e.sharedLoads
	}
	srv, err := New(context.Background(), cfg, st, loads)
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
	e.ts = serveTest(e.t, srv)
	e.t.Cleanup(func() { e.stop() })
}

func (e *env) stop() {
	if e.ts != nil {
		e.ts.Close()
		e.ts = nil
	}
	if e.srv != nil {
		if err := e.srv.Close(context.Background()); err != nil {
			e.t.Errorf("close: %v", err)
		}
		e.srv = nil
	}
}

func (e *env) room() string { return e.sc.Room.ID().String() }

// do sends a request and returns the response with its body read.
func (e *env) do(method, target string, body []byte, header http.Header) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+target, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
		req.ContentLength = 0
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

func (e *env) get(target string) (*http.Response, []byte) { return e.do("GET", target, nil, nil) }

// wantError checks a refusal's status and the code its body names.
func wantError(t testing.TB, what string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d, want %d (%s)", what, resp.StatusCode, status, body)
		return
	}
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Errorf("%s: body %q is not an error's JSON: %v", what, body, err)
		return
	}
	if eb.Error != code {
		t.Errorf("%s: error %q, want %q (%s)", what, eb.Error, code, eb.Detail)
	}
	if eb.Detail == "" {
		t.Errorf("%s: the body names no detail", what)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
}

// postRecords posts records back to back and checks the status.
func (e *env) postRecords(rs [][]byte, status int) api.RecordsAnswer {
	e.t.Helper()
	resp, b := e.do("POST", "/v1/rooms/"+e.room()+"/records", bytes.Join(rs, nil),
		http.Header{"Content-Type": {"application/octet-stream"}})
	if resp.StatusCode != status {
		e.t.Fatalf("POST records: status %d, want %d: %s", resp.StatusCode, status, b)
	}
	var a api.RecordsAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		e.t.Fatalf("POST records: %v: %s", err, b)
	}
	return a
}

// manifest is a steering manifest as §8.1 writes it, read back.
type manifest struct {
	Version  int      `json:"VERSION"`
	TTL      uint32   `json:"TTL"`
	Reload   string   `json:"RELOAD-URI"`
	Priority []string `json:"PATHWAY-PRIORITY"`
	Decision string   `json:"science.transaction.wai-decision"`
	raw      []byte
}

// steer sends a steering request for target (a path and query) and
// checks the answer's headers; it returns the manifest.
func (e *env) steer(target string, header http.Header) *manifest {
	e.t.Helper()
	resp, b := e.do("GET", target, nil, header)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: status %d: %s", target, resp.StatusCode, b)
	}
	checkSteerHeaders(e.t, resp)
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("manifest %s: %v", b, err)
	}
	m.raw = b
	return &m
}

// checkSteerHeaders checks the headers §8.1 and players.md ask of a
// manifest.
func checkSteerHeaders(t testing.TB, resp *http.Response) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Type":                ManifestType,
		"Cache-Control":               "no-store",
		"Access-Control-Allow-Origin": "*",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}

// path is the path and query of an absolute URI the server wrote.
func path(t testing.TB, uri string) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	return u.RequestURI()
}

// session is the wai_session of a manifest's RELOAD-URI.
func (m *manifest) session(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(m.Reload)
	if err != nil {
		t.Fatal(err)
	}
	s := u.Query().Get("wai_session")
	if len(s) != 32 {
		t.Fatalf("RELOAD-URI %q has no session", m.Reload)
	}
	return s
}

// fetch GETs signed bytes and checks they are served as such.
func (e *env) fetch(target string) []byte {
	e.t.Helper()
	resp, b := e.get(target)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: status %d: %s", target, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
		e.t.Errorf("GET %s: Content-Type %q", target, ct)
	}
	return b
}

// audit fetches a manifest's decision by the URI it names (§8.4) and all
// that verification needs from the /v1/ routes, as `waisteer verify --url`
// does, and verifies it with the manifest (§9.1).
func (e *env) audit(m *manifest) (*decision.Decision, *verify.Facts) {
	e.t.Helper()
	resp, raw := e.get(path(e.t, m.Decision))
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET decision: %d: %s", resp.StatusCode, raw)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
		e.t.Errorf("decision Cache-Control %q", cc)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
		e.t.Errorf("decision Content-Type %q", ct)
	}
	d, err := decision.Parse(raw)
	if err != nil {
		e.t.Fatalf("decision: %v", err)
	}
	if !strings.HasSuffix(m.Decision, d.Digest().String()) {
		e.t.Errorf("decision URI %q does not end with the digest of what it serves", m.Decision)
	}
	in := verify.Input{
		Descriptor: e.fetch("/v1/rooms/" + d.Room.String() + "/descriptor"),
		Policy:     e.fetch("/v1/policies/" + d.Policy.String()),
		Decision:   raw,
		Manifest:   m.raw,
	}
	if resp, b := e.get("/v1/rooms/" + d.Room.String() + "/keylog"); resp.StatusCode == http.StatusOK {
		in.KeyLogHead = b
	}
	for _, pw := range d.Pathways {
		for _, h := range pw.Records {
			in.Records = append(in.Records, e.fetch("/v1/records/"+h.String()))
		}
	}
	f, err := verify.Verify(in)
	if err != nil {
		e.t.Fatalf("verify: %v", err)
	}
	return d, f
}

// withPolicy edits the scenario's default policy.
func withPolicy(spec scenario.Spec, edit func(*policy.Policy)) scenario.Spec {
	prev := spec.Policy
	spec.Policy = func(p *policy.Policy) {
		if prev != nil {
			prev(p)
		}
		edit(p)
	}
	return spec
}

// statusOfRoom reads the room's status.
func (e *env) status() Status {
	e.t.Helper()
	resp, b := e.do("GET", "/v1/rooms/"+e.room()+"/status", nil, http.Header{"Authorization": {"Bearer " + testToken}})
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("status: %d: %s", resp.StatusCode, b)
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func newClock(t uint64) *atomic.Uint64 {
	c := new(atomic.Uint64)
	c.Store(t)
	return c
}

// errorBody is a refusal's JSON body as the tests read it from the wire
// (api's doc comment gives the shape).
type errorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
}
