package postgres

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// quietLoads is a Loads on st that never reads the others' decisions by
// itself: the test calls restore and follow. Its store writes its Steers'
// entries with their decisions, as NewLoads's does.
func quietLoads(st *Store) *Loads {
	l := &Loads{st: st, local: store.NewLoads(), log: slog.Default(), restored: make(chan struct{})}
	st.mu.Lock()
	st.loads = l
	st.mu.Unlock()
	return l
}

// steerAt steers s to first until expires (of 3 pathways) at now, and
// returns the instant decide was given; nothing is stored.
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

// entriesOf is the session's decisions in waisteer.decisions, in t order,
// each as "first@t until ends", "-@t" for one without an entry.
func entriesOf(t *testing.T, st *Store, room sig.Hash, s report.Session) []string {
	t.Helper()
	rows, err := st.pool.Query(bg(t), "SELECT t, first, ends, row FROM waisteer.decisions ORDER BY t")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var tt int64
		var first *int16
		var ends *int64
		var row []byte
		if err := rows.Scan(&tt, &first, &ends, &row); err != nil {
			t.Fatal(err)
		}
		var d store.Decision
		if err := store.ParseDecisionRow(row, &d); err != nil {
			t.Fatal(err)
		}
		if d.Session != s {
			continue
		}
		if first == nil || ends == nil {
			out = append(out, "-@"+itoa(u64(tt)))
			continue
		}
		out = append(out, itoa(uint64(*first))+"@"+itoa(u64(tt))+" until "+itoa(u64(*ends)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func itoa(u uint64) string { return string(appendUint(nil, u)) }

func appendUint(b []byte, u uint64) []byte {
	if u >= 10 {
		b = appendUint(b, u/10)
	}
	return append(b, byte('0'+u%10))
}

func wantRows(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: rows %q, want %q", what, got, want)
	}
}

// TestUnsteerShared (issue 31's outage must-show; §6: a session counts
// from its latest stored decision). A session reaches the other servers
// with its decision (schema 6): a Steer whose decision is stored is
// counted by the others, on the pathway it put first until its expiry, as
// the decision's row says; one taken back (Unsteer, its decision not
// stored) is counted nowhere, and nothing of it is written; a decision
// stored without a Steer (no table steered it) counts nowhere either. A
// server started later counts what the others count. The rows and loads
// are worked by hand.
func TestUnsteerShared(t *testing.T) {
	sa, dsn := open(t)
	sb, err := Open(bg(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	a, b := quietLoads(sa), newLoads(t, sb)
	<-b.Restored()
	room := sig.Digest([]byte("room"))
	s1, s2, s3, s4 := report.Session{1}, report.Session{2}, report.Session{3}, report.Session{4}

	// s1 stored: b counts it on pathway 0.
	at1 := steerAt(t, a, room, s1, 1000, 0, 5000)
	putSteered(t, sa, room, s1, at1)
	wantRows(t, "s1", entriesOf(t, sa, room, s1), "0@"+itoa(at1)+" until 5000")
	eventually(t, b, room, 1000, []uint32{1, 0, 0}, 2*time.Second)

	// s2 steered and taken back (its decision not stored): counted
	// nowhere. s3, stored after it, shows b has read past it.
	at2 := steerAt(t, a, room, s2, 1000, 1, 5000)
	if u := a.Unsteer(room, s2, at2); !u.Done || u.Had {
		t.Errorf("the undo of s2: %+v", u)
	}
	at3 := steerAt(t, a, room, s3, 1000, 2, 5000)
	putSteered(t, sa, room, s3, at3)
	eventually(t, b, room, 1000, []uint32{1, 0, 1}, 2*time.Second)
	if got, _ := a.Snapshot(bg(t), room, 3, 1000); !slices.Equal(got, []uint32{1, 0, 1}) {
		t.Errorf("a's loads %v, want [1 0 1]: s2 taken back", got)
	}
	wantRows(t, "s2", entriesOf(t, sa, room, s2))

	// s1 re-steered to 1 and taken back: its entry before (0 until 5000)
	// stays here and there; nothing is written.
	at1b := steerAt(t, a, room, s1, 1000, 1, 6000)
	if u := a.Unsteer(room, s1, at1b); !u.Done || !u.Had || u.Prev != (store.LoadEntry{First: 0, T: at1, Expires: 5000}) {
		t.Errorf("the undo of s1's re-steer: %+v", u)
	}
	wantRows(t, "s1 after the undo", entriesOf(t, sa, room, s1), "0@"+itoa(at1)+" until 5000")

	// A decision stored that no table steered (s4): its row has no
	// entry, and nobody counts it.
	putSteered(t, sa, room, s4, 1500)
	wantRows(t, "s4", entriesOf(t, sa, room, s4), "-@1500")

	// s1 moved to 1 by b, stored: a counts it there once it follows.
	steerTo(t, b, room, s1, 2000, 1, 7000)
	f, err := a.restore(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.follow(bg(t), f); err != nil {
		t.Fatal(err)
	}
	eventually(t, a, room, 2000, []uint32{0, 1, 1}, time.Second)
	eventually(t, b, room, 2000, []uint32{0, 1, 1}, 2*time.Second)

	// A server started now counts s1 on 1 and s3 on 2, as a and b do.
	sc, err := Open(bg(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := newLoads(t, sc)
	<-c.Restored()
	eventually(t, c, room, 2000, []uint32{0, 1, 1}, time.Second)
	// And expiry holds: s3 until 5000, s1 until 7000.
	eventually(t, c, room, 5001, []uint32{0, 1, 0}, time.Second)

	// Nothing of a's Steers is left waiting for a commit.
	a.mu.Lock()
	left := len(a.made)
	a.mu.Unlock()
	if left != 0 {
		t.Errorf("%d Steers left uncommitted, want 0", left)
	}
}

// A log whose id was taken before another's but committed after it is
// read all the same (Loads.follow): ids are no guide to the order logs
// become visible in. Here log P takes its id first and commits last, with
// a decision of session s; a follow between the two commits sees only Q.
// The follow after P's commit counts s, on the pathway its row says.
func TestFollowReadsALogCommittedLate(t *testing.T) {
	ctx := bg(t)
	sa, dsn := open(t)
	sb, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	a, b := quietLoads(sa), quietLoads(sb)
	room, other := sig.Digest([]byte("room")), sig.Digest([]byte("another room"))
	s := report.Session{7}
	// A steered decision of a's, whose row is the template of P's.
	at := steerAt(t, a, other, s, 1000, 2, 9000)
	d := putSteered(t, sa, other, s, at)
	f, err := b.restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// P and Q: two servers' logs of room, of instances of their own.
	var ip, iq int32
	for _, id := range []*int32{&ip, &iq} {
		if err := sa.pool.QueryRow(ctx, "INSERT INTO waisteer.instances (host, pid) VALUES ('elsewhere', 1) RETURNING id").Scan(id); err != nil {
			t.Fatal(err)
		}
	}
	txP, err := sa.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txP.Rollback(ctx)
	var p, q int32
	if err := txP.QueryRow(ctx, "INSERT INTO waisteer.logs (room, writer, n) VALUES ($1, $2, 90) RETURNING id", room[:], ip).Scan(&p); err != nil {
		t.Fatal(err)
	}
	if err := sa.pool.QueryRow(ctx, "INSERT INTO waisteer.logs (room, writer, n) VALUES ($1, $2, 91) RETURNING id", room[:], iq).Scan(&q); err != nil {
		t.Fatal(err)
	}
	if p >= q {
		t.Fatalf("log ids %d and %d: the test needs P's below Q's", p, q)
	}
	if err := b.follow(ctx, f); err != nil {
		t.Fatal(err)
	}
	fresh := sig.Digest([]byte("P's decision"))
	if _, err := txP.Exec(ctx, `INSERT INTO waisteer.decisions (t, snapshot, idx, context, log, digest, row, first, ends)
		SELECT t, snapshot, 0, context, $2, $3, row, first, ends FROM waisteer.decisions WHERE digest = $1`, d.Digest[:], p, fresh[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := txP.Exec(ctx, "UPDATE waisteer.logs SET size = 1 WHERE id = $1", p); err != nil {
		t.Fatal(err)
	}
	if err := txP.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.follow(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Snapshot(ctx, room, 3, 1000); !slices.Equal(got, []uint32{0, 0, 1}) {
		t.Fatalf("loads %v after P's commit, want [0 0 1]: s on pathway 2 from P's decision", got)
	}
}
