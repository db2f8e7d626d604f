package postgres

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waisteer/waisteer/internal/retry"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// Loads is the table of sessions and loads of several servers on one
// database (§6, issue 15): each server keeps the whole table in process
// (store.MemLoads), its own decisions' sessions as it makes them and the
// others' as it reads them from the database, so that each pathway's load
// counts the sessions of every server, and a session counts once, on the
// pathway its latest decision put first, whichever server made it.
//
// Each server writes its decisions' sessions (room, session, first
// pathway, expiry) to waisteer.steers every flushEvery, and reads the
// others' every followEvery, by number in commit order: a load a decision
// states is at most about stale (flushEvery + followEvery + a round trip)
// behind the other servers' decisions. SPEC-NOTES §6 states the bound on
// overshooting a capacity that follows. A Steer whose decision is not
// stored is taken back (Unsteer) before its row is written if it can be,
// and by a row of its own after.
type Loads struct {
	st    *Store
	local *store.MemLoads
	log   *slog.Logger

	mu      sync.Mutex
	pending []steer // this server's, not yet written
	// The instants (ns since 1970, 0 for none) since which the oldest
	// pending row waits, and the oldest of the rows a flush is writing.
	pendingSince, flushingSince int64
	// changed is closed, and replaced, at each follow and flush that
	// succeeds: a Steer waiting for the table to be current wakes.
	changed chan struct{}

	now  atomic.Uint64 // the latest instant a Steer was given, for pruning expired rows
	stop context.CancelFunc
	wg   sync.WaitGroup

	// restored is closed once the live sessions the others held at the
	// start are counted (the first follow, beside steering: issue 31).
	restored chan struct{}
	// followed is when the last follow that succeeded began, ns since
	// 1970: it read every row committed before.
	followed  atomic.Int64
	following atomic.Bool   // the first follow is done: Steer holds δ
	waited    atomic.Uint64 // Steers that waited for the table to be current
	refused   atomic.Uint64 // Steers refused, the table not current in time

	closed atomic.Bool
}

// steer is one decision's session, as waisteer.steers holds it, or the
// undo of one already written (undo).
type steer struct {
	room    sig.Hash
	session report.Session
	n       int
	first   int
	t       uint64 // the decision's instant
	expires uint64
	// An undo (Unsteer) removes this server's row of the session at t
	// whose expiry is taken (the index on expiry finds it), and writes a
	// row at t+1 with first and expires: the entry restored, or an
	// expiry of 0 where the session is dropped.
	undo  bool
	taken uint64
}

// How often the shared table is written and read, and how often the rows
// of expired sessions are removed.
const (
	flushEvery  = 50 * time.Millisecond
	followEvery = 50 * time.Millisecond
	pruneEvery  = time.Minute
	steersBatch = 10000
)

// The bound δ on the loads across servers (SPEC-NOTES, "Issue 31"), which
// Steer holds: a session another server counted at t is in the table by
// t + staleBound (its server steers nothing while one of its rows waits
// longer to be written), and this server has read the table as it was
// staleBound ago (it steers nothing while its last follow began longer
// ago), so that a decision's loads count every session of every server
// steered more than 2·staleBound = 200 ms before it, plus round trips.
// Overloaded, a server waits for its follower and its flusher (the rate
// falls, not the bound), up to staleWait, then refuses (503).
const (
	staleBound = 100 * time.Millisecond
	staleWait  = time.Second
)

// errStale is a Steer refused: the table did not become current in
// staleWait, or the database is down.
var errStale = errors.New("postgres: the shared table of loads is not current: the other servers' sessions would be counted late")

var _ store.Loads = (*Loads)(nil)

// NewLoads starts the shared table on the store's database: it writes
// and reads as it goes until Close, or the store's Close. The live
// sessions the other servers hold are read beside steering, as the bbolt
// store's are counted again from its logs (issue 31: a start-up within a
// second, whatever their number): Restored says when they are counted.
func NewLoads(ctx context.Context, st *Store, log *slog.Logger) (*Loads, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &Loads{st: st, local: store.NewLoads(), log: log, restored: make(chan struct{})}
	bg, stop := context.WithCancel(context.Background())
	l.stop = stop
	l.wg.Go(func() { l.run(bg) })
	st.mu.Lock()
	st.loads = l
	st.mu.Unlock()
	return l, nil
}

// Restored is closed once the sessions live at the start, every server's,
// are counted here. Before, a decision states fewer than live (the room's
// restoring_loads, as on bbolt).
func (l *Loads) Restored() <-chan struct{} { return l.restored }

// Close writes what is pending and stops; again, it does nothing.
func (l *Loads) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	l.stop()
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.flush(ctx)
}

// Steer decides from the loads of every server and records the decision's
// session, here at once and for the others at the next flush.
func (l *Loads) Steer(ctx context.Context, room sig.Hash, n int, session report.Session, now uint64,
	decide func(loads []uint32, at uint64) (first int, expires uint64, err error)) error {
	if err := l.current(ctx); err != nil {
		return err
	}
	var rec steer
	err := l.local.Steer(ctx, room, n, session, now, func(loads []uint32, at uint64) (int, uint64, error) {
		first, expires, err := decide(loads, at)
		now = at
		rec = steer{room: room, session: session, n: n, first: first, t: at, expires: expires}
		return first, expires, err
	})
	if err != nil {
		return err
	}
	for {
		if old := l.now.Load(); now <= old || l.now.CompareAndSwap(old, now) {
			break
		}
	}
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.pendingSince = time.Now().UnixNano()
	}
	l.pending = append(l.pending, rec)
	l.mu.Unlock()
	return nil
}

// current waits until the table is current (staleBound): the last follow
// began within it, and none of this server's rows has waited longer to be
// written. Before the first follow it does not wait: the table is being
// restored, and the decisions state fewer than live (Restored). It
// refuses at once while the database is down, and after staleWait.
func (l *Loads) current(ctx context.Context) error {
	if !l.following.Load() {
		return nil
	}
	var deadline time.Time
	for {
		now := time.Now().UnixNano()
		l.mu.Lock()
		late := now-l.followed.Load() > int64(staleBound) ||
			l.pendingSince != 0 && now-l.pendingSince > int64(staleBound) ||
			l.flushingSince != 0 && now-l.flushingSince > int64(staleBound)
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if !late {
			return nil
		}
		if !l.st.Up() {
			l.refused.Add(1)
			return errStale
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(staleWait)
			l.waited.Add(1)
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			l.refused.Add(1)
			return errStale
		}
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// wake wakes the Steers waiting for the table to be current.
func (l *Loads) wake() {
	l.mu.Lock()
	if l.changed != nil {
		close(l.changed)
	}
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// Unsteer takes back a Steer whose decision was not stored (store.Loads),
// here at once and for the other servers as follows. Its row, still
// pending, is removed: nobody ever reads it. A row already written (or
// being written) is undone by the next flush: it is deleted, so that a
// server that starts later never reads it, and a row one µs after it is
// written for the servers that read it already, which take of two rows of
// a session the later t (store.MemLoads.Merge): it restores the entry
// before, or drops the session with an expiry already past. A Steer that
// is no longer the session's entry here (a later Steer or Merge) writes
// nothing: the later row is the latest for the others too.
func (l *Loads) Unsteer(room sig.Hash, session report.Session, t uint64) store.Undone {
	u := l.local.Unsteer(room, session, t)
	l.mu.Lock()
	defer l.mu.Unlock()
	// The row, if pending, is among the last: the undo comes within a
	// commit's time of its Steer.
	for i := len(l.pending) - 1; i >= 0; i-- {
		if p := &l.pending[i]; !p.undo && p.t == t && p.session == session && p.room == room {
			l.pending = slices.Delete(l.pending, i, i+1)
			if len(l.pending) == 0 {
				l.pendingSince = 0
			}
			return u
		}
	}
	if u.Done {
		rec := steer{room: room, session: session, n: u.N, t: t, undo: true, taken: u.Taken.Expires}
		if u.Had {
			rec.first, rec.expires = u.Prev.First, u.Prev.Expires
		}
		if len(l.pending) == 0 {
			l.pendingSince = time.Now().UnixNano()
		}
		l.pending = append(l.pending, rec)
	}
	return u
}

// Snapshot is the room's loads at now, every server's sessions counted.
func (l *Loads) Snapshot(ctx context.Context, room sig.Hash, n int, now uint64) ([]uint32, error) {
	return l.local.Snapshot(ctx, room, n, now)
}

// Reset forgets the room's sessions here (a policy with another count of
// pathways): the others' decisions under the old count are not merged.
func (l *Loads) Reset(ctx context.Context, room sig.Hash) error {
	return l.local.Reset(ctx, room)
}

// Sweep drops the expired sessions of every room (the server's sweeper).
func (l *Loads) Sweep(now uint64) int { return l.local.Sweep(now) }

// run writes and reads the shared table until ctx ends. After a failure it
// waits (retry.Backoff: 50 ms doubling to 5 s, with jitter), or until the
// store is back, before it tries again; the store logs the outage, once
// (health.go), so a failure here is logged at debug level only.
func (l *Loads) run(ctx context.Context) {
	// The first follow reads every live session: on a goroutine of its
	// own, so that this server's sessions are written meanwhile. It is
	// tried until it succeeds, as the follows after it.
	first := make(chan int64, 1)
	l.wg.Go(func() {
		b := retry.Backoff{First: retryFirst, Max: retryMax}
		for {
			at, err := l.follow(ctx, 0)
			if err == nil {
				first <- at
				close(l.restored)
				return
			}
			l.log.Debug("sharing the loads: counting the live sessions: retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(b.Next()):
			}
		}
	})
	var at int64
	following := false
	flush, follow, prune := time.NewTicker(flushEvery), time.NewTicker(followEvery), time.NewTicker(pruneEvery)
	defer flush.Stop()
	defer follow.Stop()
	defer prune.Stop()
	b := retry.Backoff{First: retryFirst, Max: retryMax}
	var until time.Time      // no attempt before, after a failure
	var back <-chan struct{} // the store's return, while waiting
	note := func(err error) {
		if err == nil {
			b.Reset()
			until, back = time.Time{}, nil
			return
		}
		if ctx.Err() != nil {
			return
		}
		wait := b.Next()
		l.log.Debug("sharing the loads: retrying", "in", wait.String(), "err", err)
		until = time.Now().Add(wait)
		if !l.st.Up() {
			back = l.st.Back()
		}
	}
	waiting := func() bool { return !until.IsZero() && time.Now().Before(until) }
	for {
		select {
		case <-ctx.Done():
			return
		case <-back:
			until, back = time.Time{}, nil // the store is back: at once
		case <-flush.C:
			l.mu.Lock()
			some := len(l.pending) > 0
			l.mu.Unlock()
			if some && !waiting() { // nothing written is no success
				note(l.flush(ctx))
			}
		case at = <-first:
			following = true
			l.following.Store(true)
		case <-follow.C:
			if waiting() || !following {
				continue
			}
			next, err := l.follow(ctx, at)
			if err == nil {
				at = next
			}
			note(err)
		case <-prune.C:
			if now := l.now.Load(); now > 0 && !waiting() {
				_, err := l.st.pool.Exec(ctx, "DELETE FROM waisteer.steers WHERE expires < $1", i64(now))
				note(err)
			}
		}
	}
}

// The waits of the loops that retry the store (Loads.run, and the server's
// follower): 50 ms doubling to 5 s.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

// flush writes the pending sessions in one transaction, numbered under the
// feed's lock; on failure they wait for the next.
func (l *Loads) flush(ctx context.Context) error {
	l.mu.Lock()
	batch, since := l.pending, l.pendingSince
	l.pending, l.pendingSince = nil, 0
	if len(batch) > 0 {
		l.flushingSince = since
	}
	l.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	rooms, sessions := make([][]byte, len(batch)), make([][]byte, len(batch))
	ns, firsts, expires := make([]int16, len(batch)), make([]int16, len(batch)), make([]int64, len(batch))
	ts := make([]int64, len(batch))
	// The rows undone (Unsteer): rare, a commit failing while the
	// database is up.
	var uRooms, uSessions [][]byte
	var uExpires, uTs []int64
	for i := range batch {
		b := &batch[i]
		rooms[i], sessions[i] = b.room[:], b.session[:]
		ns[i], firsts[i], expires[i], ts[i] = int16(b.n), int16(b.first), i64(b.expires), i64(b.t)
		if b.undo {
			ts[i] = i64(b.t + 1)
			uRooms, uSessions = append(uRooms, b.room[:]), append(uSessions, b.session[:])
			uExpires, uTs = append(uExpires, i64(b.taken)), append(uTs, i64(b.t))
		}
	}
	err := l.st.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockSteers); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO waisteer.steers (seq, writer, room, session, n, first, expires, t)
			SELECT nextval('waisteer.feed'), $1, r, s, n, f, e, t
			FROM unnest($2::bytea[], $3::bytea[], $4::smallint[], $5::smallint[], $6::bigint[], $7::bigint[]) WITH ORDINALITY AS u(r, s, n, f, e, t, i)
			ORDER BY i`, l.st.instance, rooms, sessions, ns, firsts, expires, ts)
		if err != nil || len(uTs) == 0 {
			return err
		}
		// After the insert: a row undone may be in this batch too (a
		// flush that failed, retried).
		_, err = tx.Exec(ctx, `DELETE FROM waisteer.steers AS x
			USING unnest($2::bytea[], $3::bytea[], $4::bigint[], $5::bigint[]) AS u(r, s, e, t)
			WHERE x.expires = u.e AND x.writer = $1 AND x.room = u.r AND x.session = u.s AND x.t = u.t`,
			l.st.instance, uRooms, uSessions, uExpires, uTs)
		return err
	})
	l.mu.Lock()
	l.flushingSince = 0
	if err != nil {
		l.pending = append(batch, l.pending...)
		l.pendingSince = since
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	l.wake()
	return nil
}

// follow merges the other servers' sessions numbered after at, and
// returns the last number read.
func (l *Loads) follow(ctx context.Context, at int64) (int64, error) {
	began := time.Now().UnixNano()
	for {
		rows, err := l.st.pool.Query(ctx, `SELECT seq, writer, room, session, n, first, expires, t FROM waisteer.steers
			WHERE seq > $1 ORDER BY seq LIMIT $2`, at, steersBatch)
		if err != nil {
			return at, err
		}
		k := 0
		for rows.Next() {
			var seq, expires, t int64
			var writer int32
			var room, session []byte
			var n, first int16
			if err := rows.Scan(&seq, &writer, &room, &session, &n, &first, &expires, &t); err != nil {
				rows.Close()
				return at, err
			}
			at, k = seq, k+1
			if writer == l.st.instance || len(room) != sig.HashSize || len(session) != len(report.Session{}) {
				continue
			}
			l.local.Merge(sig.Hash(room), int(n), report.Session(session), int(first), u64(t), u64(expires), l.now.Load())
		}
		if err := rows.Err(); err != nil {
			return at, err
		}
		if k < steersBatch {
			l.followed.Store(began)
			l.wake()
			return at, nil
		}
	}
}
