package postgres

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// delayed is a proxy on loopback that delivers every byte to the database at
// dsn, and back, after oneWay: the database on another host. Its listener
// and connections are closed at cleanup. It returns the DSN through it.
func delayed(tb testing.TB, dsn string, oneWay time.Duration) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var conns sync.WaitGroup
	tb.Cleanup(func() {
		ln.Close()
		conns.Wait()
	})
	target := u.Host
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			conns.Add(2)
			go func() { defer conns.Done(); pipeLate(d, c, oneWay) }()
			go func() { defer conns.Done(); pipeLate(c, d, oneWay) }()
		}
	}()
	u.Host = ln.Addr().String()
	return u.String()
}

// pipeLate copies src to dst, each chunk written oneWay after it was read,
// in order; it closes both at the end.
func pipeLate(dst, src net.Conn, oneWay time.Duration) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	ch := make(chan chunk, 1024)
	go func() {
		defer close(ch)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				ch <- chunk{time.Now().Add(oneWay), b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	for range ch { // the reader, its connection closed, ends
	}
}

// BenchmarkServersOneRoomRTT is BenchmarkServersOneRoom with the database a
// round trip of 1 ms away (0.5 ms each way, a database on another host of
// the data centre), through a proxy on loopback: what a room's group commit
// waits for is then the network rather than this machine's CPU, shared by
// the servers, PostgreSQL and whatever else runs. The round trip of a
// SELECT 1 through the proxy is reported beside (rtt-ms): on a loaded
// machine the proxy's goroutines wake late, and it is more than 1 ms. Issue 31: adding a server
// should not lower a room's rate; with one log a room locked from a
// group's first batch to its commit (schema 4), a room took one group a
// round trip or two whatever the servers; with one log per server (schema
// 5) each server's groups go at once.
func BenchmarkServersOneRoomRTT(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			dsn := server.Database(b)
			far := delayed(b, dsn, 500*time.Microsecond)
			var ss []*Store
			for k := range n {
				opts := []Option{}
				if k == 0 {
					opts = append(opts, WithMigrate())
				}
				s, err := Open(context.Background(), far, opts...)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				ss = append(ss, s)
			}
			rtt := time.Now()
			for range 50 {
				if _, err := ss[0].pool.Exec(context.Background(), "SELECT 1"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(rtt).Microseconds())/50/1000, "rtt-ms")
			putTogether(b, ss)
		})
	}
}
