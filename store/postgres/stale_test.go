package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// steerErr is one Steer of s on a quiet table, its error, how long it
// took and the instant it was given.
func steerErr(l *Loads, ctx context.Context, room sig.Hash, s report.Session) (error, time.Duration, uint64) {
	start := time.Now()
	var at uint64
	err := l.Steer(ctx, room, 3, s, 1000, func(_ []uint32, a uint64) (int, uint64, error) { at = a; return 0, 1 << 40, nil })
	return err, time.Since(start), at
}

// The bound δ across servers (SPEC-NOTES, "Issue 31": a decision's loads
// count every session another server steered more than 200 ms before it)
// is held by Steer: it waits while its table's last follow began more than
// 100 ms ago, or while a decision of its own Steers has waited more than 100 ms
// for its commit, until a follow or the commit makes it current; it refuses after a
// second, and at once while the database is down. The follower and the
// commits are driven by hand here (a quiet table), so that each wait is
// the test's to end.
func TestSteerHoldsTheBound(t *testing.T) {
	ctx := bg(t)
	st, _ := open(t)
	l := quietLoads(st)
	room := sig.Digest([]byte("room"))
	f, err := l.restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.following.Store(true)

	// Current: no wait.
	err, took, at := steerErr(l, ctx, room, report.Session{1})
	if err != nil || took > staleBound/2 {
		t.Fatalf("a Steer on a current table: %v after %s", err, took)
	}
	l.Unsteer(room, report.Session{1}, at)

	// The follow began 150 ms ago: the Steer waits for the next, which
	// the test makes 200 ms later.
	l.followed.Store(time.Now().Add(-150 * time.Millisecond).UnixNano())
	go func() {
		time.Sleep(200 * time.Millisecond)
		l.follow(context.Background(), f)
	}()
	err, took, _ = steerErr(l, ctx, room, report.Session{2})
	if err != nil || took < 150*time.Millisecond || took > staleWait/2 {
		t.Fatalf("a Steer on a table followed 150 ms ago: %v after %s, want a wait for the next follow (200 ms)", err, took)
	}
	if age := time.Since(time.Unix(0, l.followed.Load())); age > staleBound+took {
		t.Fatalf("the Steer went on with a follow begun %s ago", age)
	}
	if l.waited.Load() != 1 {
		t.Fatalf("waits %d, want 1", l.waited.Load())
	}

	// A Steer of this server's whose decision has waited 150 ms for its
	// commit (s2's): the next waits for the commit, 200 ms later.
	l.followed.Store(time.Now().UnixNano() + int64(time.Hour)) // the follower is not in question
	l.mu.Lock()
	var d2 store.Decision
	for k, e := range l.made {
		e.since = time.Now().Add(-150 * time.Millisecond).UnixNano()
		l.made[k], l.oldest = e, e.since
		d2 = decisionOf(k.room, k.session, k.t)
	}
	l.mu.Unlock()
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, ev := benchDecisions(1, 0)
		st.PutDecisions(context.Background(), []store.Evidence{ev}, []store.Decision{d2})
	}()
	err, took, _ = steerErr(l, ctx, room, report.Session{3})
	if err != nil || took < 150*time.Millisecond || took > staleWait/2 {
		t.Fatalf("a Steer while a decision waits 150 ms for its commit: %v after %s, want a wait for the commit (200 ms)", err, took)
	}
	if rows := entriesOf(t, st, room, report.Session{2}); len(rows) != 1 || rows[0] == "-@"+itoa(d2.T) {
		t.Fatalf("s2's decisions %q once the Steer went on, want 1 with its entry", rows)
	}

	// Nobody follows: refused after staleWait, 503 (errStale).
	l.followed.Store(time.Now().Add(-time.Second).UnixNano())
	err, took, _ = steerErr(l, ctx, room, report.Session{4})
	if !errors.Is(err, errStale) || took < staleWait || took > 2*staleWait {
		t.Fatalf("a Steer nobody makes current: %v after %s, want errStale after %s", err, took, staleWait)
	}
	// The database down: refused at once.
	st.health.up.Store(false)
	err, took, _ = steerErr(l, ctx, room, report.Session{5})
	st.health.up.Store(true)
	if !errors.Is(err, errStale) || took > staleBound {
		t.Fatalf("a Steer with the database down: %v after %s, want errStale at once", err, took)
	}
	if l.refused.Load() != 2 || l.waited.Load() != 3 {
		t.Fatalf("refused %d, waited %d; want 2 and 3", l.refused.Load(), l.waited.Load())
	}
}
