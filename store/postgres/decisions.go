package postgres

// Decisions: writes, with shared contexts and snapshots, and reads.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// PutDecisions stores the decisions not yet held and the snapshots they
// reference, in one transaction; a refusal writes nothing.
func (s *Store) PutDecisions(ctx context.Context, ev []store.Evidence, ds []store.Decision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rows := make([][]byte, len(ds))
	for i := range ds {
		var err error
		if rows[i], err = store.AppendDecisionRow(nil, &ds[i]); err != nil {
			return err
		}
	}
	if len(ds) == 0 {
		return nil
	}
	var fresh map[context3]int64
	var after map[int32]frontier // the logs once committed
	err := s.inFeed(ctx, lockDecisions, "decisions", func(tx pgx.Tx) error {
		fresh = map[context3]int64{}
		// Each decision once; one held already (or its leaf, pruned) is
		// left as it is: a decision's bytes are its digest's.
		seen := make(map[sig.Hash]bool, len(ds))
		var all [][]byte
		for i := range ds {
			if !seen[ds[i].Digest] {
				seen[ds[i].Digest] = true
				all = append(all, ds[i].Digest[:])
			}
		}
		held, err := heldDigests(ctx, tx, all)
		if err != nil {
			return err
		}
		var todo []int
		for i := range ds {
			if seen[ds[i].Digest] && !held[ds[i].Digest] {
				seen[ds[i].Digest] = false
				todo = append(todo, i)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		snapshots, err := s.snapshotIDs(ctx, tx, ev, ds, todo)
		if err != nil {
			return err
		}
		digests, rowsOf := make([][]byte, 0, len(todo)), make([][]byte, 0, len(todo))
		ts, ctxs, snaps := make([]int64, 0, len(todo)), make([]int64, 0, len(todo)), make([]int64, 0, len(todo))
		logged := make([]*store.Decision, 0, len(todo))
		for _, i := range todo {
			d := &ds[i]
			c := context3{d.Room, d.Policy, d.Signer}
			id, err := s.contextID(ctx, tx, c, fresh)
			if err != nil {
				return err
			}
			digests, rowsOf = append(digests, d.Digest[:]), append(rowsOf, rows[i])
			ts, ctxs, snaps = append(ts, i64(d.T)), append(ctxs, id), append(snaps, snapshots[d.Evidence])
			logged = append(logged, d)
		}
		var logs []int32
		var idx []int64
		if logs, idx, after, err = s.appendLogs(ctx, tx, logged); err != nil {
			return err
		}
		// A digest stored meanwhile by another server fails the insert,
		// and so the transaction: its leaf is not to be a hole.
		_, err = tx.Exec(ctx, `INSERT INTO waisteer.decisions (t, snapshot, idx, context, log, digest, row)
			SELECT t, s, x, c, l, d, r
			FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[], $6::integer[], $7::bigint[]) AS u(d, t, c, s, r, l, x)`,
			digests, ts, ctxs, snaps, rowsOf, logs, idx)
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	for c, id := range fresh {
		s.contexts[c] = id
	}
	maps.Copy(s.frontiers, after)
	s.mu.Unlock()
	return nil
}

// heldDigests is which of the digests the store holds, as a decision or as
// a pruned decision's leaf.
func heldDigests(ctx context.Context, tx pgx.Tx, digests [][]byte) (map[sig.Hash]bool, error) {
	rows, err := tx.Query(ctx, "SELECT digest FROM waisteer.decisions WHERE digest = ANY($1)", digests)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := map[sig.Hash]bool{}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		h, err := hash(b)
		if err != nil {
			return nil, err
		}
		held[h] = true
	}
	return held, rows.Err()
}

// snapshotIDs returns the ids of the snapshots the decisions ds[todo]
// reference, writing those given in ev that are not held. Those held are
// locked (FOR KEY SHARE) to the commit, so that Prune cannot remove one that
// a decision written here is about to reference.
func (s *Store) snapshotIDs(ctx context.Context, tx pgx.Tx, ev []store.Evidence, ds []store.Decision, todo []int) (map[sig.Hash]int64, error) {
	var keys [][]byte
	need := map[sig.Hash]bool{}
	for _, i := range todo {
		if k := ds[i].Evidence; !need[k] {
			need[k] = true
			keys = append(keys, k[:])
		}
	}
	ids := map[sig.Hash]int64{}
	scan := func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id int64
			var k []byte
			if err := rows.Scan(&id, &k); err != nil {
				return err
			}
			h, err := hash(k)
			if err != nil {
				return err
			}
			ids[h] = id
		}
		return rows.Err()
	}
	rows, err := tx.Query(ctx, "SELECT id, key FROM waisteer.snapshots WHERE key = ANY($1) ORDER BY id FOR KEY SHARE", keys)
	if err != nil {
		return nil, err
	}
	if err := scan(rows); err != nil {
		return nil, err
	}
	var newKeys, bodies [][]byte
	for _, k := range keys {
		h := sig.Hash(k)
		if _, ok := ids[h]; ok {
			continue
		}
		j := slices.IndexFunc(ev, func(e store.Evidence) bool { return e.Key == h })
		if j < 0 {
			return nil, fmt.Errorf("%w: %s", store.ErrSnapshotMissing, h)
		}
		if sha256.Sum256(ev[j].Body) != h {
			return nil, fmt.Errorf("store: snapshot %s is not the SHA-256 of its body", h)
		}
		newKeys, bodies = append(newKeys, k), append(bodies, nonNil(ev[j].Body))
	}
	if len(newKeys) == 0 {
		return ids, nil
	}
	rows, err = tx.Query(ctx, `INSERT INTO waisteer.snapshots (key, body) SELECT k, b FROM unnest($1::bytea[], $2::bytea[]) AS u(k, b)
		RETURNING id, key`, newKeys, bodies)
	if err != nil {
		return nil, err
	}
	if err := scan(rows); err != nil {
		return nil, err
	}
	return ids, nil
}

// contextID returns the id of c, adding it when it is not held.
func (s *Store) contextID(ctx context.Context, tx pgx.Tx, c context3, fresh map[context3]int64) (int64, error) {
	if id, ok := fresh[c]; ok {
		return id, nil
	}
	s.mu.Lock()
	id, ok := s.contexts[c]
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	err := tx.QueryRow(ctx, `WITH n AS (
			INSERT INTO waisteer.contexts (room, policy, signer) VALUES ($1, $2, $3)
			ON CONFLICT (room, policy, signer) DO NOTHING RETURNING id)
		SELECT id FROM n UNION ALL SELECT id FROM waisteer.contexts WHERE room = $1 AND policy = $2 AND signer = $3`,
		c.room[:], c.policy[:], c.signer[:]).Scan(&id)
	if err != nil {
		return 0, err
	}
	fresh[c] = id
	return id, nil
}

// Decision returns the stored decision with the digest.
func (s *Store) Decision(ctx context.Context, digest sig.Hash) (store.Decision, error) {
	var t int64
	var room, policy, signer, key, row []byte
	err := s.pool.QueryRow(ctx, `SELECT d.t, c.room, c.policy, c.signer, n.key, d.row FROM waisteer.decisions d
		JOIN waisteer.contexts c ON c.id = d.context JOIN waisteer.snapshots n ON n.id = d.snapshot
		WHERE d.digest = $1`, digest[:]).Scan(&t, &room, &policy, &signer, &key, &row)
	if err != nil {
		return store.Decision{}, notFound(err)
	}
	d := store.Decision{Digest: digest, T: u64(t)}
	if err := store.ParseDecisionRow(row, &d); err != nil {
		return store.Decision{}, fmt.Errorf("postgres: decision %s: %w", digest, err)
	}
	if d.Room, err = hash(room); err != nil {
		return store.Decision{}, err
	}
	if d.Policy, err = hash(policy); err != nil {
		return store.Decision{}, err
	}
	if d.Evidence, err = hash(key); err != nil {
		return store.Decision{}, err
	}
	if len(signer) != len(d.Signer) {
		return store.Decision{}, fmt.Errorf("postgres: decision %s's signer has %d bytes", digest, len(signer))
	}
	copy(d.Signer[:], signer)
	return d, nil
}

// EvidenceSnapshot returns the body of the snapshot with the key.
func (s *Store) EvidenceSnapshot(ctx context.Context, key sig.Hash) ([]byte, error) {
	var body []byte
	err := s.pool.QueryRow(ctx, "SELECT body FROM waisteer.snapshots WHERE key = $1", key[:]).Scan(&body)
	return nonNil(body), notFound(err)
}
