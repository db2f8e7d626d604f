package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

// TestJournalRecordsCrash: records put through the journal (journal.go,
// issue 30) survive a crash between the applier's commits. A store whose
// journal's regions are small (so that the writer reuses each, and a large
// group goes to the file at once) takes groups of records, some given
// again (held in the file, pending in the journal, or twice in a group),
// between groups of decisions; PutRecords reports new exactly the records
// a brute-force reference has not seen. Copies made as a crash leaves the
// files, with the applier held after some groups, open with every record
// put found by digest and by room, and every decision put.
func TestJournalRecordsCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "waisteer.db")
	s := openTestBolt(t, path, withJournalRegion(16<<10), WithLogFlush(23))
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 41, 120, 6*scenario.Period, 50_000)
	rng := rand.New(rand.NewPCG(41, 2))
	rooms := []sig.Hash{{1}, {2}}
	ref := refRecords{}
	var all []Record
	salt := uint64(0)
	end := uint64(1_790_000_000_000_000)
	put := func(rs []Record) {
		t.Helper()
		ref.put(t, s, rs)
		all = append(all, rs...)
	}
	crashes, replayed, large := 0, 0, 0
	for k, d := 0, 0; k < 120; k++ {
		size := 1 + rng.IntN(12)
		if k%29 == 13 {
			size = 120 // more than a region holds: written to the file at once
			large++
		}
		rs := make([]Record, size)
		for i := range rs {
			switch x := rng.IntN(10); {
			case x == 0 && len(all) > 0:
				rs[i] = all[rng.IntN(len(all))] // put before: in the file or pending
			case x == 1 && i > 0:
				rs[i] = rs[rng.IntN(i)] // twice in the group
			default:
				salt++
				end += 1000
				rs[i] = recordAt(rooms[rng.IntN(len(rooms))], byte(rng.IntN(4)), end, salt)
			}
		}
		if k%3 == 0 && d < len(ms) {
			g := ms[d:min(d+4, len(ms))]
			if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
				t.Fatal(err)
			}
			d += len(g)
		}
		if k%7 != 4 || size == 120 {
			// (A large group waits for the applier, which a crash's copy
			// holds.)
			put(rs)
			continue
		}
		// The applier held from before this group: the copy holds it in
		// the journal alone.
		crashed := crashImage(t, s, path, "crashed.db", func() { put(rs) })
		crashes++
		c, err := Open(crashed)
		if err != nil {
			t.Fatalf("after %d records: %v", len(ref), err)
		}
		replayed += c.jr.replayed
		ref.check(t, c, nil, rooms, []uint64{0, end - 50_000})
		for _, m := range ms[:d] {
			if got, err := c.Decision(bg, m.row.Digest); err != nil || got.Sig != m.row.Sig {
				t.Fatalf("decision %s: %v", m.row.Digest, err)
			}
		}
		// Put again in the copy: held, every one.
		again, err := c.PutRecords(bg, rs)
		if err != nil || slices.Contains(again, true) {
			t.Fatalf("the group put again in the crashed copy: %v, %v", again, err)
		}
		if err := boltInvariants(c); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ref.check(t, s, nil, rooms, []uint64{0})
	s.jr.wmu.Lock()
	switches := s.jr.switches
	s.jr.wmu.Unlock()
	if replayed == 0 || switches < 2 || large == 0 {
		t.Fatalf("%d entries replayed in %d crashes, %d changes of region, %d large groups: the test did not reach what it means to", replayed, crashes, switches, large)
	}
}

// TestJournalRecordsRace: the same records put by several POSTs at once,
// while the applier applies them, are each reported new exactly once, and
// each is held (journal.go: a record is looked for in the pending groups,
// then the file).
func TestJournalRecordsRace(t *testing.T) {
	s := openTestBolt(t, "")
	room := sig.Hash{9}
	rs := make([]Record, 600)
	for i := range rs {
		rs[i] = recordAt(room, byte(i%5), 1_790_000_000_000_000+uint64(i)*1000, uint64(i))
	}
	const posters = 6
	news := make([][]int, posters)
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 3))
			for start := 0; start < len(rs); {
				n := 1 + rng.IntN(9)
				g := slices.Clone(rs[start:min(start+n, len(rs))])
				rng.Shuffle(len(g), func(i, j int) { g[i], g[j] = g[j], g[i] })
				added, err := s.PutRecords(bg, g)
				if err != nil {
					t.Error(err)
					return
				}
				for i, a := range added {
					if a {
						news[p] = append(news[p], int(g[i].End))
					}
				}
				start += n
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, ns := range news {
		for _, e := range ns {
			count[e]++
		}
	}
	for i, r := range rs {
		if n := count[int(r.End)]; n != 1 {
			t.Fatalf("record %d reported new %d times", i, n)
		}
		raw, err := s.Record(bg, r.Digest)
		if err != nil || !bytes.Equal(raw, r.Raw) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

// TestJournalRecordsLinger: groups of records alone are applied in few
// commits (journalRecordsLinger), and decisions put among them are not
// held back by it: they are read back, by a read that does not hurry the
// applier, within a small part of it.
func TestJournalRecordsLinger(t *testing.T) {
	s := openTestBolt(t, "")
	room := sig.Hash{4}
	before := journalApplies(s)
	start := time.Now()
	for i := range 40 {
		if _, err := s.PutRecords(bg, []Record{recordAt(room, 1, 1_790_000_000_000_000+uint64(i)*1000, uint64(i))}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	// One commit a linger at most, and one for the rest: at one a group,
	// 40.
	if n, most := journalApplies(s)-before, int(elapsed/journalRecordsLinger)+2; n > most {
		t.Fatalf("%d commits applied 40 groups of records over %v, want at most %d", n, elapsed, most)
	}
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 42, 1, 6*scenario.Period, 50_000)
	// The applier at rest, then lingering over a group of records.
	if err := s.settle(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutRecords(bg, []Record{recordAt(room, 1, 1_790_000_000_000_000+999_000, 999)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	began := time.Now()
	if err := s.PutDecisions(bg, evidenceOf(ms), rowsOf(ms)); err != nil {
		t.Fatal(err)
	}
	if err := s.settle(bg); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took >= journalRecordsLinger*4/5 {
		t.Fatalf("a decision put among records lingering was applied after %v", took)
	}
	if _, err := s.Decision(bg, ms[0].row.Digest); err != nil {
		t.Fatal(err)
	}
}

// TestJournalRecordRead: a record put is read back by its digest while
// its group lingers (journalRecordsLinger), from the pending groups, and a
// digest not held is answered at once: neither waits for, nor causes, a
// commit (journal.go, bolt_records.go's Record). Readers racing the
// applier's commits find every record put before their read.
func TestJournalRecordRead(t *testing.T) {
	s := openTestBolt(t, "")
	room := sig.Hash{5}
	if err := s.settle(bg); err != nil {
		t.Fatal(err)
	}
	before := journalApplies(s)
	r := recordAt(room, 2, 1_790_000_000_000_000, 1)
	if _, err := s.PutRecords(bg, []Record{r}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	raw, err := s.Record(bg, r.Digest)
	if err != nil || !bytes.Equal(raw, r.Raw) {
		t.Fatalf("a record lingering: %q, %v", raw, err)
	}
	raw[0] ^= 1 // a copy: the pending group's bytes are not the caller's
	if _, err := s.Record(bg, sig.Digest([]byte("not held"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a digest not held: %v", err)
	}
	took := time.Since(began)
	if n := journalApplies(s) - before; n != 0 || took >= journalRecordsLinger/5 {
		t.Fatalf("two reads took %v and %d commits, while the group lingers %v", took, n, journalRecordsLinger)
	}
	if raw, err := s.Record(bg, r.Digest); err != nil || !bytes.Equal(raw, r.Raw) {
		t.Fatalf("read again: %q, %v", raw, err)
	}

	// The race: a writer puts groups and hurries the applier after each,
	// while readers read back every record put so far.
	var (
		mu  sync.Mutex
		put []Record
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(stop)
		for k := range 300 {
			g := make([]Record, 1+k%4)
			for i := range g {
				g[i] = recordAt(room, 3, 1_790_000_001_000_000+uint64(k*4+i)*1000, uint64(k))
			}
			if _, err := s.PutRecords(bg, g); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			put = append(put, g...)
			mu.Unlock()
			signal(s.jr.hurry)
		}
	})
	for range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				held := put
				mu.Unlock()
				n := len(held)
				if n == 0 {
					continue
				}
				// The newest, the likeliest to be in the commit under way.
				r := held[n-1-i%min(n, 8)]
				if raw, err := s.Record(bg, r.Digest); err != nil || !bytes.Equal(raw, r.Raw) {
					t.Errorf("record %d of %d read while applied: %v", n-1-i%min(n, 8), n, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestJournalRecordsEntry: an entry of records reads back as written, and
// one cut short, with bytes added, or with a count of no records is
// refused.
func TestJournalRecordsEntry(t *testing.T) {
	rs := []Record{recordAt(sig.Hash{1}, 2, 3_000_000, 4), recordAt(sig.Hash{5}, 6, 7_000_000, 8)}
	b, err := appendJournalPayload(nil, nil, nil, rs)
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseJournalPayload(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.ev) != 0 || len(g.ds) != 0 || len(g.rs) != len(rs) {
		t.Fatalf("%d snapshots, %d decisions and %d records read", len(g.ev), len(g.ds), len(g.rs))
	}
	for i := range rs {
		a, w := g.rs[i], rs[i]
		if a.Digest != w.Digest || a.Room != w.Room || a.Hop != w.Hop || a.Start != w.Start || a.End != w.End || !bytes.Equal(a.Raw, w.Raw) {
			t.Fatalf("record %d reads back as %+v, written %+v", i, a, w)
		}
	}
	// Eight bytes of no snapshots and no decisions, then four of no
	// records: not what a writer writes.
	for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clip(b), 0), b[:9], make([]byte, 12)} {
		if _, err := parseJournalPayload(bad); err == nil {
			t.Fatalf("a payload of %d bytes (of %d) read", len(bad), len(b))
		}
	}
}

// journalApplies is how many commits s's applier has made.
func journalApplies(s *Bolt) int {
	s.jr.mu.Lock()
	defer s.jr.mu.Unlock()
	return s.jr.applies
}
