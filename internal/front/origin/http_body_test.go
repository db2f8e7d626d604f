package origin

// The answers' bodies: gzip, the size bound, and connections reused.

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// gzipped is b compressed.
func gzipped(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A gzip body is decompressed, and bounded once decompressed, so that a
// small body that inflates without end (a bomb) is refused as
// origin_too_large, never cut to fit; x-gzip is gzip (RFC 9110 §8.4.1.3).
func TestHTTPGzip(t *testing.T) {
	const max = 4096
	exact := bytes.Repeat([]byte("#EXT-X-X\n"), max/9+1)[:max]
	// 64 members of 1 MiB of zeros each: 64 MiB from 65 KiB.
	bomb := bytes.Repeat(gzipped(t, make([]byte, 1<<20)), 64)
	for _, c := range []struct {
		name, coding string
		body         []byte
		want         []byte // nil: too large
		words        string
		max          int64
	}{
		{"small", "gzip", gzipped(t, []byte(playlist)), []byte(playlist), "", 0},
		{"x-gzip", "x-gzip", gzipped(t, []byte(playlist)), []byte(playlist), "", 0},
		{"upper case", "GZIP", gzipped(t, []byte(playlist)), []byte(playlist), "", 0},
		{"two members", "gzip", append(gzipped(t, []byte("#EXTM3U\n")), gzipped(t, []byte("#EXT-X-ENDLIST\n"))...), []byte("#EXTM3U\n#EXT-X-ENDLIST\n"), "", 0},
		{"exactly the limit", "gzip", gzipped(t, exact), exact, "", 0},
		{"one over", "gzip", gzipped(t, append(exact, '\n')), nil, "once decompressed", 0},
		{"a bomb", "gzip", bomb, nil, "once decompressed", 1 << 20},
	} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", c.coding)
			w.Write(c.body)
		})
		if c.max == 0 {
			c.max = max
		}
		o := newOrigin(t, srv.URL, Options{MaxBytes: c.max})
		resp, err := o.Fetch(t.Context(), &Request{Path: "/live.m3u8"})
		if c.want == nil {
			wantError(t, err, 502, CodeTooLarge, c.words, fmt.Sprint(c.max))
			continue
		}
		if err != nil || !bytes.Equal(resp.Body, c.want) {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	// Bytes after the last member, and a member whose checksum is wrong,
	// do not read (RFC 1952 §2.3).
	bad := gzipped(t, []byte(playlist))
	bad[len(bad)-5] ^= 1 // the CRC-32's last byte
	for _, body := range [][]byte{append(gzipped(t, []byte(playlist)), "junk"...), bad} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(body)
		})
		_, err := newOrigin(t, srv.URL, Options{}).Fetch(t.Context(), &Request{Path: "/live.m3u8"})
		wantError(t, err, 502, CodeBadAnswer, "gzip")
	}
}

// A body over MaxBytes is refused, never cut to fit: at MaxBytes it is
// read, one byte more is origin_too_large, whether its length is announced
// or chunked. An announced length over the limit is refused at once, with
// no byte of the body read. A compressed body is bounded as sent too.
func TestHTTPTooLarge(t *testing.T) {
	const max = 1000
	exact := bytes.Repeat([]byte("#"), max)
	for _, c := range []struct {
		name    string
		body    []byte
		chunked bool
		ok      bool
	}{
		{"exact, announced", exact, false, true},
		{"exact, chunked", exact, true, true},
		{"one over, announced", append(exact, '#'), false, false},
		{"one over, chunked", append(exact, '#'), true, false},
	} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			if !c.chunked {
				w.Header().Set("Content-Length", fmt.Sprint(len(c.body)))
			}
			w.Write(c.body[:1])
			w.(http.Flusher).Flush()
			w.Write(c.body[1:])
		})
		resp, err := newOrigin(t, srv.URL, Options{MaxBytes: max}).Fetch(t.Context(), &Request{Path: "/a.mpd"})
		if c.ok {
			if err != nil || !bytes.Equal(resp.Body, c.body) {
				t.Fatalf("%s: %v", c.name, err)
			}
			continue
		}
		wantError(t, err, 502, CodeTooLarge, "1000")
	}

	// Announced over the limit, then nothing: refused at once, long
	// before the timeout.
	announce := answering(t, "HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n")
	o := newOrigin(t, announce, Options{Timeout: 5 * time.Second})
	start := time.Now()
	_, err := o.Fetch(t.Context(), &Request{Path: "/a.m3u8"})
	wantError(t, err, 502, CodeTooLarge, "2000000 bytes", "1048576")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("an announced length was refused after %v", d)
	}

	// Random bytes do not compress: MaxBytes of them gzipped are over
	// MaxBytes as sent, and refused so.
	noise := make([]byte, max)
	rand.Read(noise)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		z := gzipped(t, noise)
		w.Write(z[:1])
		w.(http.Flusher).Flush() // chunked: no length announced
		w.Write(z[1:])
	})
	_, err = newOrigin(t, srv.URL, Options{MaxBytes: max}).Fetch(t.Context(), &Request{Path: "/a.m3u8"})
	wantError(t, err, 502, CodeTooLarge, "as sent")
}

// Fetches reuse one connection: each body is read to its end.
func TestHTTPReuse(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/gone.m3u8":
			w.WriteHeader(404)
			io.WriteString(w, "no such playlist")
		case "/gz.m3u8":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gzipped(t, []byte(playlist)))
		default:
			w.Header().Set("ETag", `"v"`)
			if r.Header.Get("If-None-Match") == `"v"` {
				w.WriteHeader(304)
				return
			}
			io.WriteString(w, playlist)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	o := newOrigin(t, srv.URL, Options{})
	for i := range 30 {
		r := &Request{Path: "/live.m3u8"}
		switch i % 4 {
		case 1:
			r.IfNoneMatch = `"v"`
		case 2:
			r.Path = "/gone.m3u8"
		case 3:
			r.Path = "/gz.m3u8"
		}
		o.Fetch(t.Context(), r)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("30 fetches made %d connections, want 1", n)
	}
}
