package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// openTestBolt opens a store at path (in t.TempDir() when path is "") and,
// when the test ends, checks the file with bbolt's tx.Check and the store's
// own invariants, then closes it. A test that closed the store itself has
// the file opened again for the check.
func openTestBolt(t testing.TB, path string, opts ...Option) *Bolt {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "waisteer.db")
	}
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := s.Check()
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			if s, err = Open(path); err != nil {
				t.Errorf("reopen %s for its check: %v", path, err)
				return
			}
			err = s.Check()
		}
		if err != nil {
			t.Errorf("bbolt check of %s: %v", path, err)
		}
		if err := boltInvariants(s); err != nil {
			t.Errorf("store invariants of %s: %v", path, err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return s
}

// boltInvariants checks what the buckets promise each other: every decision
// is found by its digest (index.go) and its context and snapshot are held; each
// snapshot's count is the number of decisions referencing it and its key is
// SHA-256 of its body; every record is indexed once.
func boltInvariants(s *Bolt) error {
	if err := s.settle(context.Background()); err != nil {
		return err
	}
	return s.db.View(func(tx *bolt.Tx) error {
		refs := map[uint64]uint64{}
		decisions := 0
		err := tx.Bucket(bucketDecisions).ForEach(func(k, v []byte) error {
			decisions++
			r, err := parseRow(v)
			if err != nil {
				return fmt.Errorf("decision %x: %w", k, err)
			}
			if t, found, err := lookup(tx, sig.Hash(k[8:])); err != nil || !found || t != binary.BigEndian.Uint64(k[:8]) {
				return fmt.Errorf("decision %x is indexed at %d (found %t, %v)", k[8:], t, found, err)
			}
			dc, err := s.decisionContextOf(tx, r.context)
			if err != nil {
				return err
			}
			if r.logIndex >= 0 {
				// Its leaf is its log's at the index its row names.
				es, err := s.LogEntries(bg, dc.room, 0, r.logIndex, r.logIndex+1)
				if err != nil || es[0] != (LogEntry{Digest: sig.Hash(k[8:]), T: binary.BigEndian.Uint64(k)}) {
					return fmt.Errorf("decision %x names leaf %d of its log, which holds %v (%v)", k[8:], r.logIndex, es, err)
				}
			}
			refs[r.snapshot]++
			return nil
		})
		if err != nil {
			return err
		}
		if err := indexInvariants(tx, s, &s.ix); err != nil {
			return err
		}
		bodies := tx.Bucket(bucketSnapshotBodies)
		err = tx.Bucket(bucketSnapshots).ForEach(func(k, v []byte) error {
			id, n := binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
			if refs[id] != n {
				return fmt.Errorf("snapshot %x counts %d references, %d decisions make them", k, n, refs[id])
			}
			delete(refs, id)
			bv := bodies.Get(v[:8])
			if bv == nil || string(bv[:32]) != string(k) || sha256.Sum256(bv[32:]) != sig.Hash(k) {
				return fmt.Errorf("snapshot %x's body does not hash to it", k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(refs) != 0 {
			return fmt.Errorf("decisions reference %d snapshots not held", len(refs))
		}
		if a, b := tx.Bucket(bucketSnapshots).Stats().KeyN, bodies.Stats().KeyN; a != b {
			return fmt.Errorf("%d snapshots, %d bodies", a, b)
		}
		if err := indexInvariants(tx, s, &s.rx); err != nil {
			return err
		}
		rows := tx.Bucket(bucketRecordRows)
		indexed := 0
		err = tx.Bucket(bucketRecordEnds).ForEach(func(k, v []byte) error {
			indexed++
			if rows.Get(k[32:]) == nil {
				return fmt.Errorf("record %x is indexed, not held", k[40:])
			}
			// Found by its digest at its end (bolt_records.go).
			if end, found, err := recordIndex.lookup(tx, sig.Hash(k[40:])); err != nil || !found || end != binary.BigEndian.Uint64(k[32:]) {
				return fmt.Errorf("record %x is indexed at %d (found %t, %v)", k[40:], end, found, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n := rows.Stats().KeyN; n != indexed {
			return fmt.Errorf("%d records, %d indexed", n, indexed)
		}
		if tx.Bucket(bucketRecords) != nil {
			return fmt.Errorf("format 1's records bucket is held")
		}
		return nil
	})
}

// memoryInvariants is boltInvariants for a Memory.
func memoryInvariants(m *Memory) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	refs := map[sig.Hash]uint64{}
	for _, d := range m.decisions {
		refs[d.Evidence]++
	}
	for k, s := range m.snapshots {
		if refs[k] != s.refs {
			return fmt.Errorf("snapshot %s counts %d references, %d decisions make them", k, s.refs, refs[k])
		}
		if sha256.Sum256(s.body) != k {
			return fmt.Errorf("snapshot %s's body does not hash to it", k)
		}
		delete(refs, k)
	}
	if len(refs) != 0 {
		return fmt.Errorf("decisions reference %d snapshots not held", len(refs))
	}
	return nil
}

// snapshotCount is the number of snapshots s holds.
func snapshotCount(t testing.TB, s Store) int {
	t.Helper()
	switch s := s.(type) {
	case *Memory:
		s.mu.RLock()
		defer s.mu.RUnlock()
		return len(s.snapshots)
	case *Bolt:
		if err := s.settle(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := 0
		if err := s.db.View(func(tx *bolt.Tx) error {
			n = tx.Bucket(bucketSnapshots).Stats().KeyN
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Fatalf("a store of type %T", s)
	return 0
}

// made is one signed decision as the server has it: its WSD1 bytes, its
// store row and its evidence snapshot.
type made struct {
	bytes []byte
	row   Decision
	ev    Evidence
}

// pathwaysScenario builds a scenario of n pathways of the default shapes
// (two hops each, one edge) with records for periods periods, and the
// default window of 5 periods (§5.1).
func pathwaysScenario(t testing.TB, n, periods int) *scenario.Scenario {
	t.Helper()
	var pws []scenario.Pathway
	for i := range n {
		pw := scenario.DefaultPathways()[i%3]
		pw.ID = fmt.Sprintf("cdn-%02d", i)
		pw.Hops[0].Joules += uint64(i) * 1000
		pws = append(pws, pw)
	}
	sc, err := scenario.Build(scenario.Spec{Name: fmt.Sprintf("room-%d", n), Pathways: pws, Periods: periods, Policy: func(p *policy.Policy) {
		if n > 1 {
			p.Pathways[1].MinSharePPM = 100_000 // a band, so that §6.3 places some sessions
		}
		if n > 2 {
			p.Pathways[2].Capacity = 3 // a capacity, so that the loads change the limits (§6.1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// randomRequest is a request at t with a report, session and loads drawn
// from rng: every present bit, both protocols (§4, §7.1).
func randomRequest(rng *rand.Rand, n int, t uint64) scenario.Request {
	req := scenario.Request{T: t, Protocol: report.Protocol(1 + rng.IntN(2))}
	for i := range req.Session {
		req.Session[i] = byte(rng.Uint32())
	}
	if rng.IntN(3) > 0 {
		req.Report.Present |= report.HasPathway
		req.Report.Pathway = uint8(rng.IntN(n))
	}
	if rng.IntN(3) > 0 {
		req.Report.Present |= report.HasThroughput
		req.Report.Throughput = []uint64{0, 400_000, 1_000_000, 5_000_000, 1<<64 - 1}[rng.IntN(5)]
	}
	if rng.IntN(3) > 0 {
		req.Report.Present |= report.HasBuffer
		req.Report.Buffer = []uint64{0, 3999, 4000, 30_000, 1 << 40}[rng.IntN(5)]
	}
	req.Loads = make([]uint32, n)
	for i := range req.Loads {
		req.Loads[i] = []uint32{0, 1, 3, 4, 200, 1<<32 - 1}[rng.IntN(6)]
	}
	return req
}

// makeDecisions makes count decisions of sc, signed, at instants from
// first, step µs apart: with records for the periods before, each has a
// full window (§5.1) while t stays within them.
func makeDecisions(t testing.TB, sc *scenario.Scenario, seed uint64, count int, first, step uint64) []made {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	n := len(sc.Policy.Pathways)
	out := make([]made, 0, count)
	var last Evidence
	for i := range count {
		m, err := sc.Decide(randomRequest(rng, n, first+uint64(i)*step))
		if err != nil {
			t.Fatal(err)
		}
		ev := make([]evidence.Pathway, n)
		for j := range ev {
			ev[j] = m.Decision.Pathways[j].Pathway
		}
		e := EncodeEvidence(ev)
		if e.Key == last.Key {
			e = last // share the body, as a server shares its ranking's
		}
		last = e
		out = append(out, made{bytes: m.Bytes, row: Compact(m.Decision, m.Digest, e.Key), ev: e})
	}
	return out
}

// evidenceOf is the distinct snapshots of ms.
func evidenceOf(ms []made) []Evidence {
	seen := map[sig.Hash]bool{}
	var ev []Evidence
	for _, m := range ms {
		if !seen[m.ev.Key] {
			seen[m.ev.Key] = true
			ev = append(ev, m.ev)
		}
	}
	return ev
}

func rowsOf(ms []made) []Decision {
	ds := make([]Decision, len(ms))
	for i := range ms {
		ds[i] = ms[i].row
	}
	return ds
}

// putAll stores ms in groups of size.
func putAll(t testing.TB, s Store, ms []made, size int) {
	t.Helper()
	for i := 0; i < len(ms); i += size {
		g := ms[i:min(i+size, len(ms))]
		if err := s.PutDecisions(context.Background(), evidenceOf(g), rowsOf(g)); err != nil {
			t.Fatal(err)
		}
	}
}

// indexInvariants checks an index by digest (index.go), ix: the
// runs the file lists are those the store has in memory, each held with as
// many entries as listed, all in the run's span of t; and no run is held
// that is neither listed, nor a merge's output, nor waiting to be deleted.
func indexInvariants(tx *bolt.Tx, s *Bolt, ix *digestIndex) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	runs := tx.Bucket(ix.names.runs)
	listed := map[uint64]bool{}
	err := tx.Bucket(ix.names.runList).ForEach(func(k, v []byte) error {
		r, err := parseRunInfo(k, v)
		if err != nil {
			return err
		}
		listed[r.id] = true
		if !slices.ContainsFunc(ix.runs, func(m runInfo) bool { return m == r }) {
			return fmt.Errorf("run %+v is listed, the store does not have it", r)
		}
		sub := runs.Bucket(k)
		if sub == nil {
			return fmt.Errorf("run %d is listed, not held", r.id)
		}
		// Its entries ascend, each in the run's span.
		n, last := uint64(0), []byte(nil)
		c := runCursor{c: sub.Cursor()}
		for err = c.first(); err == nil && c.d != nil; err = c.next() {
			n++
			t, err := c.entryT()
			if err != nil {
				return err
			}
			if t < r.tmin || t > r.tmax {
				return fmt.Errorf("run %d holds %x at %d, outside [%d, %d]", r.id, c.d, t, r.tmin, r.tmax)
			}
			if last != nil && bytes.Compare(last, c.d) >= 0 {
				return fmt.Errorf("run %d holds %x after %x", r.id, c.d, last)
			}
			last = append(last[:0], c.d...)
		}
		if err != nil {
			return err
		}
		// Its blocks all hold as many entries as the first (the block
		// size it was written with, which need not be this store's), but
		// the last, which may hold fewer.
		size, short := 0, false
		err = sub.ForEach(func(k, v []byte) error {
			if len(v) == 8 {
				return nil // an entry of format 2
			}
			switch {
			case short:
				return fmt.Errorf("run %d holds a block after a short one (of blocks of %d entries)", r.id, size)
			case size == 0:
				size = len(v) / indexEntrySize
			case len(v) > size*indexEntrySize:
				return fmt.Errorf("run %d holds a block of %d bytes after blocks of %d entries", r.id, len(v), size)
			case len(v) < size*indexEntrySize:
				short = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n != r.count {
			return fmt.Errorf("run %d holds %d entries, is listed with %d", r.id, n, r.count)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(listed) != len(ix.runs) {
		return fmt.Errorf("%d runs listed, the store has %d", len(listed), len(ix.runs))
	}
	return runs.ForEach(func(k, _ []byte) error {
		id := binary.BigEndian.Uint64(k)
		if !listed[id] && !slices.Contains(ix.garbage, id) && !slices.ContainsFunc(ix.merges, func(m *runMerge) bool { return m.out == id }) {
			return fmt.Errorf("run %d is held, neither listed nor a merge's output nor garbage", id)
		}
		return nil
	})
}
