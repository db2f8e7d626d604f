package fastserve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/guard"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// conn is one fasthttp connection as a fasthttp server serves it: one
// RequestCtx, each request read into the buffers of the one before.
type conn struct {
	h fasthttp.RequestHandler
	c fasthttp.RequestCtx
}

func newConn(h fasthttp.RequestHandler) *conn {
	cn := &conn{h: h}
	cn.c.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 7), Port: 40000}, nil)
	return cn
}

// do reads raw into the connection's RequestCtx and serves it.
func (cn *conn) do(t *testing.T, raw string) *fasthttp.RequestCtx {
	t.Helper()
	c := &cn.c
	c.Request.Reset()
	c.Response.Reset()
	if err := c.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	cn.h(c)
	return c
}

// A request the hook answers is answered so; every other goes to the
// handler, and a nil hook sends every request there.
func TestHandlerFastFirst(t *testing.T) {
	std := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "std %s %s", r.Method, r.URL.Path)
	})
	fast := func(c *fasthttp.RequestCtx) bool {
		if !c.IsGet() || string(c.Path()) != "/fast" {
			return false
		}
		w := NewWriter(c)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte("fast"))
		return true
	}
	cn := newConn(Handler(std, fast, discard()))
	for _, c := range []struct {
		raw, body string
		status    int
	}{
		{"GET /fast HTTP/1.1\r\nHost: h\r\n\r\n", "fast", http.StatusAccepted},
		{"GET /other HTTP/1.1\r\nHost: h\r\n\r\n", "std GET /other", http.StatusOK},
		{"POST /fast HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", "std POST /fast", http.StatusOK},
	} {
		c2 := cn.do(t, c.raw)
		if got := string(c2.Response.Body()); got != c.body || c2.Response.StatusCode() != c.status || string(c2.Response.Header.ContentType()) != "text/plain" {
			t.Errorf("%q: %d %q %q", c.raw, c2.Response.StatusCode(), c2.Response.Header.ContentType(), got)
		}
	}
	cn = newConn(Handler(std, nil, discard()))
	if got := string(cn.do(t, "GET /fast HTTP/1.1\r\nHost: h\r\n\r\n").Response.Body()); got != "std GET /fast" {
		t.Errorf("no hook: %q", got)
	}
}

// What the handler keeps of a request (its strings) stays as it was once
// the connection's next request is read into the same buffers.
func TestHandlerOwnsRequest(t *testing.T) {
	type kept struct{ method, host, uri, path, query, proto, remote, key, value string }
	var all []kept
	std := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := kept{method: r.Method, host: r.Host, uri: r.RequestURI, path: r.URL.Path, query: r.URL.RawQuery, proto: r.Proto, remote: r.RemoteAddr}
		for key, vs := range r.Header {
			if strings.HasPrefix(key, "X-") {
				k.key, k.value = key, vs[0]
			}
		}
		all = append(all, k)
	})
	cn := newConn(Handler(std, nil, discard()))
	cn.do(t, "PUT /aaaa?b=cccc HTTP/1.1\r\nHost: first.example\r\nX-Region: wxyz\r\nContent-Length: 0\r\n\r\n")
	want := all[0]
	cn.do(t, "GET /zzzz?y=xxxx HTTP/1.1\r\nHost: other.example\r\nX-Cohort: abcd\r\n\r\n")
	if all[0] != want || want != (kept{"PUT", "first.example", "/aaaa?b=cccc", "/aaaa", "b=cccc", "HTTP/1.1", "127.0.0.7:40000", "X-Region", "wxyz"}) {
		t.Fatalf("kept %+v, then %+v", want, all[0])
	}
}

// A panic in the hook is logged and counted, and the connection is closed
// with no answer.
func TestHandlerPanic(t *testing.T) {
	std := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	fast := func(c *fasthttp.RequestCtx) bool {
		c.SetStatusCode(http.StatusTeapot)
		panic("in the hook")
	}
	before := guard.Counts()["request"]
	c := newConn(Handler(std, fast, discard())).do(t, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if !c.Hijacked() || c.Response.StatusCode() == http.StatusTeapot {
		t.Fatalf("hijacked %v, status %d", c.Hijacked(), c.Response.StatusCode())
	}
	if n := guard.Counts()["request"]; n != before+1 {
		t.Fatalf("panics counted %d, were %d", n, before)
	}
}

// serve serves h by NewServer on a loopback listener of Listener, as
// serve does, until the test ends.
func serve(t *testing.T, h fasthttp.RequestHandler, maxBody int, l Limits) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := NewServer(h, maxBody, l)
	done := make(chan struct{})
	go func() { defer close(done); fs.Serve(Listener(ln)) }()
	t.Cleanup(func() {
		fs.Shutdown()
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// exchange writes raw on a new connection and reads the answer.
func exchange(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// The server refuses a body over the largest the handler reads, 413
// body_too_large as the handler would, and a head over MaxHeaderBytes 431,
// as net/http does; a request within both reaches the handler.
func TestNewServerLimits(t *testing.T) {
	std := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d", len(b))
	})
	addr := serve(t, Handler(std, nil, discard()), 1024, Limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 4 << 10, Logger: discard()})

	resp, body := exchange(t, addr, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1024\r\n\r\n"+strings.Repeat("a", 1024))
	if resp.StatusCode != http.StatusOK || body != "1024" {
		t.Fatalf("within the limit: %s %q", resp.Status, body)
	}
	resp, body = exchange(t, addr, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4096\r\n\r\n"+strings.Repeat("a", 4096))
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || e.Error != "body_too_large" || !resp.Close {
		t.Fatalf("over the limit: %s close %v %q (%v)", resp.Status, resp.Close, body, err)
	}
	resp, _ = exchange(t, addr, "GET / HTTP/1.1\r\nHost: h\r\nX-Long: "+strings.Repeat("a", 8<<10)+"\r\n\r\n")
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a head over the limit: %s", resp.Status)
	}
	resp, _ = exchange(t, addr, "GET / HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a head that does not read: %s", resp.Status)
	}
}
