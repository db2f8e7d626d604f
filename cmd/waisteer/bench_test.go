package main

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// benchChildEnv makes this test binary run the command line it is given
// instead of the tests: `waisteer bench` starts its servers as children of
// its own binary, which under `go test` is this one.
const benchChildEnv = "WAISTEER_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(benchChildEnv) == "1" {
		os.Exit(run(&env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestBenchQuick runs `waisteer bench -quick` (a few seconds a phase of
// tenths of a second) and checks its report: every section, each figure
// measured, the goals' ratios computed, and every manifest answered naming
// a decision the store holds (§8.4: an auditor fetches the decision by the
// digest its manifest names, so each must be durable before the answer).
func TestBenchQuick(t *testing.T) {
	spawn := benchSpawn
	benchSpawn = func(args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), benchChildEnv+"=1")
		return cmd, nil
	}
	t.Cleanup(func() { benchSpawn = spawn })

	out, errs, code := waisteer(t, "", "bench", "-quick")
	if code != 0 {
		t.Fatalf("bench -quick exited %d:\n%s\n%s", code, errs, out)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{
		"machine ", "Steering: waisteer serve behind fasthttp on its bbolt store", "decisions/s at saturation", "server CPU per decision",
		"latency p50 at half rate", "latency p99 / p999 at half rate", "bytes stored per decision", "decisions per group commit",
		"(a) bare Ed25519 of the decision", "the same on every core at once", "(c) plain + signature: answers/s", "(b) plain net/http, fixed manifest:",
		"Records in: POST /v1/rooms/{room}/records", "1 records per POST:", "64 records per POST:",
		"Evidence update after a record", "Memory per live session",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	for _, goal := range []string{"CPU per decision / bare signature = ", "decisions/s / signing floor (c)   = "} {
		m := regexp.MustCompile(regexp.QuoteMeta(goal) + `([0-9.]+|NaN)`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("no goal line %q", goal)
			continue
		}
		if r, err := strconv.ParseFloat(m[1], 64); err != nil || math.IsNaN(r) || r <= 0 {
			t.Errorf("%s%s: not a ratio", goal, m[1])
		}
	}
	m := regexp.MustCompile(`decisions stored / answered +(\d+) / (\d+)`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[1] == "0" {
		t.Errorf("decisions stored and answered: %v", m)
	}
	if !regexp.MustCompile(`failed requests +0 `).MatchString(out) {
		t.Errorf("requests failed")
	}
	for _, batch := range []string{" 1 records per POST: ", "64 records per POST: "} {
		i := strings.Index(out, batch)
		if i < 0 {
			continue
		}
		line := out[i : i+strings.IndexByte(out[i:], '\n')]
		if strings.Contains(line, "failed") || strings.HasPrefix(line[len(batch):], "0 records/s") {
			t.Errorf("ingest: %s", line)
		}
	}
}

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
