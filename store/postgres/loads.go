package postgres

import (
	"context"
	"errors"
	"log/slog"
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
// A server's sessions reach the others with its decisions (schema 6): each
// decision's row carries the pathway it put first and its session's
// expiry, written in the decision's group commit, and each server reads
// the other servers' logs every followEvery, each from where it stopped
// (a log is appended to in order, and its size committed with its
// leaves). So a session counts elsewhere only once its decision is stored
// (§6: a session counts from its latest stored decision), and nothing is
// written for it but its decision: a Steer whose decision is not stored is
// taken back here alone (Unsteer). A load a decision states is at most
// about stale (its commit + followEvery + a round trip) behind the other
// servers' decisions; Steer holds the bound δ (current). SPEC-NOTES §6
// states the bound on overshooting a capacity that follows.
type Loads struct {
	st    *Store
	local *store.MemLoads
	log   *slog.Logger

	mu sync.Mutex
	// made is this server's Steers whose decisions are not yet committed:
	// their group's commit writes the pathway first and the expiry of each
	// (steered), and forgets them (committed).
	made map[madeKey]madeEntry
	// oldest is at most the oldest since in made (0 while made is empty
	// since it was last scanned): Steer scans made only once oldest is
	// late, not at every decision.
	oldest int64
	// changed is closed, and replaced, at each follow and commit that
	// succeeds: a Steer waiting for the table to be current wakes.
	changed chan struct{}

	now  atomic.Uint64 // the latest instant a Steer was given: the others' expired sessions are not merged
	stop context.CancelFunc
	wg   sync.WaitGroup

	// restored is closed once the live sessions the others held at the
	// start are counted (the first follow, beside steering: issue 31).
	restored chan struct{}
	// followed is when the last follow that succeeded began, ns since
	// 1970: it read every decision committed before.
	followed  atomic.Int64
	following atomic.Bool   // the first follow is done: Steer holds δ
	waited    atomic.Uint64 // Steers that waited for the table to be current
	refused   atomic.Uint64 // Steers refused, the table not current in time

	closed atomic.Bool
}

// madeKey is a decision's session as Steer saw it: the decision has the
// same room, session and t.
type madeKey struct {
	room    sig.Hash
	session report.Session
	t       uint64
}

type madeEntry struct {
	first   int
	expires uint64
	since   int64 // when Steer gave it, ns since 1970
}

// How often the other servers' decisions are read, how many rows a query
// reads at most, and how often the expired rows of schema 5's table of
// sessions are removed.
const (
	followEvery = 50 * time.Millisecond
	followBatch = 10000
	pruneEvery  = time.Minute
	// madeForgotten is the age past which a Steer whose decision was
	// neither committed nor taken back is forgotten (it cannot be: a
	// caller that lost it must not hold every later Steer up).
	madeForgotten = time.Minute
)

// The bound δ on the loads across servers (SPEC-NOTES, "Issue 31"), which
// Steer holds: a session another server counted at t is in the database by
// t + staleBound (its server steers nothing while one of its decisions
// waits longer to be committed), and this server has read the database as
// it was staleBound ago (it steers nothing while its last follow began
// longer ago), so that a decision's loads count every session of every
// server steered more than 2·staleBound = 200 ms before it, plus round
// trips. Overloaded, a server waits for its follower and its commits (the
// rate falls, not the bound), up to staleWait, then refuses (503).
const (
	staleBound = 100 * time.Millisecond
	staleWait  = time.Second
)

// errStale is a Steer refused: the table did not become current in
// staleWait, or the database is down.
var errStale = errors.New("postgres: the shared table of loads is not current: the other servers' sessions would be counted late")

var _ store.Loads = (*Loads)(nil)

// NewLoads starts the shared table on the store's database: it reads the
// other servers' decisions as it goes until Close, or the store's Close.
// The live sessions the other servers hold are read beside steering, as
// the bbolt store's are counted again from its logs (issue 31: a start-up
// within a second, whatever their number): Restored says when they are
// counted.
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

// Close stops the follower; again, it does nothing.
func (l *Loads) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	if l.stop != nil {
		l.stop()
	}
	l.wg.Wait()
	return nil
}

// Steer decides from the loads of every server and records the decision's
// session here at once; the others read it with the decision.
func (l *Loads) Steer(ctx context.Context, room sig.Hash, n int, session report.Session, now uint64,
	decide func(loads []uint32, at uint64) (first int, expires uint64, err error)) error {
	if err := l.current(ctx); err != nil {
		return err
	}
	var key madeKey
	var entry madeEntry
	err := l.local.Steer(ctx, room, n, session, now, func(loads []uint32, at uint64) (int, uint64, error) {
		first, expires, err := decide(loads, at)
		now = at
		key, entry = madeKey{room, session, at}, madeEntry{first: first, expires: expires}
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
	entry.since = time.Now().UnixNano()
	l.mu.Lock()
	if l.made == nil {
		l.made = map[madeKey]madeEntry{}
	}
	if l.oldest == 0 {
		l.oldest = entry.since
	}
	l.made[key] = entry
	l.mu.Unlock()
	return nil
}

// Unsteer takes back a Steer whose decision was not stored (store.Loads):
// here alone, since the others read a session from its stored decision
// only.
func (l *Loads) Unsteer(room sig.Hash, session report.Session, t uint64) store.Undone {
	u := l.local.Unsteer(room, session, t)
	l.mu.Lock()
	delete(l.made, madeKey{room, session, t})
	l.mu.Unlock()
	return u
}

// steered gives, for each of the decisions ds[i] for i in todo, the
// pathway it put first and its session's expiry, when it was steered here
// and not taken back.
func (l *Loads) steered(ds []store.Decision, todo []int, each func(first int, expires uint64, ok bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, i := range todo {
		e, ok := l.made[madeKey{ds[i].Room, ds[i].Session, ds[i].T}]
		each(e.first, e.expires, ok)
	}
}

// committed forgets the Steers of decisions now stored (or held already),
// and wakes the Steers waiting for them.
func (l *Loads) committed(ds []store.Decision) {
	l.mu.Lock()
	for i := range ds {
		delete(l.made, madeKey{ds[i].Room, ds[i].Session, ds[i].T})
	}
	l.mu.Unlock()
	l.wake()
}

// current waits until the table is current (staleBound): the last follow
// began within it, and no decision of this server's Steers has waited
// longer to be committed. Before the first follow it does not wait: the
// table is being restored, and the decisions state fewer than live
// (Restored). It refuses at once while the database is down, and after
// staleWait.
func (l *Loads) current(ctx context.Context) error {
	if !l.following.Load() {
		return nil
	}
	var deadline time.Time
	for {
		now := time.Now().UnixNano()
		late := now-l.followed.Load() > int64(staleBound)
		l.mu.Lock()
		if l.oldest != 0 && now-l.oldest > int64(staleBound) {
			// Perhaps late: the oldest Steer not committed, exactly.
			l.oldest = 0
			for k, e := range l.made {
				switch {
				case now-e.since > int64(madeForgotten):
					delete(l.made, k)
				case l.oldest == 0 || e.since < l.oldest:
					l.oldest = e.since
				}
			}
			late = late || l.oldest != 0 && now-l.oldest > int64(staleBound)
		}
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

// run reads the other servers' decisions until ctx ends. After a failure
// it waits (retry.Backoff: 50 ms doubling to 5 s, with jitter), or until
// the store is back, before it tries again; the store logs the outage, once
// (health.go), so a failure here is logged at debug level only.
func (l *Loads) run(ctx context.Context) {
	// The first follow reads every live session: on a goroutine of its
	// own, so that this server steers meanwhile. It is tried until it
	// succeeds, as the follows after it.
	first := make(chan *follower, 1)
	l.wg.Go(func() {
		b := retry.Backoff{First: retryFirst, Max: retryMax}
		for {
			f, err := l.restore(ctx)
			if err == nil {
				first <- f
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
	var f *follower
	follow, prune := time.NewTicker(followEvery), time.NewTicker(pruneEvery)
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
	behind := clockWatch{l: l}
	for {
		select {
		case <-ctx.Done():
			return
		case <-back:
			until, back = time.Time{}, nil // the store is back: at once
		case f = <-first:
			l.following.Store(true)
		case <-follow.C:
			if waiting() || f == nil {
				continue
			}
			note(l.follow(ctx, f))
			behind.check()
		case <-prune.C:
			// Schema 5's table of sessions is read by the first follow
			// only, for the sessions it held live at the upgrade.
			if now := l.now.Load(); now > 0 && !waiting() {
				_, err := l.st.pool.Exec(ctx, "DELETE FROM waisteer.steers WHERE expires < $1", i64(now))
				note(err)
			}
		}
	}
}

// clockWatch logs, at most once every clockWarnEvery, that this server's
// decisions counted sessions of another server's decisions a second or
// more past their own t (store.MergeLead): the servers' clocks disagree by
// that much, and the audit will report those decisions' loads.
type clockWatch struct {
	l      *Loads
	seen   uint64 // the count of such decisions at the last line
	warned time.Time
}

// clockWarnEvery is the least time between two of clockWatch's lines.
const clockWarnEvery = time.Minute

func (c *clockWatch) check() {
	_, ahead := c.l.local.Clocks()
	if ahead == c.seen || time.Since(c.warned) < clockWarnEvery {
		return
	}
	c.l.log.Warn("sharing the loads: another server's clock is a second or more ahead of this one's; decisions counted its sessions before their own t, which the audit reports as loads that do not hold: check the servers' clocks",
		"decisions", ahead-c.seen)
	c.seen, c.warned = ahead, time.Now()
}

// The waits of the loops that retry the store (Loads.run, and the server's
// follower): 50 ms doubling to 5 s.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

// A follower is where the reading of the other servers' logs stands.
// Each follow lists the logs open and those it reads; every listEvery
// follows, every log, for those it has not seen (a log's id is no guide:
// ids are taken in one order and committed in another, and a log may be
// made and sealed between two follows).
type follower struct {
	logs    map[int32]*otherLog // the other servers' logs not yet read to their end
	done    map[int32]bool      // this server's own, and the others' read to their sealed end
	follows int
}

// listEvery is how many follows list only the open logs between two that
// list every log.
const listEvery = 20

// otherLog is another server's log (or one of this server's earlier
// openings): its room and the index of its next leaf to read.
type otherLog struct {
	room sig.Hash
	next int64
}

// restore counts the sessions live in the other servers' decisions, and
// returns where their logs stand. It reads one snapshot of the database
// (repeatable read): the logs and their sizes, the latest t of their last
// leaves (the instant the sessions are live at: every log is in commit
// order, in which t is at most a commit's wait behind the latest), and the
// decisions whose session expires at it or later (decisions_by_end), so
// that the follows after it read each log from the size it saw. Schema
// 5's table of sessions (waisteer.steers) is read too: the sessions live
// when the database was upgraded.
func (l *Loads) restore(ctx context.Context) (*follower, error) {
	began := time.Now().UnixNano()
	f := &follower{logs: map[int32]*otherLog{}, done: map[int32]bool{}}
	err := pgx.BeginTxFunc(ctx, l.st.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT id, room, writer, size FROM waisteer.logs")
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int32
			var room []byte
			var writer *int32
			var size int64
			if err := rows.Scan(&id, &room, &writer, &size); err != nil {
				rows.Close()
				return err
			}
			if len(room) != sig.HashSize || writer != nil && *writer == l.st.instance {
				f.done[id] = true
				continue
			}
			f.logs[id] = &otherLog{room: sig.Hash(room), next: size}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var latest *int64
		if err := tx.QueryRow(ctx, `SELECT max(d.t) FROM waisteer.logs l
			JOIN waisteer.decisions d ON d.log = l.id AND d.idx = l.size - 1 WHERE l.size > 0`).Scan(&latest); err != nil {
			return err
		}
		at := uint64(0)
		if latest != nil {
			at = u64(*latest)
		}
		// Planned for its value (the simple protocol: no generic plan),
		// which the index answers: the live sessions are a sliver of
		// the table.
		rows, err = tx.Query(ctx, `SELECT log, t, first, ends, row FROM waisteer.decisions
			WHERE coalesce(ends, t) >= $1 AND row IS NOT NULL AND first IS NOT NULL`, pgx.QueryExecModeSimpleProtocol, i64(at))
		if err != nil {
			return err
		}
		for rows.Next() {
			var log int32
			var t, ends int64
			var first int16
			var row []byte
			if err := rows.Scan(&log, &t, &first, &ends, &row); err != nil {
				rows.Close()
				return err
			}
			if o := f.logs[log]; o != nil {
				l.merge(o.room, row, int(first), u64(t), u64(ends), at)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Schema 5's sessions, each server's (none of this opening's).
		rows, err = tx.Query(ctx, "SELECT room, session, n, first, expires, t FROM waisteer.steers WHERE expires >= $1", i64(at))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var room, session []byte
			var n, first int16
			var expires, t int64
			if err := rows.Scan(&room, &session, &n, &first, &expires, &t); err != nil {
				return err
			}
			if len(room) == sig.HashSize && len(session) == len(report.Session{}) {
				l.local.Merge(sig.Hash(room), int(n), report.Session(session), int(first), u64(t), u64(expires), at)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	l.followed.Store(began)
	l.wake()
	return f, nil
}

// merge counts another server's decision, its row as stored: the session
// and the count of pathways are the row's.
func (l *Loads) merge(room sig.Hash, row []byte, first int, t, expires, now uint64) {
	var d store.Decision
	if err := store.ParseDecisionRow(row, &d); err != nil {
		l.log.Debug("sharing the loads: a decision's row does not read", "room", room, "t", t, "err", err)
		return
	}
	l.local.Merge(room, len(d.Loads), d.Session, first, t, expires, now)
}

// follow reads the decisions committed to the other servers' logs since
// the last follow, and merges their sessions.
func (l *Loads) follow(ctx context.Context, f *follower) error {
	began := time.Now().UnixNano()
	known := make([]int32, 0, len(f.logs))
	for id := range f.logs {
		known = append(known, id)
	}
	type size struct {
		id     int32
		size   int64
		sealed bool
	}
	var sizes []size
	f.follows++
	all := f.follows%listEvery == 0
	rows, err := l.st.pool.Query(ctx, `SELECT id, room, writer, size, sealed IS NOT NULL FROM waisteer.logs
		WHERE $1 OR sealed IS NULL OR id = ANY($2)`, all, known)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int32
		var room []byte
		var writer *int32
		var s size
		if err := rows.Scan(&id, &room, &writer, &s.size, &s.sealed); err != nil {
			rows.Close()
			return err
		}
		s.id = id
		if f.logs[id] == nil {
			if f.done[id] {
				continue
			}
			// A log not seen before: this server's own, or another's,
			// read from its first leaf.
			if len(room) != sig.HashSize || writer != nil && *writer == l.st.instance {
				f.done[id] = true
				continue
			}
			f.logs[id] = &otherLog{room: sig.Hash(room)}
		}
		sizes = append(sizes, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	now := l.now.Load()
	for _, s := range sizes {
		o := f.logs[s.id]
		if o == nil {
			continue
		}
		for o.next < s.size {
			end := min(s.size, o.next+followBatch)
			rows, err := l.st.pool.Query(ctx, `SELECT t, first, ends, row FROM waisteer.decisions
				WHERE log = $1 AND idx >= $2 AND idx < $3`, s.id, o.next, end)
			if err != nil {
				return err
			}
			for rows.Next() {
				var t int64
				var first *int16
				var ends *int64
				var row []byte
				if err := rows.Scan(&t, &first, &ends, &row); err != nil {
					rows.Close()
					return err
				}
				if first != nil && ends != nil && row != nil {
					l.merge(o.room, row, int(*first), u64(t), u64(*ends), now)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			o.next = end
		}
		if s.sealed {
			delete(f.logs, s.id) // read to its end, which is final
			f.done[s.id] = true
		}
	}
	l.followed.Store(began)
	l.wake()
	return nil
}
