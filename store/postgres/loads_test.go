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

// steerTo steers s to first until expires (of 3 pathways) at now on l,
// and stores the decision on l's store, as a server does: the other
// servers read the session with it (schema 6). It returns the loads the
// decision was made from.
func steerTo(t *testing.T, l *Loads, room sig.Hash, s report.Session, now uint64, first int, expires uint64) []uint32 {
	t.Helper()
	var seen []uint32
	var at uint64
	if err := l.Steer(bg(t), room, 3, s, now, func(loads []uint32, a uint64) (int, uint64, error) {
		seen, at = slices.Clone(loads), a
		return first, expires, nil
	}); err != nil {
		t.Fatal(err)
	}
	putSteered(t, l.st, room, s, at)
	return seen
}

// putSteered stores a decision of s at t in room, of 3 pathways, as the
// committer of a server does.
func putSteered(t *testing.T, st *Store, room sig.Hash, s report.Session, at uint64) store.Decision {
	t.Helper()
	d := decisionOf(room, s, at)
	_, ev := benchDecisions(1, 0)
	if err := st.PutDecisions(bg(t), []store.Evidence{ev}, []store.Decision{d}); err != nil {
		t.Fatal(err)
	}
	return d
}

// decisionOf is a decision of s at t in room, of 3 pathways, its digest
// its own.
func decisionOf(room sig.Hash, s report.Session, at uint64) store.Decision {
	ds, _ := benchDecisions(1, 0)
	d := ds[0]
	d.Room, d.Session, d.T = room, s, at
	d.Digest = sig.Digest(append(append(room[:], s[:]...), byte(at), byte(at>>8), byte(at>>16), byte(at>>24), byte(at>>32)))
	copy(d.Sig[:], d.Digest[:])
	return d
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

// TestLoadsStartUpBesideSteering (issue 31, "start-up within 1 s whatever
// the number of live sessions; the recount beside steering, as bbolt
// does"): with 300 000 live sessions of other servers in the shared table,
// NewLoads returns within a second; the sessions are counted after
// (Restored), 100 000 on each pathway as written (first = i mod 3), and a
// decision made before they are counted is not lost: it counts too.
func TestLoadsStartUpBesideSteering(t *testing.T) {
	st, _ := open(t)
	ctx := bg(t)
	room := sig.Digest([]byte("room"))
	const live = 300_000
	// Written as another server (writer 0 is no opening's) writes them:
	// expires and t as i64 writes them (the top bit flipped).
	if _, err := st.pool.Exec(ctx, `INSERT INTO waisteer.steers (seq, writer, room, session, n, first, expires, t)
		SELECT nextval('waisteer.feed'), 0, $1, decode(lpad(to_hex(g), 32, '0'), 'hex'), 3, g % 3, $2, $3
		FROM generate_series(1, $4) AS g`, room[:], i64(1_000_000), i64(100), live); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l := newLoads(t, st)
	took := time.Since(start)
	t.Logf("NewLoads with %d live sessions in the table: %v", live, took)
	if took > time.Second {
		t.Errorf("NewLoads took %v with %d live sessions, more than a second", took, live)
	}
	// Beside, not before: reading 300 000 rows takes longer than NewLoads
	// took (0.6 s alone on the machine of issue 31, 2 s under -race).
	select {
	case <-l.Restored():
		t.Errorf("the live sessions were counted before NewLoads returned (%v)", took)
	default:
	}
	// A decision at once, before the count: it is this server's, and
	// counts whatever the count finds.
	steerTo(t, l, room, report.Session{0xff, 1}, 200, 2, 1_000_000)
	select {
	case <-l.Restored():
	case <-time.After(90 * time.Second):
		t.Fatal("the live sessions were not counted within 90 s")
	}
	t.Logf("counted after %v", time.Since(start))
	got, err := l.Snapshot(ctx, room, 3, 300)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{live / 3, live / 3, live/3 + 1}; !slices.Equal(got, want) {
		t.Fatalf("loads %v after the count, want %v", got, want)
	}
}
