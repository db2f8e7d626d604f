package serve_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
)

// startPlain serves a pool of two pathways over plain HTTP on engine, as
// `waisteer serve` does, with a read_header_timeout and idle_timeout of
// 300 ms; it returns the address.
func startPlain(t *testing.T, engine string) string {
	t.Helper()
	doc := "listen = \"127.0.0.1:0\"\n[http]\nengine = \"" + engine + "\"\nread_header_timeout = \"300ms\"\nidle_timeout = \"300ms\"\n" +
		"[steering]\n[[steering.edges]]\npathway = \"a\"\n[[steering.edges]]\npathway = \"b\"\n"
	return strings.TrimPrefix(runServe(t, t.TempDir(), doc, &lockedLog{}), "http://")
}

// closedWithin reports how long c took to be closed by the server (its
// read ending in EOF, a reset, or an answer and then EOF), at most limit.
func closedWithin(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection still open after %v", limit)
	}
	return time.Since(start)
}

// The connections a player's network may make, on both engines, over plain
// HTTP (where fasthttp waits through fastserve.Listener): a head dribbled a
// byte at a time (a slow peer) and a connection that sends nothing are cut
// at read_header_timeout, not held while they last; 200 idle connections
// at once leave a request of another answered; a request whose first byte
// comes alone (a proxy's segments) and two in one write are answered.
func TestPeersPlainHTTP(t *testing.T) {
	for _, engine := range []string{serve.EngineStd, serve.EngineFast} {
		t.Run(strings.ReplaceAll(engine, "/", "-"), func(t *testing.T) {
			addr := startPlain(t, engine)
			dial := func() net.Conn {
				t.Helper()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			const head = "GET /api/v1/steering HTTP/1.1\r\nHost: h\r\n\r\n"

			slow := dial()
			dribbled := make(chan int)
			go func() {
				n := 0
				for ; n < 40; n++ { // 40 bytes at 50 ms: 2 s, past the timeout
					if _, err := slow.Write([]byte{"GET /api/v1/steering HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaa"[n]}); err != nil {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				dribbled <- n
			}()
			if d := closedWithin(t, slow, 10*time.Second); d > 1500*time.Millisecond {
				t.Errorf("a head dribbled a byte each 50 ms: cut after %v, read_header_timeout 300ms", d)
			}
			<-dribbled

			silent := dial()
			if d := closedWithin(t, silent, 10*time.Second); d < 200*time.Millisecond || d > 1500*time.Millisecond {
				t.Errorf("a connection that sends nothing: cut after %v, read_header_timeout 300ms", d)
			}

			for range 200 {
				dial()
			}
			c := dial()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			answer := func(what string) {
				t.Helper()
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %s", what, resp.Status)
				}
			}
			io.WriteString(c, head[:1])
			time.Sleep(30 * time.Millisecond)
			io.WriteString(c, head[1:])
			answer("beside 200 idle connections, its first byte alone")
			io.WriteString(c, head+head)
			answer("the first of two in one write")
			answer("the second of two in one write")
		})
	}
}
