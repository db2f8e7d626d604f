package postgres

// Pruning: old records and decisions, and the snapshots no decision holds.

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/waisteer/waisteer/store"
)

// Prune removes the records whose end is before recordsBefore, then the
// decisions' bytes whose session ended before decisionsBefore (their t,
// for a decision without a session; schema 6: a decision is kept until
// its session's end at least, so that a starting server finds it; their
// leaves stay) and the snapshots no decision left references, each group
// of at most the prune chunk in a transaction of its own, so that the
// writers go on between them.
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
			// Planned for its values (the simple protocol: no generic
			// plan), as rare as it is.
			rows, err := tx.Query(ctx, `WITH p AS (
					SELECT digest, snapshot, log FROM waisteer.decisions WHERE coalesce(ends, t) < $1 AND row IS NOT NULL
						ORDER BY coalesce(ends, t) LIMIT $2 FOR UPDATE),
				gone AS (DELETE FROM waisteer.decisions d USING p WHERE d.digest = p.digest AND p.log IS NULL RETURNING p.snapshot),
				kept AS (UPDATE waisteer.decisions d SET row = NULL, context = NULL, snapshot = NULL FROM p
					WHERE d.digest = p.digest AND p.log IS NOT NULL RETURNING p.snapshot)
				SELECT snapshot FROM gone UNION ALL SELECT snapshot FROM kept`, pgx.QueryExecModeSimpleProtocol, i64(decisionsBefore), s.chunk)
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

// pruneSnapshots removes those of the snapshots no decision references.
// A writer that has just referenced one holds it locked (FOR KEY SHARE, in
// its group's first batch) until it commits; the lock taken here (FOR
// UPDATE) waits for that commit and keeps later writers waiting, and the
// question asked after it, in a statement of its own, sees every decision
// committed before: a snapshot a decision references is never removed
// (schema 6: no foreign key checks it). A writer that waited finds the
// snapshot gone and writes it again (addSnapshots).
func pruneSnapshots(ctx context.Context, tx pgx.Tx, ids []int64) (int, error) {
	if _, err := tx.Exec(ctx, "SELECT id FROM waisteer.snapshots WHERE id = ANY($1) ORDER BY id FOR UPDATE", ids); err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, `DELETE FROM waisteer.snapshots n WHERE n.id = ANY($1)
		AND NOT EXISTS (SELECT 1 FROM waisteer.decisions d WHERE d.snapshot = n.id)`, ids)
	return int(tag.RowsAffected()), err
}
