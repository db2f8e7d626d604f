package origin

// The origin's failures: statuses, timeouts, unreachable, bad answers.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Each status of the origin: 404 and 410 say it has no such playlist (RFC
// 9110 §15.5.5, §15.5.11) and the front answers 404; a redirect is never
// followed (the package doc's rule) and its target never asked for; any
// other status but 200 and 203 is a 502 naming it, 2xx ones included,
// since none of them carries a whole playlist (RFC 9110 §15.3).
func TestHTTPStatuses(t *testing.T) {
	var followed atomic.Int64
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/target.m3u8" {
			followed.Add(1)
			io.WriteString(w, playlist)
			return
		}
		var code int
		fmt.Sscanf(r.URL.Path, "/%d.m3u8", &code)
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/target.m3u8")
		}
		w.WriteHeader(code)
		if code != 204 && code != 304 && code >= 200 {
			io.WriteString(w, playlist)
		}
	})
	o := newOrigin(t, srv.URL, Options{})
	for _, c := range []struct {
		code, status int
		want         string
	}{
		{200, 200, ""}, {203, 200, ""},
		{404, 404, CodeNotFound}, {410, 404, CodeNotFound},
		{500, 502, CodeStatus}, {503, 502, CodeStatus}, {502, 502, CodeStatus},
		{403, 502, CodeStatus}, {401, 502, CodeStatus}, {429, 502, CodeStatus},
		{201, 502, CodeStatus}, {204, 502, CodeStatus}, {206, 502, CodeStatus},
		{300, 502, CodeRedirect}, {301, 502, CodeRedirect}, {302, 502, CodeRedirect},
		{303, 502, CodeRedirect}, {307, 502, CodeRedirect}, {308, 502, CodeRedirect},
	} {
		resp, err := o.Fetch(t.Context(), &Request{Path: fmt.Sprintf("/%d.m3u8", c.code)})
		if c.want == "" {
			if err != nil || resp.Status != 200 || string(resp.Body) != playlist {
				t.Fatalf("%d: %v", c.code, err)
			}
			continue
		}
		e := wantError(t, err, c.status, c.want, fmt.Sprint(c.code))
		if c.want == CodeStatus && e.Detail != fmt.Sprintf("the origin answered %d", c.code) {
			t.Errorf("%d: detail %q", c.code, e.Detail)
		}
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("a redirect was followed %d times", n)
	}
}

// An origin that accepts and never answers gives origin_timeout once
// Timeout has run, not before and not much after (the margin is for a
// loaded machine); one that answers its head and then trickles its body
// runs out the same time, which bounds the whole exchange.
func TestHTTPTimeout(t *testing.T) {
	hang := tcpServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	trickle := tcpServer(t, func(c net.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n#")
		for {
			time.Sleep(20 * time.Millisecond)
			if _, err := io.WriteString(c, "#"); err != nil {
				return
			}
		}
	})
	const timeout = 300 * time.Millisecond
	for _, c := range []struct{ addr, words string }{
		{hang, "no answer from the origin within 300ms"},
		{trickle, "the origin's body did not end within 300ms"},
	} {
		o := newOrigin(t, "http://"+c.addr, Options{Timeout: timeout})
		start := time.Now()
		_, err := o.Fetch(t.Context(), &Request{Path: "/live.m3u8"})
		d := time.Since(start)
		wantError(t, err, 502, CodeTimeout, c.words)
		if d < timeout || d > timeout+time.Second {
			t.Errorf("timed out after %v, want %v and a margin", d, timeout)
		}
	}
	// The caller's context bounds the fetch too, and the detail says the
	// time it had.
	o := newOrigin(t, "http://"+hang, Options{Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := o.Fetch(ctx, &Request{Path: "/live.m3u8"})
	wantError(t, err, 502, CodeTimeout, "within 200ms")
	if d := time.Since(start); d > 1200*time.Millisecond {
		t.Errorf("the caller's deadline of 200ms ended the fetch after %v", d)
	}
}

// A fetch whose player left (its context cancelled) ends at once.
func TestHTTPCanceled(t *testing.T) {
	hang := tcpServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	o := newOrigin(t, "http://"+hang, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := o.Fetch(ctx, &Request{Path: "/live.m3u8"})
	wantError(t, err, 502, CodeCanceled)
}

// An origin that cannot be reached, each way it fails before an answer:
// all origin_unreachable, each saying why, and none naming the origin's
// address or host, which the front's players need not learn.
func TestHTTPUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	reset := tcpServer(t, func(c net.Conn) {
		readHead(bufio.NewReader(c))
		c.(*net.TCPConn).SetLinger(0) // a close that sends RST
		c.Close()
	})
	closed := tcpServer(t, func(c net.Conn) {
		readHead(bufio.NewReader(c))
		c.Close()
	})
	// A resolver that has no DNS server to ask: the lookup fails at once,
	// on any machine.
	noDNS := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS here")
	}}
	dnsClient := &http.Client{Transport: &http.Transport{
		DialContext: (&net.Dialer{Resolver: noDNS}).DialContext,
	}}
	for _, c := range []struct {
		base   string
		client *http.Client
		words  string
	}{
		{"http://" + refused, nil, "refused the connection"},
		{"http://" + reset, nil, "reset the connection"},
		{"http://" + closed, nil, "closed the connection before answering"},
		{"http://origin.example.invalid:8080", dnsClient, "host name does not resolve"},
	} {
		o := newOrigin(t, c.base, Options{Client: c.client})
		_, err := o.Fetch(t.Context(), &Request{Path: "/live.m3u8"})
		e := wantError(t, err, 502, CodeUnreachable, c.words)
		if strings.Contains(e.Detail, "127.0.0.1") || strings.Contains(e.Detail, "invalid") {
			t.Errorf("the detail %q names the origin", e.Detail)
		}
		if errors.Unwrap(err) == nil {
			t.Errorf("%s: no cause kept for the log", c.words)
		}
	}
}

// Answers that are not HTTP, or are cut short, are origin_bad_answer
// (RFC 9112 §4, §6.3); one cut short is never a shorter playlist.
func TestHTTPBadAnswers(t *testing.T) {
	for _, c := range []struct{ raw, words string }{
		{"hello, world\r\n\r\n", "does not read"},
		{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n#EXTM3U\n", "cut short"},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n#EXTM3U\n\r\n", "cut short"},
		{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "does not read"},
		{"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 8\r\n\r\n#EXTM3U\n", `coding "br", which was not asked for`},
		{"HTTP/1.1 200 OK\r\nContent-Encoding: gzip, gzip\r\nContent-Length: 8\r\n\r\n#EXTM3U\n", "not asked for"},
		{"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 8\r\n\r\n#EXTM3U\n", "gzip"},
	} {
		_, err := newOrigin(t, answering(t, c.raw), Options{}).Fetch(t.Context(), &Request{Path: "/live.m3u8"})
		wantError(t, err, 502, CodeBadAnswer, c.words)
	}
	// An empty body is never a playlist.
	for _, raw := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
	} {
		_, err := newOrigin(t, answering(t, raw), Options{}).Fetch(t.Context(), &Request{Path: "/live.m3u8"})
		wantError(t, err, 502, CodeEmpty)
	}
}
