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
// a Steer of a session already held allocates nothing.
type roomLoads struct {
	mu      sync.Mutex
	n       int      // the count of pathways the table is for
	counts  []uint32 // per pathway, the live sessions it is first for
	scratch []uint32 // the loads given to decide, reused
	slot    map[report.Session]int32
	slots   []liveSession
	free    []int32
	heap    []int32 // slots, by expiry
	// last is the latest instant the table was read at, when seen: a
	// Steer reads it later still, so that a session Snapshot or Sweep
	// dropped at a fresh clock is dropped for every later decision.
	last uint64
	seen bool
}

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
	ls := &r.slots[s]
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
// count of pathways than the table's (a server on another policy).
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
	if s, held := r.slot[session]; held && r.slots[s].t >= t {
		return
	}
	r.set(session, uint8(first), t, expires, now, false)
}

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

// Reserve makes room in the room's table for n more sessions, so that
// adding them moves no slice: a recount that adds millions (restore.Count)
// would otherwise copy its growing slices while holding the room's lock,
// and every decision of the room would wait for the copy. The new slices
// are made before the lock is taken.
func (l *MemLoads) Reserve(room sig.Hash, n int) {
	r := l.room(room)
	r.mu.Lock()
	need := len(r.slots) + n
	have := min(cap(r.slots), cap(r.heap))
	r.mu.Unlock()
	if n <= 0 || need <= have {
		return
	}
	slots, heap := make([]liveSession, 0, need), make([]int32, 0, need)
	r.mu.Lock()
	defer r.mu.Unlock()
	if cap(r.slots) < len(r.slots)+n {
		r.slots = append(slots[:0], r.slots...)
	}
	if cap(r.heap) < len(r.heap)+n {
		r.heap = append(heap[:0], r.heap...)
	}
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
	r.slots = r.slots[:0]
	r.free = r.free[:0]
	r.heap = r.heap[:0]
}

// expire drops the sessions whose expiry is before now, and returns how
// many.
func (r *roomLoads) expire(now uint64) int {
	if !r.seen || now > r.last {
		r.last, r.seen = now, true
	}
	k := 0
	for len(r.heap) > 0 && r.slots[r.heap[0]].expires < now {
		r.drop(r.heap[0])
		k++
	}
	return k
}

// drop removes the session in slot s, and its count.
func (r *roomLoads) drop(s int32) {
	ls := &r.slots[s]
	r.counts[ls.pathway]--
	delete(r.slot, ls.session)
	r.heapRemove(ls.at)
	r.free = append(r.free, s)
}

// set records that the session's latest decision put pathway first, until
// expires: a session that changes pathway moves its count; one whose expiry
// is already past counts nowhere. A Steer's entry (steered) keeps the one
// it replaces, for Unsteer; another (a Merge, or an entry Unsteer
// restores) cannot be taken back.
func (r *roomLoads) set(session report.Session, first uint8, t, expires, now uint64, steered bool) {
	s, held := r.slot[session]
	if expires < now {
		if held {
			r.drop(s)
		}
		return
	}
	if held {
		ls := &r.slots[s]
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
	if k := len(r.free); k > 0 {
		s = r.free[k-1]
		r.free = r.free[:k-1]
	} else {
		s = int32(len(r.slots))
		r.slots = append(r.slots, liveSession{})
	}
	r.slots[s] = liveSession{session: session, pathway: first, t: t, expires: expires, at: int32(len(r.heap)), steered: steered}
	r.slot[session] = s
	r.counts[first]++
	r.heap = append(r.heap, s)
	r.up(int32(len(r.heap) - 1))
}

// The heap of slots by expiry, each slot knowing its place.

func (r *roomLoads) less(i, j int32) bool {
	return r.slots[r.heap[i]].expires < r.slots[r.heap[j]].expires
}

func (r *roomLoads) swap(i, j int32) {
	r.heap[i], r.heap[j] = r.heap[j], r.heap[i]
	r.slots[r.heap[i]].at = i
	r.slots[r.heap[j]].at = j
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
	n := int32(len(r.heap))
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
	last := int32(len(r.heap) - 1)
	if i != last {
		r.swap(i, last)
	}
	r.heap = r.heap[:last]
	if i != last {
		r.down(i)
		r.up(i)
	}
}
