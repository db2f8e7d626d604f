package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

func newLoads(t *testing.T, st *Store) *Loads {
	t.Helper()
	l, err := NewLoads(bg(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func steerTo(t *testing.T, l store.Loads, room sig.Hash, s report.Session, now uint64, first int, expires uint64) []uint32 {
	t.Helper()
	var seen []uint32
	if err := l.Steer(bg(t), room, 3, s, now, func(loads []uint32, _ uint64) (int, uint64, error) {
		seen = slices.Clone(loads)
		return first, expires, nil
	}); err != nil {
		t.Fatal(err)
	}
	return seen
}

// eventually waits up to d for l's loads at now to be want, and returns
// how long it took.
func eventually(t *testing.T, l store.Loads, room sig.Hash, now uint64, want []uint32, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got, err := l.Snapshot(bg(t), room, 3, now)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got, want) {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("loads %v after %v, want %v", got, d, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Issue 15 item 3 (§6): each server's sessions count in every server's
// loads, a session once, on the pathway its latest decision put first,
// whichever server made it; a server started later finds the live ones.
func TestSharedLoads(t *testing.T) {
	sa, dsn := open(t)
	sb, err := Open(bg(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	a, b := newLoads(t, sa), newLoads(t, sb)
	room := sig.Digest([]byte("room"))
	s1, s2 := report.Session{1}, report.Session{2}

	steerTo(t, a, room, s1, 1000, 0, 5000)
	took := eventually(t, b, room, 1000, []uint32{1, 0, 0}, 2*time.Second)
	t.Logf("a session steered on one server counted on the other after %v", took)
	// The session moves, by a decision of the other server: it counts on
	// its new pathway alone, on both.
	if got := steerTo(t, b, room, s1, 2000, 1, 6000); !slices.Equal(got, []uint32{1, 0, 0}) {
		t.Fatalf("b decided from %v, want a's session counted [1 0 0]", got)
	}
	eventually(t, a, room, 2000, []uint32{0, 1, 0}, 2*time.Second)
	eventually(t, b, room, 2000, []uint32{0, 1, 0}, 2*time.Second)
	steerTo(t, a, room, s2, 2500, 2, 3000)
	eventually(t, b, room, 2500, []uint32{0, 1, 1}, 2*time.Second)

	// A third server, started now, counts the live sessions.
	sc, err := Open(bg(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := newLoads(t, sc)
	eventually(t, c, room, 2500, []uint32{0, 1, 1}, time.Second)
	// And expiry holds as in one server's table: s2 until 3000.
	eventually(t, c, room, 3001, []uint32{0, 1, 0}, time.Second)
}
