package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// benchSpec is a policy of n pathways, each of one edge and one interior
// hop of one class, with records for six periods.
func benchSpec(n int) scenario.Spec {
	pws := make([]scenario.Pathway, n)
	for i := range pws {
		pws[i] = scenario.Pathway{
			ID: fmt.Sprintf("p%02d", i), TopTier: 2, LatencyMs: 100, Capacity: policy.Unlimited,
			Hops: []scenario.Hop{
				{Place: policy.Edge, Class: evidence.ModelBased, Joules: uint64(20_000_000 + 100_000*i), Bytes: 1_000_000_000},
				{Place: policy.Interior, Class: evidence.ModelBased, Joules: 5_000_000, Bytes: 900_000_000},
			},
		}
	}
	return scenario.Spec{Pathways: pws, Periods: 6}
}

// benchServer serves spec over st, with its records posted.
func benchServer(b *testing.B, spec scenario.Spec, st store.Store) (*Server, *scenario.Scenario) {
	sc, err := scenario.Build(spec)
	if err != nil {
		b.Fatal(err)
	}
	clock := newClock(t0)
	srv, err := New(context.Background(), Config{
		Rooms: []roomsteer.Config{{Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes,
			Policy: sc.PolicyBytes, SteeringKey: sc.SteerKey}},
		Clock:  clock.Load,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, st, store.NewLoads())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close(context.Background()) })
	var body []byte
	for _, r := range sc.Records {
		body = append(body, r...)
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("POST", "/v1/rooms/"+sc.Room.ID().String()+"/records", bytes.NewReader(body)))
	if w.Code != http.StatusOK {
		b.Fatalf("records: %d %s", w.Code, w.Body)
	}
	return srv, sc
}

// BenchmarkSteer is one steering request through the Handler, no network:
// the report, the loads and the rule, the signature, the group commit
// (in memory) and the manifest (issue 3 item 6). Sign is the signature of
// the same decision alone, its share of the request.
func BenchmarkSteer(b *testing.B) {
	for _, n := range []int{3, 32} {
		b.Run(fmt.Sprintf("pathways=%d", n), func(b *testing.B) {
			srv, _ := benchServer(b, benchSpec(n), store.NewMemory())
			target := "/v1/steer?wai_session=000102030405060708090a0b0c0d0e0f&_HLS_pathway=p01&_HLS_throughput=5000000"
			req := httptest.NewRequest("GET", target, nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
		b.Run(fmt.Sprintf("pathways=%d/sign", n), func(b *testing.B) {
			sc, err := scenario.Build(benchSpec(n))
			if err != nil {
				b.Fatal(err)
			}
			rk, err := decision.RankAt(sc.Policy, sc.Policy.Digest(), t0, sc.Index)
			if err != nil {
				b.Fatal(err)
			}
			d, err := rk.Decision(sc.SteerKey.Public(), t0, report.HLS, report.Report{}, report.Session{1}, make([]uint32, n))
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 0, len(decision.SignedPrefix)+d.Size())
			b.ReportAllocs()
			for b.Loop() {
				decision.AppendSigned(buf[:0], d, sc.SteerKey)
			}
		})
	}
}

// BenchmarkLoopback is steering requests from 32 concurrent clients, each
// its own session, through a real loopback listener to one room, with the
// decisions committed in groups to memory and to a bbolt file (each group
// one fsync). Ed25519 is a bare signature of the same decision's bytes,
// from as many goroutines, for comparison: the most decisions per second
// the signing alone allows on this machine.
func BenchmarkLoopback(b *testing.B) {
	const clients = 32
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memory", func(*testing.B) store.Store { return store.NewMemory() }},
		{"bolt", func(b *testing.B) store.Store {
			st, err := store.Open(filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		}},
	}
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			srv, _ := benchServer(b, benchSpec(3), s.open(b))
			ts := serveTest(b, srv) // behind testEngine
			defer ts.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
			client := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			var seq atomic.Uint64
			b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				session := fmt.Sprintf("%032x", seq.Add(1))
				url := ts.URL + "/v1/steer?wai_session=" + session + "&_HLS_pathway=p00&_HLS_throughput=5000000"
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
			groups, decisions := srv.commits.Groups()
			b.ReportMetric(float64(decisions)/float64(max(groups, 1)), "decisions/commit")
		})
	}
	b.Run("ed25519", func(b *testing.B) {
		sc, err := scenario.Build(benchSpec(3))
		if err != nil {
			b.Fatal(err)
		}
		rk, err := decision.RankAt(sc.Policy, sc.Policy.Digest(), t0, sc.Index)
		if err != nil {
			b.Fatal(err)
		}
		d, err := rk.Decision(sc.SteerKey.Public(), t0, report.HLS, report.Report{}, report.Session{1}, make([]uint32, 3))
		if err != nil {
			b.Fatal(err)
		}
		msg := append([]byte(decision.SignedPrefix), decision.AppendBody(nil, d)...)
		b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				sc.SteerKey.SignRaw(msg)
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "signatures/s")
	})
}

// BenchmarkSteerGuarded is the steering GET of BenchmarkSteer (3
// pathways, a kept session, a report) with and without what issue 26
// added on its path, in one run, alternated in rounds so that the
// machine's noise falls on both alike: behind fasthttp, FastHandler (the
// deferred recovery around serveFast) against serveFast alone; behind
// net/http, ServeHTTP (recoverRequest deferred) against serve. Both
// include the committer's group written under guard.Try. The ratios are
// reported: 1.00 is no change.
func BenchmarkSteerGuarded(b *testing.B) {
	srv, _ := benchServer(b, benchSpec(3), store.NewMemory())
	target := "/v1/steer?wai_session=000102030405060708090a0b0c0d0e0f&_HLS_pathway=p01&_HLS_throughput=5000000"
	raw := []byte("GET " + target + " HTTP/1.1\r\nHost: steer.example\r\n\r\n")
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	var c fasthttp.RequestCtx
	c.Init(&req, nil, nil)
	guarded := srv.FastHandler()
	bare := func(c *fasthttp.RequestCtx) {
		if !srv.serveFast(c) {
			b.Fatal("not on serveFast's path")
		}
	}
	fast := func(h fasthttp.RequestHandler) func() {
		return func() {
			c.Response.Reset()
			h(&c)
			if c.Response.StatusCode() != http.StatusOK {
				b.Fatalf("%d %s", c.Response.StatusCode(), c.Response.Body())
			}
		}
	}
	hreq := httptest.NewRequest("GET", target, nil)
	std := func(h func(http.ResponseWriter, *http.Request)) func() {
		return func() {
			w := httptest.NewRecorder()
			h(w, hreq)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	}
	for _, p := range []struct {
		name      string
		now, then func()
	}{
		{"fasthttp", fast(guarded), fast(bare)},
		{"net-http", std(srv.ServeHTTP), std(srv.serve)},
	} {
		b.Run(p.name, func(b *testing.B) {
			var tNow, tThen time.Duration
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				// A round: 200 requests of each, in turn.
				start := time.Now()
				for range 200 {
					p.now()
				}
				mid := time.Now()
				for range 200 {
					p.then()
				}
				tNow, tThen = tNow+mid.Sub(start), tThen+time.Since(mid)
				n += 200
			}
			b.ReportMetric(float64(tNow)/float64(n), "ns/guarded")
			b.ReportMetric(float64(tThen)/float64(n), "ns/bare")
			b.ReportMetric(float64(tNow)/float64(tThen), "guarded/bare")
		})
	}
	b.Run("guard.Try", func(b *testing.B) {
		// The committer's cost a group: one guard.Try of a closure.
		err := errors.New("x")
		for b.Loop() {
			if guard.Try(nil, "bench", func() error { return err }) != err {
				b.Fatal("not the closure's error")
			}
		}
	})
}
