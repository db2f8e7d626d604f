package postgres

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// quietLoads is a Loads that writes only when the test calls flush, and
// never reads: the test decides whether an undo finds its row pending or
// written.
func quietLoads(st *Store) *Loads {
	return &Loads{st: st, local: store.NewLoads(), log: slog.Default(), restored: make(chan struct{})}
}

// steerAt steers s to first until expires (of 3 pathways) at now, and
// returns the instant decide was given.
func steerAt(t *testing.T, l store.Loads, room sig.Hash, s report.Session, now uint64, first int, expires uint64) uint64 {
	t.Helper()
	var at uint64
	if err := l.Steer(bg(t), room, 3, s, now, func(_ []uint32, a uint64) (int, uint64, error) {
		at = a
		return first, expires, nil
	}); err != nil {
		t.Fatal(err)
	}
	return at
}

// rowsOf is the session's rows in waisteer.steers, in order, each as
// "first@t until expires".
func rowsOf(t *testing.T, st *Store, s report.Session) []string {
	t.Helper()
	rows, err := st.pool.Query(bg(t), "SELECT first, t, expires FROM waisteer.steers WHERE session = $1 ORDER BY seq", s[:])
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var first int16
		var ts, expires int64
		if err := rows.Scan(&first, &ts, &expires); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d@%d until %d", first, u64(ts), u64(expires)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantRows(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: rows %q, want %q", what, got, want)
	}
}

// TestUnsteerShared (issue 31's outage must-show; §6: a session counts
// from a decision that was stored). A Steer taken back before its row is
// written leaves no row, and the other servers never count it; one taken
// back after leaves the row deleted (a server started later never reads
// it) and a row one µs later that the others take as the session's latest:
// the entry before restored, or an expiry already past that drops it. The
// rows and loads are worked by hand.
func TestUnsteerShared(t *testing.T) {
	sa, dsn := open(t)
	sb, err := Open(bg(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	a, b := quietLoads(sa), newLoads(t, sb)
	room := sig.Digest([]byte("room"))
	s1, s2, s3, s4 := report.Session{1}, report.Session{2}, report.Session{3}, report.Session{4}
	flush := func() {
		t.Helper()
		if err := a.flush(bg(t)); err != nil {
			t.Fatal(err)
		}
	}

	// Before the flush: s1 stays, s2 (new) and s1's re-steer are taken
	// back; their rows are never written.
	steerAt(t, a, room, s1, 1000, 0, 5000)
	at2 := steerAt(t, a, room, s2, 1000, 1, 5000)
	at1 := steerAt(t, a, room, s1, 1000, 2, 5000)
	if u := a.Unsteer(room, s2, at2); !u.Done || u.Had {
		t.Errorf("the undo of s2: %+v", u)
	}
	if u := a.Unsteer(room, s1, at1); !u.Done || !u.Had || u.Prev.First != 0 {
		t.Errorf("the undo of s1's re-steer: %+v", u)
	}
	flush()
	wantRows(t, "s1", rowsOf(t, sa, s1), "0@1000 until 5000")
	wantRows(t, "s2", rowsOf(t, sa, s2))
	// One flush wrote s1's row alone: once b counts s1, it has read it.
	eventually(t, b, room, 1000, []uint32{1, 0, 0}, 2*time.Second)

	// After the flush: s3 (new) written, then taken back.
	at3 := steerAt(t, a, room, s3, 1000, 2, 5000)
	flush()
	eventually(t, b, room, 1000, []uint32{1, 0, 1}, 2*time.Second)
	if u := a.Unsteer(room, s3, at3); !u.Done || u.Had {
		t.Errorf("the undo of s3: %+v", u)
	}
	flush()
	wantRows(t, "s3", rowsOf(t, sa, s3), fmt.Sprintf("0@%d until 0", at3+1))
	eventually(t, b, room, 1000, []uint32{1, 0, 0}, 2*time.Second)

	// s1 re-steered to 1, written, then taken back: its row at 1000
	// until 5000 is restored, for b by the row one µs later.
	at1 = steerAt(t, a, room, s1, 1000, 1, 6000)
	flush()
	eventually(t, b, room, 1000, []uint32{0, 1, 0}, 2*time.Second)
	if u := a.Unsteer(room, s1, at1); !u.Done || !u.Had || u.Prev != (store.LoadEntry{First: 0, T: 1000, Expires: 5000}) {
		t.Errorf("the undo of s1's written re-steer: %+v", u)
	}
	flush()
	wantRows(t, "s1 restored", rowsOf(t, sa, s1), "0@1000 until 5000", fmt.Sprintf("0@%d until 5000", at1+1))
	eventually(t, b, room, 1000, []uint32{1, 0, 0}, 2*time.Second)

	// A flush that fails after taking s4's row: the undo, meanwhile,
	// finds it neither pending nor written; the flush retried writes the
	// row and its undo in one batch, and the row is deleted after.
	at4 := steerAt(t, a, room, s4, 1000, 2, 5000)
	a.mu.Lock()
	batch := a.pending
	a.pending = nil
	a.mu.Unlock()
	if u := a.Unsteer(room, s4, at4); !u.Done {
		t.Errorf("the undo of s4: %+v", u)
	}
	a.mu.Lock()
	a.pending = append(batch, a.pending...)
	a.mu.Unlock()
	flush()
	wantRows(t, "s4", rowsOf(t, sa, s4), fmt.Sprintf("0@%d until 0", at4+1))

	// A server started now counts s1 alone, as a and b do.
	sc, err := Open(bg(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := newLoads(t, sc)
	<-c.Restored()
	eventually(t, c, room, 1000, []uint32{1, 0, 0}, time.Second)
	eventually(t, b, room, 1000, []uint32{1, 0, 0}, time.Second)
	eventually(t, a, room, 1000, []uint32{1, 0, 0}, time.Second)
}
