// Package limit keeps budgets: token buckets by key (a client address, a
// network, a player session) in a table of bounded size, and the keys of
// the addresses a request comes from.
//
// A bucket holds at most Burst tokens and gains PerSecond tokens a second;
// a request takes its tokens or is over its budget. A key the table does
// not hold starts with a full bucket, so a table forgets a bucket as soon
// as it is full again (Sweep) and remembers only the keys that spent
// something lately. A table holds at most its size of keys: a new key past
// it is refused (Full), which bounds the memory a flood of new keys costs.
package limit

import (
	"sync"
	"time"
)

// Rate is a budget: PerSecond tokens a second, up to Burst at once. A Rate
// with no PerSecond (0) is no budget at all: every take succeeds.
type Rate struct {
	PerSecond float64
	Burst     float64
}

// Off reports whether r limits nothing.
func (r Rate) Off() bool { return r.PerSecond <= 0 }

// Outcome is what a take did.
type Outcome uint8

const (
	Taken Outcome = iota // the bucket held the tokens, now taken
	Empty                // the bucket did not hold them: over the budget
	Full                 // the table holds no room for a new key
)

// bucket is tokens at an instant (ns on the table's clock).
type bucket struct {
	tokens float64
	at     int64
}

// Table is a table of buckets by key, all of one Rate. It is safe for
// concurrent use.
type Table[K comparable] struct {
	rate Rate
	size int

	mu    sync.Mutex
	m     map[K]bucket
	swept int64 // when a take last swept a full table
}

// NewTable makes a table of buckets of rate r holding at most size keys.
func NewTable[K comparable](r Rate, size int) *Table[K] {
	return &Table[K]{rate: r, size: max(size, 1), m: map[K]bucket{}}
}

// Rate is the table's budget.
func (t *Table[K]) Rate() Rate { return t.rate }

// fill is b's tokens at now.
func (t *Table[K]) fill(b bucket, now int64) float64 {
	if d := now - b.at; d > 0 {
		return min(t.rate.Burst, b.tokens+float64(d)/1e9*t.rate.PerSecond)
	}
	return b.tokens
}

// Take takes n tokens from key's bucket at now.
func (t *Table[K]) Take(key K, n float64, now time.Time) Outcome {
	if t.rate.Off() {
		return Taken
	}
	ns := now.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	b, held := t.m[key]
	if !held {
		if len(t.m) >= t.size {
			// Sweep at most once a second: a flood of new keys must
			// not make every take a walk of the table.
			if ns-t.swept < int64(time.Second) {
				return Full
			}
			t.swept = ns
			t.sweep(ns)
			if len(t.m) >= t.size {
				return Full
			}
		}
		b = bucket{tokens: t.rate.Burst, at: ns}
	}
	b.tokens, b.at = t.fill(b, ns), max(b.at, ns)
	if b.tokens < n {
		t.m[key] = b
		return Empty
	}
	b.tokens -= n
	t.m[key] = b
	return Taken
}

// Give puts n tokens back into key's bucket (up to its burst): a request
// that took them and was then refused by another budget spent nothing.
func (t *Table[K]) Give(key K, n float64) {
	if t.rate.Off() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b, held := t.m[key]; held {
		b.tokens = min(t.rate.Burst, b.tokens+n)
		t.m[key] = b
	}
}

// Sweep forgets the buckets that are full again at now, and returns how
// many keys the table still holds.
func (t *Table[K]) Sweep(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now.UnixNano())
	return len(t.m)
}

func (t *Table[K]) sweep(ns int64) {
	for k, b := range t.m {
		if t.fill(b, ns) >= t.rate.Burst {
			delete(t.m, k)
		}
	}
}

// Len is how many keys the table holds.
func (t *Table[K]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
