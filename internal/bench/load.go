package bench

// The load generator of `waisteer bench`: closed-loop players on keep-alive
// HTTP/1.1 connections over loopback. Each connection is written and read
// by hand (a request line, a few header fields, a body of Content-Length
// bytes), so that the generator, which shares the machine's cores with the
// server it measures, spends as little of them as it can; the real server
// and the two plain ones are driven by this same code.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// benchConn is one keep-alive HTTP/1.1 connection.
type benchConn struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
	req  []byte // the request being written
	body []byte // the last answer's body, reused
}

func (c *benchConn) close() {
	if c.c != nil {
		c.c.Close()
		c.c, c.br = nil, nil
	}
}

// roundTrip writes the request in c.req and reads the answer: its status
// and its body, valid until the next round trip. An answer must carry
// Content-Length (every answer of the servers measured does). A connection
// that fails is closed, and dialled again by the next round trip.
func (c *benchConn) roundTrip() (int, []byte, error) {
	if c.c == nil {
		conn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			return 0, nil, err
		}
		c.c, c.br = conn, bufio.NewReaderSize(conn, 32<<10)
	}
	status, body, err := c.exchange()
	if err != nil {
		c.close()
	}
	return status, body, err
}

func (c *benchConn) exchange() (int, []byte, error) {
	if _, err := c.c.Write(c.req); err != nil {
		return 0, nil, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, fmt.Errorf("not an HTTP/1 status line: %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("status line %q: %v", line, err)
	}
	length, closing := -1, false
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		if len(line) <= 2 { // the empty line that ends the header
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, fmt.Errorf("Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, fmt.Errorf("an answer with Transfer-Encoding %q; the generator reads Content-Length only", value)
		}
	}
	if length < 0 {
		return 0, nil, errors.New("an answer without Content-Length")
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		return 0, nil, err
	}
	if closing {
		c.close()
	}
	return status, c.body, nil
}

// benchPlayer is one player: its session's RELOAD-URI once it has had a
// manifest, the pathway its last manifest put first, and how it reports
// (§4.2 HLS or §4.3 DASH parameters; CMCD in the query, in a header, or
// not at all, §4.4).
type benchPlayer struct {
	reload     []byte // path and query of the RELOAD-URI; nil before the first manifest
	first      int    // index of the pathway it is on
	dash       bool
	cmcd       uint8 // 0 none, 1 in the query, 2 in the CMCD-Request header
	throughput uint64
}

// The players' mix: half report as HLS players, half as DASH players; a
// quarter of them send CMCD (half of those in the query, half in a
// header); one in eight is at the floor tier (§6.4 step 2).
func newBenchPlayers(n, initial int) []*benchPlayer {
	ps := make([]*benchPlayer, n)
	for i := range ps {
		p := &benchPlayer{first: initial, dash: i%2 == 1, throughput: 5_000_000}
		switch i % 8 {
		case 2:
			p.cmcd = 1
		case 5:
			p.cmcd = 2
		case 7:
			p.throughput = 1_000_000
		}
		ps[i] = p
	}
	return ps
}

// benchLoad drives one server: its players, spread over its clients, each
// client one connection.
type benchLoad struct {
	path    string   // the path of server_uri
	ids     []string // the pathways' ids, to read PATHWAY-PRIORITY
	players []*benchPlayer
	conns   []*benchConn
	// answered counts every manifest answered 200, over all phases: the
	// decisions the server must have stored.
	answered atomic.Uint64
	// slow counts the answers over benchFlightSlow from their due time,
	// except those due in a run's first benchFlightSettle, over all phases:
	// the soak's flight recorder watches it (soak.go).
	slow atomic.Uint64
}

func newBenchLoad(addr, path string, ids []string, initial, clients, players int) *benchLoad {
	// As many players for each client: a player is only ever asked for by
	// its own client (run), so never by two at once.
	per := max(1, (players+clients-1)/clients)
	l := &benchLoad{path: path, ids: ids, players: newBenchPlayers(per*clients, initial)}
	for range clients {
		l.conns = append(l.conns, &benchConn{addr: addr, req: make([]byte, 0, 512)})
	}
	return l
}

func (l *benchLoad) close() {
	for _, c := range l.conns {
		c.close()
	}
}

// request writes player p's steering request into c.req: server_uri for
// its first, then its RELOAD-URI, with its report.
func (l *benchLoad) request(c *benchConn, p *benchPlayer) {
	b := append(c.req[:0], "GET "...)
	sep := byte('&')
	if p.reload == nil {
		b = append(b, l.path...)
		sep = '?'
	} else {
		b = append(b, p.reload...)
	}
	b = append(b, sep)
	id := l.ids[p.first]
	if p.dash {
		b = append(b, "_DASH_pathway=%22"...)
		b = append(b, id...)
		b = append(b, "%22&_DASH_throughput="...)
	} else {
		b = append(b, "_HLS_pathway=%22"...)
		b = append(b, id...)
		b = append(b, "%22&_HLS_throughput="...)
	}
	b = strconv.AppendUint(b, p.throughput, 10)
	if p.cmcd == 1 {
		b = append(b, "&CMCD=bl%3D21300%2Cmtp%3D48100"...)
	}
	b = append(b, " HTTP/1.1\r\nHost: steer.example\r\nUser-Agent: waisteer-bench\r\n"...)
	if p.cmcd == 2 {
		b = append(b, "CMCD-Request: bl=21300,mtp=48100\r\n"...)
	}
	c.req = append(b, "\r\n"...)
}

// The members of a manifest (§8.1) the players read.
var (
	benchReloadKey   = []byte(`"RELOAD-URI":"`)
	benchPriorityKey = []byte(`"PATHWAY-PRIORITY":["`)
)

// read takes from a manifest what the player's next request needs: its
// RELOAD-URI's path and query (the generator is the host) and the first
// pathway of PATHWAY-PRIORITY.
func (l *benchLoad) read(p *benchPlayer, m []byte) error {
	i := bytes.Index(m, benchReloadKey)
	if i < 0 {
		return fmt.Errorf("a manifest without RELOAD-URI: %q", m)
	}
	uri := m[i+len(benchReloadKey):]
	uri = uri[:max(bytes.IndexByte(uri, '"'), 0)]
	if k := bytes.Index(uri, []byte("://")); k >= 0 {
		rest := uri[k+3:]
		uri = rest[max(bytes.IndexByte(rest, '/'), 0):]
	}
	if !bytes.Equal(uri, p.reload) {
		p.reload = slices.Clone(uri)
	}
	i = bytes.Index(m, benchPriorityKey)
	if i < 0 {
		return fmt.Errorf("a manifest without PATHWAY-PRIORITY: %q", m)
	}
	id := m[i+len(benchPriorityKey):]
	id = id[:max(bytes.IndexByte(id, '"'), 0)]
	for k, s := range l.ids {
		if string(id) == s {
			p.first = k
			return nil
		}
	}
	return fmt.Errorf("PATHWAY-PRIORITY names %q, no pathway of the policy", id)
}

// benchPhase is what one phase of load measured.
type benchPhase struct {
	answered uint64 // 200s
	failed   uint64
	elapsed  time.Duration
	// latencies are from each request's due time when paced, from its
	// sending in a closed loop; pct are their p50, p99 and p999 (wrk's own
	// when wrk drove the phase).
	latencies []time.Duration
	pct       [3]time.Duration
	firstErr  error
}

func (ph *benchPhase) rate() float64 {
	if ph.elapsed <= 0 {
		return 0
	}
	return float64(ph.answered) / ph.elapsed.Seconds()
}

// run drives the server for d: closed loop when rate is 0, each client
// asking again as soon as it has its answer; otherwise paced at rate
// requests a second in all, each client's requests due at fixed intervals
// and their latency taken from when each was due, so that a server that
// falls behind is charged the wait (no coordinated omission).
func (l *benchLoad) run(ctx context.Context, d time.Duration, rate float64) benchPhase {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		total    benchPhase
		clients  = len(l.conns)
		start    = time.Now()
		deadline = start.Add(d)
		interval time.Duration
	)
	if rate > 0 {
		interval = time.Duration(float64(clients) / rate * float64(time.Second))
	}
	for ci, c := range l.conns {
		wg.Go(func() {
			var ph benchPhase
			if rate > 0 {
				ph.latencies = make([]time.Duration, 0, int(d/max(interval, 1))+1)
			} else {
				ph.latencies = make([]time.Duration, 0, 1024)
			}
			due := start.Add(time.Duration(ci) * interval / time.Duration(clients))
			for k := ci; ctx.Err() == nil; k += clients {
				now := time.Now()
				if rate > 0 {
					if !due.Before(deadline) {
						break
					}
					if wait := due.Sub(now); wait > 0 {
						time.Sleep(wait)
					}
				} else if !now.Before(deadline) {
					break
				} else {
					due = now
				}
				p := l.players[k%len(l.players)]
				l.request(c, p)
				status, body, err := c.roundTrip()
				if err == nil && status != 200 {
					err = fmt.Errorf("status %d: %s", status, bytes.TrimSpace(body))
				}
				if err == nil {
					err = l.read(p, body)
				}
				if err != nil {
					ph.failed++
					if ph.firstErr == nil {
						ph.firstErr = err
					}
					if ctx.Err() == nil && c.c == nil {
						time.Sleep(10 * time.Millisecond) // the server may be gone: not a busy loop
					}
				} else {
					ph.answered++
					l.answered.Add(1)
					lat := time.Since(due)
					ph.latencies = append(ph.latencies, lat)
					if lat > benchFlightSlow && due.Sub(start) > benchFlightSettle {
						l.slow.Add(1)
					}
				}
				if rate > 0 {
					due = due.Add(interval)
				}
			}
			mu.Lock()
			total.answered += ph.answered
			total.failed += ph.failed
			total.latencies = append(total.latencies, ph.latencies...)
			if total.firstErr == nil {
				total.firstErr = ph.firstErr
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	if rate > 0 {
		total.elapsed = d
	}
	slices.Sort(total.latencies)
	total.pct = [3]time.Duration{quantile(total.latencies, 0.50), quantile(total.latencies, 0.99), quantile(total.latencies, 0.999)}
	return total
}

// prime has every player ask once, so that each has its session's
// RELOAD-URI (wrk replays those).
func (l *benchLoad) prime(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(l.conns))
	for ci, c := range l.conns {
		wg.Go(func() {
			for k := ci; k < len(l.players) && ctx.Err() == nil; k += len(l.conns) {
				p := l.players[k]
				l.request(c, p)
				status, body, err := c.roundTrip()
				if err == nil && status != 200 {
					err = fmt.Errorf("status %d: %s", status, bytes.TrimSpace(body))
				}
				if err == nil {
					err = l.read(p, body)
				}
				if err != nil {
					errs[ci] = err
					return
				}
				l.answered.Add(1)
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// quantile is the q-quantile of sorted latencies by nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}
