package health

// The checker's life: start, update, stop, and what New refuses.

import (
	"bufio"
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

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
