package postgres

// Decisions: writes, with shared contexts and snapshots, and reads.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	var g *group
	var err error
	began := time.Now()
	defer func() {
		if err != nil {
			s.metrics.failures.Add(1)
			return
		}
		s.metrics.groups.Add(1)
		s.metrics.commit.ObserveDuration(time.Since(began))
	}()
	checkHeld := false
	for range 6 {
		// A group whose first batch failed before reaching the server
		// (a connection the pool held had died) is sent again, on
		// another connection: nothing of it was done (inTx). One that
		// found a digest held is sent again asking which (group.go).
		// One that found a log of its sealed, in its first batch or by
		// the seal's check at its end, is sent again to new logs.
		g, err = s.putGroup(ctx, ev, ds, rows, checkHeld)
		var pe *pgconn.PgError
		var sealed errSealed
		switch {
		case !checkHeld && errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "decisions_pkey":
			checkHeld = true
			continue
		case errors.As(err, &sealed):
			s.metrics.sealedUnder.Add(uint64(len(sealed)))
			s.forgetOwn(sealed)
			continue
		case errors.As(err, &pe) && pe.Code == "23514" && pe.ConstraintName == "logs_sealed":
			continue
		}
		if err == nil || !pgconn.SafeToRetry(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	maps.Copy(s.contexts, g.fresh)
	for id, f := range g.after {
		// Of two groups of this server on one log, the later commit's
		// frontier is kept, whichever returns first.
		if old, ok := s.frontiers[id]; !ok || old.size < f.size {
			s.frontiers[id] = f
		}
	}
	loads := s.loads
	s.mu.Unlock()
	if loads != nil {
		// Their sessions are the others' to read now (Loads).
		loads.committed(ds)
	}
	return nil
}

// selectHeld is which of the digests the store holds, as a decision or
// as a pruned decision's leaf.
// (A join, not digest = ANY($1): the statement's generic plan, which
// PostgreSQL takes after five runs, scanned the whole table for that.)
const selectHeld = "SELECT d.digest FROM unnest($1::bytea[]) AS u(k) JOIN waisteer.decisions d ON d.digest = u.k"

// scanHeld reads the rows of selectHeld.
func scanHeld(rows pgx.Rows) (map[sig.Hash]bool, error) {
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

// snapshotKeys is the keys of the snapshots the decisions ds[todo]
// reference, each once.
func snapshotKeys(ds []store.Decision, todo []int) [][]byte {
	var keys [][]byte
	need := map[sig.Hash]bool{}
	for _, i := range todo {
		if k := ds[i].Evidence; !need[k] {
			need[k] = true
			keys = append(keys, k[:])
		}
	}
	return keys
}

// The snapshots of a group's decisions are read with the group's first
// batch, and locked (FOR KEY SHARE) to the commit, so that Prune cannot
// remove one that a decision written here is about to reference.
const selectSnapshots = "SELECT id, key FROM waisteer.snapshots WHERE key = ANY($1) ORDER BY id FOR KEY SHARE"

// scanSnapshots adds the rows of selectSnapshots, or of an insert that
// returns the same, to ids.
func scanSnapshots(rows pgx.Rows, ids map[sig.Hash]int64) error {
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

// addSnapshots writes the snapshots of keys that ids lacks, from ev. Two
// servers may write one snapshot at once (their evidence alike): the
// second's insert waits for the first's commit and inserts nothing, and
// the snapshot is then read, locked as selectSnapshots locks it, by a
// statement that sees the first's commit.
func addSnapshots(ctx context.Context, tx querier, ev []store.Evidence, keys [][]byte, ids map[sig.Hash]int64) error {
	var newKeys, bodies [][]byte
	for _, k := range keys {
		h := sig.Hash(k)
		if _, ok := ids[h]; ok {
			continue
		}
		j := slices.IndexFunc(ev, func(e store.Evidence) bool { return e.Key == h })
		if j < 0 {
			return fmt.Errorf("%w: %s", store.ErrSnapshotMissing, h)
		}
		if sha256.Sum256(ev[j].Body) != h {
			return fmt.Errorf("store: snapshot %s is not the SHA-256 of its body", h)
		}
		newKeys, bodies = append(newKeys, k), append(bodies, nonNil(ev[j].Body))
	}
	if len(newKeys) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `INSERT INTO waisteer.snapshots (key, body) SELECT k, b FROM unnest($1::bytea[], $2::bytea[]) AS u(k, b)
		ON CONFLICT (key) DO NOTHING RETURNING id, key`, newKeys, bodies)
	if err != nil {
		return err
	}
	if err := scanSnapshots(rows, ids); err != nil {
		return err
	}
	var theirs [][]byte
	for _, k := range newKeys {
		if _, ok := ids[sig.Hash(k)]; !ok {
			theirs = append(theirs, k)
		}
	}
	if len(theirs) == 0 {
		return nil
	}
	if rows, err = tx.Query(ctx, selectSnapshots, theirs); err != nil {
		return err
	}
	if err := scanSnapshots(rows, ids); err != nil {
		return err
	}
	for _, k := range theirs {
		if _, ok := ids[sig.Hash(k)]; !ok {
			return fmt.Errorf("postgres: snapshot %x was neither written nor found", k)
		}
	}
	return nil
}

// contextID returns the id of c, adding it when it is not held.
func (s *Store) contextID(ctx context.Context, tx querier, c context3, fresh map[context3]int64) (int64, error) {
	if id, ok := fresh[c]; ok {
		return id, nil
	}
	s.mu.Lock()
	id, ok := s.contexts[c]
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	// Of two servers adding one context at once, the one whose insert
	// waited for the other's sees neither row in its statement's
	// snapshot: it asks again, and then reads the other's (as Secret).
	var err error
	for range 2 {
		err = tx.QueryRow(ctx, `WITH n AS (
				INSERT INTO waisteer.contexts (room, policy, signer) VALUES ($1, $2, $3)
				ON CONFLICT (room, policy, signer) DO NOTHING RETURNING id)
			SELECT id FROM n UNION ALL SELECT id FROM waisteer.contexts WHERE room = $1 AND policy = $2 AND signer = $3`,
			c.room[:], c.policy[:], c.signer[:]).Scan(&id)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
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
