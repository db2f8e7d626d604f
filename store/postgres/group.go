package postgres

// A group of decisions written in few round trips (issue 31): the first
// batch begins the transaction, locks the rooms' logs and reads the
// snapshots the decisions reference; the last writes the decisions with
// their leaves, the tiles and the logs' sizes, and commits. Between them,
// only what is rare: a snapshot, a context or a log not known, or a log
// another server appended to since this one did.
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

// catchUp is how many leaves another server may have appended to a log for
// this one to append them to its frontier, rather than read the log's
// partial tiles again.
const catchUp = 1024

// A group is what a committed group leaves this server to remember.
type group struct {
	fresh map[context3]int64
	after map[int32]frontier
	logs  map[sig.Hash]int32
}

// putGroup writes the decisions not yet held, in one transaction on a
// connection of its own.
func (s *Store) putGroup(ctx context.Context, ev []store.Evidence, ds []store.Decision, rows [][]byte, checkHeld bool) (g *group, err error) {
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

	// Each decision once, in the order given; the rooms in order, so
	// that two servers lock two rooms' logs in one order.
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
	roomBytes := make([][]byte, len(rooms))
	var unknown [][]byte
	s.mu.Lock()
	for i, r := range rooms {
		roomBytes[i] = r[:]
		if _, ok := s.logs[r]; !ok {
			unknown = append(unknown, roomBytes[i])
		}
	}
	s.mu.Unlock()
	every := make([]int, len(ds))
	for i := range every {
		every[i] = i
	}
	keys := snapshotKeys(ds, every)

	// The first round trip.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if len(unknown) > 0 {
		b.Queue(`INSERT INTO waisteer.logs (room) SELECT r FROM unnest($1::bytea[]) AS u(r) ORDER BY r
			ON CONFLICT (room) WHERE writer IS NULL DO NOTHING`, unknown)
	}
	// The rooms' logs locked to the commit: one append at a time to each.
	b.Queue("SELECT id, room, size FROM waisteer.logs WHERE room = ANY($1) AND writer IS NULL ORDER BY room FOR UPDATE", roomBytes)
	if checkHeld {
		b.Queue(selectHeld, digests)
	}
	b.Queue(selectSnapshots, keys)
	sent := time.Now()
	br := conn.SendBatch(ctx, b)
	g = &group{fresh: map[context3]int64{}, after: map[int32]frontier{}, logs: map[sig.Hash]int32{}}
	sizes := map[sig.Hash]int64{}
	var held map[sig.Hash]bool
	snapshots := map[sig.Hash]int64{}
	err = func() error {
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		if len(unknown) > 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rs, err := br.Query()
		if err != nil {
			return err
		}
		for rs.Next() {
			var id int32
			var room []byte
			var n int64
			if err := rs.Scan(&id, &room, &n); err != nil {
				rs.Close()
				return err
			}
			h, err := hash(room)
			if err != nil {
				rs.Close()
				return err
			}
			g.logs[h], sizes[h] = id, n
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
	s.metrics.lockWait.ObserveDuration(time.Since(sent))
	for _, r := range rooms {
		if _, ok := g.logs[r]; !ok {
			return nil, fmt.Errorf("postgres: room %s has no log", r)
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
	cols := struct {
		digests, rows   [][]byte
		ts, ctxs, snaps []int64
		logs            []int32
		idx             []int64
	}{}
	leaves := map[sig.Hash][]store.LogEntry{}
	for _, i := range todo {
		d := &ds[i]
		id, err := s.contextID(ctx, conn, context3{d.Room, d.Policy, d.Signer}, g.fresh)
		if err != nil {
			return nil, err
		}
		cols.digests, cols.rows = append(cols.digests, d.Digest[:]), append(cols.rows, rows[i])
		cols.ts, cols.ctxs, cols.snaps = append(cols.ts, i64(d.T)), append(cols.ctxs, id), append(cols.snaps, snapshots[d.Evidence])
		cols.logs, cols.idx = append(cols.logs, g.logs[d.Room]), append(cols.idx, sizes[d.Room]+int64(len(leaves[d.Room])))
		leaves[d.Room] = append(leaves[d.Room], store.LogEntry{Digest: d.Digest, T: d.T})
	}

	// The logs: their partial tiles, read again when another server has
	// appended since this one did, and what the leaves add.
	var tiles []tileRow
	var tileLogs []int32
	var logIDs []int32
	var logSizes []int64
	for _, r := range rooms {
		es := leaves[r]
		if len(es) == 0 {
			continue
		}
		id, n := g.logs[r], sizes[r]
		s.mu.Lock()
		f, known := s.frontiers[id]
		s.mu.Unlock()
		switch {
		case known && f.size < n && n-f.size <= catchUp:
			// Another server appended since: its leaves, appended
			// here too, give the frontier (their tiles are written).
			s.metrics.handOvers.Add(1)
			theirs, err := readLeaves(ctx, conn, id, f.size, n)
			if err != nil {
				return nil, err
			}
			if f, _, err = appendTo(f, theirs); err != nil {
				return nil, fmt.Errorf("postgres: room %s's log: %w", r, err)
			}
		case !known || f.size != n:
			if known {
				s.metrics.handOvers.Add(1)
			}
			if f, err = readFrontier(ctx, conn, id, n); err != nil {
				return nil, err
			}
		}
		next, ts, err := appendTo(f, es)
		if err != nil {
			return nil, fmt.Errorf("postgres: room %s's log: %w", r, err)
		}
		g.after[id] = next
		for _, t := range ts {
			tiles, tileLogs = append(tiles, t), append(tileLogs, id)
		}
		logIDs, logSizes = append(logIDs, id), append(logSizes, next.size)
	}

	// The last round trip. A digest held fails the insert, and so the
	// transaction: a leaf is never a hole.
	b = &pgx.Batch{}
	b.Queue(`INSERT INTO waisteer.decisions (t, snapshot, idx, context, log, digest, row)
		SELECT t, s, x, c, l, d, r
		FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[], $6::integer[], $7::bigint[]) AS u(d, t, c, s, r, l, x)`,
		cols.digests, cols.ts, cols.ctxs, cols.snaps, cols.rows, cols.logs, cols.idx)
	if len(tiles) > 0 {
		levels, ns, data := make([]int16, len(tiles)), make([]int64, len(tiles)), make([][]byte, len(tiles))
		for i, t := range tiles {
			levels[i], ns[i], data[i] = int16(t.level), t.n, t.data
		}
		b.Queue(`INSERT INTO waisteer.log_tiles (log, level, n, hashes)
			SELECT g, l, n, h FROM unnest($1::integer[], $2::smallint[], $3::bigint[], $4::bytea[]) AS u(g, l, n, h)`,
			tileLogs, levels, ns, data)
	}
	b.Queue("UPDATE waisteer.logs l SET size = u.n FROM unnest($1::integer[], $2::bigint[]) AS u(i, n) WHERE l.id = u.i", logIDs, logSizes)
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
