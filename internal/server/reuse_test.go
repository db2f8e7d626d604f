package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/pool"
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
func cellsOf(w *qoeWatch) []string {
	var out []string
	for _, c := range w.view().Cells {
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
			w := srv.poolNamed("").qoe.Load()
			srv.evaluate(w, time.UnixMicro(t0)) // panicked on bd4ceba behind fasthttp
			if got := cellsOf(w); !slices.Equal(got, want) {
				t.Errorf("cells\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
