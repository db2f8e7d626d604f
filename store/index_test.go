package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

// withIndex sets the index's flush, margin (µs), fan-in and the least
// entries of merges per group commit, small for the tests, and blocks of
// 5 entries in its runs, so that a run of a few dozen entries is several
// blocks and a merge's steps end inside one.
func withIndex(flush int, margin uint64, fanIn, budget int) Option {
	// The tests watch the index change with each group: without the
	// journal (journal.go), each group is a commit of its own.
	return func(o *options) {
		o.index.flush, o.index.margin, o.index.fanIn, o.index.budget = flush, margin, fanIn, budget
		o.index.block = 5
		o.noJournal = true
	}
}

// withRunBlock sets the entries of a block of the index's runs, after
// withIndex.
func withRunBlock(n int) Option { return func(o *options) { o.index.block = n } }

// indexRows are count decisions like base, at t from first, step µs apart,
// each with a digest of its own.
func indexRows(base Decision, seed uint64, count int, first, step uint64) []Decision {
	ds := make([]Decision, count)
	for i := range ds {
		ds[i] = base
		ds[i].T = first + uint64(i)*step
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:], seed)
		binary.LittleEndian.PutUint64(b[8:], uint64(i))
		ds[i].Digest = sha256.Sum256(b[:])
	}
	return ds
}

// indexBase is one decision and its snapshot, the model of indexRows.
func indexBase(t testing.TB) (Decision, []Evidence) {
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 1, 1, 7*scenario.Period, 0)
	return ms[0].row, evidenceOf(ms)
}

func putRows(t *testing.T, s *Bolt, ev []Evidence, ds []Decision, size int) {
	t.Helper()
	for i := 0; i < len(ds); i += size {
		if err := s.PutDecisions(bg, ev, ds[i:min(i+size, len(ds))]); err != nil {
			t.Fatal(err)
		}
	}
}

// found checks that each decision is found by its digest (§8.4: an auditor
// has the digest alone) with its t.
func found(t *testing.T, s *Bolt, ds []Decision) {
	t.Helper()
	for _, d := range ds {
		got, err := s.Decision(bg, d.Digest)
		if err != nil || got.T != d.T {
			t.Fatalf("decision %s at %d: found at %d, %v", d.Digest, d.T, got.T, err)
		}
		// By the t its log's leaf names (the recount after a restart):
		// the same row, and none at another t.
		at, err := s.DecisionAt(bg, d.T, d.Digest)
		if err != nil || !reflect.DeepEqual(at, got) {
			t.Fatalf("decision %s at %d: DecisionAt gives %+v, %v; Decision %+v", d.Digest, d.T, at, err, got)
		}
		if _, err := s.DecisionAt(bg, d.T+1, d.Digest); !errors.Is(err, ErrNotFound) {
			t.Fatalf("decision %s at %d: DecisionAt a µs later: %v, want ErrNotFound", d.Digest, d.T, err)
		}
	}
	// Many leaves in one read (DecisionsAt, the recount's): each leaf's
	// decision as Decision gives it, the leaf a µs later not held, both
	// appended after what was given.
	var es []LogEntry
	for _, d := range ds {
		es = append(es, LogEntry{Digest: d.Digest, T: d.T}, LogEntry{Digest: d.Digest, T: d.T + 1})
	}
	rows, held, err := s.DecisionsAt(bg, es, []Decision{{T: 1}}, []bool{true})
	if err != nil || len(rows) != len(es)+1 || len(held) != len(es)+1 || rows[0].T != 1 || !held[0] {
		t.Fatalf("DecisionsAt of %d leaves: %d rows, %d held, %v", len(es), len(rows), len(held), err)
	}
	for k, d := range ds {
		got, err := s.Decision(bg, d.Digest)
		if err != nil || !held[1+2*k] || !reflect.DeepEqual(rows[1+2*k], got) {
			t.Fatalf("decision %s at %d: DecisionsAt gives %+v (held %v); Decision %+v, %v", d.Digest, d.T, rows[1+2*k], held[1+2*k], got, err)
		}
		if held[2+2*k] || !reflect.DeepEqual(rows[2+2*k], Decision{}) {
			t.Fatalf("decision %s at %d: DecisionsAt a µs later held %v, %+v", d.Digest, d.T, held[2+2*k], rows[2+2*k])
		}
	}
}

func runLevels(s *Bolt) map[uint8]int {
	s.ix.mu.Lock()
	defer s.ix.mu.Unlock()
	levels := map[uint8]int{}
	for _, r := range s.ix.runs {
		levels[r.level]++
	}
	return levels
}

// TestIndexRunsAndMerges_8_4: decisions put in groups are cut into runs of
// the index and merged level by level, and each is found by its digest
// throughout, with the store's invariants (checked on cleanup).
func TestIndexRunsAndMerges_8_4(t *testing.T) {
	base, ev := indexBase(t)
	s := openTestBolt(t, "", withIndex(16, 0, 3, 5))
	ds := indexRows(base, 1, 900, 1_000_000, 1000)
	for i := 0; i < len(ds); i += 50 {
		putRows(t, s, ev, ds[i:i+50], 7)
		found(t, s, ds[:i+50])
	}
	levels := runLevels(s)
	if levels[1] == 0 && levels[2] == 0 {
		t.Errorf("runs by level %v: nothing was merged", levels)
	}
	if n := len(s.ix.runs); n > 3*4 {
		t.Errorf("%d runs for %d decisions with a fan-in of 3", n, len(ds))
	}
}

// TestIndexLateRows_8_4: a decision whose t is behind the index's watermark
// (a clock stepped back) is found too.
func TestIndexLateRows_8_4(t *testing.T) {
	base, ev := indexBase(t)
	s := openTestBolt(t, "", withIndex(8, 0, 4, 5))
	ds := indexRows(base, 2, 100, 5_000_000, 1000)
	putRows(t, s, ev, ds, 10)
	late := indexRows(base, 3, 20, 5_000_000+500, 1000) // among the first's instants
	putRows(t, s, ev, late, 3)
	found(t, s, append(ds, late...))
	// Put again, they are held once.
	putRows(t, s, ev, late, 20)
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketDecisions).Stats().KeyN; n != len(ds)+len(late) {
			t.Errorf("%d rows for %d decisions", n, len(ds)+len(late))
		}
		if n := tx.Bucket(bucketDecisionDigests).Stats().KeyN; n == 0 {
			t.Errorf("no decision was behind the watermark: the test tests nothing")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestIndexReopen_8_4: a store closed with merges under way opens with the
// unfinished output deleted, finds every decision, and goes on merging.
func TestIndexReopen_8_4(t *testing.T) {
	base, ev := indexBase(t)
	path := filepath.Join(t.TempDir(), "index.db")
	s, err := Open(path, withIndex(16, 0, 4, 5))
	if err != nil {
		t.Fatal(err)
	}
	ds := indexRows(base, 4, 2000, 1_000_000, 1000)
	// Put until a merge is under way: one of 4 runs of 16 takes more than
	// a group of one's budget of 16 entries.
	i := 0
	for ; i < len(ds) && len(s.ix.merges) == 0; i++ {
		putRows(t, s, ev, ds[i:i+1], 1)
	}
	if len(s.ix.merges) == 0 {
		t.Fatalf("no merge under way after %d decisions", i)
	}
	out := s.ix.merges[0].out
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestBolt(t, path, withIndex(16, 0, 4, 5))
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketDecisionRuns).Bucket(idKey(out)) != nil {
			t.Errorf("the unfinished output %d of a merge is still held", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	found(t, s, ds[:i])
	putRows(t, s, ev, ds[i:], 25)
	found(t, s, ds)
}

// TestIndexPrune_8_4: Prune drops the runs whose decisions are all gone;
// the decisions before the instant are not found, the others are.
func TestIndexPrune_8_4(t *testing.T) {
	base, ev := indexBase(t)
	s := openTestBolt(t, "", withIndex(16, 0, 4, 5), WithPruneChunk(37))
	ds := indexRows(base, 5, 600, 1_000_000, 1000)
	putRows(t, s, ev, ds, 9)
	before := len(s.ix.runs)
	cut := ds[400].T
	st, err := s.Prune(bg, 0, cut)
	if err != nil || st.Decisions != 400 {
		t.Fatalf("pruned %+v, %v; want 400 decisions", st, err)
	}
	if len(s.ix.runs) >= before {
		t.Errorf("%d runs before pruning, %d after", before, len(s.ix.runs))
	}
	for _, d := range ds[:400] {
		if _, err := s.Decision(bg, d.Digest); !errors.Is(err, ErrNotFound) {
			t.Fatalf("decision at %d after pruning before %d: %v", d.T, cut, err)
		}
	}
	found(t, s, ds[400:])
	// The runs dropped are deleted as groups are committed.
	more := indexRows(base, 6, 200, ds[599].T+1000, 1000)
	putRows(t, s, ev, more, 5)
	found(t, s, more)
}

// TestIndexLegacyFile_8_4: a file written before the runs, whose
// decision_digests indexes every decision and which has no watermark, finds
// them all, and indexes new ones in runs.
func TestIndexLegacyFile_8_4(t *testing.T) {
	base, ev := indexBase(t)
	path := filepath.Join(t.TempDir(), "legacy.db")
	s, err := Open(path, withIndex(8, 0, 4, 5))
	if err != nil {
		t.Fatal(err)
	}
	old := indexRows(base, 7, 100, 1_000_000, 1000)
	putRows(t, s, ev, old, 10)
	// The layout before the runs: every decision in decision_digests.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, d := range old {
			if err := tx.Bucket(bucketDecisionDigests).Put(d.Digest[:], binary.BigEndian.AppendUint64(nil, d.T)); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(bucketDecisionRuns); err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketDecisionRunList); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaIndexThrough)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestBolt(t, path, withIndex(8, 0, 4, 5))
	found(t, s, old)
	if s.ix.sinceFlush != 0 || len(s.ix.runs) != 0 {
		t.Errorf("a legacy file opens with %d rows in the tail and %d runs", s.ix.sinceFlush, len(s.ix.runs))
	}
	more := indexRows(base, 8, 100, 2_000_000, 1000)
	putRows(t, s, ev, more, 10)
	found(t, s, append(old, more...))
	if len(s.ix.runs) == 0 {
		t.Errorf("no run after 100 more decisions")
	}
}

// TestIndexFormat2Runs_8_4: a file of format 2, whose runs hold an entry
// per key (digest → t u64 BE), opens as it is and becomes format 3: every
// decision is found by its digest; its runs of entries are merged with
// runs of blocks as decisions arrive, each decision still found, until no
// run of entries is left.
func TestIndexFormat2Runs_8_4(t *testing.T) {
	base, ev := indexBase(t)
	path := filepath.Join(t.TempDir(), "format2.db")
	s, err := Open(path, withIndex(16, 0, 4, 5))
	if err != nil {
		t.Fatal(err)
	}
	old := indexRows(base, 11, 200, 1_000_000, 1000)
	putRows(t, s, ev, old, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Every run as format 2 wrote it: each block (the digest of its
	// first entry → digest ‖ t, …) taken apart into a key per entry.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	rewritten := 0
	err = db.Update(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketDecisionRuns)
		var ids [][]byte
		if err := runs.ForEach(func(k, _ []byte) error { ids = append(ids, clone(k)); return nil }); err != nil {
			return err
		}
		for _, id := range ids {
			var entries []byte
			if err := runs.Bucket(id).ForEach(func(k, v []byte) error {
				if len(v)%indexEntrySize != 0 || !bytes.Equal(k, v[:sig.HashSize]) {
					return fmt.Errorf("run %x: an item of %d bytes under %x", id, len(v), k)
				}
				entries = append(entries, v...)
				return nil
			}); err != nil {
				return err
			}
			if err := runs.DeleteBucket(id); err != nil {
				return err
			}
			sub, err := runs.CreateBucket(id)
			if err != nil {
				return err
			}
			for e := entries; len(e) > 0; e = e[indexEntrySize:] {
				if err := sub.Put(clone(e[:sig.HashSize]), clone(e[sig.HashSize:indexEntrySize])); err != nil {
					return err
				}
				rewritten++
			}
		}
		return tx.Bucket(bucketMeta).Put(metaFormat, []byte{2})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rewritten < 100 {
		t.Fatalf("%d entries in runs of format 2: the test tests little", rewritten)
	}
	entryRuns := func(s *Bolt) (n int) {
		s.db.View(func(tx *bolt.Tx) error {
			runs := tx.Bucket(bucketDecisionRuns)
			return tx.Bucket(bucketDecisionRunList).ForEach(func(k, _ []byte) error {
				if _, v := runs.Bucket(k).Cursor().First(); len(v) == 8 {
					n++
				}
				return nil
			})
		})
		return n
	}
	s = openTestBolt(t, path, withIndex(16, 0, 4, 5))
	s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaFormat); !bytes.Equal(v, []byte{3}) {
			t.Errorf("format %x once opened, want 3", v)
		}
		return nil
	})
	if n := entryRuns(s); n == 0 {
		t.Fatal("no run of entries listed once opened")
	}
	found(t, s, old)
	more := indexRows(base, 12, 600, 2_000_000, 1000)
	for i := 0; i < len(more); i += 100 {
		putRows(t, s, ev, more[i:i+100], 10)
		found(t, s, append(old, more[:i+100]...))
	}
	if n := entryRuns(s); n != 0 {
		t.Errorf("%d runs of entries listed after 600 more decisions", n)
	}
}

// TestIndexBrokenBlock_8_4: a run's block that is not one (its length
// not a multiple of an entry's, or its key not its first digest) fails a
// lookup that reads it with an error naming what is wrong, and no panic.
func TestIndexBrokenBlock_8_4(t *testing.T) {
	base, ev := indexBase(t)
	for _, c := range []struct {
		name  string
		spoil func(k, v []byte) ([]byte, []byte)
		want  string
	}{
		{"short", func(k, v []byte) ([]byte, []byte) { return k, v[:len(v)-1] }, "an item of"},
		{"key", func(k, v []byte) ([]byte, []byte) {
			k = clone(k)
			k[31] ^= 1
			return k, v
		}, "begins with"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "broken.db"), withIndex(16, 0, 4, 5))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ds := indexRows(base, 13, 64, 1_000_000, 1000)
			putRows(t, s, ev, ds, 16)
			if len(s.ix.runs) == 0 {
				t.Fatal("no run")
			}
			// The first block of the first run listed, replaced.
			var first []byte
			if err := s.db.Update(func(tx *bolt.Tx) error {
				id, _ := tx.Bucket(bucketDecisionRunList).Cursor().First()
				run := tx.Bucket(bucketDecisionRuns).Bucket(id)
				k, v := run.Cursor().First()
				first = clone(k)
				nk, nv := c.spoil(clone(k), clone(v))
				if err := run.Delete(k); err != nil {
					return err
				}
				return run.Put(nk, nv)
			}); err != nil {
				t.Fatal(err)
			}
			d, err := s.Decision(bg, sig.Hash(first))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the decision of a broken block: %+v, %v; want an error with %q", d.T, err, c.want)
			}
		})
	}
}

// TestIndexMargin_8_4: a run leaves in the tail the decisions within the
// margin of the latest, so that one still on its way to the committer is
// not behind the watermark.
func TestIndexMargin_8_4(t *testing.T) {
	base, ev := indexBase(t)
	s := openTestBolt(t, "", withIndex(10, 50_000, 4, 5))
	ds := indexRows(base, 9, 100, 1_000_000, 1000) // 99 ms of decisions
	putRows(t, s, ev, ds, 20)
	var through []byte
	s.db.View(func(tx *bolt.Tx) error { through = clone(indexThrough(tx)); return nil })
	if len(through) < 8 || binary.BigEndian.Uint64(through) > ds[len(ds)-1].T-50_000 {
		t.Errorf("watermark %x: within 50 ms of the latest decision at %d", through, ds[len(ds)-1].T)
	}
	// One decided 40 ms before the latest arrives last: in the tail, not
	// behind the watermark.
	late := indexRows(base, 10, 1, ds[len(ds)-1].T-40_000+1, 0)
	putRows(t, s, ev, late, 1)
	s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketDecisionDigests).Get(late[0].Digest[:]) != nil {
			t.Errorf("a decision 40 ms behind the latest was indexed behind the watermark")
		}
		return nil
	})
	found(t, s, append(ds, late...))
}

// BenchmarkIndexLookup is a decision found by its digest (§8.4) among
// 200 000, indexed in runs and the tail, and a digest the store does not
// hold, which reads every run and the whole tail: the cost the index's
// runs put on an auditor's fetch, for the random write per decision they
// save (BenchmarkPutDecisions).
func BenchmarkIndexLookup(b *testing.B) {
	sc := pathwaysScenario(b, 3, 8)
	ms := makeDecisions(b, sc, 1, 1, 7*scenario.Period, 0)
	base, ev := ms[0].row, evidenceOf(ms)
	s := openTestBolt(b, "")
	ds := indexRows(base, 11, 200_000, 1_000_000, 50)
	for i := 0; i < len(ds); i += 64 {
		if err := s.PutDecisions(bg, ev, ds[i:min(i+64, len(ds))]); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("held", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := ds[(i*7919)%len(ds)]
			if got, err := s.Decision(bg, d.Digest); err != nil || got.T != d.T {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("absent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Decision(bg, sig.Hash{1}); !errors.Is(err, ErrNotFound) {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(len(s.ix.runs)), "runs")
}
