package store

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/report"
)

// The tests of Unsteer (issue 31's outage must-show: a request answered
// 503 stored no decision). §6: the loads a decision states are the live
// sessions' latest decisions, so a session counts from a decision that was
// stored; a Steer whose decision was not is taken back, and the table is
// as if the request had never been decided. The counts are worked by hand.

// TestUnsteerNewSession_6: the undo of a session's first Steer drops it.
func TestUnsteerNewSession_6(t *testing.T) {
	l := NewLoads()
	room := hash("room")
	steer(t, l, room, 3, session(1), 10, 0, 100)
	_, at := steerAt(t, l, room, 3, session(2), 11, 1, 100)
	wantLoads(t, "with the phantom", snapshot(t, l, room, 3, 11), 1, 1, 0)
	u := l.Unsteer(room, session(2), at)
	want := Undone{Done: true, N: 3, Taken: LoadEntry{First: 1, T: 11, Expires: 100}}
	if u != want {
		t.Errorf("Unsteer: %+v, want %+v", u, want)
	}
	wantLoads(t, "after the undo", snapshot(t, l, room, 3, 11), 1, 0, 0)
	if got := l.Sessions(room); got != 1 {
		t.Errorf("%d sessions held after the undo, want 1", got)
	}
	// Again, it does nothing: the session is not held.
	if u := l.Unsteer(room, session(2), at); u.Done {
		t.Errorf("a second Unsteer: %+v", u)
	}
	// The next request sees no phantom, and its instant is after the
	// one the undo spent (11 + 1): 13.
	got, at := steerAt(t, l, room, 3, session(3), 11, 2, 100)
	wantLoads(t, "the next request", got, 1, 0, 0)
	if at != 13 {
		t.Errorf("the next request read the loads at %d, want 13", at)
	}
}

// TestUnsteerRestores_6: the undo of a re-steer restores the session's
// entry before: its pathway, its expiry (and place among expiries), and
// its instant, which a later Merge is compared with.
func TestUnsteerRestores_6(t *testing.T) {
	l := NewLoads()
	room := hash("room")
	a, b := session(1), session(2)
	steer(t, l, room, 3, a, 10, 0, 100) // a on 0 until 100
	steer(t, l, room, 3, b, 11, 1, 50)  // b on 1 until 50
	steer(t, l, room, 3, a, 12, 2, 40)  // a moves to 2 until 40: the first to expire
	wantLoads(t, "a moved", snapshot(t, l, room, 3, 12), 0, 1, 1)
	u := l.Unsteer(room, a, 12)
	want := Undone{Done: true, Had: true, N: 3, Taken: LoadEntry{First: 2, T: 12, Expires: 40},
		Prev: LoadEntry{First: 0, T: 10, Expires: 100}}
	if u != want {
		t.Errorf("Unsteer: %+v, want %+v", u, want)
	}
	wantLoads(t, "a back on 0", snapshot(t, l, room, 3, 13), 1, 1, 0)
	// a expires at 100 again, not 40: at 45 it still counts; b goes at 51.
	wantLoads(t, "at 45", snapshot(t, l, room, 3, 45), 1, 1, 0)
	wantLoads(t, "at 51", snapshot(t, l, room, 3, 51), 1, 0, 0)
	// A restored entry cannot be taken back: it is no Steer's.
	if u := l.Unsteer(room, a, 10); u.Done {
		t.Errorf("the restored entry taken back: %+v", u)
	}
	// a's instant is 10 again: another server's decision at 11, earlier
	// than the one taken back, is now a's latest.
	l.Merge(room, 3, a, 1, 11, 100, 51)
	wantLoads(t, "a merged at 11", snapshot(t, l, room, 3, 60), 0, 1, 0)
	wantLoads(t, "at 101", snapshot(t, l, room, 3, 101), 0, 0, 0)
	if got := l.Sessions(room); got != 0 {
		t.Errorf("%d sessions held after every expiry", got)
	}
}

// TestUnsteerRestoredExpired_6: an entry restored whose expiry has passed
// counts nowhere (§6: a session counts while now ≤ expires).
func TestUnsteerRestoredExpired_6(t *testing.T) {
	l := NewLoads()
	room := hash("room")
	steer(t, l, room, 2, session(1), 10, 0, 30)
	steer(t, l, room, 2, session(1), 20, 1, 100)
	wantLoads(t, "at 50", snapshot(t, l, room, 2, 50), 0, 1)
	if u := l.Unsteer(room, session(1), 20); !u.Done || !u.Had || u.Prev.Expires != 30 {
		t.Errorf("Unsteer: %+v", u)
	}
	wantLoads(t, "after the undo", snapshot(t, l, room, 2, 50), 0, 0)
	if got := l.Sessions(room); got != 0 {
		t.Errorf("%d sessions held, none live", got)
	}
}

// TestUnsteerLeavesLater_6: an undo of a Steer that is no longer the
// session's entry (a later Steer, another server's later decision, a
// Reset, an expiry) leaves the table alone, as one of an unknown room or
// session does.
func TestUnsteerLeavesLater_6(t *testing.T) {
	l := NewLoads()
	room := hash("room")
	a, b, c := session(1), session(2), session(3)
	steer(t, l, room, 2, a, 10, 0, 100)
	steer(t, l, room, 2, a, 20, 1, 100) // a later Steer of a
	if u := l.Unsteer(room, a, 10); u.Done {
		t.Errorf("the earlier Steer taken back: %+v", u)
	}
	steer(t, l, room, 2, b, 21, 0, 100)
	l.Merge(room, 2, b, 1, 30, 100, 21) // another server's later decision of b
	if u := l.Unsteer(room, b, 21); u.Done {
		t.Errorf("b's Steer taken back after a later merge: %+v", u)
	}
	steer(t, l, room, 2, c, 31, 0, 40)
	wantLoads(t, "at 41", snapshot(t, l, room, 2, 41), 0, 2) // c expired
	if u := l.Unsteer(room, c, 31); u.Done {
		t.Errorf("an expired Steer taken back: %+v", u)
	}
	if u := l.Unsteer(hash("none"), a, 20); u.Done {
		t.Errorf("a room never steered: %+v", u)
	}
	if u := l.Unsteer(room, session(9), 20); u.Done {
		t.Errorf("a session never steered: %+v", u)
	}
	wantLoads(t, "left alone", snapshot(t, l, room, 2, 41), 0, 2)
	if err := l.Reset(bg, room); err != nil {
		t.Fatal(err)
	}
	if u := l.Unsteer(room, a, 20); u.Done {
		t.Errorf("a Steer before a Reset taken back: %+v", u)
	}
	wantLoads(t, "after the Reset", snapshot(t, l, room, 2, 41), 0, 0)
}

// unsteerModel is the table recomputed from scratch with undos: each
// session's decisions that were not taken back, in order; its latest
// counts while now ≤ its expiry.
type unsteerModel map[report.Session]*history

type history struct {
	entries  []LoadEntry
	undoable bool // the latest is a Steer not taken back
}

func (m unsteerModel) loads(n int, now uint64) []uint32 {
	out := make([]uint32, n)
	for _, h := range m {
		if k := len(h.entries); k > 0 && now <= h.entries[k-1].Expires {
			out[h.entries[k-1].First]++
		}
	}
	return out
}

// TestUnsteerAgainstModel_6: random steering with undos, some at once and
// some after other sessions' Steers, gives at every request the loads of
// the decisions not taken back, and the instants Loads.Steer promises.
func TestUnsteerAgainstModel_6(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 6))
	l := NewLoads()
	room := hash("room")
	const n = 4
	m := unsteerModel{}
	now, last, seen := uint64(0), uint64(0), false
	undone := 0
	for i := range 20_000 {
		now += uint64(rng.IntN(3))
		s := session(rng.IntN(200))
		if rng.IntN(10) == 0 {
			wantLoads(t, "snapshot", snapshot(t, l, room, n, now), m.loads(n, now)...)
			last, seen = max(last, now), true
		}
		at := now
		if seen && at <= last {
			at = last + 1
		}
		last, seen = at, true
		first, expires := rng.IntN(n), at+uint64(rng.IntN(150))
		want := m.loads(n, at)
		got, gotAt := steerAt(t, l, room, n, s, now, first, expires)
		if !slices.Equal(got, want) || gotAt != at {
			t.Fatalf("request %d at %d: loads %v at %d, a recount gives %v at %d", i, now, got, gotAt, want, at)
		}
		now = max(now, at)
		h := m[s]
		if h == nil {
			h = &history{}
			m[s] = h
		}
		h.entries, h.undoable = append(h.entries, LoadEntry{First: first, T: at, Expires: expires}), true

		// Take back this Steer, or another session's latest.
		switch rng.IntN(6) {
		case 0:
		case 1:
			s = session(rng.IntN(200))
			h = m[s]
		default:
			continue
		}
		if h == nil || len(h.entries) == 0 {
			continue
		}
		e := h.entries[len(h.entries)-1]
		u := l.Unsteer(room, s, e.T)
		// An entry expired may already be dropped (nothing to take back)
		// or not: either way it counts nowhere.
		live := e.Expires >= last
		switch {
		case live && h.undoable && !u.Done:
			t.Fatalf("request %d: the undo of a live Steer did nothing", i)
		case !h.undoable && u.Done:
			t.Fatalf("request %d: an entry no Steer's taken back: %+v", i, u)
		case u.Done && u.Taken != e:
			t.Fatalf("request %d: took back %+v, want %+v", i, u.Taken, e)
		}
		if u.Done {
			undone++
			h.entries, h.undoable = h.entries[:len(h.entries)-1], false
			last = max(last, e.T+1)
		}
		// An earlier instant of the session is no Steer's entry.
		if u := l.Unsteer(room, s, e.T-1); u.Done {
			t.Fatalf("request %d: an earlier instant taken back: %+v", i, u)
		}
	}
	if undone < 3000 {
		t.Errorf("only %d undos", undone)
	}
}
