package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBenchConn checks the load generator's HTTP/1.1 client against
// net/http: a body of Content-Length bytes on a kept-alive connection, the
// connection closed and dialled again after Connection: close, and an
// answer without Content-Length refused.
func TestBenchConn(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
		case "/chunked":
			w.(http.Flusher).Flush() // no Content-Length: chunked
		}
		fmt.Fprintf(w, "%s?%s", r.URL.Path, r.URL.RawQuery)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := &benchConn{addr: srv.Listener.Addr().String()}
	defer c.close()
	for i, path := range []string{"/a?x=1", "/b?y=2", "/close?z", "/c?", "/chunked?"} {
		c.req = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		status, body, err := c.roundTrip()
		if path == "/chunked?" {
			if err == nil {
				t.Errorf("an answer without Content-Length was read: %q", body)
			}
			continue
		}
		if err != nil || status != 200 || string(body) != path {
			t.Fatalf("request %d %s: %d %q %v", i, path, status, body, err)
		}
		if path == "/close?z" && c.c != nil {
			t.Errorf("the connection was kept after Connection: close")
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections: want one kept alive until Connection: close, and one after", n)
	}
}

// TestQuantile: the nearest rank of sorted latencies.
func TestQuantile(t *testing.T) {
	var ls []time.Duration
	for i := 1; i <= 1000; i++ {
		ls = append(ls, time.Duration(i))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := quantile(ls, c.q); got != c.want {
			t.Errorf("quantile %v = %d, want %d", c.q, got, c.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Errorf("quantile of nothing")
	}
}

// TestParseWrk reads what the script's done hook prints (wrk.go): the
// answers are the responses less those of status >= 400, the failures
// those and the socket errors; the percentiles are in µs.
func TestParseWrk(t *testing.T) {
	out := []byte("Running 1s test @ http://127.0.0.1:1/\n  1 threads and 64 connections\n" +
		"waisteer-wrk requests 1000\nwaisteer-wrk duration_us 1000000\nwaisteer-wrk status 3\nwaisteer-wrk socket 2\n" +
		"waisteer-wrk p50_us 1500\nwaisteer-wrk p99_us 9000\nwaisteer-wrk p999_us 12000\n")
	ph, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if ph.answered != 997 || ph.failed != 5 || ph.elapsed != time.Second || ph.firstErr == nil {
		t.Errorf("answered %d, failed %d, elapsed %v, err %v: want 997, 5, 1s and an error", ph.answered, ph.failed, ph.elapsed, ph.firstErr)
	}
	if ph.pct != [3]time.Duration{1500 * time.Microsecond, 9 * time.Millisecond, 12 * time.Millisecond} {
		t.Errorf("percentiles %v", ph.pct)
	}
	if _, err := parseWrk([]byte("waisteer-wrk requests 10\n")); err == nil {
		t.Errorf("an output without its percentiles was read")
	}
}

// TestParseCounts reads a server's counters from /metrics: the steering
// route's 200s less a pool's manifests (which make no decision), the group
// commits' decisions, the failed commits and the records accepted.
func TestParseCounts(t *testing.T) {
	m := []byte(`waisteer_http_requests_total{route="steer",code="200"} 1300
waisteer_http_requests_total{route="steer",code="400"} 7
waisteer_http_requests_total{route="records_post",code="200"} 40
waisteer_commit_group_size_sum 1000
waisteer_commit_group_size_count 10
waisteer_commit_failures_total 1
waisteer_records_total{room="ab",outcome="accepted"} 120
waisteer_records_total{room="ab",outcome="duplicate"} 5
waisteer_pool_manifests_total{pool="p",first="edge-1"} 100
waisteer_pool_manifests_total{pool="p",first="edge-2"} 200
`)
	c, ok := parseCounts(m)
	if !ok || c != (benchCounts{answered: 1000, stored: 1000, failures: 1, records: 120}) {
		t.Errorf("%+v %v", c, ok)
	}
	if _, ok := parseCounts([]byte("waisteer_commit_failures_total 0\n")); ok {
		t.Errorf("counters without the group commits' were taken")
	}
}

// TestDemoReady reads the demo's steering route from its curl line, and
// nothing from its other lines.
func TestDemoReady(t *testing.T) {
	c := &benchChild{}
	for _, line := range []string{
		"waisteer demo: room \"demo\" (90ab), served at http://127.0.0.1:36937",
		"  curl -H 'Authorization: Bearer 92c6' http://127.0.0.1:36937/v1/rooms/90ab/status",
		"  curl http://127.0.0.1:36937/api/v1/steering",
	} {
		demoReady(c, line)
	}
	if c.addr != "" {
		t.Fatalf("address %q taken from a line that is not the steering route's", c.addr)
	}
	demoReady(c, "  curl 'http://127.0.0.1:36937/v1/steer?_HLS_pathway=%22cdn-a%22&_HLS_throughput=6000000'")
	if c.addr != "127.0.0.1:36937" || c.path != "/v1/steer" {
		t.Errorf("addr %q path %q", c.addr, c.path)
	}
}

// TestWrkPaths: each player's RELOAD-URI with an HLS report of its
// pathway and throughput (§4.2), and server_uri with the report as the
// query for a player that has had no manifest; and the Lua script lists
// them.
func TestWrkPaths(t *testing.T) {
	l := newBenchLoad("127.0.0.1:1", "/v1/steer", []string{"p00", "p01"}, 1, 2, 3)
	l.players[0].reload = []byte("/v1/steer?wai_session=ab")
	got := l.wrkPaths()
	want := []string{
		"/v1/steer?wai_session=ab&_HLS_pathway=%22p01%22&_HLS_throughput=5000000",
		"/v1/steer?_HLS_pathway=%22p01%22&_HLS_throughput=5000000",
		"/v1/steer?_HLS_pathway=%22p01%22&_HLS_throughput=5000000",
		"/v1/steer?_HLS_pathway=%22p01%22&_HLS_throughput=5000000",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("paths\n%q\nwant\n%q", got, want)
	}
	if string(l.players[0].reload) != "/v1/steer?wai_session=ab" {
		t.Errorf("the player's RELOAD-URI was changed: %q", l.players[0].reload)
	}
	name, err := l.writeWrkScript(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil || !strings.Contains(string(b), "  \""+want[0]+"\",\n") || !strings.Contains(string(b), "i = i % #reqs + 1") {
		t.Errorf("the script:\n%s", b)
	}
}

// TestWrkScript drives an httptest server with wrk and the generated
// script, where wrk is installed: every path requested in turn, and the
// 404s counted as failures. Where it is not, -generator wrk is refused
// (auto falls back to the Go generator).
func TestWrkScript(t *testing.T) {
	path, err := exec.LookPath("wrk")
	if err != nil {
		o := NewOptions(true)
		o.Generator = GeneratorWrk
		if err := Run(context.Background(), io.Discard, io.Discard, o); err == nil || !strings.Contains(err.Error(), "-generator wrk") {
			t.Errorf("-generator wrk without wrk: %v", err)
		}
		return
	}
	var seen sync.Map
	var n404 atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.RequestURI(), true)
		if r.URL.Query().Get("wai_session") == "gone" {
			n404.Add(1)
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	l := newBenchLoad(srv.Listener.Addr().String(), "/v1/steer", []string{"p00"}, 0, 2, 2)
	l.players[0].reload = []byte("/v1/steer?wai_session=ok")
	l.players[1].reload = []byte("/v1/steer?wai_session=gone")
	script, err := l.writeWrkScript(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := &bencher{pin: &benchPin{}, wrk: path}
	ph, _, err := b.runWrk(context.Background(), srv.Listener.Addr().String(), script, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.wrkPaths() {
		if _, ok := seen.Load(p); !ok {
			t.Errorf("%s was never requested", p)
		}
	}
	if ph.answered == 0 || ph.failed == 0 || ph.failed > n404.Load() || ph.pct[1] <= 0 {
		t.Errorf("answered %d, failed %d (the server answered %d 404s), p99 %v", ph.answered, ph.failed, n404.Load(), ph.pct[1])
	}
}

// TestPinSelf: the generator's threads moved off core 0 and given back
// the affinity they had.
func TestPinSelf(t *testing.T) {
	p := newBenchPin()
	if !p.on {
		// Nothing pinned: the children run as they are.
		cmd := exec.Command("/bin/true", "x")
		if p.wrap(cmd, "0") != cmd || p.pinSelf() != nil {
			t.Errorf("a machine that cannot pin pinned")
		}
		return
	}
	before, err := getAffinity()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.pinSelf(); err != nil {
		t.Fatal(err)
	}
	pinned, _ := getAffinity()
	p.unpinSelf()
	after, _ := getAffinity()
	if pinned[0]&1 != 0 || pinned[0]&2 == 0 {
		t.Errorf("pinned mask %#x: want core 1 and not core 0", pinned[0])
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("affinity %#x after, %#x before", after[0], before[0])
	}
}

// TestBenchGetWaitsForAProfile: a CPU profile's answer begins only once its
// seconds are over; benchGet waits for it past client.New's 15 s wait for
// an answer's header (perf-findings: `bench -d 10s -profile` asked a
// 30 s profile and failed with "timeout awaiting response headers").
func TestBenchGetWaitsForAProfile(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(16 * time.Second)
		io.WriteString(w, "profile")
	}))
	defer srv.Close()
	b, err := benchGet(context.Background(), srv.Listener.Addr().String(), "/debug/pprof/profile?seconds=16")
	if err != nil || string(b) != "profile" {
		t.Errorf("%q %v", b, err)
	}
}
