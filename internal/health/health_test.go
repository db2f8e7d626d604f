package health

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
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

// The expectations here are the station seed's words (issue 12, item 4):
// "An edge that fails its health check down_after times in a row leaves
// the order. One passing check brings it back."; a check is a GET over
// plain HTTP where 2xx passes and a redirect, any other status, a refused
// connection or a timeout fails ("a login redirect counts as a failure");
// checks run every check_every_s, spread out; a check never blocks a
// steering request.

// patient is the timing of tests whose subject is not the timeout: a
// period and a timeout that a loaded machine still keeps.
func patient(downAfter int) Settings {
	return Settings{Every: 200 * time.Millisecond, Timeout: 200 * time.Millisecond, DownAfter: downAfter}
}

// event is one OnCheck call with the status read back inside it.
type event struct {
	name string
	o    Outcome
	d    time.Duration
	st   Status
	at   time.Time
}

// watcher collects a checker's checks and changes.
type watcher struct {
	c       *Checker
	events  chan event
	mu      sync.Mutex
	changes []Change
	// onChange, when set, runs inside OnChange.
	onChange func(Change)
}

func newWatcher() *watcher { return &watcher{events: make(chan event, 10_000)} }

func (w *watcher) options() Options {
	return Options{
		OnCheck: func(name string, o Outcome, d time.Duration) {
			// Status from inside the callback: it must not be under a
			// lock Status takes.
			st, _ := w.c.Status(name)
			w.events <- event{name, o, d, st, time.Now()}
		},
		OnChange: func(ch Change) {
			st, _ := w.c.Status(ch.Name)
			if st != ch.Status {
				panic(fmt.Sprintf("change %+v, status %+v", ch.Status, st))
			}
			w.mu.Lock()
			w.changes = append(w.changes, ch)
			w.mu.Unlock()
			if w.onChange != nil {
				w.onChange(ch)
			}
		},
	}
}

func (w *watcher) start(t *testing.T, s Settings, targets []Target, o Options) *Checker {
	t.Helper()
	c, err := New(s, targets, o)
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	c.Start(t.Context())
	t.Cleanup(c.Stop)
	return c
}

// next waits for the next check of name.
func (w *watcher) next(t *testing.T, name string) event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-w.events:
			if e.name == name {
				return e
			}
		case <-deadline:
			t.Fatalf("no check of %s within 5s", name)
		}
	}
}

func (w *watcher) changed() []Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.changes)
}

// scripted is an HTTP server answering its i-th request with codes[i],
// then 200.
func scripted(t *testing.T, codes ...int) (url string, requests *atomic.Int64) {
	requests = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := requests.Add(1) - 1
		code := 200
		if int(i) < len(codes) {
			code = codes[i]
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/health", requests
}

// tcpServer runs handle on each connection to a loopback listener; its
// connections are closed at cleanup.
func tcpServer(t *testing.T, handle func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go handle(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/health"
}

// readRequest reads one request head from c.
func readRequest(br *bufio.Reader) error {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if line == "\r\n" {
			return nil
		}
	}
}

// DownAfter failures in a row take a target down and one pass brings it
// back; a pass between failures starts the count again.
func TestDownAfterInARow(t *testing.T) {
	url, _ := scripted(t, 500, 500, 200, 500, 500, 500, 200, 500)
	w := newWatcher()
	s := patient(3)
	w.start(t, s, []Target{{"edge-1", url}}, w.options())
	type seen struct {
		up       bool
		failures int
		checks   uint64
	}
	// By hand from the rule: after each check, up and failures in a row.
	want := []seen{{true, 1, 1}, {true, 2, 2}, {true, 0, 3}, {true, 1, 4}, {true, 2, 5}, {false, 3, 6}, {true, 0, 7}, {true, 1, 8}}
	for i, wt := range want {
		e := w.next(t, "edge-1")
		if got := (seen{e.st.Up, e.st.Failures, e.st.Checks}); got != wt {
			t.Fatalf("after check %d: %+v, want %+v", i+1, got, wt)
		}
		if (e.o == OutcomePass) != (e.st.LastError == "") || (e.o == OutcomePass) != (e.st.Failures == 0) {
			t.Fatalf("after check %d: outcome %s, last error %q", i+1, e.o, e.st.LastError)
		}
	}
	ch := w.changed()
	if len(ch) != 2 || ch[0].Up || ch[0].Status.Checks != 6 || !ch[1].Up || ch[1].Status.Checks != 7 {
		t.Fatalf("changes %+v, want down at check 6 and up at check 7", ch)
	}
	if ch[0].Status.LastError != "status 500" || ch[1].Status.LastError != "" {
		t.Fatalf("changes %+v: the reasons", ch)
	}
	if !ch[0].Status.Since.Equal(ch[0].Status.LastCheck) || !ch[1].Status.Since.Equal(ch[1].Status.LastCheck) {
		t.Fatalf("changes %+v: since is when up changed", ch)
	}
}

// DownAfter 1: the first failure takes the target down. Each change is
// logged, a fall at Warn and a return at Info, with why.
func TestDownAfterOne(t *testing.T) {
	url, _ := scripted(t, 503)
	w := newWatcher()
	var logs syncBuffer
	o := w.options()
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "ms" {
				return slog.Attr{}
			}
			return a
		},
	}))
	w.start(t, patient(1), []Target{{"a", url}}, o)
	if e := w.next(t, "a"); e.st.Up || e.st.Failures != 1 || e.o != OutcomeStatus || e.st.LastError != "status 503" {
		t.Fatalf("after one failure: %+v", e)
	}
	if e := w.next(t, "a"); !e.st.Up || e.o != OutcomePass {
		t.Fatalf("after one pass: %+v", e)
	}
	want := `level=WARN msg="health: target down" target=a url=` + url + ` failures=1 why="status 503"` + "\n" +
		`level=INFO msg="health: target up" target=a url=` + url + ` why="a check passed"` + "\n"
	if got := logs.String(); got != want {
		t.Fatalf("logs\n%s\nwant\n%s", got, want)
	}
}

// syncBuffer is a bytes.Buffer for a logger on the checker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Each way a check fails, with its outcome and its reason.
func TestFailures(t *testing.T) {
	const timeout = 300 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var followed atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/login", http.StatusFound)
	})
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	redirect := httptest.NewServer(mux)
	t.Cleanup(redirect.Close)
	status500, _ := scripted(t, 500)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	slowBody := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(200)
		w.Write([]byte("abc"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slowBody.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/health"
	ln.Close()
	silent := tcpServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		<-release
	})
	garbage := tcpServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
	})
	reset := tcpServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	})
	closed := tcpServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		c.Close()
	})
	cut := tcpServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))
		c.Close()
	})

	cases := []struct {
		name, url string
		o         Outcome
		why       string
	}{
		{"redirect", redirect.URL + "/health", OutcomeRedirect, "status 302 (a redirect is a failure)"},
		{"status 500", status500, OutcomeStatus, "status 500"},
		{"refused", refused, OutcomeRefused, "connection refused"},
		{"slow answer", slow.URL + "/health", OutcomeTimeout, "timed out after 300ms"},
		{"slow body", slowBody.URL + "/health", OutcomeTimeout, "timed out after 300ms"},
		{"never answers", silent, OutcomeTimeout, "timed out after 300ms"},
		{"garbage", garbage, OutcomeError, `not an HTTP answer: a status line "SSH-2.0-OpenSSH_9.6"`},
		{"reset", reset, OutcomeError, "connection reset"},
		{"closed", closed, OutcomeError, "connection closed before an answer"},
		{"cut short", cut, OutcomeError, "answer cut short"},
	}
	var targets []Target
	for _, tc := range cases {
		targets = append(targets, Target{tc.name, tc.url})
	}
	w := newWatcher()
	w.start(t, Settings{Every: time.Second, Timeout: timeout, DownAfter: 1}, targets, w.options())
	got := map[string]event{}
	for len(got) < len(cases) {
		select {
		case e := <-w.events:
			if _, ok := got[e.name]; !ok {
				got[e.name] = e
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("checks of %d targets of %d within 5s", len(got), len(cases))
		}
	}
	for _, tc := range cases {
		e := got[tc.name]
		if e.o != tc.o || e.st.LastError != tc.why || e.st.Up || e.st.Failures != 1 {
			t.Errorf("%s: outcome %s, status %+v; want %s, %q, down", tc.name, e.o, e.st, tc.o, tc.why)
		}
		if tc.o == OutcomeTimeout && (e.d < timeout || e.d > timeout+500*time.Millisecond) {
			t.Errorf("%s: took %v, want the timeout %v", tc.name, e.d, timeout)
		}
		if ms := float64(e.d) / float64(time.Millisecond); e.st.LastMs != ms {
			t.Errorf("%s: last_ms %v, want %v", tc.name, e.st.LastMs, ms)
		}
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

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

// Update keeps the status of a target kept with its name and URL, starts a
// new one (or one whose URL changed) up, and stops a removed one.
func TestUpdate(t *testing.T) {
	down, _ := scripted(t, slices.Repeat([]int{500}, 100)...)
	okA, _ := scripted(t)
	okB, _ := scripted(t)
	gone, goneRequests := scripted(t)
	w := newWatcher()
	s := patient(1)
	c := w.start(t, s, []Target{{"kept", down}, {"moved", okA}, {"removed", gone}}, w.options())
	for range 2 {
		w.next(t, "kept")
	}
	w.next(t, "moved")
	w.next(t, "removed")
	before, _ := c.Status("kept")
	if before.Up || before.Checks < 2 {
		t.Fatalf("kept target before the update: %+v", before)
	}

	if err := c.Update(s, []Target{{"kept", down}, {"bad", "https://x.example/"}}); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("an https target: %v", err)
	}
	if _, ok := c.Status("removed"); !ok {
		t.Fatal("a refused update changed the targets")
	}

	s2 := patient(2)
	if err := c.Update(s2, []Target{{"added", okB}, {"kept", down}, {"moved", okB}}); err != nil {
		t.Fatal(err)
	}
	sent := goneRequests.Load()
	// The checks reported before Update returned are the old targets'.
	for len(w.events) > 0 {
		<-w.events
	}
	after, _ := c.Status("kept")
	if after.Up || after.Since != before.Since || after.Checks < before.Checks {
		t.Fatalf("kept target: %+v, before %+v", after, before)
	}
	for _, name := range []string{"added", "moved"} {
		st, ok := c.Status(name)
		if !ok || !st.Up || st.Checks != 0 || !st.LastCheck.IsZero() {
			t.Fatalf("%s after the update: %+v %v", name, st, ok)
		}
	}
	if _, ok := c.Status("removed"); ok {
		t.Fatal("a removed target still has a status")
	}
	if e := w.next(t, "moved"); e.o != OutcomePass || e.st.Checks != 1 {
		t.Fatalf("moved target: %+v", e)
	}
	for range 3 {
		w.next(t, "kept")
	}
	if st, _ := c.Status("kept"); st.Up || st.Checks < before.Checks+3 {
		t.Fatalf("kept target goes on: %+v", st)
	}
	if n := goneRequests.Load(); n != sent {
		t.Fatalf("the removed target was checked %d times after Update returned", n-sent)
	}
}

// Stop returns promptly with a check in flight against a target that never
// answers, and that check, cut short, is not counted against the target.
func TestStopWithAHungTarget(t *testing.T) {
	accepted := make(chan struct{}, 1)
	url := tcpServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		accepted <- struct{}{}
		io.Copy(io.Discard, c)
	})
	w := newWatcher()
	c, err := New(Settings{Every: 5 * time.Second, Timeout: 5 * time.Second, DownAfter: 1}, []Target{{"hung", url}}, w.options())
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	c.Start(context.Background())
	<-accepted
	// Status does not wait for the check in flight either.
	for range 1000 {
		t0 := time.Now()
		c.Status("hung")
		if d := time.Since(t0); d > 100*time.Millisecond {
			t.Fatalf("Status took %v during a check", d)
		}
	}
	t0 := time.Now()
	c.Stop()
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Fatalf("Stop took %v", d)
	}
	if st, _ := c.Status("hung"); st.Checks != 0 || !st.Up {
		t.Fatalf("after Stop: %+v", st)
	}
	c.Stop() // twice is fine
}

// Ending the context passed to Start ends the checks as Stop does.
func TestContextEnds(t *testing.T) {
	url, requests := scripted(t)
	c, err := New(Settings{Every: 50 * time.Millisecond, Timeout: 50 * time.Millisecond, DownAfter: 1}, []Target{{"a", url}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	time.Sleep(200 * time.Millisecond)
	cancel()
	c.Stop()
	// A request sent before the end may still be on its way.
	time.Sleep(50 * time.Millisecond)
	n := requests.Load()
	if n < 2 {
		t.Fatalf("%d checks in 4 periods", n)
	}
	time.Sleep(150 * time.Millisecond)
	if m := requests.Load(); m != n {
		t.Fatalf("%d checks after the context ended", m-n)
	}
}

// A target is up before its first check, since the seed counts an edge
// never checked as up, with Since when it was added; the times in Status
// are Options.Now's.
func TestStartsUp(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(clock.Load())) }
	url, _ := scripted(t, 500)
	w := newWatcher()
	o := w.options()
	o.Now = now
	c, err := New(Settings{Every: 50 * time.Millisecond, Timeout: 50 * time.Millisecond, DownAfter: 1}, []Target{{"a", url}}, o)
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	if st, ok := c.Status("a"); !ok || st != (Status{Up: true, Since: t0}) {
		t.Fatalf("before any check: %+v", st)
	}
	if _, ok := c.Status("b"); ok {
		t.Fatal("an unknown target has a status")
	}
	clock.Store(int64(time.Minute))
	c.Start(t.Context())
	t.Cleanup(c.Stop)
	e := w.next(t, "a")
	if e.st.Up || !e.st.LastCheck.Equal(t0.Add(time.Minute)) || !e.st.Since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after a failure: %+v", e.st)
	}
}

// New refuses what is not a plain-HTTP target, naming it, and timing out
// of range.
func TestNewRefuses(t *testing.T) {
	ok := Settings{Every: time.Second, Timeout: time.Second, DownAfter: 2}
	for _, tc := range []struct {
		s    Settings
		ts   []Target
		want string
	}{
		{ok, []Target{{"e", "https://edge.example/health"}}, `target "e"`},
		{ok, []Target{{"e", "HTTPS://edge.example/health"}}, `target "e"`},
		{ok, []Target{{"e", "http://user:pw@edge.example/health"}}, `target "e"`},
		{ok, []Target{{"e", "http:///health"}}, `target "e"`},
		{ok, []Target{{"e", "http:edge.example"}}, `target "e"`},
		{ok, []Target{{"e", "http://edge.example:0/"}}, `target "e"`},
		{ok, []Target{{"e", "http://edge.example:65536/"}}, `target "e"`},
		{ok, []Target{{"e", "http://edge.example/\r\nX: y"}}, `target "e"`},
		{ok, []Target{{"e", "edge.example/health"}}, `target "e"`},
		{ok, []Target{{"", "http://edge.example/"}}, "no name"},
		{ok, []Target{{"e", "http://a.example/"}, {"e", "http://b.example/"}}, `target "e"`},
		{Settings{Every: 0, Timeout: time.Second, DownAfter: 1}, nil, "period"},
		{Settings{Every: time.Second, Timeout: 2 * time.Second, DownAfter: 1}, nil, "timeout"},
		{Settings{Every: time.Second, Timeout: 0, DownAfter: 1}, nil, "timeout"},
		{Settings{Every: time.Second, Timeout: time.Second, DownAfter: 0}, nil, "down after"},
	} {
		_, err := New(tc.s, tc.ts, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %+v: %v, want an error with %s", tc.s, tc.ts, err, tc.want)
		}
	}
	c, err := New(ok, []Target{{"e", "http://[::1]:8080/health"}, {"f", "HTTP://edge.example"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := (*c.byName.Load())["f"]
	if r.wire.addr != "edge.example:80" || !strings.HasPrefix(string(r.wire.request), "GET / HTTP/1.1\r\nHost: edge.example\r\n") {
		t.Fatalf("wire %q %q", r.wire.addr, r.wire.request)
	}
}

// Update's settings apply to a kept target at once: a target checked every
// 5 s is checked again within a new period of 200 ms, not after the old
// one, and by the new DownAfter.
func TestUpdateSettings(t *testing.T) {
	url, _ := scripted(t, 500, 500, 500)
	w := newWatcher()
	c := w.start(t, Settings{Every: 5 * time.Second, Timeout: time.Second, DownAfter: 3}, []Target{{"a", url}}, w.options())
	if e := w.next(t, "a"); !e.st.Up || e.st.Failures != 1 {
		t.Fatalf("first check: %+v", e.st)
	}
	t0 := time.Now()
	if err := c.Update(patient(2), []Target{{"a", url}}); err != nil {
		t.Fatal(err)
	}
	e := w.next(t, "a")
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("checked %v after the update", d)
	}
	if e.st.Up || e.st.Failures != 2 {
		t.Fatalf("second failure under down after 2: %+v", e.st)
	}
}
