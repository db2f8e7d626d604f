package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/qoewatch"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report/qoe"
	"github.com/waisteer/waisteer/store"
)

// Issue 26 item 1: a value taken from a fasthttp request that outlives its
// handler must be copied. fasthttp reads each request of a connection into
// the buffers of one RequestCtx, reused; whatever still points into them
// after the handler returns changes under whoever kept it.

// reusedConn is one fasthttp connection as FastServer serves it: one
// RequestCtx, each request read into the buffers of the one before, after
// the handler of the one before has returned.
type reusedConn struct {
	h fasthttp.RequestHandler
	c fasthttp.RequestCtx
}

// testClient is the address every request of these tests comes from, on
// both engines: the report route's rate is per address.
var testClient = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 7), Port: 40000}

func newReusedConn(h fasthttp.RequestHandler) *reusedConn {
	rc := &reusedConn{h: h}
	rc.c.Init(&fasthttp.Request{}, testClient, nil)
	return rc
}

// do reads raw into the connection's RequestCtx, as fasthttp's server does
// for the next request of a connection (Reset, then Read into the same
// buffers), serves it, and returns the answer; ok is false when fasthttp
// does not read raw.
func (rc *reusedConn) do(raw []byte) (a fastAnswer, ok bool) {
	c := &rc.c
	c.Request.Reset()
	c.Response.Reset()
	c.Response.Header.SetNoDefaultContentType(true) // as FastServer's connections have it
	if err := c.Request.Read(bufio.NewReaderSize(bytes.NewReader(raw), 64<<10)); err != nil {
		return a, false
	}
	rc.h(c)
	hd := http.Header{}
	for k, v := range c.Response.Header.All() {
		hd.Add(string(k), string(v))
	}
	return fastAnswer{c.Response.StatusCode(), string(c.Response.Header.ContentType()), string(c.Response.Body()), hd}, true
}

// stdDo serves raw through ServeHTTP, from testClient; ok is false when
// net/http does not read raw.
func stdDo(srv *Server, raw []byte) (a fastAnswer, ok bool) {
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return a, false
	}
	r.RemoteAddr = testClient.String()
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return fastAnswer{w.Code, w.Header().Get("Content-Type"), w.Body.String(), w.Header()}, true
}

// wire writes an HTTP/1.1 request with the header fields given as
// name/value pairs, in order.
func wire(method, target string, body []byte, fields ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: steer.example\r\n", method, target)
	for i := 0; i+1 < len(fields); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", fields[i], fields[i+1])
	}
	if body != nil {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// newQoEServer is a server of the pool of the README's qoe.toml
// (cmd/waisteer/testdata/serve/qoe.toml: two pathways, cohorts by
// X-Region, the cohort rule at half the best median over 3 sessions),
// with no background loop of its own to race the test's evaluations.
func newQoEServer(t testing.TB) *Server {
	t.Helper()
	c := qoePool()
	c.QoE.MinSessions, c.QoE.Lowest = 3, 800_000
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{c}, OperatorToken: testToken,
		Clock:  newClock(t0).Load,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, store.NewMemory(), store.NewLoads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	return srv
}

// cellsOf is a QoE watch's cells as "pathway/cohort sessions median"
// lines, sorted.
func cellsOf(w *qoewatch.Watch) []string {
	var out []string
	for _, c := range w.View().Cells {
		out = append(out, fmt.Sprintf("%s/%s %d %d", c.Pathway, c.Cohort, c.Sessions, c.Throughput[1]))
	}
	slices.Sort(out)
	return out
}

// TestFastReportCohortKept is the reproduction (issue 26 item 1):
// CMCD v2 event reports posted with a cohort the pool has not seen
// (X-Region: wxyz), then steering requests of other cohorts on the same
// connection, then the QoE rule's evaluation. On bd4ceba the cohort kept
// as the aggregator's key was the header's bytes in fasthttp's buffer,
// which the next requests overwrote: Evaluate then found no cell under the
// key it iterated and panicked (nil pointer in Aggregator.step), or named
// a cohort no request sent. Both engines must end with the cells the
// requests made, worked out by hand below.
func TestFastReportCohortKept(t *testing.T) {
	var report bytes.Buffer
	for i := range 3 {
		// 3 sessions of wxyz on cdn-a at 2 Mbit/s (mtp is kbit/s).
		fmt.Fprintf(&report, "sid=\"wxyz-%d\",cdn=\"cdn-a\",e=ps,mtp=2000,bl=9000\n", i)
	}
	var stream [][]byte
	stream = append(stream, wire("POST", pool.DefaultPath, report.Bytes(), "X-Region", "wxyz", "Content-Type", "application/cmcd"))
	// Steering requests of other cohorts, each reporting cdn-b at 9 Mbit/s
	// from a session of its own (none given: the pool mints one).
	for _, cohort := range []string{"fra", "par", "fra", "ams", "par", "fra"} {
		stream = append(stream, wire("GET", pool.DefaultPath+"?_HLS_pathway=cdn-b&_HLS_throughput=9000000", nil, "X-Region", cohort))
	}
	want := []string{"cdn-a/wxyz 3 2000000", "cdn-b/ams 1 9000000", "cdn-b/fra 3 9000000", "cdn-b/par 2 9000000"}

	for _, engine := range []string{"fasthttp", "net/http"} {
		t.Run(strings.ReplaceAll(engine, "/", ""), func(t *testing.T) {
			srv := newQoEServer(t)
			conn := newReusedConn(srv.FastHandler())
			for _, raw := range stream {
				var a fastAnswer
				var ok bool
				if engine == "fasthttp" {
					a, ok = conn.do(raw)
				} else {
					a, ok = stdDo(srv, raw)
				}
				if !ok || a.status != http.StatusOK && a.status != http.StatusNoContent {
					t.Fatalf("%.80q: %d %s", raw, a.status, a.body)
				}
			}
			w := srv.poolNamed("").Watch()
			w.Evaluate(srv.log, time.UnixMicro(t0)) // panicked on bd4ceba behind fasthttp
			if got := cellsOf(w); !slices.Equal(got, want) {
				t.Errorf("cells\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// scribble is a request read into a connection's RequestCtx after each
// handler has returned, not served: its method, target, Host and 64 header
// fields of one byte each overwrite, in place, the first byte of every
// buffer the request before was read into, so that any string of that
// request still pointing into them reads differently from then on.
var scribble = func() []byte {
	var b bytes.Buffer
	b.WriteString("GET /~ HTTP/1.1\r\nHost: ~\r\n")
	for range 64 {
		b.WriteString("~: ~\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}()

// scribbled is a reusedConn that reads scribble into its RequestCtx after
// each answer.
func (rc *reusedConn) doScribbled(raw []byte) (fastAnswer, bool) {
	a, ok := rc.do(raw)
	rc.c.Request.Reset()
	if err := rc.c.Request.Read(bufio.NewReader(bytes.NewReader(scribble))); err != nil {
		panic(err)
	}
	return a, ok
}

// routeStep is one request of the route table's stream: its target may
// name {decision} (the path of the decision the last manifest names),
// {reload} (the path and query of the last manifest's RELOAD-URI) or
// {policy} (the digest of the policy the last decision was made under);
// exact asks both engines' answers to be the same bytes, not only the
// same status, media type and shape (sameAnswer).
type routeStep struct {
	method, target string
	fields         []string
	body           []byte
	exact          bool
}

// routeEnv is one engine's server of the route table: an energy room
// steering by QoE, the README's QoE pool with cohorts by X-Region, and a
// front over a directory origin, on a fixed clock.
type routeEnv struct {
	srv   *Server
	clock interface{ Load() uint64 }
	last  manifest // the last steering manifest of a room or a pool
}

func newRouteEnv(t *testing.T, sc *scenario.Scenario, dir string) *routeEnv {
	t.Helper()
	noPanics(t)
	e := newRouteServer(t, sc, dir)
	t.Cleanup(func() { e.srv.Close(context.Background()) })
	return e
}

// newRouteServer makes a routeEnv's server, for the caller to close; with
// dir "", no front.
func newRouteServer(t testing.TB, sc *scenario.Scenario, dir string) *routeEnv {
	t.Helper()
	c := qoePool()
	c.QoE.MinSessions, c.QoE.Lowest = 3, 800_000
	clock := newClock(t0)
	cfg := Config{
		Rooms: []roomsteer.Config{{Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes, Policy: sc.PolicyBytes, SteeringKey: sc.SteerKey,
			QoE: &qoe.Config{Window: time.Minute, MinSessions: 3, Fraction: 0.5, Margin: 0.2, Hold: time.Minute}}},
		Pools:         []pool.Config{c},
		OperatorToken: testToken,
		Name:          "route-table",
		Clock:         clock.Load,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if dir != "" {
		og, err := origin.New(dir, origin.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Front = &FrontConfig{Origin: og, Playlists: []FrontPlaylist{{Path: "/hls/"}, {Path: "/dash/live.mpd"}}}
	}
	srv, err := New(context.Background(), cfg, store.NewMemory(), store.NewLoads())
	if err != nil {
		t.Fatal(err)
	}
	return &routeEnv{srv: srv, clock: clock}
}

// fill puts step's placeholders in from the env's last manifest.
func (e *routeEnv) fill(t *testing.T, target string) string {
	t.Helper()
	if strings.Contains(target, "{decision}") {
		target = strings.ReplaceAll(target, "{decision}", strings.TrimPrefix(path(t, e.last.Decision), "/v1/decisions/"))
	}
	if strings.Contains(target, "{reload}") {
		target = strings.ReplaceAll(target, "{reload}", path(t, e.last.Reload))
	}
	return target
}

// serve answers one step behind engine, and keeps the manifest it answers.
func (e *routeEnv) serve(t *testing.T, engine string, conn *reusedConn, s routeStep) (raw []byte, a fastAnswer) {
	t.Helper()
	raw = wire(s.method, e.fill(t, s.target), s.body, s.fields...)
	var ok bool
	if engine == "fasthttp" {
		a, ok = conn.doScribbled(raw)
	} else {
		a, ok = stdDo(e.srv, raw)
	}
	if !ok {
		t.Fatalf("%s does not read %.200q", engine, raw)
	}
	if a.status == http.StatusOK && (a.contentType == ManifestType || strings.HasPrefix(s.target, pool.DefaultPath) && s.method == "GET") {
		var m manifest
		if err := json.Unmarshal([]byte(a.body), &m); err == nil && m.Reload != "" {
			e.last = m
		}
	}
	return raw, a
}

// frontDir is a directory origin of the front's playlists (front_test.go).
func frontDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"hls/live.m3u8": frontMultivariant, "hls/low/index.m3u8": frontMedia, "dash/live.mpd": frontMPD} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// routeStream is the stream of TestRouteTableBothEngines: every kind of
// route the server has, the requests of one player, hop or operator each.
func routeStream(t *testing.T, sc *scenario.Scenario) []routeStep {
	room := sc.Room.ID().String()
	rooms := "/v1/rooms/" + room
	auth := []string{"Authorization", "Bearer " + testToken}
	with := func(f ...[]string) []string {
		var out []string
		for _, x := range f {
			out = append(out, x...)
		}
		return out
	}
	cmcd := []string{"Content-Type", "application/cmcd"}
	var steps []routeStep
	add := func(exact bool, method, target string, body []byte, fields ...string) {
		steps = append(steps, routeStep{method, target, fields, body, exact})
	}
	add(true, "POST", rooms+"/records", bytes.Join(sc.Records, nil), "Content-Type", "application/octet-stream")
	// The room's steering route: requests (on serveFast's path) with
	// reports in the query and in CMCD-Request, a session kept, CMCD v2
	// event reports (through the adaptor), a preflight, a HEAD.
	add(false, "GET", "/v1/steer", nil)
	for _, id := range sc.Policy.IDs() {
		for i := range 3 {
			add(false, "GET", fmt.Sprintf("/v1/steer?_HLS_pathway=%s&_HLS_throughput=%d", id, 4_000_000+1_000_000*i), nil, "X-Region", "fra")
		}
	}
	add(false, "GET", "{reload}&_HLS_pathway=b", nil, "CMCD-Request", "bl=30000,mtp=8000")
	add(true, "POST", "/v1/steer", []byte("sid=\"r1\",cdn=\"a\",mtp=6000\nsid=\"r2\",cdn=\"c\",bl=100\nsid=\"r3\",cdn=\"z\",mtp=1\n"), cmcd...)
	add(true, "OPTIONS", "/v1/steer", nil, "Origin", "https://player.example")
	add(true, "HEAD", "/v1/steer", nil)
	// The auditor's routes, for the last decision.
	add(false, "GET", "/v1/decisions/{decision}", nil)
	add(true, "GET", "/v1/policies/"+sc.Policy.Digest().String(), nil)
	add(true, "GET", "/v1/records/"+evidence.NamedDigest(sc.Records[0]).String(), nil)
	add(true, "GET", rooms+"/descriptor", nil)
	add(true, "GET", rooms+"/keylog", nil)
	add(true, "GET", rooms+"/keylog/1", nil)
	add(false, "GET", rooms+"/log/checkpoint", nil)
	add(true, "GET", rooms+"/log/epochs", nil)
	add(false, "GET", rooms+"/log/tile/0/000.p/1", nil)
	add(false, "GET", rooms+"/log/inclusion/{decision}?size=1", nil)
	add(false, "GET", rooms+"/log/consistency?from=1&size=1", nil)
	// The pool: steering requests of several cohorts, reports of a cohort
	// no request named before (the wxyz), and the operator's.
	for i, cohort := range []string{"fra", "par", "fra", "ams", "par", "fra"} {
		add(false, "GET", fmt.Sprintf("%s?_HLS_pathway=cdn-b&_HLS_throughput=%d", pool.DefaultPath, 9_000_000+i), nil, "X-Region", cohort)
	}
	add(false, "GET", "{reload}&_HLS_pathway=cdn-a&_HLS_throughput=700000", nil, "X-Region", "par")
	var rep bytes.Buffer
	for i := range 3 {
		fmt.Fprintf(&rep, "sid=\"wxyz-%d\",cdn=\"cdn-a\",e=ps,mtp=2000,bl=9000\n", i)
	}
	rep.WriteString("sid=\"wxyz-9\",cdn=\"nowhere\",mtp=1\n")
	add(true, "POST", pool.DefaultPath, rep.Bytes(), with(cmcd, []string{"X-Region", "wxyz"})...)
	add(true, "POST", pool.DefaultPath, []byte("sid=\"q\",cdn=\"cdn-b\",mtp=3000\n"), with(cmcd, []string{"X-Region", "qqqq"})...)
	add(true, "POST", pool.DefaultPath, []byte("x"), "Content-Type", "text/plain", "X-Region", "wxyz")
	add(true, "OPTIONS", pool.DefaultPath, nil)
	// The pool's operator routes: which edge sessions were put on first
	// is the pool's secret's, another on each server; compared by shape.
	add(false, "GET", "/api/v1/steering/edges", nil, auth...)
	add(false, "PUT", "/api/v1/steering/edges/cdn-b/weight", []byte(`{"weight": 3}`), auth...)
	add(false, "POST", "/api/v1/steering/edges/cdn-a/drain", nil, auth...)
	add(false, "DELETE", "/api/v1/steering/edges/cdn-a/drain", nil, auth...)
	// The operator's changes of the room: a policy, a key log head.
	add(true, "PUT", rooms+"/policy", resign(t, sc, sc.SteerKey, func(p *policy.Policy) { p.TTLs = 120 }), auth...)
	add(true, "PUT", rooms+"/keylog", head(t, sc, 2, nil), auth...)
	add(true, "PUT", rooms+"/policy", []byte("WSP1"), auth...)
	add(false, "GET", rooms+"/status", nil, auth...)
	add(false, "GET", "/v1/steer", nil)
	// The front, the dashboard, the server's own routes.
	add(true, "GET", "/hls/live.m3u8", nil, "User-Agent", chrome)
	add(true, "GET", "/hls/low/index.m3u8", nil, "User-Agent", chrome)
	add(true, "GET", "/dash/live.mpd", nil, "User-Agent", chrome)
	add(true, "GET", "/hls/live.m3u8", nil, "User-Agent", "AppleCoreMedia/1.0.0.21A5248v (iPhone; U; CPU OS 17_0 like Mac OS X; en_us)")
	add(false, "GET", "/v1/front/status", nil, auth...) // headroom by session: by shape
	add(true, "GET", "/dashboard", nil)
	add(true, "GET", "/dashboard/app.js", nil)
	add(false, "GET", "/v1/dashboard", nil, auth...)
	add(false, "POST", "/v1/dashboard/inspect", []byte(`{"input":"{decision}"}`), with(auth, []string{"Content-Type", "application/json"})...)
	add(true, "GET", "/v1/dashboard", nil)
	add(true, "GET", "/healthz", nil)
	add(true, "GET", "/readyz", nil)
	add(false, "GET", "/metrics", nil)
	add(true, "GET", "/v1/records/../x", nil)
	add(true, "GET", "/nowhere", nil)
	return steps
}

// TestRouteTableBothEngines (issue 26, "no input reaches a panic"): the
// whole route table, one stream of requests, served behind fasthttp on
// one reused RequestCtx (each request read into the buffers of the one
// before, and those scribbled over after each answer) and behind net/http:
// the same answers, and the same state after (the pool's and the room's
// QoE cells and what they ignored, the pool's edges, the room's policy and
// key log), the QoE cells also as worked out by hand. On bd4ceba the
// report's cohort kept in the aggregator read "~xyz" once scribbled over,
// and the QoE rule's evaluation panicked.
func TestRouteTableBothEngines(t *testing.T) {
	sc, err := scenario.Build(scenario.Spec{Periods: 6})
	if err != nil {
		t.Fatal(err)
	}
	dir := frontDir(t)
	steps := routeStream(t, sc)
	envs := map[string]*routeEnv{}
	answers := map[string][]fastAnswer{}
	for _, engine := range []string{"fasthttp", "net/http"} {
		e := newRouteEnv(t, sc, dir)
		envs[engine] = e
		conn := newReusedConn(e.srv.FastHandler())
		for _, s := range steps {
			_, a := e.serve(t, engine, conn, s)
			answers[engine] = append(answers[engine], a)
		}
	}
	for i, s := range steps {
		f, n := answers["fasthttp"][i], answers["net/http"][i]
		raw := []byte(s.method + " " + s.target)
		if s.exact {
			sameAnswer(t, raw, n, f)
		} else if n.status != f.status || n.contentType != f.contentType {
			t.Errorf("%s: net/http %d %q, fasthttp %d %q %s", raw, n.status, n.contentType, f.status, f.contentType, f.body)
		}
		if n.status >= 500 {
			t.Errorf("%s: %d %s", raw, n.status, n.body)
		}
	}

	// The state after: the QoE rule evaluated at one instant on both.
	states := map[string]string{}
	for engine, e := range envs {
		now := time.UnixMicro(int64(e.clock.Load()))
		pw := e.srv.poolNamed("").Watch()
		rw := e.srv.sortedHubs()[0].QoE()
		pw.Evaluate(e.srv.log, now)
		rw.Evaluate(e.srv.log, now)
		st := e.srv.sortedHubs()[0].State()
		seq, _ := st.KeyLogSeq()
		v := e.srv.poolNamed("").View(context.Background())
		var edges []string
		for _, ed := range v.Edges {
			edges = append(edges, fmt.Sprintf("%s w%d drained=%v", ed.Pathway, ed.Weight, ed.Drained))
		}
		states[engine] = fmt.Sprintf("pool cells %v\npool ignored %v\nroom cells %v\nroom ignored %v\nedges %v\npolicy %s seq %d",
			cellsOf(pw), pw.Agg.Ignored(), cellsOf(rw), rw.Agg.Ignored(), edges, st.Digest(), seq)
		// By hand: the pool's cells are the steering requests' reports
		// (fra 3, par 2, ams 1 on cdn-b, the par session moved to report
		// cdn-a once) and the reports' (wxyz 3 on cdn-a, qqqq 1 on cdn-b).
		want := []string{"cdn-a/par 1 700000", "cdn-a/wxyz 3 2000000", "cdn-b/ams 1 9000003", "cdn-b/fra 3 9000002", "cdn-b/par 2 9000001", "cdn-b/qqqq 1 3000000"}
		if got := cellsOf(pw); !slices.Equal(got, want) {
			t.Errorf("%s: pool cells\n%s\nwant\n%s", engine, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// The room's: each pathway's 3 requests at 4, 5 and 6 Mbit/s, and
		// a: a report's 6 Mbit/s; b: a kept session's CMCD 8 Mbit/s; c: a
		// report's buffer (a session, no throughput). Each median the
		// second of its ⌈n/2⌉-th rank: 5 Mbit/s.
		if got, want := cellsOf(rw), []string{"a/ 4 5000000", "b/ 4 5000000", "c/ 4 5000000"}; !slices.Equal(got, want) {
			t.Errorf("%s: room cells %v, want %v", engine, got, want)
		}
	}
	if states["fasthttp"] != states["net/http"] {
		t.Errorf("the state after the stream:\nfasthttp\n%s\nnet/http\n%s", states["fasthttp"], states["net/http"])
	}
	t.Logf("state after %d requests:\n%s", len(steps), states["fasthttp"])
}

// TestFastReportCohortLoopback is the reproduction as it was
// found (issue 26 item 1), behind a real listener (TestMain: each engine):
// the README's QoE pool, CMCD v2 reports posted with X-Region: wxyz, then
// steering requests of other cohorts, each on a connection of its own,
// then the QoE rule's evaluation. fasthttp reuses a closed connection's
// RequestCtx, and its buffers, for the next connection's requests: on
// bd4ceba the cohort kept from the reports changed under the aggregator,
// and the evaluation panicked (nil pointer in Aggregator.step) or named
// a cohort no request sent.
func TestFastReportCohortLoopback(t *testing.T) {
	c := qoePool()
	c.QoE.MinSessions, c.QoE.Lowest = 3, 800_000
	e := newPoolEnv(t, testToken, c)
	// Each request on a connection of its own, and each steering player
	// from an address of its own: one address counts at most
	// qoe.PerClient sessions in a cell (issue 26 item 2).
	src := newLoopbackSources(t, e.ts)
	send := func(ip, method, target, cohort string, body []byte, ct string) {
		t.Helper()
		h := http.Header{"X-Region": {cohort}, "Connection": {"close"}}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		resp, _ := src.do(t, ip, method, target, string(body), h)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s %s: %s", method, target, resp.Status)
		}
	}
	for i := range 3 {
		send("127.0.3.1", "POST", pool.DefaultPath, "wxyz", fmt.Appendf(nil, "sid=\"wxyz-%d\",cdn=\"cdn-a\",e=ps,mtp=2000\n", i), "application/cmcd")
	}
	cohorts := []string{"fra", "par", "ams", "lon"}
	for i := range 20 {
		send(fmt.Sprintf("127.0.4.%d", i+1), "GET", pool.DefaultPath+"?_HLS_pathway=cdn-b&_HLS_throughput=9000000", cohorts[i%len(cohorts)], nil, "")
	}
	w := e.srv.poolNamed("").Watch()
	w.Evaluate(e.srv.log, time.Now())
	want := []string{"cdn-a/wxyz 3 2000000", "cdn-b/ams 5 9000000", "cdn-b/fra 5 9000000", "cdn-b/lon 5 9000000", "cdn-b/par 5 9000000"}
	if got := cellsOf(w); !slices.Equal(got, want) {
		t.Errorf("cells\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
