package bench

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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
