package store

// Bolt's records: their writes and reads, their index by digest, and the
// move of a file of format 1's records to their rows.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/sig"
)

// A record's row is keyed by its end and digest, so that the records of a
// period, which the hops post together as it ends, are written to a few
// neighbouring pages of the bucket: keyed by digest alone (format 1), each
// record rewrote and synced a page of its own, several times the cost of
// checking its signature (issue 30). Records are found by digest (GET
// /v1/records/{digest}) through an index kept as the decisions' is
// (index.go), in buckets of its own, its newest entries pending in the
// order they were put.
var (
	bucketRecordRows    = []byte("record_rows")     // end u64 BE ‖ digest → the WMH1 bytes
	bucketRecordDigests = []byte("record_digests")  // digest → end u64 BE, for a record put again after Prune
	bucketRecordRuns    = []byte("record_runs")     // as decision_runs
	bucketRecordRunList = []byte("record_run_list") // as decision_run_list
	bucketRecordPending = []byte("record_pending")  // sequence u64 BE → digest ‖ end u64 BE

	// bucketRecords is format 1's records bucket, digest → the WMH1
	// bytes, which Open moves to record_rows (migrateRecords).
	bucketRecords = []byte("records")
)

var recordIndex = &indexNames{
	what: "record", rows: bucketRecordRows, digests: bucketRecordDigests,
	runs: bucketRecordRuns, runList: bucketRecordRunList, pending: bucketRecordPending,
}

// Sizes of a record_ends entry and a record's key.
const (
	recordEndKeySize = sig.HashSize + 8 + sig.HashSize
	recordEndValSize = sig.PublicKeySize + 8
	recordKeySize    = 8 + sig.HashSize
)

// recordKey is a record's row key: end u64 BE ‖ digest.
func recordKey(dst []byte, end uint64, digest *sig.Hash) []byte {
	return append(binary.BigEndian.AppendUint64(dst, end), digest[:]...)
}

// PutRecords stores the records not yet held, durably, and reports which
// were new. A record's digest covers its end (COMPANION §5), so a record
// held is held under the key it would be put at. With a journal, the
// records are made durable there and applied to the file a little later
// (journal.go); without, they are written to the file in one commit.
func (s *Bolt) PutRecords(ctx context.Context, rs []Record) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.jr == nil {
		return s.putRecords(rs)
	}
	return s.jr.appendRecords(ctx, rs, s.recordsHeld, s.putRecords)
}

// recordsHeld reports, for each record not set in skip, whether the file
// holds its row.
func (s *Bolt) recordsHeld(rs []Record, skip []bool) ([]bool, error) {
	held := make([]bool, len(rs))
	err := s.db.View(func(tx *bolt.Tx) error {
		rows := tx.Bucket(bucketRecordRows)
		key := make([]byte, 0, recordKeySize)
		for i := range rs {
			if !skip[i] {
				held[i] = rows.Get(recordKey(key[:0], rs[i].End, &rs[i].Digest)) != nil
			}
		}
		return nil
	})
	return held, err
}

// putRecords writes the records not yet held to the file in one commit,
// and reports which were new.
func (s *Bolt) putRecords(rs []Record) ([]bool, error) {
	added := make([]bool, len(rs))
	var ch indexChange
	s.rx.mu.Lock()
	defer s.rx.mu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		ch = indexChange{}
		return s.putRecordsTx(tx, rs, added, &ch)
	})
	if err != nil {
		return nil, err
	}
	s.rx.apply(&ch)
	return added, nil
}

// putRecordsTx puts the records not yet held, in tx, with their share of
// the index's upkeep, and sets added (when not nil) for those it put. The
// caller holds rx.mu.
func (s *Bolt) putRecordsTx(tx *bolt.Tx, rs []Record, added []bool, ch *indexChange) error {
	// One arena for the keys and values: bbolt keeps the slices given to
	// Put until the transaction ends. The bytes are copied, since the
	// caller's may be a request's, reused once it is answered.
	size := 0
	for i := range rs {
		size += recordKeySize + recordEndKeySize + recordEndValSize + 8 + indexEntrySize + len(rs[i].Raw)
	}
	arena := make([]byte, 0, size)
	rows, ends, digests := tx.Bucket(bucketRecordRows), tx.Bucket(bucketRecordEnds), tx.Bucket(bucketRecordDigests)
	pending := tx.Bucket(bucketRecordPending)
	rows.FillPercent, ends.FillPercent, pending.FillPercent = appendFill, appendFill, 1
	for i := range rs {
		r := &rs[i]
		start := len(arena)
		arena = recordKey(arena, r.End, &r.Digest)
		key := arena[start:len(arena):len(arena)]
		if rows.Get(key) != nil {
			arena = arena[:start]
			continue
		}
		start = len(arena)
		arena = append(arena, r.Raw...)
		if err := rows.Put(key, arena[start:len(arena):len(arena)]); err != nil {
			return err
		}
		start = len(arena)
		arena = append(arena, r.Room[:]...)
		arena = append(arena, key...)
		k := arena[start:len(arena):len(arena)]
		start = len(arena)
		arena = append(arena, r.Hop[:]...)
		arena = binary.BigEndian.AppendUint64(arena, r.Start)
		if err := ends.Put(k, arena[start:len(arena):len(arena)]); err != nil {
			return err
		}
		if added != nil {
			added[i] = true
		}
		if r.End < s.rx.pruned {
			// Before what Prune removed, which merges leave out:
			// indexed on its own.
			if err := digests.Put(key[8:], key[:8]); err != nil {
				return err
			}
			continue
		}
		seq, err := pending.NextSequence()
		if err != nil {
			return err
		}
		start = len(arena)
		arena = binary.BigEndian.AppendUint64(arena, seq)
		arena = append(arena, r.Digest[:]...)
		arena = binary.BigEndian.AppendUint64(arena, r.End)
		if err := pending.Put(arena[start:start+8:start+8], arena[start+8:len(arena):len(arena)]); err != nil {
			return err
		}
		ch.added++
	}
	return s.rx.maintain(tx, ch, max(s.rx.budget, 16*len(rs)))
}

// Record returns the WMH1 bytes of the record with the digest, from a
// group of the journal not applied yet or from the file.
func (s *Bolt) Record(ctx context.Context, digest sig.Hash) ([]byte, error) {
	// The pending groups first, then the file, as appendRecords looks: the
	// applier forgets a group's records only once its commit is in the
	// file, so a record put before the call is found in one or the other,
	// and a miss waits for no commit.
	if j := s.jr; j != nil {
		if raw, ok := j.pendingRecord(digest); ok {
			return raw, nil
		}
	}
	return s.record(ctx, digest)
}

func (s *Bolt) record(ctx context.Context, digest sig.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var v []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		end, found, err := recordIndex.lookup(tx, digest)
		if err != nil || !found {
			return err
		}
		// Not held when Prune removed it: the index keeps some entries a
		// while longer.
		v = clone(tx.Bucket(bucketRecordRows).Get(recordKey(make([]byte, 0, recordKeySize), end, &digest)))
		return nil
	})
	if err == nil && v == nil {
		err = ErrNotFound
	}
	return v, err
}

// Records calls fn for each record of the room whose end is after since, in
// ascending order of end. It reads them in groups, each in its own read
// transaction, and calls fn outside any: a long read transaction would hold
// back the writers that grow the file. The records journaled before it are
// applied first, at once (a room reads its records when it opens or its
// key log changes, not per request).
func (s *Bolt) Records(ctx context.Context, room sig.Hash, since uint64, fn func(Record) error) error {
	if since == 1<<64-1 {
		return ctx.Err() // no end is after it
	}
	if j := s.jr; j != nil {
		if err := j.waitApplied(ctx, j.seq.Load(), true); err != nil {
			return err
		}
	}
	seek := make([]byte, 0, recordEndKeySize+1)
	seek = append(seek, room[:]...)
	seek = binary.BigEndian.AppendUint64(seek, since+1)
	batch := make([]Record, 0, recordsChunk)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch = batch[:0]
		err := s.db.View(func(tx *bolt.Tx) error {
			rows := tx.Bucket(bucketRecordRows)
			c := tx.Bucket(bucketRecordEnds).Cursor()
			for k, v := c.Seek(seek); k != nil && len(batch) < recordsChunk && bytes.HasPrefix(k, room[:]); k, v = c.Next() {
				if len(k) != recordEndKeySize || len(v) != recordEndValSize {
					return fmt.Errorf("store: a record index entry of %d and %d bytes", len(k), len(v))
				}
				r := Record{Room: room, End: binary.BigEndian.Uint64(k[sig.HashSize:]), Start: binary.BigEndian.Uint64(v[sig.PublicKeySize:])}
				copy(r.Digest[:], k[sig.HashSize+8:])
				copy(r.Hop[:], v)
				// The row's key is the entry's after the room.
				if r.Raw = clone(rows.Get(k[sig.HashSize:])); r.Raw == nil {
					return fmt.Errorf("store: record %s is indexed but not held", r.Digest)
				}
				batch = append(batch, r)
				// The next group starts after this key: the key with one
				// more byte sorts after it and before any other.
				seek = append(append(seek[:0], k...), 0)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range batch {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(batch) < recordsChunk {
			return nil
		}
	}
}

// migrateRecords moves the records of a file of format 1, in the
// transaction that opens it, from the records bucket (digest → WMH1) to
// their rows (end ‖ digest → WMH1), in ascending order of key so that the
// rows are written packed, deletes the records bucket, and returns the
// entries of the index by digest (migratedRun writes them). A record held
// but not in record_ends, which format 1 wrote together, fails the
// migration, and the file keeps format 1.
func migrateRecords(tx *bolt.Tx) ([][indexEntrySize]byte, error) {
	old := tx.Bucket(bucketRecords)
	if old == nil {
		return nil, nil
	}
	var keys [][recordKeySize]byte
	err := tx.Bucket(bucketRecordEnds).ForEach(func(k, _ []byte) error {
		if len(k) != recordEndKeySize {
			return fmt.Errorf("a record index key of %d bytes", len(k))
		}
		keys = append(keys, [recordKeySize]byte(k[sig.HashSize:]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(keys, func(a, b [recordKeySize]byte) int { return bytes.Compare(a[:], b[:]) })
	rows := tx.Bucket(bucketRecordRows)
	if k, _ := rows.Cursor().First(); k != nil {
		return nil, fmt.Errorf("format 1 with records in %s", bucketRecordRows)
	}
	rows.FillPercent = 1 // written in ascending order
	entries := make([][indexEntrySize]byte, len(keys))
	for i := range keys {
		k := keys[i][:]
		v := old.Get(k[8:])
		if v == nil {
			return nil, fmt.Errorf("record %x is indexed but not held", k[8:])
		}
		// v is the file's until the transaction ends, as Put needs.
		if err := rows.Put(k, v); err != nil {
			return nil, err
		}
		copy(entries[i][:], k[8:])
		copy(entries[i][sig.HashSize:], k[:8])
	}
	if n := old.Stats().KeyN; n != len(keys) {
		return nil, fmt.Errorf("%d records held, %d indexed", n, len(keys))
	}
	return entries, tx.DeleteBucket(bucketRecords)
}

// migratedRun writes the index entries of the records a migration moved
// as one run, in the transaction that opens the file, at the level its
// size would have reached by merges, so that merges do not soon write its
// entries again.
func (ix *digestIndex) migratedRun(tx *bolt.Tx, entries [][indexEntrySize]byte) error {
	level := uint8(0)
	for size := uint64(ix.flush); size < uint64(len(entries)) && level < 254; size *= uint64(ix.fanIn) {
		level++
	}
	var ch indexChange
	if err := ix.writeRun(tx, &ch, entries, level); err != nil {
		return err
	}
	ch.flushed = 0 // the pending entries are not these
	ix.apply(&ch)
	return nil
}
