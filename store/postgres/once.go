package postgres

// A group in one statement (issue 31). In the steady state a server
// knows all that the first batch of a group reads (group.go): its logs'
// frontiers are its own last appends, and the ids of the group's
// contexts and snapshots are those its earlier groups wrote or read. The
// group is then one statement, one round trip and its own transaction: it
// locks the snapshots it names, moves each log from the size this server
// knows to the size after, and writes the decisions and the tiles. Should
// any of that not hold (a log sealed or moved under it, a snapshot
// pruned), a check in the statement fails it whole, nothing written, and
// the group is written in two round trips instead, reading what it
// assumed. Half the round trips halve the wait a group adds to its
// requests' and the connections' switches that cost both sides CPU.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// maxSnapshotIDs bounds the snapshots' ids a server remembers: a room's
// decisions name the snapshot of its current evidence, so a few per room
// are all that a group finds.
const maxSnapshotIDs = 4096

// putAtOnce is the statement of a group in one. Its check divides by
// zero, failing the statement with division_by_zero, unless every
// snapshot named is held (and now locked FOR KEY SHARE, as Prune takes
// them FOR UPDATE) and every log moved from the size this server knew,
// not sealed. The check is a CTE that both inserts read: they write only
// once it has held, and the statement writes all or nothing.
const putAtOnce = `WITH s AS (
		SELECT id FROM waisteer.snapshots WHERE id = ANY($11::bigint[]) FOR KEY SHARE),
	l AS (
		UPDATE waisteer.logs g SET size = u.n FROM unnest($12::integer[], $13::bigint[], $14::bigint[]) AS u(i, o, n)
		WHERE g.id = u.i AND g.size = u.o AND g.sealed IS NULL RETURNING g.id),
	checked AS (
		SELECT 1 / ((SELECT count(*) FROM s) = cardinality($11::bigint[])
			AND (SELECT count(*) FROM l) = cardinality($12::integer[]))::integer AS ok),
	d AS (
		INSERT INTO waisteer.decisions (t, snapshot, idx, context, log, digest, row, first, ends)
		SELECT t, s, x, c, l, d, r, CASE WHEN h THEN f END, CASE WHEN h THEN e END
		FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[], $6::integer[], $7::bigint[],
			$8::boolean[], $9::smallint[], $10::bigint[]) AS u(d, t, c, s, r, l, x, h, f, e)
		WHERE (SELECT ok FROM checked) = 1 RETURNING 1),
	t AS (
		INSERT INTO waisteer.log_tiles (log, level, n, hashes)
		SELECT g, l, n, h FROM unnest($15::integer[], $16::smallint[], $17::bigint[], $18::bytea[]) AS u(g, l, n, h)
		WHERE (SELECT ok FROM checked) = 1 RETURNING 1)
	SELECT (SELECT ok FROM checked), (SELECT count(*) FROM d), (SELECT count(*) FROM t)`

// putGroupAtOnce writes the group in one statement where this server
// knows what it needs (ok), and otherwise leaves it to the two round
// trips: not ok, and nothing written. An error is the statement's, as
// the two round trips' second batch would have had it (a digest held, a
// connection lost).
func (s *Store) putGroupAtOnce(ctx context.Context, ds []store.Decision, rows [][]byte, rooms []sig.Hash, logs map[sig.Hash]int32) (g *group, ok bool, err error) {
	g = &group{fresh: map[context3]int64{}, after: map[int32]frontier{}}
	fronts := make(map[int32]frontier, len(rooms))
	var cols columns
	var snaps []int64
	var todo []int
	once := make(map[sig.Hash]bool, len(ds))
	s.mu.Lock()
	for _, r := range rooms {
		f, known := s.frontiers[logs[r]]
		if !known {
			s.mu.Unlock()
			return nil, false, nil
		}
		fronts[logs[r]] = f
	}
	for i := range ds {
		d := &ds[i]
		if once[d.Digest] {
			continue
		}
		once[d.Digest] = true
		c, known := s.contexts[context3{d.Room, d.Policy, d.Signer}]
		n, held := s.snapshotIDs[d.Evidence]
		if !known || !held {
			s.mu.Unlock()
			return nil, false, nil
		}
		if !containsID(snaps, n) {
			snaps = append(snaps, n)
		}
		cols.add(d, rows[i], c, n)
		todo = append(todo, i)
	}
	s.mu.Unlock()
	s.sessions(ds, todo, &cols)
	if err := cols.appendLeaves(ds, todo, rooms, logs, fronts, g); err != nil {
		return nil, false, err
	}

	args := append(cols.decisionArgs(), snaps, cols.logIDs, cols.oldSizes, cols.newSizes, cols.tileLogs, cols.levels, cols.ns, cols.hashes)
	sent := time.Now()
	var checked, wrote, tiles int64
	err = s.pool.QueryRow(ctx, putAtOnce, args...).Scan(&checked, &wrote, &tiles)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "22012" {
		// What this server knew no longer holds: forget it, and read it.
		s.metrics.atOnceMissed.Add(1)
		s.mu.Lock()
		for _, n := range snaps {
			for k, v := range s.snapshotIDs {
				if v == n {
					delete(s.snapshotIDs, k)
				}
			}
		}
		for _, id := range cols.logIDs {
			delete(s.frontiers, id)
		}
		s.mu.Unlock()
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if checked != 1 || wrote != int64(len(todo)) || tiles != int64(len(cols.hashes)) {
		return nil, false, errors.New("postgres: a group's statement wrote other than its rows")
	}
	s.metrics.roundTrip.ObserveDuration(time.Since(sent))
	s.metrics.atOnce.Add(1)
	return g, true, nil
}

// rememberSnapshots keeps the ids of snapshots a group read or wrote, for
// the next groups to name at once.
func (s *Store) rememberSnapshots(ids map[sig.Hash]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snapshotIDs)+len(ids) > maxSnapshotIDs {
		clear(s.snapshotIDs)
	}
	for k, v := range ids {
		s.snapshotIDs[k] = v
	}
}

func containsID(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
