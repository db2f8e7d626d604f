//go:build unix

package fastserve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// pair is a loopback connection: the server's end accepted through
// Listener, and the client's.
func pair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = Listener(ln).Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	server.SetDeadline(time.Now().Add(10 * time.Second))
	return server, client
}

// readAs reads n bytes from c in reads of the sizes given, in turn
// (again from the first once all are used). A read that returns nothing
// and no error is an error: it would be read again forever.
func readAs(c net.Conn, n int, sizes []int) ([]byte, error) {
	var got []byte
	for i := 0; len(got) < n; i++ {
		b := make([]byte, sizes[i%len(sizes)])
		k, err := c.Read(b)
		got = append(got, b[:k]...)
		if err != nil {
			return got, err
		}
		if k == 0 {
			return got, io.ErrNoProgress
		}
	}
	return got, nil
}

// Whatever the sizes of the reads, waits of one byte among them, and
// however the bytes arrive, a connection of Listener reads the bytes sent,
// in order, each once; and once a wait's bytes are all read it keeps no
// buffer.
func TestWaitConnStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 1))
	for round := range 40 {
		server, client := pair(t)
		data := make([]byte, 1+rng.IntN(3*waitSize))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		sizes := make([]int, 1+rng.IntN(6))
		for i := range sizes {
			if sizes[i] = 1; rng.IntN(2) == 0 {
				sizes[i] = 1 + rng.IntN(2*waitSize)
			}
		}
		var writes [][]byte // as the bytes arrive: in pieces, some after a pause
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(waitSize))
			writes, rest = append(writes, rest[:k]), rest[k:]
		}
		go func() {
			for i, w := range writes {
				client.Write(w)
				time.Sleep(time.Duration(i%2) * time.Millisecond)
			}
		}()
		got, err := readAs(server, len(data), sizes)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d (reads of %v): read %d bytes of %d sent, equal %v (%v)", round, sizes, len(got), len(data), bytes.Equal(got, data[:min(len(got), len(data))]), err)
		}
		if wc, ok := server.(*waitConn); ok && wc.held != nil {
			t.Fatalf("round %d: all read, and the connection still holds a buffer (%d to %d)", round, wc.next, wc.end)
		}
	}
}

// A wait of one byte reads all that has arrived at once: a request sent
// whole is read by one read of the system, the rest of it handed over by
// the next read without another.
func TestWaitConnOneRead(t *testing.T) {
	server, client := pair(t)
	wc, ok := server.(*waitConn)
	if !ok {
		t.Skip("not a system whose reads Listener opens (syscall.Conn)")
	}
	req := "GET /v1/rooms/r/steer?_HLS_pathway=%22a%22 HTTP/1.1\r\nHost: h\r\n\r\n"
	io.WriteString(client, req)
	time.Sleep(20 * time.Millisecond) // all of it there before the wait
	b := make([]byte, 1)
	if n, err := server.Read(b); n != 1 || err != nil || b[0] != 'G' {
		t.Fatalf("the wait: %d %q %v", n, b[:n], err)
	}
	if wc.held == nil || wc.end-wc.next != len(req)-1 {
		t.Fatalf("after the wait the connection holds %v (%d to %d), not the rest of the request (%d bytes)", wc.held != nil, wc.next, wc.end, len(req)-1)
	}
	wc.Conn.Close() // a read of the system now fails: the rest must come from what is held
	rest := make([]byte, 4096)
	if n, err := server.Read(rest); err != nil || string(rest[:n]) != req[1:] {
		t.Fatalf("the rest: %q %v", rest[:n], err)
	}
}

// A wait ends at the read deadline as any read does, a timeout, and loses
// nothing that arrives after; a wait on a connection the client closed
// ends in io.EOF; on one it reset, in an error that is not.
func TestWaitConnEnds(t *testing.T) {
	server, client := pair(t)
	server.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	b := make([]byte, 1)
	n, err := server.Read(b)
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a wait past its deadline: %d %v", n, err)
	}
	io.WriteString(client, "after")
	server.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := readAs(server, 5, []int{1, 64}); err != nil || string(got) != "after" {
		t.Fatalf("after the timeout: %q %v", got, err)
	}
	client.Close()
	if n, err := server.Read(b); n != 0 || err != io.EOF {
		t.Fatalf("closed by the client: %d %v", n, err)
	}

	server, client = pair(t)
	client.(*net.TCPConn).SetLinger(0)
	client.Close()
	if n, err := server.Read(b); n != 0 || err == nil || err == io.EOF {
		t.Fatalf("reset by the client: %d %v", n, err)
	}
}

// A server of NewServer behind Listener answers, on one keep-alive
// connection: a request whose first byte comes alone, two requests in one
// write, in order, and a head longer than a wait reads; and it closes a
// connection idle past IdleTimeout.
func TestListenerServes(t *testing.T) {
	h := func(c *fasthttp.RequestCtx) {
		fmt.Fprintf(c, "%s %d", c.Path(), len(c.Request.Header.Peek("X-Long")))
	}
	addr := serve(t, h, 1024, Limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 200 * time.Millisecond, MaxHeaderBytes: 64 << 10, Logger: discard()})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	answer := func(want string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != want {
			t.Fatalf("%s %q (%v), want 200 %q", resp.Status, b, err, want)
		}
	}
	io.WriteString(nc, "G")
	time.Sleep(20 * time.Millisecond)
	io.WriteString(nc, "ET /one HTTP/1.1\r\nHost: h\r\n\r\n")
	answer("/one 0")
	io.WriteString(nc, "GET /two HTTP/1.1\r\nHost: h\r\n\r\nGET /three HTTP/1.1\r\nHost: h\r\n\r\n")
	answer("/two 0")
	answer("/three 0")
	long := strings.Repeat("a", 3*waitSize)
	io.WriteString(nc, "GET /four HTTP/1.1\r\nHost: h\r\nX-Long: "+long+"\r\n\r\n")
	answer(fmt.Sprintf("/four %d", len(long)))

	start := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle connection: %v, want it closed", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 5*time.Second {
		t.Fatalf("an idle connection closed after %v, IdleTimeout 200ms", d)
	}
}

// FuzzWaitConn sends data over a connection of Listener and reads it in
// reads of the sizes sizes names (a byte each: even, a wait of one byte;
// odd, a read of up to 16 times its value): what is read is what was sent.
func FuzzWaitConn(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), []byte{0, 255})
	f.Add(bytes.Repeat([]byte("x"), 3*waitSize), []byte{0, 0, 1, 0, 201})
	f.Add([]byte("a"), []byte{0})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		if len(data) == 0 || len(data) > 1<<16 {
			return
		}
		rs := []int{1}
		for _, s := range sizes {
			rs = append(rs, max(1, int(s&1)*16*int(s)))
		}
		server, client := pair(t)
		go client.Write(data)
		got, err := readAs(server, len(data), rs)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes of %d (%v)", len(got), len(data), err)
		}
	})
}

// BenchmarkWait is a keep-alive connection's requests as a server of
// NewServer reads them (a wait of one byte, then the rest into its
// buffer) and answers them, the client sending each once it has read the
// answer to the one before: on a plain TCP connection and on one of
// Listener. Each op holds the client's write and read too; cpu-ns/op is
// the process's CPU time (user and system) per op.
func BenchmarkWait(b *testing.B) {
	req := []byte("GET /v1/rooms/r/steer?_HLS_pathway=%22a%22&_HLS_throughput=5000000 HTTP/1.1\r\nHost: h\r\nUser-Agent: bench\r\n\r\n")
	for _, name := range []string{"tcp", "listener"} {
		b.Run(name, func(b *testing.B) {
			server, client := pair(b)
			if name == "tcp" {
				server = server.(*waitConn).Conn
			}
			go func() {
				ans := make([]byte, 1)
				for {
					if _, err := client.Write(req); err != nil {
						return
					}
					if _, err := client.Read(ans); err != nil {
						return
					}
				}
			}()
			one, buf := make([]byte, 1), make([]byte, 64<<10)
			cpu := processCPU()
			for b.Loop() {
				n, err := server.Read(one)
				for got := n; err == nil && got < len(req); got += n {
					n, err = server.Read(buf)
				}
				if err == nil {
					_, err = server.Write(one)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's CPU time so far, user and system, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
