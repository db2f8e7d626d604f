package recount

import "github.com/waisteer/waisteer/report"

// table is one room's table of sessions as the server keeps it (§6): each
// session's latest first pathway and expiry, and per pathway the count of
// live sessions. It is fed decisions in the server's order, so its instants
// never go back.
type table struct {
	class  int // the policy's ids it is for; -1 before the first decision
	counts []uint32
	live   map[report.Session]session
	heap   []pending // by expiry; entries a later decision replaced are skipped
	gen    uint64

	// With δ > 0, each pathway's changes (package doc), as instants in the
	// order recorded, which is non-decreasing: a decision's at its T, and
	// the expiries dropped before the next decision, which all fall in
	// [that T, the next T).
	delta   uint64
	changes []instants
}

type session struct {
	pathway uint8
	expires uint64
	gen     uint64 // which pending entry is this one's
}

type pending struct {
	expires uint64
	gen     uint64
	session report.Session
}

// instants is a queue of instants, oldest first from head.
type instants struct {
	at   []uint64
	head int
}

func newTable(delta uint64) *table {
	return &table{class: -1, live: map[report.Session]session{}, delta: delta}
}

// reset empties the table for a policy of n pathways whose ids are class.
func (t *table) reset(class, n int) {
	t.class = class
	t.counts = make([]uint32, n)
	clear(t.live)
	t.heap = t.heap[:0]
	if t.delta > 0 {
		t.changes = make([]instants, n)
	}
}

// expire drops the sessions whose expiry is before now: at now they no
// longer count.
func (t *table) expire(now uint64) {
	for len(t.heap) > 0 && t.heap[0].expires < now {
		p := t.pop()
		s, ok := t.live[p.session]
		if !ok || s.gen != p.gen {
			continue // replaced by a later decision of the session
		}
		delete(t.live, p.session)
		t.counts[s.pathway]--
		t.change(s.pathway, s.expires)
	}
}

// set records that a session's latest decision, at now, put pathway first
// until expires.
func (t *table) set(id report.Session, pathway uint8, expires, now uint64) {
	old, held := t.live[id]
	switch {
	case !held:
		t.counts[pathway]++
		t.change(pathway, now)
	case old.pathway != pathway:
		t.counts[old.pathway]--
		t.counts[pathway]++
		t.change(old.pathway, now)
		t.change(pathway, now)
	case old.expires-now < t.delta:
		// Kept on its pathway just before it would have expired: a server
		// that missed this decision may have dropped it.
		t.change(pathway, now)
	}
	t.gen++
	t.live[id] = session{pathway: pathway, expires: expires, gen: t.gen}
	t.push(pending{expires: expires, gen: t.gen, session: id})
}

// change notes a change to a pathway's count at the instant.
func (t *table) change(pathway uint8, at uint64) {
	if t.delta == 0 {
		return
	}
	q := &t.changes[pathway]
	// Every later question is at an instant of at least at, so changes
	// before at − δ are never asked about again.
	q.trim(at, t.delta)
	if q.head > 0 && q.head >= len(q.at)/2 {
		// Reuse the front half once the queue has moved past it.
		q.at = q.at[:copy(q.at, q.at[q.head:])]
		q.head = 0
	}
	q.at = append(q.at, at)
}

// trim forgets the instants before now − δ.
func (q *instants) trim(now, delta uint64) {
	from := uint64(0)
	if now > delta {
		from = now - delta
	}
	for q.head < len(q.at) && q.at[q.head] < from {
		q.head++
	}
}

// changesSince is the count of a pathway's changes recorded at an instant
// of at least now − δ; the older are forgotten, since now never goes back.
func (t *table) changesSince(pathway int, now uint64) int {
	if t.delta == 0 {
		return 0
	}
	q := &t.changes[pathway]
	q.trim(now, t.delta)
	return len(q.at) - q.head
}

// The heap of pending expiries.

func (t *table) push(p pending) {
	t.heap = append(t.heap, p)
	i := len(t.heap) - 1
	for i > 0 {
		up := (i - 1) / 2
		if t.heap[up].expires <= t.heap[i].expires {
			break
		}
		t.heap[up], t.heap[i] = t.heap[i], t.heap[up]
		i = up
	}
}

func (t *table) pop() pending {
	h := t.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1].expires < h[c].expires {
			c++
		}
		if h[i].expires <= h[c].expires {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	t.heap = h
	return top
}
