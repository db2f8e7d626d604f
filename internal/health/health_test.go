package health

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
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
