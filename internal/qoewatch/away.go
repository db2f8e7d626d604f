package qoewatch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/report"
)

// Away is a pool's clients the per-client rule moved off a pathway,
// kept away from it until their time is up (the QoE's hold): once on the
// next pathway a client reports that pathway's throughput, and without
// this its next order would send it back to the slow one.
type Away struct {
	mu sync.Mutex
	m  map[report.Session]awayEntry
	n  atomic.Int64 // len(m), read without the lock
}

// Empty reports whether no client is kept away.
func (t *Away) Empty() bool { return t.n.Load() == 0 }

type awayEntry struct {
	pathway string
	until   time.Time
}

// maxAway bounds the clients kept away; a client past it is moved for one
// manifest only.
const maxAway = 1 << 20

// Keep keeps s away from pathway until then.
func (t *Away) Keep(s report.Session, pathway string, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[report.Session]awayEntry{}
	}
	if _, ok := t.m[s]; ok || len(t.m) < maxAway {
		t.m[s] = awayEntry{pathway, until}
	}
	t.n.Store(int64(len(t.m)))
}

// Of is the pathway the session is kept away from at now, "" for none.
func (t *Away) Of(s report.Session, now time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[s]; ok && now.Before(e.until) {
		return e.pathway
	}
	return ""
}

// Sweep forgets the clients whose time is up at now.
func (t *Away) Sweep(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s, e := range t.m {
		if !now.Before(e.until) {
			delete(t.m, s)
		}
	}
	t.n.Store(int64(len(t.m)))
}

// Len is how many clients are kept away.
func (t *Away) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
