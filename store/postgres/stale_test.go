package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

// steerErr is one Steer of s on a quiet table, its error and how long it
// took.
func steerErr(l *Loads, ctx context.Context, room sig.Hash, s report.Session) (error, time.Duration) {
	start := time.Now()
	err := l.Steer(ctx, room, 3, s, 1000, func(_ []uint32, _ uint64) (int, uint64, error) { return 0, 1 << 40, nil })
	return err, time.Since(start)
}

// The bound δ across servers (SPEC-NOTES, "Issue 31": a decision's loads
// count every session another server steered more than 200 ms before it)
// is held by Steer: it waits while its table's last follow began more than
// 100 ms ago, or while a row of its own has waited more than 100 ms to be
// written, until a follow or a flush makes it current; it refuses after a
// second, and at once while the database is down. The follower and the
// flusher are driven by hand here (a quiet table), so that each wait is
// the test's to end.
func TestSteerHoldsTheBound(t *testing.T) {
	ctx := bg(t)
	st, _ := open(t)
	l := quietLoads(st)
	room := sig.Digest([]byte("room"))
	at, err := l.follow(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.following.Store(true)

	// Current: no wait.
	if err, took := steerErr(l, ctx, room, report.Session{1}); err != nil || took > staleBound/2 {
		t.Fatalf("a Steer on a current table: %v after %s", err, took)
	}
	if err := l.flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The follow began 150 ms ago: the Steer waits for the next, which
	// the test makes 200 ms later.
	l.followed.Store(time.Now().Add(-150 * time.Millisecond).UnixNano())
	go func() {
		time.Sleep(200 * time.Millisecond)
		at, _ = l.follow(context.Background(), at)
	}()
	err, took := steerErr(l, ctx, room, report.Session{2})
	if err != nil || took < 150*time.Millisecond || took > staleWait/2 {
		t.Fatalf("a Steer on a table followed 150 ms ago: %v after %s, want a wait for the next follow (200 ms)", err, took)
	}
	if age := time.Since(time.Unix(0, l.followed.Load())); age > staleBound+took {
		t.Fatalf("the Steer went on with a follow begun %s ago", age)
	}
	if l.waited.Load() != 1 {
		t.Fatalf("waits %d, want 1", l.waited.Load())
	}

	// A row of this server's pending for 150 ms (s2's, written by no
	// flush yet): the Steer waits for the flush, 200 ms later.
	l.followed.Store(time.Now().UnixNano() + int64(time.Hour)) // the follower is not in question
	l.mu.Lock()
	l.pendingSince = time.Now().Add(-150 * time.Millisecond).UnixNano()
	l.mu.Unlock()
	go func() {
		time.Sleep(200 * time.Millisecond)
		l.flush(context.Background())
	}()
	err, took = steerErr(l, ctx, room, report.Session{3})
	if err != nil || took < 150*time.Millisecond || took > staleWait/2 {
		t.Fatalf("a Steer while a row waits 150 ms: %v after %s, want a wait for the flush (200 ms)", err, took)
	}
	if rows := rowsOf(t, st, report.Session{2}); len(rows) != 1 {
		t.Fatalf("s2's rows %q once the Steer went on, want 1", rows)
	}

	// Nobody follows: refused after staleWait, 503 (errStale).
	l.followed.Store(time.Now().Add(-time.Second).UnixNano())
	err, took = steerErr(l, ctx, room, report.Session{4})
	if !errors.Is(err, errStale) || took < staleWait || took > 2*staleWait {
		t.Fatalf("a Steer nobody makes current: %v after %s, want errStale after %s", err, took, staleWait)
	}
	// The database down: refused at once.
	st.health.up.Store(false)
	err, took = steerErr(l, ctx, room, report.Session{5})
	st.health.up.Store(true)
	if !errors.Is(err, errStale) || took > staleBound {
		t.Fatalf("a Steer with the database down: %v after %s, want errStale at once", err, took)
	}
	if l.refused.Load() != 2 || l.waited.Load() != 3 {
		t.Fatalf("refused %d, waited %d; want 2 and 3", l.refused.Load(), l.waited.Load())
	}
}
