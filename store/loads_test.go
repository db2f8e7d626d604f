package store

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

func session(i int) report.Session {
	var s report.Session
	s[0], s[1], s[2] = byte(i), byte(i>>8), byte(i>>16)
	return s
}

// steer steers the session to first until expires, and returns the loads
// decide was given.
func steer(t *testing.T, l *MemLoads, room sig.Hash, n int, s report.Session, now uint64, first int, expires uint64) []uint32 {
	t.Helper()
	seen, _ := steerAt(t, l, room, n, s, now, first, expires)
	return seen
}

// steerAt is steer, and the instant the loads were read at.
func steerAt(t *testing.T, l *MemLoads, room sig.Hash, n int, s report.Session, now uint64, first int, expires uint64) ([]uint32, uint64) {
	t.Helper()
	var seen []uint32
	var at uint64
	err := l.Steer(bg, room, n, s, now, func(loads []uint32, a uint64) (int, uint64, error) {
		seen, at = slices.Clone(loads), a
		return first, expires, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen, at
}

func snapshot(t *testing.T, l *MemLoads, room sig.Hash, n int, now uint64) []uint32 {
	t.Helper()
	got, err := l.Snapshot(bg, room, n, now)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wantLoads(t *testing.T, what string, got []uint32, want ...uint32) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: loads %v, want %v", what, got, want)
	}
}

// TestLoadsCountSessions_6: a pathway's load is the number of sessions the
// server is steering to it first (§6); a session counts toward the pathway
// its latest decision put first, and its own request sees itself counted
// there (§6.1: c's load already counts the client).
func TestLoadsCountSessions_6(t *testing.T) {
	l := NewLoads()
	room := hash("room")
	wantLoads(t, "an empty room", snapshot(t, l, room, 3, 0), 0, 0, 0)
	wantLoads(t, "first request", steer(t, l, room, 3, session(1), 10, 0, 100), 0, 0, 0)
	wantLoads(t, "second session", steer(t, l, room, 3, session(2), 10, 0, 100), 1, 0, 0)
	wantLoads(t, "first session again", steer(t, l, room, 3, session(1), 20, 2, 100), 2, 0, 0)
	// The session moved from pathway 0 to 2: its count moved with it.
	wantLoads(t, "after the move", snapshot(t, l, room, 3, 20), 1, 0, 1)
	wantLoads(t, "another room", snapshot(t, l, hash("other"), 3, 20), 0, 0, 0)
}

// TestLoadsExpiry_6: a session counts until it has been silent for longer
// than its expiry allows: while now ≤ expires, and nowhere after.
func TestLoadsExpiry_6(t *testing.T) {
	l := NewLoads()
	room := hash("room")
	steer(t, l, room, 2, session(1), 0, 1, 100)
	steer(t, l, room, 2, session(2), 0, 1, 200)
	steer(t, l, room, 2, session(3), 0, 0, 150)
	wantLoads(t, "at 100", snapshot(t, l, room, 2, 100), 1, 2)
	wantLoads(t, "at 101", snapshot(t, l, room, 2, 101), 1, 1)
	if got := l.Sessions(room); got != 2 {
		t.Errorf("%d sessions held after one expired", got)
	}
	// A later decision extends a session's expiry; an earlier expiry
	// shortens it.
	steer(t, l, room, 2, session(2), 120, 1, 300)
	steer(t, l, room, 2, session(3), 120, 0, 125)
	wantLoads(t, "at 151", snapshot(t, l, room, 2, 151), 0, 1)
	wantLoads(t, "at 300", snapshot(t, l, room, 2, 300), 0, 1)
	// An expired session's request sees it counted nowhere.
	wantLoads(t, "a request after expiry", steer(t, l, room, 2, session(2), 301, 0, 400), 0, 0)
	// An expiry already past counts nowhere.
	steer(t, l, room, 2, session(4), 310, 1, 309)
	wantLoads(t, "an expiry in the past", snapshot(t, l, room, 2, 310), 1, 0)
	steer(t, l, room, 2, session(2), 320, 0, 319)
	wantLoads(t, "a held session given a past expiry", snapshot(t, l, room, 2, 320), 0, 0)
	if got := l.Sessions(room); got != 0 {
		t.Errorf("%d sessions held, none live", got)
	}
}

// TestLoadsSweep: Sweep drops expired sessions in every room.
func TestLoadsSweep(t *testing.T) {
	l := NewLoads()
	for i := range 10 {
		steer(t, l, hash("a"), 1, session(i), uint64(i), 0, uint64(100+i*10))
		steer(t, l, hash("b"), 1, session(i), uint64(i), 0, uint64(100+i*10))
	}
	if got := l.Sweep(145); got != 10 {
		t.Errorf("swept %d, want 10", got)
	}
	if l.Sessions(hash("a")) != 5 || l.Sessions(hash("b")) != 5 {
		t.Errorf("%d and %d sessions held after the sweep", l.Sessions(hash("a")), l.Sessions(hash("b")))
	}
	wantLoads(t, "after the sweep", snapshot(t, l, hash("a"), 1, 45), 5)
}

// TestLoadsResetAndCount: Reset forgets a room's sessions (a new policy);
// a table asked for another count of pathways starts again.
func TestLoadsResetAndCount(t *testing.T) {
	l := NewLoads()
	room := hash("room")
	steer(t, l, room, 3, session(1), 0, 2, 100)
	steer(t, l, hash("other"), 3, session(1), 0, 2, 100)
	if err := l.Reset(bg, room); err != nil {
		t.Fatal(err)
	}
	wantLoads(t, "after Reset", snapshot(t, l, room, 3, 0), 0, 0, 0)
	wantLoads(t, "the other room", snapshot(t, l, hash("other"), 3, 0), 0, 0, 1)
	steer(t, l, room, 3, session(1), 0, 2, 100)
	wantLoads(t, "four pathways", steer(t, l, room, 4, session(2), 0, 3, 100), 0, 0, 0, 0)
	wantLoads(t, "after the change", snapshot(t, l, room, 4, 0), 0, 0, 0, 1)
	for _, n := range []int{0, 256} {
		if err := l.Steer(bg, room, n, session(1), 0, nil); err == nil {
			t.Errorf("%d pathways accepted", n)
		}
	}
}

// TestLoadsDecideRefused: an error from decide, or a first pathway that is
// not one, leaves the table as it was.
func TestLoadsDecideRefused(t *testing.T) {
	l := NewLoads()
	room := hash("room")
	steer(t, l, room, 2, session(1), 0, 1, 100)
	boom := errors.New("boom")
	if err := l.Steer(bg, room, 2, session(1), 0, func([]uint32, uint64) (int, uint64, error) { return 0, 100, boom }); err != boom {
		t.Errorf("decide's error: %v", err)
	}
	for _, first := range []int{-1, 2} {
		if err := l.Steer(bg, room, 2, session(2), 0, func([]uint32, uint64) (int, uint64, error) { return first, 100, nil }); err == nil {
			t.Errorf("first %d accepted", first)
		}
	}
	wantLoads(t, "after refusals", snapshot(t, l, room, 2, 0), 0, 1)
}

// model is the table recomputed from scratch: each session's latest
// pathway and expiry.
type model map[report.Session]struct {
	pathway int
	expires uint64
}

func (m model) loads(n int, now uint64) []uint32 {
	out := make([]uint32, n)
	for _, e := range m {
		if now <= e.expires {
			out[e.pathway]++
		}
	}
	return out
}

// TestLoadsAgainstModel_6: random steering, expiries and sweeps give the
// loads a recount gives, at every request.
func TestLoadsAgainstModel_6(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	l := NewLoads()
	room := hash("room")
	const n = 5
	m := model{}
	now, last, seen := uint64(0), uint64(0), false
	for i := range 20_000 {
		now += uint64(rng.IntN(3))
		s := session(rng.IntN(300))
		switch rng.IntN(20) {
		case 0:
			l.Sweep(now)
			if i > 0 { // the room's table exists: a Steer after it reads later still
				last, seen = max(last, now), true
			}
		case 1:
			wantLoads(t, "snapshot", snapshot(t, l, room, n, now), m.loads(n, now)...)
			last, seen = max(last, now), true // Snapshot makes the table
		}
		first := rng.IntN(n)
		// The loads are read one µs after the previous Steer when now
		// is not later (Loads.Steer), so that the room's decisions are
		// ordered by their instants.
		at := now
		if seen && at <= last {
			at = last + 1
		}
		last, seen = at, true
		expires := at + uint64(rng.IntN(200)) - 5
		want := m.loads(n, at)
		got, gotAt := steerAt(t, l, room, n, s, now, first, expires)
		if !slices.Equal(got, want) || gotAt != at {
			t.Fatalf("request %d at %d: loads %v at %d, a recount gives %v at %d", i, now, got, gotAt, want, at)
		}
		now = max(now, at)
		m[s] = struct {
			pathway int
			expires uint64
		}{first, expires}
	}
}

// TestLoadsConcurrent_6: loads are exact under concurrent requests (issue
// 5): many goroutines steer sessions of two rooms at once, and every
// decide sees the loads a recount of the decisions recorded before it
// gives. decide runs under the room's lock, so the recount's map needs no
// lock of its own; the race detector would see it if it did.
func TestLoadsConcurrent_6(t *testing.T) {
	l := NewLoads()
	rooms := []sig.Hash{hash("a"), hash("b")}
	const n = 4
	models := []model{{}, {}}
	lasts, steered := make([]uint64, 2), make([]bool, 2)
	for phase := range 6 {
		now := uint64(phase) * 100 // every request of a phase is at one instant
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(phase), uint64(g)))
				for range 500 {
					k := rng.IntN(2)
					s := session(rng.IntN(200))
					err := l.Steer(bg, rooms[k], n, s, now, func(loads []uint32, at uint64) (int, uint64, error) {
						// Each request of a room is one µs after the one
						// before it under the room's lock (Loads.Steer).
						if at <= lasts[k] && steered[k] {
							t.Errorf("room %d: loads read at %d, after %d", k, at, lasts[k])
						}
						lasts[k], steered[k] = at, true
						if want := models[k].loads(n, at); !slices.Equal(loads, want) {
							t.Errorf("room %d at %d: loads %v, a recount gives %v", k, at, loads, want)
						}
						first, expires := rng.IntN(n), at+uint64(rng.IntN(250))
						models[k][s] = struct {
							pathway int
							expires uint64
						}{first, expires}
						return first, expires, nil
					})
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		for k, room := range rooms {
			wantLoads(t, "after the phase", snapshot(t, l, room, n, lasts[k]), models[k].loads(n, lasts[k])...)
		}
	}
}

// Merge (issue 15): another server's decision for a session counts as the
// session's latest when its t is later than that of what the table holds
// (issue 16: as the audit's recount orders them), whatever its expiry; the
// counts below are worked by hand.
func TestLoadsMerge(t *testing.T) {
	l := NewLoads()
	room := hash("merge")
	a, b, c := session(1), session(2), session(3)
	steer(t, l, room, 3, a, 10, 0, 100) // a on 0 at 10, until 100
	l.Merge(room, 3, a, 1, 15, 150, 20) // a later decision elsewhere: a moves to 1
	if got := snapshot(t, l, room, 3, 20); !slices.Equal(got, []uint32{0, 1, 0}) {
		t.Fatalf("after a later decision for a: %v, want [0 1 0]", got)
	}
	l.Merge(room, 3, a, 0, 12, 120, 20) // an earlier one arriving late: no change
	l.Merge(room, 3, a, 2, 15, 160, 20) // one of the same t: no change
	if got := snapshot(t, l, room, 3, 20); !slices.Equal(got, []uint32{0, 1, 0}) {
		t.Fatalf("after earlier decisions for a: %v, want [0 1 0]", got)
	}
	l.Merge(room, 3, a, 1, 17, 90, 20) // later, with a shorter TTL: taken, until 90
	if got := snapshot(t, l, room, 3, 91); !slices.Equal(got, []uint32{0, 0, 0}) {
		t.Fatalf("a's later decision until 90, at 91: %v, want [0 0 0]", got)
	}
	l.Merge(room, 3, a, 1, 18, 150, 20) // and later again, until 150
	l.Merge(room, 3, b, 2, 19, 50, 20)  // b on 2 until 50
	l.Merge(room, 3, c, 2, 5, 15, 20)   // c expired already at 20: nowhere
	l.Merge(room, 4, c, 3, 19, 500, 20) // another count of pathways: ignored
	l.Merge(room, 3, c, 3, 19, 500, 20) // no pathway 3 of 3: ignored
	if got := snapshot(t, l, room, 3, 20); !slices.Equal(got, []uint32{0, 1, 1}) {
		t.Fatalf("with b: %v, want [0 1 1]", got)
	}
	// The merged sessions expire as the table's own do (§6: a session
	// counts while now ≤ expires).
	if got := snapshot(t, l, room, 3, 51); !slices.Equal(got, []uint32{0, 1, 0}) {
		t.Fatalf("at 51: %v, want [0 1 0]", got)
	}
	// A decision of this server for a, later again, counts.
	if got := steer(t, l, room, 3, a, 60, 2, 300); !slices.Equal(got, []uint32{0, 1, 0}) {
		t.Fatalf("the loads a's own decision saw: %v", got)
	}
	if got := snapshot(t, l, room, 3, 60); !slices.Equal(got, []uint32{0, 0, 1}) {
		t.Fatalf("after a's own decision: %v, want [0 0 1]", got)
	}
	// A fresh room takes the count of the first merge.
	other := hash("fresh")
	l.Merge(other, 2, b, 1, 0, 100, 0)
	if got := snapshot(t, l, other, 2, 0); !slices.Equal(got, []uint32{0, 1}) {
		t.Fatalf("a fresh room: %v, want [0 1]", got)
	}
}

// TestLoadsAfterMerged (§9.2; SPEC-NOTES "A decision comes after the
// sessions it counts"): a Steer that counts another server's merged
// decision decides after its t, so that the recount's order by t puts it
// after what it counted; within MergeLead (1 s) of the Steer's instant
// only. The instants are chosen by hand around that bound.
func TestLoadsAfterMerged(t *testing.T) {
	l := NewLoads()
	room := hash("after merged")
	const now = 5_000_000
	l.Merge(room, 2, session(1), 1, now+999_999, now+50_000_000, now) // a clock 999 999 µs ahead
	seen, at := steerAt(t, l, room, 2, session(2), now, 0, now+60_000_000)
	wantLoads(t, "the Steer after a merge 999 999 µs ahead", seen, 0, 1)
	if at != now+1_000_000 {
		t.Errorf("decided at %d after a merged t %d; want %d", at, now+999_999, now+1_000_000)
	}
	// Its own next Steer is after that one, though the clock says now+10.
	if _, at := steerAt(t, l, room, 2, session(3), now+10, 0, now+60_000_000); at != now+1_000_001 {
		t.Errorf("the next Steer decided at %d, want %d", at, now+1_000_001)
	}
	// A merge at exactly MergeLead past the Steer's instant is beyond it:
	// counted, not followed. (Each merge is given an instant before the
	// Steer's: a Steer at an instant the table was read at already decides
	// one µs after it.)
	const later = now + 2_000_000
	l.Merge(room, 2, session(4), 1, later+1_000_000, later+50_000_000, later-10)
	seen, at = steerAt(t, l, room, 2, session(5), later, 0, later+60_000_000)
	wantLoads(t, "the Steer after a merge 1 s ahead", seen, 2, 2)
	if at != later {
		t.Errorf("decided at %d after a merged t 1 s ahead; want its own instant %d", at, later)
	}
	// A merged session that does not count (expired at the merge) moves
	// nothing.
	other := hash("after expired")
	l.Merge(other, 2, session(1), 1, now+500, now+100, now+200)
	if _, at := steerAt(t, l, other, 2, session(2), now+300, 0, now+60_000_000); at != now+300 {
		t.Errorf("decided at %d after an expired merge; want %d", at, now+300)
	}
	// Two Steers were moved after a merged t (the second by it as well as
	// by the first), and one counted a merged t a second ahead.
	if after, ahead := l.Clocks(); after != 2 || ahead != 1 {
		t.Errorf("Clocks: %d after, %d ahead; want 2 and 1", after, ahead)
	}
}

// TestRoomLoadsLines: a room's table is a whole number of 64-byte cache
// lines, and its size class the same size, so that the tables of two rooms
// steered on two cores at once never share a line (the room lock and the
// table's instant are written at every Steer). BenchmarkSteer's
// parallel/room-each tripled when it grew to 200 bytes (size class 208).
func TestRoomLoadsLines(t *testing.T) {
	size := unsafe.Sizeof(roomLoads{})
	// Go's size classes at and above 128 bytes up to 256 step by 16 or
	// 32 (128, 144, 160, 176, 192, 208, 224, 240, 256): the multiples of
	// 64 among them are classes of their own.
	if size%64 != 0 || size > 256 {
		t.Errorf("roomLoads is %d bytes: want a multiple of 64 no larger than 256", size)
	}
}

// TestTableGrowsInPlace: a room's table grown past its first chunk moves
// none of the sessions it holds, as a recount's millions (issue 30) or a
// server gaining sessions grow it under the room's lock; and it counts
// them as ever. The expected loads are counted by hand: sessions i of
// pathway i%3, expiring at 2 000 000 - i, looked at on 1 000 000.
func TestTableGrowsInPlace(t *testing.T) {
	room := sig.Hash{9}
	l := NewLoads()
	const total = 3*chunkLen + 5
	var first *liveSession
	for i := range total {
		var s report.Session
		binary.LittleEndian.PutUint64(s[:], uint64(i)+2)
		l.Merge(room, 3, s, i%3, uint64(20+i), uint64(2_000_000-i), 5)
		if i == chunkLen-1 {
			first = l.room(room).slots.at(0)
		}
	}
	r := l.room(room)
	if r.slots.at(0) != first || len(r.slots.chunks) != 4 || r.slots.n != total {
		t.Fatalf("after %d sessions: slot 0 moved %v, %d chunks, n %d", total, r.slots.at(0) != first, len(r.slots.chunks), r.slots.n)
	}
	got, err := l.Snapshot(bg, room, 3, 1_000_000)
	want := []uint32{(total + 2) / 3, (total + 1) / 3, total / 3}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("loads %v, %v; want %v", got, err, want)
	}
	// Session i expires at 2 000 000 - i, so at 2 000 000 - (total-100)
	// the 99 latest made, i > total-100, have expired: their slots are
	// free, and sessions 0 to total-100 are left.
	got, err = l.Snapshot(bg, room, 3, 2_000_000-(total-100))
	const left = total - 99
	want = []uint32{(left + 2) / 3, (left + 1) / 3, left / 3}
	if err != nil || !slices.Equal(got, want) || r.free.n != 99 {
		t.Fatalf("loads %v, %v, %d free; want %v, 99 free", got, err, r.free.n, want)
	}
}

// TestChunked: chunked against a slice doing the same pushes and pops, by
// a seeded random walk that crosses chunk bounds both ways and resets;
// and an element of a full chunk never moves.
func TestChunked(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 42))
	var c chunked[int32]
	var ref []int32
	var pinned *int32 // element chunkLen, once there
	for step := range 300_000 {
		switch op := rng.IntN(100); {
		case step == 100_000 || step == 200_000:
			c.reset()
			ref, pinned = ref[:0], nil
		case op < 40 && len(ref) > 0:
			if got, want := c.pop(), ref[len(ref)-1]; got != want {
				t.Fatalf("step %d: pop %d, want %d", step, got, want)
			}
			ref = ref[:len(ref)-1]
			if len(ref) <= chunkLen {
				pinned = nil
			}
		default:
			v := rng.Int32()
			if i := c.push(v); int(i) != len(ref) {
				t.Fatalf("step %d: push at %d, want %d", step, i, len(ref))
			}
			ref = append(ref, v)
			if len(ref) == chunkLen+1 {
				pinned = c.at(chunkLen)
			}
		}
		if int(c.n) != len(ref) {
			t.Fatalf("step %d: n %d, want %d", step, c.n, len(ref))
		}
		if pinned != nil && c.at(chunkLen) != pinned {
			t.Fatalf("step %d: element %d moved", step, chunkLen)
		}
		if step%997 == 0 {
			for i, v := range ref {
				if *c.at(int32(i)) != v {
					t.Fatalf("step %d: element %d is %d, want %d", step, i, *c.at(int32(i)), v)
				}
			}
		}
	}
	if len(ref) < 2*chunkLen {
		t.Fatalf("the walk reached %d elements, not past two chunks", len(ref))
	}
}
