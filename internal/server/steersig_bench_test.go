package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

var hexDigest = regexp.MustCompile(`[0-9a-f]{64}`)

// BenchmarkSteerVsSignature is issue 30's pair: a steering GET behind
// testEngine (fasthttp: FastHandler on a fasthttp.RequestCtx; net/http:
// ServeHTTP with httptest), no network (a kept session with an HLS report: the
// report, the loads, the rule, the signature, the group commit, the
// manifest) beside a bare Ed25519 signature of the bytes that request
// signed (fetched back by the digest its manifest names), alternated in
// rounds of 200 so that the machine's noise falls on both alike. It
// reports ns/decision, ns/signature and their ratio (wall time of one
// goroutine: the committer's work is in ns/decision). On bolt each request
// is a group of one, so its ratio includes a bbolt commit's two
// fdatasyncs per decision: the commit's cost apart is bolt's ns/decision
// less memory's.
//
//	go test -run=NONE -bench=SteerVsSignature ./internal/server
func BenchmarkSteerVsSignature(b *testing.B) {
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
	for _, n := range []int{3, 32} {
		for _, s := range stores {
			b.Run(fmt.Sprintf("pathways=%d/%s", n, s.name), func(b *testing.B) {
				benchSteerVsSignature(b, n, s.open(b))
			})
		}
	}
}

func benchSteerVsSignature(b *testing.B, n int, st store.Store) {
	srv, sc := benchServer(b, benchSpec(n), st)
	target := "/v1/steer?wai_session=000102030405060708090a0b0c0d0e0f&_HLS_pathway=p01&_HLS_throughput=5000000"
	raw := []byte("GET " + target + " HTTP/1.1\r\nHost: steer.example\r\n\r\n")
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	var c fasthttp.RequestCtx
	c.Init(&req, nil, nil)
	h := srv.FastHandler()
	var body []byte // the last manifest
	steer := func() {
		c.Response.Reset()
		h(&c)
		if c.Response.StatusCode() != http.StatusOK {
			b.Fatalf("%d %s", c.Response.StatusCode(), c.Response.Body())
		}
		body = c.Response.Body()
	}
	if testEngine != "fasthttp" {
		hreq := httptest.NewRequest("GET", target, nil)
		steer = func() {
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, hreq)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
			body = w.Body.Bytes()
		}
	}

	// The message the steering request signs: its decision, fetched by
	// the digest its manifest names, less the signature.
	steer()
	msg := signedOf(b, srv, body)
	sign := func() { _ = sc.SteerKey.SignRaw(msg) }

	var tSteer, tSign time.Duration
	done := 0
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		for range 200 {
			steer()
		}
		mid := time.Now()
		for range 200 {
			sign()
		}
		tSteer, tSign = tSteer+mid.Sub(start), tSign+time.Since(mid)
		done += 200
	}
	b.ReportMetric(float64(len(msg)-len(decision.SignedPrefix)+sig.SignatureSize), "WSD1-bytes")
	b.ReportMetric(float64(tSteer)/float64(done), "ns/decision")
	b.ReportMetric(float64(tSign)/float64(done), "ns/signature")
	b.ReportMetric(float64(tSteer)/float64(tSign), "decision/signature")
}

// BenchmarkSteerVsSignatureParallel is the pair under load: each round,
// 64 goroutines make 8 steering GETs each (each goroutine its own
// session), so that decisions wait for the committer together and group
// commits form on bolt as they do in a server at saturation; then the same
// goroutines make as many bare signatures of the bytes a steering request
// signed. It reports the wall time per decision and per signature over
// the rounds (the inverse of each one's rate on GOMAXPROCS cores), their
// ratio, and the decisions per group commit.
//
//	go test -run=NONE -bench=SteerVsSignatureParallel ./internal/server
func BenchmarkSteerVsSignatureParallel(b *testing.B) {
	for _, n := range []int{3, 32} {
		for _, name := range []string{"memory", "bolt"} {
			b.Run(fmt.Sprintf("pathways=%d/%s", n, name), func(b *testing.B) {
				var st store.Store = store.NewMemory()
				if name == "bolt" {
					bs, err := store.Open(filepath.Join(b.TempDir(), "bench.db"))
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { bs.Close() })
					st = bs
				}
				benchSteerVsSignatureParallel(b, n, st)
			})
		}
	}
}

func benchSteerVsSignatureParallel(b *testing.B, n int, st store.Store) {
	const goroutines, each = 64, 8
	srv, sc := benchServer(b, benchSpec(n), st)
	h := srv.FastHandler()
	// steerers[g] makes goroutine g's steering request and returns its
	// manifest.
	steerers := make([]func() []byte, goroutines)
	for g := range steerers {
		target := fmt.Sprintf("/v1/steer?wai_session=%032x&_HLS_pathway=p01&_HLS_throughput=5000000", g+1)
		if testEngine != "fasthttp" {
			hreq := httptest.NewRequest("GET", target, nil)
			steerers[g] = func() []byte {
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, hreq)
				if w.Code != http.StatusOK {
					b.Errorf("%d %s", w.Code, w.Body)
				}
				return w.Body.Bytes()
			}
			continue
		}
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(bytes.NewReader([]byte("GET " + target + " HTTP/1.1\r\nHost: steer.example\r\n\r\n")))); err != nil {
			b.Fatal(err)
		}
		c := new(fasthttp.RequestCtx)
		c.Init(&req, nil, nil)
		steerers[g] = func() []byte {
			c.Response.Reset()
			h(c)
			if c.Response.StatusCode() != http.StatusOK {
				b.Errorf("%d %s", c.Response.StatusCode(), c.Response.Body())
			}
			return c.Response.Body()
		}
	}
	msg := signedOf(b, srv, steerers[0]())
	round := func(op func(g int)) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for range each {
					op(g)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	groups0, decisions0 := srv.commits.Groups()
	var tSteer, tSign time.Duration
	done := 0
	for b.Loop() {
		tSteer += round(func(g int) { steerers[g]() })
		tSign += round(func(int) { _ = sc.SteerKey.SignRaw(msg) })
		done += goroutines * each
	}
	groups, decisions := srv.commits.Groups()
	b.ReportMetric(float64(tSteer)/float64(done), "ns/decision")
	b.ReportMetric(float64(tSign)/float64(done), "ns/signature")
	b.ReportMetric(float64(tSteer)/float64(tSign), "decision/signature")
	b.ReportMetric(float64(decisions-decisions0)/float64(max(groups-groups0, 1)), "decisions/commit")
}

// signedOf is the message the decision a manifest names was signed over
// (§7.3): the decision fetched by the digest the manifest names, less its
// signature, after the signing prefix.
func signedOf(b *testing.B, srv *Server, manifest []byte) []byte {
	b.Helper()
	digest := hexDigest.FindAll(manifest, -1)
	if len(digest) == 0 {
		b.Fatalf("no digest in the manifest %s", manifest)
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("GET", "/v1/decisions/"+string(digest[len(digest)-1]), nil))
	if w.Code != http.StatusOK || w.Body.Len() <= sig.SignatureSize {
		b.Fatalf("the decision: %d %s", w.Code, w.Body)
	}
	d := w.Body.Bytes()
	return append([]byte(decision.SignedPrefix), d[:len(d)-sig.SignatureSize]...)
}
