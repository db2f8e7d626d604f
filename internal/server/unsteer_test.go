package server

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/verify/audit"
)

// TestSteerCommitFailsLoadsAsBefore (§6, issue 31's outage must-show: a
// request answered 503 stored no decision): the loads a decision states
// are the live sessions' latest stored decisions, so a steering request
// whose commit fails leaves the table of loads as it was. New sessions
// refused count nowhere, and a stored session's refused re-steer leaves it
// where its stored decision put it, until that decision's expiry (its t,
// its TTL and the grace, §6 and §9.2), not the refused one's. Before the
// undo (Loads.Unsteer) every refused request counted for TTL and grace.
func TestSteerCommitFailsLoadsAsBefore(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	ctx := context.Background()
	room := e.sc.Room.ID()
	m1, m2 := e.steer("/v1/steer", nil), e.steer("/v1/steer", nil)
	n := len(m1.Priority)
	before, err := e.loads.Snapshot(ctx, room, n, t0)
	if err != nil {
		t.Fatal(err)
	}
	if sessionsIn(before) != 2 {
		t.Fatalf("loads %v after two stored decisions, want two sessions", before)
	}

	e.st.failDecisions.Store(true)
	for range 20 {
		resp, b := e.get("/v1/steer")
		wantError(t, "steer", resp, b, http.StatusServiceUnavailable, "store_unavailable")
	}
	resp, b := e.get(path(t, m1.Reload))
	wantError(t, "the first session again", resp, b, http.StatusServiceUnavailable, "store_unavailable")
	e.st.failDecisions.Store(false)

	after, err := e.loads.Snapshot(ctx, room, n, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, before) {
		t.Errorf("loads %v after 21 refused requests, want %v as before them", after, before)
	}
	if got := e.loads.Sessions(room); got != 2 {
		t.Errorf("%d sessions held after the refusals, want the 2 stored", got)
	}

	// The first session expires at its stored decision's expiry: one µs
	// after it, the second session alone counts (it was decided later,
	// with the same TTL).
	grace := uint64(DefaultSessionGrace / time.Microsecond)
	expiry := func(m *manifest) uint64 {
		d, err := sig.ParseHash(m.Decision[len(m.Decision)-64:])
		if err != nil {
			t.Fatal(err)
		}
		sd, err := e.mem.Decision(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return sd.T + uint64(m.TTL)*1_000_000 + grace
	}
	e1, e2 := expiry(m1), expiry(m2)
	if e2 <= e1 {
		t.Fatalf("the second session expires at %d, not after the first's %d", e2, e1)
	}
	if got, _ := e.loads.Snapshot(ctx, room, n, e1); sessionsIn(got) != 2 {
		t.Errorf("loads %v at the first session's expiry, want both sessions", got)
	}
	if got, _ := e.loads.Snapshot(ctx, room, n, e1+1); sessionsIn(got) != 1 {
		t.Errorf("loads %v one µs after the first session's stored expiry, want the second session alone", got)
	}
}

func sessionsIn(loads []uint32) (s uint32) {
	for _, l := range loads {
		s += l
	}
	return s
}

// TestSteerCountingAFailedDecision (§6, §9.2; SPEC-NOTES "A decision that
// counted one not stored is not stored"): a request decided while an
// earlier decision's group was being written counted that decision's
// session; when the group fails, the session was never stored, so the
// later decision's stated loads are not the recount's, and it is refused
// too, though the store would take its group. On e3c4c5c it was stored
// and answered, and the audit found its loads one session over.
func TestSteerCountingAFailedDecision(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	ctx := context.Background()
	room := e.sc.Room.ID()
	n := len(e.steer("/v1/steer", nil).Priority)
	count := func() uint32 {
		got, err := e.loads.Snapshot(ctx, room, n, t0)
		if err != nil {
			t.Fatal(err)
		}
		return sessionsIn(got)
	}
	held := make(chan struct{})
	e.st.failHeld.Store(&held)
	get := func(out chan<- int) {
		resp, err := e.ts.Client().Get(e.ts.URL + "/v1/steer")
		if err != nil {
			out <- 0
			return
		}
		resp.Body.Close()
		out <- resp.StatusCode
	}
	first, second := make(chan int, 1), make(chan int, 1)
	go get(first)
	within(t, 5*time.Second, "the first request's group held", func() bool { return e.st.held.Load() == 1 })
	go get(second)
	// The second is decided, counting the first's session, while the
	// first's group is held.
	within(t, 5*time.Second, "the second request counted", func() bool { return count() == 3 })
	close(held)
	if a, b := <-first, <-second; a != http.StatusServiceUnavailable || b != http.StatusServiceUnavailable {
		t.Errorf("the failed group's request answered %d, the one that counted it %d; want 503 and 503", a, b)
	}
	if got := count(); got != 1 {
		t.Errorf("%d sessions counted after the two refusals, want the one stored", got)
	}
	e.steer("/v1/steer", nil)
	rep, err := audit.Run(ctx, client.New(), e.ts.URL, room, audit.Options{Workers: 4})
	if err != nil || !rep.OK() || rep.Fetched != 2 {
		t.Errorf("the audit: want its 2 decisions' claims to hold: %v\n%v", err, rep)
	}
}
