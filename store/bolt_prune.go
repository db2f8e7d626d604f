package store

// Bolt's pruning: old records and decisions, and snapshots left unreferenced.

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/sig"
)

// Prune removes, in groups of at most the prune chunk each committed on its
// own, the records whose end is before recordsBefore, then the decisions
// whose t is before decisionsBefore, and with the last decision referencing it each snapshot. Requests
// run between the groups. A context cancelled stops it between groups, with
// what it removed so far counted.
func (s *Bolt) Prune(ctx context.Context, recordsBefore, decisionsBefore uint64) (PruneStats, error) {
	var st PruneStats
	if err := s.settle(ctx); err != nil {
		return st, err
	}
	if err := s.pruneRecords(ctx, recordsBefore, &st); err != nil {
		return st, err
	}
	err := s.pruneDecisions(ctx, decisionsBefore, &st)
	return st, err
}

func (s *Bolt) pruneRecords(ctx context.Context, before uint64, st *PruneStats) error {
	var from []byte // the first key the next group looks at; nil for the first
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var victims [][]byte
		var ch indexChange
		s.rx.mu.Lock()
		err := s.db.Update(func(tx *bolt.Tx) error {
			victims, ch = victims[:0], indexChange{}
			if err := s.rx.collect(tx, &ch); err != nil {
				return err
			}
			rows, ends, digests := tx.Bucket(bucketRecordRows), tx.Bucket(bucketRecordEnds), tx.Bucket(bucketRecordDigests)
			c := ends.Cursor()
			k, _ := c.First()
			if from != nil {
				k, _ = c.Seek(from)
			}
			for k != nil && len(victims) < s.chunk {
				if len(k) != recordEndKeySize {
					return fmt.Errorf("store: a record index key of %d bytes", len(k))
				}
				if binary.BigEndian.Uint64(k[sig.HashSize:]) < before {
					victims = append(victims, clone(k))
					k, _ = c.Next()
					continue
				}
				// The room's other records end later: on to the next room.
				next, ok := nextRoom(k[:sig.HashSize])
				if !ok {
					k = nil
					break
				}
				k, _ = c.Seek(next)
			}
			from = clone(k)
			for _, v := range victims {
				if err := ends.Delete(v); err != nil {
					return err
				}
				if err := rows.Delete(v[sig.HashSize:]); err != nil {
					return err
				}
				// Only a record indexed on its own is there; the runs'
				// entries go with their runs or in merges (index.go).
				if err := digests.Delete(v[sig.HashSize+8:]); err != nil {
					return err
				}
			}
			if from == nil {
				// Every record before the instant is gone: the runs whose
				// records all were go with the last of them.
				return s.rx.pruneRuns(tx, &ch, before)
			}
			return nil
		})
		if err == nil {
			s.rx.apply(&ch)
		}
		s.rx.mu.Unlock()
		if err != nil {
			return err
		}
		st.Records += len(victims)
		if from == nil {
			return nil
		}
	}
}

// nextRoom is the least room id above room, as a key prefix: room plus one,
// read as a big-endian number; false when room is the greatest.
func nextRoom(room []byte) ([]byte, bool) {
	next := clone(room)
	for i := len(next) - 1; i >= 0; i-- {
		next[i]++
		if next[i] != 0 {
			return next, true
		}
	}
	return nil, false
}

func (s *Bolt) pruneDecisions(ctx context.Context, before uint64, st *PruneStats) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := false
		var removed, snapshots int
		var ch indexChange
		var lch logChange
		s.ix.mu.Lock()
		err := s.db.Update(func(tx *bolt.Tx) error {
			removed, snapshots, ch, lch = 0, 0, indexChange{}, logChange{}
			if err := s.ix.collect(tx, &ch); err != nil {
				return err
			}
			// A decision's leaf is written before its row can go.
			if err := s.lg.commit(tx, &lch, true); err != nil {
				return err
			}
			b := decisionBucketsOf(tx)
			type victim struct {
				key      []byte
				snapshot uint64
			}
			var victims []victim
			c := b.decisions.Cursor()
			k, v := c.First()
			for ; k != nil && len(victims) < s.chunk; k, v = c.Next() {
				if len(k) != 8+sig.HashSize {
					return fmt.Errorf("store: a decision key of %d bytes", len(k))
				}
				if binary.BigEndian.Uint64(k) >= before {
					break
				}
				r, err := parseRow(v)
				if err != nil {
					return fmt.Errorf("store: decision %x: %w", k[8:], err)
				}
				victims = append(victims, victim{clone(k), r.snapshot})
			}
			done = k == nil || binary.BigEndian.Uint64(k) >= before
			for _, vc := range victims {
				if err := b.decisions.Delete(vc.key); err != nil {
					return err
				}
				if err := b.digests.Delete(vc.key[8:]); err != nil {
					return err
				}
				gone, err := snapshotUnref(&b, vc.snapshot)
				if err != nil {
					return err
				}
				if gone {
					snapshots++
				}
			}
			removed = len(victims)
			if done {
				// The index's runs whose decisions are all gone go with
				// the last of them (index.go).
				return s.ix.pruneRuns(tx, &ch, before)
			}
			return nil
		})
		if err == nil {
			s.ix.apply(&ch)
			s.lg.apply(&lch)
		}
		s.ix.mu.Unlock()
		if err != nil {
			return err
		}
		st.Decisions += removed
		st.Snapshots += snapshots
		if done {
			return nil
		}
	}
}

// snapshotUnref counts one decision fewer referencing the snapshot id, and
// removes it with the last; it reports whether it did.
func snapshotUnref(b *decisionBuckets, id uint64) (bool, error) {
	idb := binary.BigEndian.AppendUint64(nil, id)
	bv := b.bodies.Get(idb)
	if len(bv) < sig.HashSize {
		return false, fmt.Errorf("store: snapshot %d is referenced but not held", id)
	}
	key := clone(bv[:sig.HashSize])
	v := b.snapshots.Get(key)
	if len(v) != 16 || binary.BigEndian.Uint64(v) != id {
		return false, fmt.Errorf("store: snapshot %d's entry does not name it", id)
	}
	refs := binary.BigEndian.Uint64(v[8:])
	if refs > 1 {
		return false, b.snapshots.Put(key, binary.BigEndian.AppendUint64(idb, refs-1))
	}
	if err := b.snapshots.Delete(key); err != nil {
		return false, err
	}
	return true, b.bodies.Delete(idb)
}
