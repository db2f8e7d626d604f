package store

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

// MemLoads is the table of sessions and loads in process (§6: each
// pathway's load is the number of sessions the server is steering to it
// first). Each room has its own lock, held by Steer from reading the loads to
// recording the decision's first pathway, so that the loads are exact under
// concurrent requests: two requests never decide from one count.
//
// A session counts toward one pathway, the one its latest decision put
// first, while now ≤ its expiry, and nowhere after. A Steer whose decision
// is not stored is taken back (Unsteer): each session's entry keeps the
// one before it for that, in its slot, so that neither costs an allocation. Expired sessions are
// dropped in order of expiry before the loads are read (Steer, Snapshot,
// Sweep), so a count never includes one. Instants are µs on the room clock
// and are taken to be non-decreasing per room: a session dropped at one
// instant is not counted again by a later call with an earlier one.
type MemLoads struct {
	mu    sync.Mutex                              // serialises adding a room
	rooms atomic.Pointer[map[sig.Hash]*roomLoads] // copied on write: read without a lock

	// after counts the Steers decided after a merged decision's t, past
	// their own instant; ahead those that counted a merged decision
	// MergeLead or more past it (Clocks).
	after, ahead atomic.Uint64
}

var _ Loads = (*MemLoads)(nil)

// NewLoads returns an empty table.
func NewLoads() *MemLoads {
	l := &MemLoads{}
	m := map[sig.Hash]*roomLoads{}
	l.rooms.Store(&m)
	return l
}

// roomLoads is one room's table. Sessions live in slots, reused through a
// free list, and a min-heap of slots by expiry finds the next to expire; so
// a Steer of a session already held allocates nothing. The three grow in
// chunks (chunked), under the room's lock, without copying what they hold.
type roomLoads struct {
	mu      sync.Mutex
	n       int      // the count of pathways the table is for
	counts  []uint32 // per pathway, the live sessions it is first for
	scratch []uint32 // the loads given to decide, reused
	slot    map[report.Session]int32
	slots   chunked[liveSession]
	free    chunked[int32]
	heap    chunked[int32] // slots, by expiry
	// last is the latest instant the table was read at, when seen: a
	// Steer reads it later still, so that a session Snapshot or Sweep
	// dropped at a fresh clock is dropped for every later decision.
	last uint64
	// merged is the latest t of another server's decision merged into
	// the table while its session counted, when mergedSeen: a Steer
	// decides after it (MergeLead).
	merged           uint64
	seen, mergedSeen bool
	// The struct is 192 bytes, three cache lines, so that two rooms'
	// tables never share one (TestRoomLoadsLines): at 200, two rooms
	// steered on two cores took 50–88 ns a Steer against 34–51.
}

// MergeLead is how far, in µs, past a Steer's instant another server's
// decision may be for the Steer to be put after it. A decision counts the
// sessions of the other servers' decisions merged before it, and the
// auditor's recount replays a room's decisions by t (§9.2), so that each
// must have a t above theirs, whatever the servers' clocks say (a Lamport
// clock): Steer decides at one µs past the latest merged t, when that is
// within MergeLead of its instant. A server whose clock runs further ahead
// does not drag the others' decisions, and their windows (§5.1), after it;
// its sessions count all the same, and the recount finds the disagreement
// (SPEC-NOTES "A decision comes after the sessions it counts").
const MergeLead = 1_000_000

type liveSession struct {
	session report.Session
	t       uint64 // its latest decision's instant
	expires uint64
	// The entry before, while this one is a Steer's (steered), for
	// Unsteer: a Steer whose decision is not stored is taken back to it.
	prevT, prevExpires uint64
	at                 int32 // its place in heap
	pathway            uint8
	prevPathway        uint8
	steered, hadPrev   bool
}

// room is the room's table, made on first use. Rooms are never removed
// (Reset empties one), so a table found is never detached.
func (l *MemLoads) room(id sig.Hash) *roomLoads {
	if r, ok := (*l.rooms.Load())[id]; ok {
		return r
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.rooms.Load()
	if r, ok := old[id]; ok {
		return r
	}
	r := &roomLoads{slot: map[report.Session]int32{}}
	m := maps.Clone(old)
	m[id] = r
	l.rooms.Store(&m)
	return r
}

// Steer reads the room's loads at now and records decide's choice (Loads).
// It decides at now, or just after the room's latest instant (an earlier
// Steer's, or a merged decision's within MergeLead) when that is not
// before now.
func (l *MemLoads) Steer(ctx context.Context, room sig.Hash, n int, session report.Session, now uint64,
	decide func(loads []uint32, at uint64) (first int, expires uint64, err error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n < 1 || n > 255 {
		return fmt.Errorf("store: loads for %d pathways, not 1 to 255", n)
	}
	r := l.room(room)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fit(n)
	if r.mergedSeen && r.merged >= now {
		if r.merged-now < MergeLead && r.merged < 1<<64-1 {
			now = r.merged + 1
			l.after.Add(1)
		} else {
			l.ahead.Add(1)
		}
	}
	if r.seen && now <= r.last {
		if r.last == 1<<64-1 {
			return fmt.Errorf("store: room %s's clock is at its end", room)
		}
		now = r.last + 1
	}
	r.expire(now)
	copy(r.scratch, r.counts)
	first, expires, err := decide(r.scratch, now)
	if err != nil {
		return err
	}
	if first < 0 || first >= n {
		return fmt.Errorf("store: decide put pathway %d first, of %d", first, n)
	}
	r.set(session, uint8(first), now, expires, now, true)
	return nil
}

// Unsteer takes back the Steer of the session at t (Loads): the session's
// entry before it is restored, or the session dropped if it had none, so
// that the table is as if the Steer had not been, unless the session's
// entry is no longer the one that Steer recorded (a later Steer or Merge,
// an expiry, a Reset), which is left alone. An entry restored whose expiry
// has passed counts nowhere. The instant after t is spent as well: a
// later Steer of the room is after it, so that a table sharing the undo
// as a row one µs after t (postgres.Loads) orders it before the session's
// next decision.
func (l *MemLoads) Unsteer(room sig.Hash, session report.Session, t uint64) Undone {
	r, ok := (*l.rooms.Load())[room]
	if !ok {
		return Undone{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, held := r.slot[session]
	if !held {
		return Undone{}
	}
	ls := r.slots.at(s)
	if !ls.steered || ls.t != t {
		return Undone{}
	}
	if t < 1<<64-1 && r.last < t+1 {
		r.last = t + 1
	}
	u := Undone{Done: true, N: r.n, Taken: LoadEntry{First: int(ls.pathway), T: ls.t, Expires: ls.expires}}
	if !ls.hadPrev {
		r.drop(s)
		return u
	}
	u.Had, u.Prev = true, LoadEntry{First: int(ls.prevPathway), T: ls.prevT, Expires: ls.prevExpires}
	r.set(session, ls.prevPathway, ls.prevT, ls.prevExpires, r.last, false)
	return u
}

// Merge records another server's decision for a session in the table
// (the replica a shared store keeps in each server, issue 15): that its
// decision at t put pathway first until expires, among n pathways. Of two
// decisions for one session the later t is the latest, whichever arrives
// last (the audit's recount, issue 16, orders them so): a merge no later
// than what the table holds changes nothing, and so does one for another
// count of pathways than the table's (a server on another policy). A
// Steer after a merge whose session counts decides after its t, when that
// is within MergeLead of the Steer's instant.
func (l *MemLoads) Merge(room sig.Hash, n int, session report.Session, first int, t, expires, now uint64) {
	if n < 1 || n > 255 || first < 0 || first >= n {
		return
	}
	r := l.room(room)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		r.fit(n)
	}
	if r.n != n {
		return
	}
	r.expire(now)
	s, held := r.slot[session]
	if held && r.slots.at(s).t >= t {
		return
	}
	if expires >= now && (t > r.merged || !r.mergedSeen) {
		r.merged, r.mergedSeen = t, true
	}
	r.setAt(s, held, session, uint8(first), t, expires, now, false)
}

// Clocks says how the other servers' clocks stood against this one's at
// this table's Steers (MergeLead): how many decided after a merged
// decision's t, past their own instant, and how many counted a merged
// decision MergeLead or more past it, which the audit's recount places
// after them (a clock that far ahead is the operator's to fix).
func (l *MemLoads) Clocks() (after, ahead uint64) { return l.after.Load(), l.ahead.Load() }

// Snapshot returns the room's loads at now, in a new slice.
func (l *MemLoads) Snapshot(ctx context.Context, room sig.Hash, n int, now uint64) ([]uint32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n < 1 || n > 255 {
		return nil, fmt.Errorf("store: loads for %d pathways, not 1 to 255", n)
	}
	r := l.room(room)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fit(n)
	r.expire(now)
	return append([]uint32(nil), r.counts...), nil
}

// Reset forgets the room's sessions.
func (l *MemLoads) Reset(ctx context.Context, room sig.Hash) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := l.room(room)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reset(r.n)
	return nil
}

// Sweep drops, in every room, the sessions expired at now, and returns how
// many it dropped: Steer and Snapshot do so for the room they touch, and a
// periodic Sweep frees the memory of rooms no request touches.
func (l *MemLoads) Sweep(now uint64) int {
	dropped := 0
	for _, r := range *l.rooms.Load() {
		r.mu.Lock()
		dropped += r.expire(now)
		r.mu.Unlock()
	}
	return dropped
}

// Sessions is the number of sessions the room's table holds, live or not
// yet dropped.
func (l *MemLoads) Sessions(room sig.Hash) int {
	r := l.room(room)
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.slot)
}

// fit makes the table one for n pathways, forgetting its sessions when it
// was for another count: their pathways' indices mean nothing in it.
func (r *roomLoads) fit(n int) {
	if r.n != n {
		r.reset(n)
	}
}

func (r *roomLoads) reset(n int) {
	r.n = n
	r.counts = make([]uint32, n)
	r.scratch = make([]uint32, n)
	clear(r.slot)
	r.slots.reset()
	r.free.reset()
	r.heap.reset()
}

// expire drops the sessions whose expiry is before now, and returns how
// many.
func (r *roomLoads) expire(now uint64) int {
	if !r.seen || now > r.last {
		r.last, r.seen = now, true
	}
	k := 0
	for r.heap.n > 0 && r.slots.at(*r.heap.at(0)).expires < now {
		r.drop(*r.heap.at(0))
		k++
	}
	return k
}

// drop removes the session in slot s, and its count.
func (r *roomLoads) drop(s int32) {
	ls := r.slots.at(s)
	r.counts[ls.pathway]--
	delete(r.slot, ls.session)
	r.heapRemove(ls.at)
	r.free.push(s)
}

// set records that the session's latest decision put pathway first, until
// expires: a session that changes pathway moves its count; one whose expiry
// is already past counts nowhere. A Steer's entry (steered) keeps the one
// it replaces, for Unsteer; another (a Merge, or an entry Unsteer
// restores) cannot be taken back.
func (r *roomLoads) set(session report.Session, first uint8, t, expires, now uint64, steered bool) {
	s, held := r.slot[session]
	r.setAt(s, held, session, first, t, expires, now, steered)
}

// setAt is set of a session already looked for in the table: in slot s
// when held. A restart's recount merges millions of sessions, and a
// lookup in a table of millions is mostly a miss of the processor's
// caches.
func (r *roomLoads) setAt(s int32, held bool, session report.Session, first uint8, t, expires, now uint64, steered bool) {
	if expires < now {
		if held {
			r.drop(s)
		}
		return
	}
	if held {
		ls := r.slots.at(s)
		ls.steered, ls.hadPrev = steered, steered
		if steered {
			ls.prevPathway, ls.prevT, ls.prevExpires = ls.pathway, ls.t, ls.expires
		}
		if ls.pathway != first {
			r.counts[ls.pathway]--
			r.counts[first]++
			ls.pathway = first
		}
		old := ls.expires
		ls.t, ls.expires = t, expires
		if expires < old {
			r.up(ls.at)
		} else if expires > old {
			r.down(ls.at)
		}
		return
	}
	entry := liveSession{session: session, pathway: first, t: t, expires: expires, at: r.heap.n, steered: steered}
	if r.free.n > 0 {
		s = r.free.pop()
		*r.slots.at(s) = entry
	} else {
		s = r.slots.push(entry)
	}
	r.slot[session] = s
	r.counts[first]++
	r.up(r.heap.push(s))
}

// The heap of slots by expiry, each slot knowing its place.

func (r *roomLoads) less(i, j int32) bool {
	return r.slots.at(*r.heap.at(i)).expires < r.slots.at(*r.heap.at(j)).expires
}

func (r *roomLoads) swap(i, j int32) {
	hi, hj := r.heap.at(i), r.heap.at(j)
	*hi, *hj = *hj, *hi
	r.slots.at(*hi).at = i
	r.slots.at(*hj).at = j
}

func (r *roomLoads) up(i int32) {
	for i > 0 {
		p := (i - 1) / 2
		if !r.less(i, p) {
			return
		}
		r.swap(i, p)
		i = p
	}
}

func (r *roomLoads) down(i int32) {
	n := r.heap.n
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && r.less(c+1, c) {
			c++
		}
		if !r.less(c, i) {
			return
		}
		r.swap(i, c)
		i = c
	}
}

func (r *roomLoads) heapRemove(i int32) {
	last := r.heap.n - 1
	if i != last {
		r.swap(i, last)
	}
	r.heap.pop()
	if i != last {
		r.down(i)
		r.up(i)
	}
}

// chunked is a growable array of T held in chunks of chunkLen, which never
// move once full: growing it past its first chunk allocates one chunk and
// copies nothing. A room's table grows under its lock, and a slice's
// doubling there copied every session it held: half a second of a room's
// steering held up as its table passed two million sessions
// (BenchmarkLoadsGrowth). The first chunk grows as a slice does, so that
// a room of a few sessions holds little.
type chunked[T any] struct {
	chunks [][]T // each at most chunkLen long; all but the last full
	n      int32 // the elements: indices 0 to n-1
}

// chunkLen is the elements of a full chunk: 8 192, 448 KiB of a room's
// slots, which a doubling of the first chunk copies at most.
const (
	chunkShift = 13
	chunkLen   = 1 << chunkShift
)

// at is element i, which must be below n.
func (c *chunked[T]) at(i int32) *T {
	return &c.chunks[i>>chunkShift][i&(chunkLen-1)]
}

// push appends v and returns its index.
func (c *chunked[T]) push(v T) int32 {
	i := c.n
	k := int(i >> chunkShift)
	if k == len(c.chunks) {
		size := chunkLen
		if k == 0 {
			size = 16
		}
		c.chunks = append(c.chunks, make([]T, 0, size))
	}
	c.chunks[k] = append(c.chunks[k], v)
	c.n++
	return i
}

// pop removes the last element and returns it.
func (c *chunked[T]) pop() T {
	c.n--
	k := c.n >> chunkShift
	ch := c.chunks[k]
	v := ch[len(ch)-1]
	c.chunks[k] = ch[:len(ch)-1]
	return v
}

// reset empties c, keeping its first chunk and letting the others go.
func (c *chunked[T]) reset() {
	c.n = 0
	if len(c.chunks) > 0 {
		clear(c.chunks[1:])
		c.chunks = c.chunks[:1]
		c.chunks[0] = c.chunks[0][:0]
	}
}
