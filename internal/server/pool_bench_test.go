package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/report/qoe"
	"github.com/waisteer/waisteer/store"
)

// BenchmarkPoolSteer is a pool's steering request through the Handler, no
// network: the route, the report read and accepted, the pool's order and
// manifest, the session counted in the table of loads (issue 12: at most
// 5 µs of CPU beyond HTTP). http-only is a handler that writes the same
// manifest with the same headers into the same recorder, which is what
// HTTP costs here; ns-beyond-http is the difference, measured in the same
// run. pool-qoe is the same pool steering by what its players report
// (issue 17): each request's report aggregated, the per-client rule
// checked, the cohort's moves looked up.
func BenchmarkPoolSteer(b *testing.B) {
	// One store: both servers mint sessions under its secret, so that
	// the one request is a kept session on each.
	mem := store.NewMemory()
	srv, err := New(context.Background(), Config{
		Pools:  []pool.Config{seedPool(nil, nil)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, mem, store.NewLoads())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close(context.Background()) })
	withQoE := seedPool(nil, nil)
	withQoE.QoE = &pool.QoE{Config: qoe.Config{Window: time.Minute, MinSessions: 30, Fraction: 0.5, Margin: 0.2, Hold: time.Minute}, ShortTTL: 30, Lowest: 100_000}
	qsrv, err := New(context.Background(), Config{
		Pools:  []pool.Config{withQoE},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, mem, store.NewLoads())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { qsrv.Close(context.Background()) })
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/steering", nil))
	var m poolManifest
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		b.Fatal(err)
	}
	target := m.Reload[len("http://example.com"):] + "&_HLS_pathway=edge-1&_HLS_throughput=500000"
	manifest := w.Body.Bytes()
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer.Headers(w)
		w.Header()["Content-Type"] = answer.HeaderJSON
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		w.Write(manifest)
	})
	req := httptest.NewRequest("GET", target, nil)
	perOp := func(h http.Handler, n int) time.Duration {
		start := time.Now()
		for range n {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
		return time.Since(start) / time.Duration(n)
	}
	b.Run("http-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			plain.ServeHTTP(w, req)
		}
	})
	for _, c := range []struct {
		name string
		srv  *Server
	}{{"pool", srv}, {"pool-qoe", qsrv}} {
		b.Run(c.name, func(b *testing.B) {
			perOp(c.srv, 2000) // warm
			base := perOp(plain, 20000)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w := httptest.NewRecorder()
				c.srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
			b.StopTimer()
			if m := decodePool(b, c.srv, req); m.session(b) != sessionOfURL(b, target) {
				b.Fatalf("the request's session was not kept: %s", m.raw)
			}
			pooled := perOp(c.srv, 20000)
			b.ReportMetric(float64(pooled-base), "ns-beyond-http")
		})
	}
}

// decodePool answers req on srv and reads the manifest.
func decodePool(b testing.TB, srv *Server, req *http.Request) *poolManifest {
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	var m poolManifest
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		b.Fatal(err)
	}
	m.raw = w.Body.Bytes()
	return &m
}

// sessionOfURL is the session= of a target.
func sessionOfURL(b testing.TB, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	return u.Query().Get("session")
}
