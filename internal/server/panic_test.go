package server

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/scenario"
)

// Issue 26, "a panic in any background loop is a test failure, never a
// silent exit": each loop's unit of work runs under guard, which recovers
// a panic, logs it at ERROR with its stack and counts it
// (waisteer_background_panics_total{loop}); the loop goes on. A route's
// panic ends its request, on either engine, and the server goes on.

// metric reads one sample of the server's metrics, -1 when it has none.
func metric(t *testing.T, e *poolEnv, name string) int {
	t.Helper()
	_, b := e.do("GET", "/metrics", "", nil)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestTickPanicGoesOn: a tick of the server's loops (the QoE evaluation,
// the pruner, the sweep, the dashboard's samples run under every) that
// panics is recovered, logged with its stack and counted, and the next
// ticks run.
func TestTickPanicGoesOn(t *testing.T) {
	e := newPoolEnv(t, testToken, seedPool(nil, nil))
	name := `waisteer_background_panics_total{loop="test-tick"}`
	before := max(metric(t, e, name), 0)
	expectPanics(3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs, done := 0, make(chan struct{})
	go func() {
		defer close(done)
		e.srv.every(ctx, "test-tick", time.Millisecond, func(context.Context) {
			if runs++; runs <= 3 {
				var m map[string]int
				m["tick"]++
			}
			if runs == 5 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the loop ran %d ticks in 5 s", runs)
	}
	if got := metric(t, e, name); got != before+3 {
		t.Errorf("%s %d, want %d", name, got, before+3)
	}
	if l := e.logs.String(); strings.Count(l, "loop=test-tick") != 3 || !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "panic_test.go") {
		t.Errorf("the log:\n%s", l)
	}
}

// TestCommitterPanic: a store whose group write panics fails that group as
// a store's error does: its request is answered 503 store_unavailable with
// Retry-After (never left waiting), the server is not ready, and the
// committer writes the next group.
func TestCommitterPanic(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	before := guard.Counts()["committer"]
	expectPanics(1)
	e.st.panicDecisions.Store(true)
	resp, b := e.get("/v1/steer")
	wantError(t, "a steering request whose group panicked", resp, b, http.StatusServiceUnavailable, string(api.StoreUnavailable))
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After")
	}
	if resp, b := e.get("/readyz"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the failed group: %d %s", resp.StatusCode, b)
	}
	if got := guard.Counts()["committer"] - before; got != 1 {
		t.Errorf("%d panics counted under committer, want 1", got)
	}
	e.st.panicDecisions.Store(false)
	m := e.steer("/v1/steer", nil)
	e.audit(m)
	if resp, b := e.get("/readyz"); resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz after: %d %s", resp.StatusCode, b)
	}
}

// TestRoutePanic: a route that panics (here the store's read of a record)
// ends its request, the connection closed with no answer as net/http
// does, on either engine; it is counted (waisteer_request_panics_total)
// and logged; the server answers the next request.
func TestRoutePanic(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	target := e.ts.URL + "/v1/records/" + evidence.NamedDigest(e.sc.Records[0]).String()
	before := guard.Counts()["request"]
	expectPanics(1)
	e.st.panicRecord.Store(true)
	// A connection of its own: net/http's client sends a GET again once
	// when a connection it reused closes with no answer.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := client.Get(target); err == nil {
		resp.Body.Close()
		t.Fatalf("a route that panicked answered %s", resp.Status)
	}
	if got := guard.Counts()["request"] - before; got != 1 {
		t.Errorf("%d panics counted under request, want 1", got)
	}
	e.st.panicRecord.Store(false)
	if got := e.fetch(strings.TrimPrefix(target, e.ts.URL)); string(got) != string(e.sc.Records[0]) {
		t.Errorf("the record after: %x", got)
	}
	_, b := e.get("/metrics")
	if want := fmt.Sprintf("waisteer_request_panics_total %d\n", before+1); !strings.Contains(string(b), want) {
		t.Errorf("metrics without %q", want)
	}
}
