package budget

import (
	"sync"

	"github.com/waisteer/waisteer/report"
)

// Latest keeps each session's latest answer M, made at an instant t, for
// at least a period (a room's min_ttl_s: an answer is given again only
// that long) and at most two: two generations of a map per shard, the
// older dropped whole when the newer is a period old, so that nothing
// walks the table. It holds at most maxLatest answers; past it an answer
// is not kept, and its session is answered 503 if it is over budget.
type Latest[M any] struct {
	shards [latestShards]latestShard[M]
}

const (
	latestShards = 16
	maxLatest    = 1 << 18 // about 130 bytes each: 32 MiB a room at most, both generations
)

type latestShard[M any] struct {
	mu        sync.Mutex
	cur, prev map[report.Session]kept[M]
	since     uint64 // when cur began, µs
}

type kept[M any] struct {
	t uint64 // µs on the room clock
	m M
}

func (l *Latest[M]) shard(s report.Session) *latestShard[M] { return &l.shards[s[0]%latestShards] }

// Put keeps m, made at t, as the session's latest answer at now; period
// is the room's min_ttl_s in µs. An answer made before the one kept is
// not kept: a later decision of the session was committed first.
func (l *Latest[M]) Put(s report.Session, t uint64, m M, now, period uint64) {
	sh := l.shard(s)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.turn(now, period)
	held, ok := sh.cur[s]
	switch {
	case ok && held.t > t:
		return
	case !ok && len(sh.cur) >= maxLatest/latestShards/2:
		return
	}
	sh.cur[s] = kept[M]{t: t, m: m}
}

// Get returns the session's latest answer when it was made less than
// period µs before now.
func (l *Latest[M]) Get(s report.Session, now, period uint64) (M, bool) {
	sh := l.shard(s)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.turn(now, period)
	k, ok := sh.cur[s]
	if !ok {
		k, ok = sh.prev[s]
	}
	// A decision's instant may be a few µs past the clock: the table of
	// loads orders a room's decisions by instants one µs apart.
	if !ok || now > k.t && now-k.t >= period {
		var zero M
		return zero, false
	}
	return k.m, true
}

// turn makes the current generation the previous one once it is a period
// old, dropping the previous.
func (sh *latestShard[M]) turn(now, period uint64) {
	if sh.cur == nil {
		sh.cur, sh.prev, sh.since = map[report.Session]kept[M]{}, map[report.Session]kept[M]{}, now
		return
	}
	if now < sh.since || now-sh.since < period {
		return
	}
	clear(sh.prev)
	sh.prev, sh.cur, sh.since = sh.cur, sh.prev, now
}

// Len is how many answers the table keeps, in both generations.
func (l *Latest[M]) Len() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.cur) + len(sh.prev)
		sh.mu.Unlock()
	}
	return n
}
