package health

// The check's request and connection, and when checks run.

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The request is a plain GET with the headers the brief names, and the
// connection is kept between checks.
func TestRequestAndKeepAlive(t *testing.T) {
	var conns atomic.Int64
	type seen struct{ method, uri, host, agent, conn string }
	got := make(chan seen, 100)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Method, r.RequestURI, r.Host, r.UserAgent(), r.Header.Get("Connection")}
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	w := newWatcher()
	u := srv.URL + "/health?deep=1"
	w.start(t, patient(1), []Target{{"a", u}}, w.options())
	host := strings.TrimPrefix(srv.URL, "http://")
	for i := range 5 {
		if e := w.next(t, "a"); e.o != OutcomePass || !e.st.Up || e.st.LastError != "" {
			t.Fatalf("check %d: %+v", i, e)
		}
		if r := <-got; r != (seen{"GET", "/health?deep=1", host, "waisteer-health", "keep-alive"}) {
			t.Fatalf("request %+v", r)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 checks, want 1 kept", n)
	}
}

// An edge that closes each connection after one answer, while saying
// nothing of it, passes every check: the checker dials again when the kept
// connection turns out closed.
func TestKeptConnectionClosedByTheEdge(t *testing.T) {
	var conns atomic.Int64
	url := tcpServer(t, func(c net.Conn) {
		conns.Add(1)
		if readRequest(bufio.NewReader(c)) == nil {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		}
		c.Close()
	})
	w := newWatcher()
	w.start(t, patient(1), []Target{{"a", url}}, w.options())
	for i := range 5 {
		if e := w.next(t, "a"); e.o != OutcomePass {
			t.Fatalf("check %d: %+v", i, e)
		}
	}
	if n := conns.Load(); n < 5 {
		t.Fatalf("%d connections for 5 checks", n)
	}
}

// A body past 64 KiB is left unread, its connection dropped, and the check
// still judged by its status.
func TestLongBody(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 1<<20))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	w := newWatcher()
	w.start(t, patient(1), []Target{{"a", srv.URL}}, w.options())
	for i := range 3 {
		if e := w.next(t, "a"); e.o != OutcomePass {
			t.Fatalf("check %d: %+v", i, e)
		}
	}
	if n := conns.Load(); n < 3 {
		t.Fatalf("%d connections for 3 checks, want each dropped", n)
	}
}

// arrivals records when each path of a server is asked for.
type arrivals struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (a *arrivals) times(path string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.at[path])
}

// arrivalServer answers 200 at once on every path but /hang, which it
// never answers.
func arrivalServer(t *testing.T) (string, *arrivals) {
	a := &arrivals{at: map[string][]time.Time{}}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at[r.URL.Path] = append(a.at[r.URL.Path], time.Now())
		a.mu.Unlock()
		if r.URL.Path == "/hang" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL, a
}

// A target that never answers delays no other target's checks: those keep
// their period, as they would alone, where waiting behind the hung one
// would make it two. Its own checks are never doubled: each starts once
// the last has ended.
func TestSlowTargetDelaysNoOther(t *testing.T) {
	base, _ := arrivalServer(t)
	const every = 300 * time.Millisecond
	w := newWatcher()
	w.start(t, Settings{Every: every, Timeout: every, DownAfter: 1},
		[]Target{{"hang", base + "/hang"}, {"fast", base + "/fast"}}, w.options())
	time.Sleep(6*every + every/2)
	w.c.Stop()
	// When each check began and how long it took, from OnCheck.
	type span struct{ start, end time.Time }
	spans := map[string][]span{}
	for len(w.events) > 0 {
		e := <-w.events
		spans[e.name] = append(spans[e.name], span{e.at.Add(-e.d), e.at})
	}
	fast, hang := spans["fast"], spans["hang"]
	if len(fast) < 5 || len(hang) < 5 {
		t.Fatalf("%d checks of the fast target and %d of the hung one in 6.5 periods", len(fast), len(hang))
	}
	for i := 1; i < len(fast); i++ {
		if gap := fast[i].start.Sub(fast[i-1].start); gap < every/2 || gap > every+every/2 {
			t.Fatalf("fast target: %v between checks %d and %d, want %v", gap, i, i+1, every)
		}
	}
	for i := 1; i < len(hang); i++ {
		if hang[i].start.Before(hang[i-1].end.Add(-time.Millisecond)) {
			t.Fatalf("hung target: check %d began %v before check %d ended", i+1, hang[i-1].end.Sub(hang[i].start), i)
		}
		if d := hang[i].end.Sub(hang[i].start); d < every {
			t.Fatalf("hung target: check %d took %v, less than the timeout", i+1, d)
		}
	}
}

// The first checks of n targets are spread over the first period, target
// i at i·Every/n rounded down to the tick (the package doc), so that no
// two start together when they are a tick apart or more.
func TestSpread(t *testing.T) {
	base, arr := arrivalServer(t)
	const n, every = 10, time.Second
	var targets []Target
	for i := range n {
		targets = append(targets, Target{fmt.Sprint("edge-", i), fmt.Sprintf("%s/%d", base, i)})
	}
	w := newWatcher()
	start := time.Now()
	w.start(t, Settings{Every: every, Timeout: every / 2, DownAfter: 1}, targets, w.options())
	time.Sleep(every + every/4)
	var first []time.Time
	for i := range n {
		at := arr.times(fmt.Sprintf("/%d", i))
		if len(at) == 0 {
			t.Fatalf("target %d not checked in the first period", i)
		}
		off := at[0].Sub(start)
		want := (every * time.Duration(i) / n).Truncate(tick)
		if off < want || off > want+every/n/2 {
			t.Errorf("target %d first checked at %v, want %v", i, off, want)
		}
		first = append(first, at[0])
	}
	slices.SortFunc(first, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < n; i++ {
		if gap := first[i].Sub(first[i-1]); gap < every/n/2 {
			t.Errorf("two first checks %v apart", gap)
		}
	}
}
