package web

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/api"
)

// TestDigest: a digest in a path is 64 lowercase hexadecimal digits, as the
// server writes them (§8.4); anything else is bad_digest.
func TestDigest(t *testing.T) {
	good := strings.Repeat("0a", 32)
	if h, err := Digest(good); err != nil || h[0] != 0x0a || h[31] != 0x0a {
		t.Fatalf("Digest(%q) = %x, %v", good, h, err)
	}
	for _, bad := range []string{"", strings.Repeat("0A", 32), strings.Repeat("0a", 31), strings.Repeat("0a", 32) + "0", strings.Repeat("zz", 32)} {
		if _, err := Digest(bad); err == nil || err.Code != api.BadDigest {
			t.Errorf("Digest(%q) = %v, want bad_digest", bad, err)
		}
	}
}

// TestAllowAndNoQuery: a method not taken is 405 with Allow listing those
// taken; a query on a route that reads none is 400; the Writer remembers
// the refusal for the log line.
func TestAllowAndNoQuery(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if Allow(w, httptest.NewRequest(http.MethodPost, "/x", nil), http.MethodGet, http.MethodHead) {
		t.Fatal("POST allowed")
	}
	status, refusal := w.Result()
	w.Release()
	if status != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" || refusal == nil || refusal.Code != api.MethodNotAllowed {
		t.Fatalf("got %d %q %v", status, rec.Header().Get("Allow"), refusal)
	}
	if !Allow(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil), http.MethodGet) {
		t.Fatal("GET refused")
	}
	rec = httptest.NewRecorder()
	if NoQuery(rec, httptest.NewRequest(http.MethodGet, "/x?a=1", nil)) || rec.Code != http.StatusBadRequest {
		t.Fatalf("a query taken: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	if NoQuery(rec, httptest.NewRequest(http.MethodGet, "/x?", nil)) {
		t.Fatal("an empty query (\"?\") taken")
	}
	if !NoQuery(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil)) {
		t.Fatal("no query refused")
	}
}

// TestHistogram: le is inclusive, buckets are cumulative, +Inf counts all.
func TestHistogram(t *testing.T) {
	h := NewHistogram([]float64{1, 2}, 1)
	for _, v := range []float64{0.5, 1, 1.5, 3} {
		h.Observe(v, uint64(v*2))
	}
	var b bytes.Buffer
	h.Write(&b, "x", `a="b"`)
	want := "x_bucket{a=\"b\",le=\"1\"} 2\nx_bucket{a=\"b\",le=\"2\"} 3\nx_bucket{a=\"b\",le=\"+Inf\"} 4\nx_sum{a=\"b\"} 12\nx_count{a=\"b\"} 4\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	if n, raw := h.Totals(); n != 4 || raw != 12 {
		t.Fatalf("Totals = %d, %d", n, raw)
	}
	l := NewLatencyHistogram()
	l.ObserveDuration(250 * time.Microsecond)
	b.Reset()
	l.Write(&b, "d", "")
	if !strings.Contains(b.String(), "d_bucket{le=\"0.0001\"} 0\nd_bucket{le=\"0.00025\"} 1\n") || !strings.Contains(b.String(), "d_sum 0.00025\n") {
		t.Fatalf("latency histogram:\n%s", b.String())
	}
}

// TestCounters: keys come back in ascending order with their counts.
func TestCounters(t *testing.T) {
	var c Counters[string]
	for _, k := range []string{"b", "a", "b", "c", "b"} {
		c.Add(k)
	}
	ks, vs := c.Sorted()
	if strings.Join(ks, ",") != "a,b,c" || vs[0] != 1 || vs[1] != 3 || vs[2] != 1 || c.Get("z") != 0 {
		t.Fatalf("got %v %v", ks, vs)
	}
}
