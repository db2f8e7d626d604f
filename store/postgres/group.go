package postgres

// A group of decisions written in two round trips (issue 31), where a
// group in one statement (once.go) cannot be: the first batch begins the
// transaction, locks this server's own logs of the rooms and reads the
// snapshots the decisions reference; the last writes the
// decisions with their leaves, the tiles and the logs' sizes, and commits.
// Between them, only what is rare: a snapshot or a context not known. A
// log is appended to by its server only (SPEC-NOTES "One log per server
// and room"), so its lock is shared with nobody else's commits (only with
// this server's other groups, and with a server sealing it), and its
// frontier is this server's own last append: its partial tiles are read
// again only after a failure left that in doubt. Before the first batch, a
// room this server has no log of yet gets one (log.go).
//
// A decision already held (put again) is rare too: the group is written as
// if none were, and a digest held fails the insert (a unique violation),
// which undoes the whole transaction; the group is then written again,
// asking first which are held (checkHeld), and leaving those out. (Asking
// every time cost more than the rest of the first batch together.)

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// A group is what a committed group leaves this server to remember.
type group struct {
	fresh map[context3]int64
	after map[int32]frontier
}

// errSealed is a group that found some of its logs sealed under it: this
// server was taken for gone (a pause of gone or more), or is closing. The
// group is written again to new logs.
type errSealed map[int32]bool

func (e errSealed) Error() string {
	return fmt.Sprintf("postgres: %d of this server's logs were sealed under it", len(e))
}

// putGroup writes the decisions not yet held, in one transaction on a
// connection of its own.
func (s *Store) putGroup(ctx context.Context, ev []store.Evidence, ds []store.Decision, rows [][]byte, checkHeld bool) (g *group, err error) {
	// Each decision once, in the order given; the rooms in order (their
	// logs are locked by id, in one order for every group).
	seen := make(map[sig.Hash]bool, len(ds))
	var digests [][]byte
	var rooms []sig.Hash
	for i := range ds {
		if !seen[ds[i].Digest] {
			seen[ds[i].Digest] = true
			digests = append(digests, ds[i].Digest[:])
		}
		if !slices.Contains(rooms, ds[i].Room) {
			rooms = append(rooms, ds[i].Room)
		}
	}
	slices.SortFunc(rooms, func(a, b sig.Hash) int { return slices.Compare(a[:], b[:]) })
	// The logs, known or made, before the group takes its connection:
	// making one takes another.
	logs := make(map[sig.Hash]int32, len(rooms))
	ids := make([]int32, len(rooms))
	for i, r := range rooms {
		l, err := s.ownLogOf(ctx, r)
		if err != nil {
			return nil, err
		}
		logs[r], ids[i] = l.id, l.id
	}
	if !checkHeld {
		if g, ok, err := s.putGroupAtOnce(ctx, ds, rows, rooms, logs); ok || err != nil {
			return g, err
		}
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	conn := c.Conn()
	defer func() {
		// A transaction left open by a failure is rolled back, so that
		// the connection goes back to the pool clean (or, when even that
		// fails, is closed by the pool: its state is not idle).
		if err != nil && conn.PgConn().TxStatus() != 'I' && !conn.IsClosed() {
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			conn.Exec(rctx, "ROLLBACK") //nolint:errcheck // the pool closes a connection not idle
		}
	}()

	every := make([]int, len(ds))
	for i := range every {
		every[i] = i
	}
	keys := snapshotKeys(ds, every)

	// The first round trip.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// This server's logs locked to the commit: one of its groups at a
	// time appends to each, and a server sealing one waits for the commit.
	b.Queue("SELECT id, size, sealed IS NOT NULL FROM waisteer.logs WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE", ids)
	if checkHeld {
		b.Queue(selectHeld, digests)
	}
	b.Queue(selectSnapshots, keys)
	sent := time.Now()
	br := conn.SendBatch(ctx, b)
	g = &group{fresh: map[context3]int64{}, after: map[int32]frontier{}}
	sizes := map[int32]int64{}
	sealed := errSealed{}
	var held map[sig.Hash]bool
	snapshots := map[sig.Hash]int64{}
	err = func() error {
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rs, err := br.Query()
		if err != nil {
			return err
		}
		for rs.Next() {
			var id int32
			var n int64
			var done bool
			if err := rs.Scan(&id, &n, &done); err != nil {
				rs.Close()
				return err
			}
			sizes[id] = n
			if done {
				sealed[id] = true
			}
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		if checkHeld {
			if rs, err = br.Query(); err != nil {
				return err
			}
			if held, err = scanHeld(rs); err != nil {
				return err
			}
		}
		if rs, err = br.Query(); err != nil {
			return err
		}
		return scanSnapshots(rs, snapshots)
	}()
	if err != nil {
		return nil, err
	}
	s.metrics.roundTrip.ObserveDuration(time.Since(sent))
	if len(sealed) > 0 {
		return nil, sealed
	}
	for _, r := range rooms {
		if _, ok := sizes[logs[r]]; !ok {
			return nil, fmt.Errorf("postgres: room %s's log %d is not held", r, logs[r])
		}
	}

	var todo []int
	for i := range ds {
		if seen[ds[i].Digest] && !held[ds[i].Digest] {
			seen[ds[i].Digest] = false
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		_, err = conn.Exec(ctx, "COMMIT")
		return g, err
	}
	// What is rare: snapshots and contexts not held.
	if err := addSnapshots(ctx, conn, ev, snapshotKeys(ds, todo), snapshots); err != nil {
		return nil, err
	}
	var cols columns
	for _, i := range todo {
		d := &ds[i]
		id, err := s.contextID(ctx, conn, context3{d.Room, d.Policy, d.Signer}, g.fresh)
		if err != nil {
			return nil, err
		}
		cols.add(d, rows[i], id, snapshots[d.Evidence])
	}
	s.rememberSnapshots(snapshots)
	s.sessions(ds, todo, &cols)

	// The logs: what the leaves add to their frontiers. A frontier not
	// of the log's size (a group whose commit failed in doubt, or this
	// server's other group committed and not yet remembered) is read
	// again.
	fronts := make(map[int32]frontier, len(rooms))
	appended := map[sig.Hash]bool{}
	for _, i := range todo {
		appended[ds[i].Room] = true
	}
	for _, r := range rooms {
		if !appended[r] {
			continue // every decision of it held already
		}
		id := logs[r]
		n := sizes[id]
		s.mu.Lock()
		f, known := s.frontiers[id]
		s.mu.Unlock()
		if !known && n == 0 {
			f, known = frontier{}, true
		}
		if !known || f.size != n {
			if f, err = readFrontier(ctx, conn, id, n); err != nil {
				return nil, err
			}
		}
		fronts[id] = f
	}
	if err := cols.appendLeaves(ds, todo, rooms, logs, fronts, g); err != nil {
		return nil, err
	}

	// The last round trip. A digest held fails the insert, and so the
	// transaction: a leaf is never a hole.
	b = &pgx.Batch{}
	b.Queue(insertDecisions, cols.decisionArgs()...)
	if len(cols.hashes) > 0 {
		b.Queue(insertTiles, cols.tileLogs, cols.levels, cols.ns, cols.hashes)
	}
	b.Queue("UPDATE waisteer.logs l SET size = u.n FROM unnest($1::integer[], $2::bigint[]) AS u(i, n) WHERE l.id = u.i", cols.logIDs, cols.newSizes)
	b.Queue("COMMIT")
	sent = time.Now()
	br = conn.SendBatch(ctx, b)
	err = func() error {
		defer br.Close()
		for k := range b.Len() {
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			if k == b.Len()-1 && tag.String() != "COMMIT" {
				return fmt.Errorf("postgres: the group's transaction ended %q, not committed", tag.String())
			}
		}
		return nil
	}()
	if err != nil {
		return nil, err
	}
	s.metrics.roundTrip.ObserveDuration(time.Since(sent))
	return g, nil
}

// insertDecisions writes a group's decisions with their leaves (the
// arguments of columns.decisionArgs). A session's first and ends are kept
// only where Loads steered it.
const insertDecisions = `INSERT INTO waisteer.decisions (t, snapshot, idx, context, log, digest, row, first, ends)
	SELECT t, s, x, c, l, d, r, CASE WHEN h THEN f END, CASE WHEN h THEN e END
	FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[], $6::integer[], $7::bigint[],
		$8::boolean[], $9::smallint[], $10::bigint[]) AS u(d, t, c, s, r, l, x, h, f, e)`

// insertTiles writes the tiles a group's leaves completed.
const insertTiles = `INSERT INTO waisteer.log_tiles (log, level, n, hashes)
	SELECT g, l, n, h FROM unnest($1::integer[], $2::smallint[], $3::bigint[], $4::bytea[]) AS u(g, l, n, h)`

// columns are a group's rows, a column an array, as its statements take
// them.
type columns struct {
	// The decisions.
	digests, rows   [][]byte
	ts, ctxs, snaps []int64
	logs            []int32
	idx             []int64
	steered         []bool // a session's entry (Loads): first and ends
	firsts          []int16
	ends            []int64
	// The logs they are appended to: sizes before and after.
	logIDs             []int32
	oldSizes, newSizes []int64
	// The tiles the leaves completed.
	tileLogs []int32
	levels   []int16
	ns       []int64
	hashes   [][]byte
}

// add is one decision, of the context and snapshot of those ids.
func (c *columns) add(d *store.Decision, row []byte, context, snapshot int64) {
	c.digests, c.rows = append(c.digests, d.Digest[:]), append(c.rows, row)
	c.ts, c.ctxs, c.snaps = append(c.ts, i64(d.T)), append(c.ctxs, context), append(c.snaps, snapshot)
}

func (c *columns) decisionArgs() []any {
	return []any{c.digests, c.ts, c.ctxs, c.snaps, c.rows, c.logs, c.idx, c.steered, c.firsts, c.ends}
}

// appendLeaves appends the leaves of ds[todo] to their rooms' logs, each
// from its frontier in fronts: the leaves' indexes, the logs' sizes and
// the tiles completed, and in g the frontiers after.
func (c *columns) appendLeaves(ds []store.Decision, todo []int, rooms []sig.Hash, logs map[sig.Hash]int32, fronts map[int32]frontier, g *group) error {
	leaves := map[sig.Hash][]store.LogEntry{}
	for _, i := range todo {
		d := &ds[i]
		l := logs[d.Room]
		c.logs, c.idx = append(c.logs, l), append(c.idx, fronts[l].size+int64(len(leaves[d.Room])))
		leaves[d.Room] = append(leaves[d.Room], store.LogEntry{Digest: d.Digest, T: d.T})
	}
	for _, r := range rooms {
		es := leaves[r]
		if len(es) == 0 {
			continue
		}
		id := logs[r]
		next, ts, err := appendTo(fronts[id], es)
		if err != nil {
			return fmt.Errorf("postgres: room %s's log: %w", r, err)
		}
		g.after[id] = next
		for _, t := range ts {
			c.tileLogs, c.levels, c.ns, c.hashes = append(c.tileLogs, id), append(c.levels, int16(t.level)), append(c.ns, t.n), append(c.hashes, t.data)
		}
		c.logIDs, c.oldSizes, c.newSizes = append(c.logIDs, id), append(c.oldSizes, fronts[id].size), append(c.newSizes, next.size)
	}
	return nil
}

// sessions adds each decision's session entry, where this server's table
// of loads steered it (Loads): the others read it with the decision.
func (s *Store) sessions(ds []store.Decision, todo []int, c *columns) {
	s.mu.Lock()
	loads := s.loads
	s.mu.Unlock()
	c.steered, c.firsts, c.ends = make([]bool, 0, len(todo)), make([]int16, 0, len(todo)), make([]int64, 0, len(todo))
	add := func(first int, expires uint64, ok bool) {
		c.steered, c.firsts, c.ends = append(c.steered, ok), append(c.firsts, int16(first)), append(c.ends, i64(expires))
	}
	if loads != nil {
		loads.steered(ds, todo, add)
	} else {
		for range todo {
			add(0, 0, false)
		}
	}
}
