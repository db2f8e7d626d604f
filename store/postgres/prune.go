package postgres

// Pruning: old records and decisions, and the snapshots no decision holds.

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waisteer/waisteer/store"
)

// Prune removes the records whose end is before recordsBefore, then the
// decisions' bytes whose t is before decisionsBefore (their leaves stay) and the snapshots no decision
// left references, each group of at most the prune chunk in a transaction
// of its own, so that the writers go on between them.
func (s *Store) Prune(ctx context.Context, recordsBefore, decisionsBefore uint64) (store.PruneStats, error) {
	var st store.PruneStats
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM waisteer.records WHERE digest IN
			(SELECT digest FROM waisteer.records WHERE end_t < $1 ORDER BY end_t LIMIT $2)`, i64(recordsBefore), s.chunk)
		if err != nil {
			return st, err
		}
		st.Records += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(s.chunk) {
			break
		}
	}
	for {
		var n, gone int
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			n, gone = 0, 0
			// A decision's leaf stays (the log is append-only): its row
			// keeps its digest, t, log and index, and loses its bytes;
			// the row of one from before the logs goes.
			rows, err := tx.Query(ctx, `WITH p AS (
					SELECT digest, snapshot, log FROM waisteer.decisions WHERE t < $1 AND row IS NOT NULL ORDER BY t LIMIT $2 FOR UPDATE),
				gone AS (DELETE FROM waisteer.decisions d USING p WHERE d.digest = p.digest AND p.log IS NULL RETURNING p.snapshot),
				kept AS (UPDATE waisteer.decisions d SET row = NULL, context = NULL, snapshot = NULL FROM p
					WHERE d.digest = p.digest AND p.log IS NOT NULL RETURNING p.snapshot)
				SELECT snapshot FROM gone UNION ALL SELECT snapshot FROM kept`, i64(decisionsBefore), s.chunk)
			if err != nil {
				return err
			}
			defer rows.Close()
			var snaps []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return err
				}
				n++
				if !slices.Contains(snaps, id) {
					snaps = append(snaps, id)
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(snaps) == 0 {
				return nil
			}
			gone, err = pruneSnapshots(ctx, tx, snaps)
			return err
		})
		if err != nil {
			return st, err
		}
		st.Decisions += n
		st.Snapshots += gone
		if n < s.chunk {
			return st, nil
		}
	}
}

// pruneSnapshots removes those of the snapshots no decision references. A
// writer that has just referenced one holds it locked; the removal then
// fails on the reference (a foreign key violation) once that writer
// commits, and the snapshot stays: that part is undone alone, at its
// savepoint, and the next Prune tries again.
func pruneSnapshots(ctx context.Context, tx pgx.Tx, ids []int64) (int, error) {
	var gone int
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		tag, err := sp.Exec(ctx, `DELETE FROM waisteer.snapshots n WHERE n.id = ANY($1)
			AND NOT EXISTS (SELECT 1 FROM waisteer.decisions d WHERE d.snapshot = n.id)`, ids)
		gone = int(tag.RowsAffected())
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" { // foreign_key_violation
		return 0, nil
	}
	return gone, err
}
