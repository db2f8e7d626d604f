package postgres

// Migration 4's step in Go: the tiles of the logs of version 3.

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"
)

// upgradeChunk is how many leaves tileLogs appends at a time.
const upgradeChunk = 4096

// tileLogs makes each log's tiles from its leaves, now in their decisions'
// rows, checks that the tree they make has the root of the hashes version
// 3 kept (so no leaf was lost or changed moving), and drops version 3's
// tables of the logs.
func tileLogs(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, "SELECT l.id, l.room, l.size FROM waisteer.logs l ORDER BY l.id")
	if err != nil {
		return err
	}
	type logRow struct {
		id   int32
		room []byte
		size int64
	}
	var logs []logRow
	for rows.Next() {
		var l logRow
		if err := rows.Scan(&l.id, &l.room, &l.size); err != nil {
			rows.Close()
			return err
		}
		logs = append(logs, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, l := range logs {
		f := frontier{}
		for f.size < l.size {
			es, err := readLeaves(ctx, tx, l.id, f.size, min(l.size, f.size+upgradeChunk))
			if err != nil {
				return fmt.Errorf("log of room %x: %w", l.room, err)
			}
			next, ts, err := appendTo(f, es)
			if err != nil {
				return fmt.Errorf("log of room %x: %w", l.room, err)
			}
			if err := writeTiles(ctx, tx, l.id, ts); err != nil {
				return err
			}
			f = next
		}
		if l.size == 0 {
			continue
		}
		old, err := tlog.TreeHash(l.size, tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) {
			return oldHashes(ctx, tx, l.room, xs)
		}))
		if err != nil {
			return fmt.Errorf("log of room %x: version 3's root: %w", l.room, err)
		}
		now, err := tlog.TreeHash(l.size, tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) {
			return readHashes(ctx, tx, l.id, l.size, xs)
		}))
		if err != nil {
			return fmt.Errorf("log of room %x: the tiles' root: %w", l.room, err)
		}
		if old != now {
			return fmt.Errorf("log of room %x: its %d leaves make the root %v, version 3's hashes %v: nothing migrated", l.room, l.size, now, old)
		}
	}
	_, err = tx.Exec(ctx, "DROP TABLE waisteer.log_entries, waisteer.log_hashes, waisteer.log_sizes")
	return err
}

// oldHashes reads version 3's stored hashes of the room's log.
func oldHashes(ctx context.Context, tx pgx.Tx, room []byte, xs []int64) ([]tlog.Hash, error) {
	rows, err := tx.Query(ctx, "SELECT idx, hash FROM waisteer.log_hashes WHERE room = $1 AND idx = ANY($2)", room, xs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[int64]tlog.Hash{}
	for rows.Next() {
		var x int64
		var h []byte
		if err := rows.Scan(&x, &h); err != nil {
			return nil, err
		}
		if len(h) != tlog.HashSize {
			return nil, fmt.Errorf("hash %d has %d bytes", x, len(h))
		}
		got[x] = tlog.Hash(h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(xs))
	for i, x := range xs {
		h, ok := got[x]
		if !ok {
			return nil, fmt.Errorf("hash %d is not held", x)
		}
		out[i] = h
	}
	return out, nil
}
