package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/sig"
)

// recordAt is a record of the room with its bytes and digest made from
// its fields and a salt, as a hop's differ: the store reads none of them.
func recordAt(room sig.Hash, hop byte, end uint64, salt uint64) Record {
	raw := fmt.Appendf(nil, "WMH1 %s %d %d %d", room, hop, end, salt)
	return Record{Digest: sig.Digest(raw), Room: room, Hop: sig.PublicKey{0: hop}, Start: end - 10_000_000, End: end, Raw: raw}
}

// refRecords is the brute-force reference: the records held, by digest.
type refRecords map[sig.Hash]Record

// check compares every way the store reads records with the reference:
// each record by its digest, digests never held or pruned not found, and
// each room's records after each of the sinces, in ascending order of end
// (ties in any order: sorted by digest on both sides).
func (ref refRecords) check(t *testing.T, s *Bolt, gone []Record, rooms []sig.Hash, sinces []uint64) {
	t.Helper()
	for d, r := range ref {
		raw, err := s.Record(bg, d)
		if err != nil || !bytes.Equal(raw, r.Raw) {
			t.Fatalf("record %s (end %d): %q, %v", d, r.End, raw, err)
		}
	}
	for _, r := range gone {
		if _, held := ref[r.Digest]; held {
			continue
		}
		if _, err := s.Record(bg, r.Digest); !errors.Is(err, ErrNotFound) {
			t.Fatalf("record %s (end %d), not held: %v, want ErrNotFound", r.Digest, r.End, err)
		}
	}
	for _, room := range rooms {
		for _, since := range sinces {
			var got, want []Record
			if err := s.Records(bg, room, since, func(r Record) error { got = append(got, r); return nil }); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(got); i++ {
				if got[i].End < got[i-1].End {
					t.Fatalf("room %s since %d: end %d after %d", room, since, got[i].End, got[i-1].End)
				}
			}
			for _, r := range ref {
				if r.Room == room && r.End > since {
					want = append(want, r)
				}
			}
			order := func(a, b Record) int {
				if a.End != b.End {
					return cmpU64(a.End, b.End)
				}
				return bytes.Compare(a.Digest[:], b.Digest[:])
			}
			slices.SortFunc(got, order)
			slices.SortFunc(want, order)
			if len(got) != len(want) {
				t.Fatalf("room %s since %d: %d records, want %d", room, since, len(got), len(want))
			}
			for i := range got {
				g, w := got[i], want[i]
				if g.Digest != w.Digest || g.Room != w.Room || g.Hop != w.Hop || g.Start != w.Start || g.End != w.End || !bytes.Equal(g.Raw, w.Raw) {
					t.Fatalf("room %s since %d: record %d is %+v, want %+v", room, since, i, g, w)
				}
			}
		}
	}
}

// put puts rs, checks that PutRecords reports new exactly the records the
// reference does not hold (one given twice in rs, once), and adds them.
func (ref refRecords) put(t *testing.T, s *Bolt, rs []Record) {
	t.Helper()
	added, err := s.PutRecords(bg, rs)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[sig.Hash]bool{}
	for i, r := range rs {
		_, held := ref[r.Digest]
		if want := !held && !seen[r.Digest]; added[i] != want {
			t.Fatalf("record %s (end %d): added %t, want %t", r.Digest, r.End, added[i], want)
		}
		seen[r.Digest] = true
		ref[r.Digest] = r
	}
}

// TestRecordsByDigestAndEnd: records keyed by end and digest, with their
// index by digest (bolt_records.go, issue 30), are found by digest and by
// room and end as a brute-force reference holds them, through cuts and
// merges of the index (a small flush), records arriving late and in
// descending order of end (a backlog), duplicates within a group and
// across groups, a reopen (the index's state read again), and Prune
// (records before the cutoff gone, the others found; one put again after
// it is found again, through record_digests). The store's invariants are
// checked when the test ends (openTestBolt). It runs with the journal,
// through which records are put (journal.go), and without.
func TestRecordsByDigestAndEnd(t *testing.T) {
	t.Run("journal", func(t *testing.T) { testRecordsByDigestAndEnd(t) })
	t.Run("without journal", func(t *testing.T) { testRecordsByDigestAndEnd(t, WithoutJournal()) })
}

func testRecordsByDigestAndEnd(t *testing.T, more ...Option) {
	const sec = 1_000_000
	path := filepath.Join(t.TempDir(), "waisteer.db")
	opts := append([]Option{withIndex(64, 0, 4, 32), WithPruneChunk(50)}, more...)
	s := openTestBolt(t, path, opts...)
	rng := rand.New(rand.NewPCG(30, 1))
	rooms := []sig.Hash{{1}, {2}, {3}}
	now := uint64(1_790_000_000_000_000)
	ref := refRecords{}
	var all []Record
	put := func(rs []Record) {
		t.Helper()
		ref.put(t, s, rs)
	}
	salt := uint64(0)
	next := func(end uint64) Record {
		salt++
		return recordAt(rooms[rng.IntN(len(rooms))], byte(rng.IntN(8)), end, salt)
	}
	for g := range 300 {
		end := now + uint64(g)*sec/10 // ten groups a second of the hops' time
		rs := make([]Record, 1+rng.IntN(20))
		for i := range rs {
			e := end + uint64(rng.IntN(sec/10))
			switch x := rng.IntN(50); {
			case x == 0 && len(all) > 0:
				rs[i] = all[rng.IntN(len(all))] // held already
				continue
			case x == 1:
				e -= 10 * sec // late, behind the watermark
			case x == 2 && i > 0:
				rs[i] = rs[0] // twice in the group
				continue
			}
			rs[i] = next(e)
		}
		put(rs)
		all = append(all, rs...)
		if g == 150 {
			// The index's state as the file holds it.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTestBolt(t, path, opts...)
		}
	}
	// A backlog: records older than every other, in descending order of
	// end, a group at a time.
	for g := range 40 {
		put([]Record{next(now - uint64(g+1)*sec), next(now - uint64(g+1)*sec)})
	}
	// The test reaches what it means to: merged runs, and no record
	// indexed on its own before Prune.
	if err := s.settle(bg); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(s.rx.runs, func(r runInfo) bool { return r.level > 0 }) {
		t.Fatalf("runs %+v of the records' index: the test reaches no merge", s.rx.runs)
	}
	if n := digestsHeld(s); n != 0 {
		t.Fatalf("%d records indexed on their own before any Prune", n)
	}
	sinces := []uint64{0, now, now + 5*sec, now + 15*sec, now + 29*sec, now + 40*sec, 1<<64 - 1}
	ref.check(t, s, nil, rooms, sinces)

	cut := now + 12*sec
	st, err := s.Prune(bg, cut, 0)
	if err != nil {
		t.Fatal(err)
	}
	pruned := 0
	var gone []Record
	for d, r := range ref {
		if r.End < cut {
			delete(ref, d)
			gone = append(gone, r)
			pruned++
		}
	}
	if st.Records != pruned {
		t.Errorf("Prune removed %d records, want %d", st.Records, pruned)
	}
	ref.check(t, s, gone, rooms, sinces)
	// More groups, for merges past the pruned instant, then a pruned record
	// put again (a hop's POST sent again).
	for g := range 100 {
		end := now + 31*sec + uint64(g)*sec/10
		put([]Record{next(end), next(end)})
	}
	put([]Record{gone[0]})
	if n := digestsHeld(s); n != 1 {
		t.Errorf("%d records indexed on their own, want 1: the one put again after Prune", n)
	}
	ref.check(t, s, gone, rooms, sinces)
}

// digestsHeld is the count of records indexed on their own, once the
// records journaled are applied.
func digestsHeld(s *Bolt) int {
	n := 0
	if s.settle(bg) != nil {
		return -1
	}
	s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketRecordDigests).Stats().KeyN
		return nil
	})
	return n
}

// putRecordsFormat1 is format 1's PutRecords, as the store wrote records
// before issue 30 (the records bucket keyed by digest), kept to write the
// files the migration is tested on.
func putRecordsFormat1(db *bolt.DB, rs []Record) error {
	return db.Update(func(tx *bolt.Tx) error {
		records, ends := tx.Bucket(bucketRecords), tx.Bucket(bucketRecordEnds)
		for i := range rs {
			r := &rs[i]
			if records.Get(r.Digest[:]) != nil {
				continue
			}
			if err := records.Put(clone(r.Digest[:]), clone(r.Raw)); err != nil {
				return err
			}
			k := make([]byte, 0, recordEndKeySize)
			k = append(k, r.Room[:]...)
			k = binary.BigEndian.AppendUint64(k, r.End)
			k = append(k, r.Digest[:]...)
			v := make([]byte, 0, recordEndValSize)
			v = append(v, r.Hop[:]...)
			v = binary.BigEndian.AppendUint64(v, r.Start)
			if err := ends.Put(k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// format1File writes a store file of format 1 at path holding rs, and
// the decisions ds (with their evidence): a file of this code with its
// records moved back to format 1's bucket by format 1's writer, and the
// buckets format 1 did not have removed.
func format1File(t *testing.T, path string, ev []Evidence, ds []Decision, rs []Record) {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) > 0 {
		if err := s.PutDecisions(bg, ev, ds); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketRecordRows, bucketRecordDigests, bucketRecordRuns, bucketRecordRunList, bucketRecordPending} {
			if err := tx.DeleteBucket(name); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(metaFormat, []byte{1}); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketRecords)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(rs); i += 100 {
		if err := putRecordsFormat1(db, rs[i:min(i+100, len(rs))]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenMovesFormat1Records: a file of format 1 (records keyed by
// digest) opens: its records move to rows keyed by end and digest in the
// transaction that opens it, and read as they were written, by digest and
// by room and end, through one run of the index at the level merges
// would have given it; its decisions read as before;
// the file is of the current format (fileFormat) and opens again; its invariants hold
// (openTestBolt). Issue 30.
func TestOpenMovesFormat1Records(t *testing.T) {
	const sec = 1_000_000
	path := filepath.Join(t.TempDir(), "waisteer.db")
	base, ev := indexBase(t)
	ds := indexRows(base, 1, 40, base.T, 1000)
	rooms := []sig.Hash{{1}, {2}}
	first := uint64(1_790_000_000_000_000)
	ref := refRecords{}
	var rs []Record
	for i := range 3000 {
		r := recordAt(rooms[i%2], byte(i%5), first+uint64(i)*sec/10, uint64(i))
		rs = append(rs, r)
		ref[r.Digest] = r
	}
	rs = append(rs, rs[7]) // given twice, held once
	format1File(t, path, ev, ds, rs)

	s := openTestBolt(t, path)
	ref.check(t, s, []Record{recordAt(rooms[0], 0, first, 1<<40)}, rooms, []uint64{0, first + 100*sec, first + 299*sec, 1<<64 - 1})
	found(t, s, ds)
	// 3000 entries: 1024 at level 0, 8 192 at 1 (defaultIndexFlush and
	// defaultIndexFanIn).
	if want := (runInfo{level: 1, count: 3000, tmin: first, tmax: rs[2999].End}); len(s.rx.runs) != 1 || s.rx.runs[0].level != want.level || s.rx.runs[0].count != want.count || s.rx.runs[0].tmin != want.tmin || s.rx.runs[0].tmax != want.tmax {
		t.Errorf("the migrated index has runs %+v, want one like %+v", s.rx.runs, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestBolt(t, path)
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaFormat); !bytes.Equal(v, []byte{fileFormat}) {
			return fmt.Errorf("format %x, want %d", v, fileFormat)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ref.check(t, s, nil, rooms, []uint64{0})
	// Written on as any file of the current format.
	more := recordAt(rooms[1], 9, first+3600*sec, 1)
	if _, err := s.PutRecords(bg, []Record{more}); err != nil {
		t.Fatal(err)
	}
	ref[more.Digest] = more
	ref.check(t, s, nil, rooms, []uint64{first + 299*sec})
}

// TestOpenFormat1Refused: a file of format 1 whose records do not move (a
// record indexed by its end but not held) does not open, and is left as
// it was: format 1, its records bucket and no rows. A file of a format
// this code does not know does not open either.
func TestOpenFormat1Refused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "waisteer.db")
	r := recordAt(sig.Hash{1}, 1, 5_000_000, 1)
	format1File(t, path, nil, nil, []Record{r, recordAt(sig.Hash{1}, 2, 6_000_000, 2)})
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketRecords).Delete(r.Digest[:]) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatal("a file of format 1 with a record indexed, not held, opened")
	}
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaFormat); !bytes.Equal(v, []byte{1}) {
			return fmt.Errorf("format %x after a refused migration, want 1", v)
		}
		if tx.Bucket(bucketRecords) == nil || tx.Bucket(bucketRecords).Stats().KeyN != 1 {
			return errors.New("format 1's records bucket is not as it was")
		}
		if tx.Bucket(bucketRecordRows) != nil {
			return errors.New("a refused migration left rows")
		}
		return tx.Bucket(bucketMeta).Put(metaFormat, []byte{fileFormat + 1})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatalf("a file of format %d opened", fileFormat+1)
	}
}
