package postgres

// Rooms, policies and records: their writes, reads and feed changes.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// PutRoom stores a room, replacing its descriptor and key log head.
func (s *Store) PutRoom(ctx context.Context, r store.Room) error {
	return s.inFeed(ctx, lockChanges, "changes", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO waisteer.rooms (id, descriptor, key_log_head) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET descriptor = excluded.descriptor, key_log_head = excluded.key_log_head`,
			r.ID[:], nonNil(r.Descriptor), r.KeyLogHead); err != nil {
			return err
		}
		return s.addChange(ctx, tx, "room", r.ID)
	})
}

// addChange numbers a change of the room for the other servers (the feed
// of changes: kind "room" or "policy"); the changes' lock is held.
func (s *Store) addChange(ctx context.Context, tx pgx.Tx, kind string, room sig.Hash) error {
	_, err := tx.Exec(ctx, "INSERT INTO waisteer.changes (seq, writer, kind, room) VALUES (nextval('waisteer.feed'), $1, $2, $3)", s.instance, kind, room[:])
	return err
}

// Rooms returns every room held.
func (s *Store) Rooms(ctx context.Context) ([]store.Room, error) {
	rows, err := s.pool.Query(ctx, "SELECT id, descriptor, key_log_head FROM waisteer.rooms ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rs []store.Room
	for rows.Next() {
		var id, desc, head []byte
		if err := rows.Scan(&id, &desc, &head); err != nil {
			return nil, err
		}
		h, err := hash(id)
		if err != nil {
			return nil, err
		}
		rs = append(rs, store.Room{ID: h, Descriptor: nonNil(desc), KeyLogHead: head})
	}
	return rs, rows.Err()
}

// PutPolicy stores a policy by digest and, with active, makes it the room's
// active policy.
func (s *Store) PutPolicy(ctx context.Context, room sig.Hash, digest sig.Hash, raw []byte, active bool) error {
	put := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO waisteer.policies (digest, room, raw) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING",
			digest[:], room[:], nonNil(raw))
		return err
	}
	if !active {
		return s.inTx(ctx, put)
	}
	return s.inFeed(ctx, lockChanges, "changes", func(tx pgx.Tx) error {
		if err := put(tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO waisteer.active_policies (room, digest) VALUES ($1, $2)
			ON CONFLICT (room) DO UPDATE SET digest = excluded.digest`, room[:], digest[:]); err != nil {
			return err
		}
		return s.addChange(ctx, tx, "policy", room)
	})
}

// Policy returns the policy with the digest.
func (s *Store) Policy(ctx context.Context, digest sig.Hash) ([]byte, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, "SELECT raw FROM waisteer.policies WHERE digest = $1", digest[:]).Scan(&raw)
	return nonNil(raw), notFound(err)
}

// ActivePolicy returns the room's active policy.
func (s *Store) ActivePolicy(ctx context.Context, room sig.Hash) (sig.Hash, []byte, error) {
	var d, raw []byte
	err := s.pool.QueryRow(ctx, `SELECT a.digest, p.raw FROM waisteer.active_policies a
		JOIN waisteer.policies p ON p.digest = a.digest WHERE a.room = $1`, room[:]).Scan(&d, &raw)
	if err != nil {
		return sig.Hash{}, nil, notFound(err)
	}
	h, err := hash(d)
	return h, nonNil(raw), err
}

// PutRecords stores the records not yet held, in one transaction, and
// reports which were new; of one given twice, the first.
func (s *Store) PutRecords(ctx context.Context, rs []store.Record) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	added := make([]bool, len(rs))
	if len(rs) == 0 {
		return added, nil
	}
	digests, rooms, hops, raws := make([][]byte, len(rs)), make([][]byte, len(rs)), make([][]byte, len(rs)), make([][]byte, len(rs))
	starts, ends := make([]int64, len(rs)), make([]int64, len(rs))
	for i := range rs {
		r := &rs[i]
		digests[i], rooms[i], hops[i], raws[i] = r.Digest[:], r.Room[:], r.Hop[:], nonNil(r.Raw)
		starts[i], ends[i] = i64(r.Start), i64(r.End)
	}
	err := s.inFeed(ctx, lockRecords, "records", func(tx pgx.Tx) error {
		clear(added)
		rows, err := tx.Query(ctx, `INSERT INTO waisteer.records (digest, seq, writer, room, hop, start_t, end_t, raw)
			SELECT d, nextval('waisteer.feed'), $7, r, h, s, e, w
			FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[], $5::bigint[], $6::bytea[]) WITH ORDINALITY AS u(d, r, h, s, e, w, i)
			ORDER BY i
			ON CONFLICT (digest) DO NOTHING RETURNING digest`,
			digests, rooms, hops, starts, ends, raws, s.instance)
		if err != nil {
			return err
		}
		defer rows.Close()
		fresh := map[sig.Hash]bool{}
		for rows.Next() {
			var d []byte
			if err := rows.Scan(&d); err != nil {
				return err
			}
			h, err := hash(d)
			if err != nil {
				return err
			}
			fresh[h] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range rs {
			if fresh[rs[i].Digest] {
				added[i] = true
				delete(fresh, rs[i].Digest) // a later copy was not new
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// Record returns the WMH1 bytes of the record with the digest.
func (s *Store) Record(ctx context.Context, digest sig.Hash) ([]byte, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, "SELECT raw FROM waisteer.records WHERE digest = $1", digest[:]).Scan(&raw)
	return nonNil(raw), notFound(err)
}

// Records calls fn for each record of the room whose end is after since, in
// ascending order of end and then digest (the bbolt store's order).
func (s *Store) Records(ctx context.Context, room sig.Hash, since uint64, fn func(store.Record) error) error {
	rows, err := s.pool.Query(ctx, `SELECT digest, hop, start_t, end_t, raw FROM waisteer.records
		WHERE room = $1 AND end_t > $2 ORDER BY end_t, digest`, room[:], i64(since))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var d, hop, raw []byte
		var start, end int64
		if err := rows.Scan(&d, &hop, &start, &end, &raw); err != nil {
			return err
		}
		r, err := recordOf(d, room[:], hop, start, end, raw)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// recordOf is a record as waisteer.records holds it.
func recordOf(digest, room, hop []byte, start, end int64, raw []byte) (store.Record, error) {
	r := store.Record{Start: u64(start), End: u64(end), Raw: nonNil(raw)}
	var err1, err2 error
	r.Digest, err1 = hash(digest)
	r.Room, err2 = hash(room)
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("postgres: a record does not read: %w", err)
	}
	if len(hop) != len(r.Hop) {
		return r, fmt.Errorf("postgres: record %s's hop key has %d bytes", r.Digest, len(hop))
	}
	copy(r.Hop[:], hop)
	return r, nil
}
