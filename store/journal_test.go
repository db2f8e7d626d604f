package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

// crashImage copies the store's file and journal to dir/name as a crash
// would leave them: between two commits of the journal's applier (which
// holds ix.mu in each). hold runs with the applier held, before the copy:
// what it puts is journaled and not applied.
func crashImage(t *testing.T, s *Bolt, path, name string, hold func()) string {
	t.Helper()
	crashed := filepath.Join(filepath.Dir(path), name)
	s.ix.mu.Lock()
	defer s.ix.mu.Unlock()
	if hold != nil {
		hold()
	}
	for _, p := range [][2]string{{path, crashed}, {journalPath(path), journalPath(crashed)}} {
		raw, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return crashed
}

// logOf reads the room's whole log.
func logOf(t *testing.T, s *Bolt, room sig.Hash) []LogEntry {
	t.Helper()
	n, err := s.LogSize(bg, room, 0)
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.LogEntries(bg, room, 0, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestJournalCrash: issue 30's journal. A store whose journal's regions
// are small (so that the writer reuses each many times) is copied as a
// crash leaves it after group after group; each copy opens with every
// decision its PutDecisions returned (the journal's groups not applied are
// applied at Open), its log holding them in the order put (a decision
// given twice, once), and the running store's tree at that size.
func TestJournalCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "waisteer.db")
	s := openTestBolt(t, path, withJournalRegion(16<<10), WithLogFlush(23))
	sc := pathwaysScenario(t, 3, 8)
	room := sc.Room.ID()
	ms := makeDecisions(t, sc, 31, 600, 6*scenario.Period, 50_000)
	var want []LogEntry
	replayed := 0
	for i, size, k := 0, 1, 0; i < len(ms); i, size, k = i+size, size%13+1, k+1 {
		g := slices.Clip(ms[i:min(i+size, len(ms))])
		if k%6 == 5 && i > 0 {
			g = append(g, ms[i-1]) // given again: held, or in a group not applied
		}
		if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
			t.Fatal(err)
		}
		for _, m := range g {
			if e := (LogEntry{Digest: m.row.Digest, T: m.row.T}); !slices.Contains(want, e) {
				want = append(want, e)
			}
		}
		if k%5 != 2 {
			continue
		}
		crashed := crashImage(t, s, path, "crashed.db", nil)
		c, err := Open(crashed)
		if err != nil {
			t.Fatalf("after %d decisions: %v", len(want), err)
		}
		replayed += c.jr.replayed
		if got := logOf(t, c, room); !slices.Equal(got, want) {
			t.Fatalf("after %d decisions (%d groups replayed): the log holds %d leaves, not the decisions in the order put", len(want), c.jr.replayed, len(got))
		}
		for _, m := range ms[:min(i+size, len(ms))] {
			if d, err := c.Decision(bg, m.row.Digest); err != nil || d.T != m.row.T || d.Sig != m.row.Sig {
				t.Fatalf("after %d decisions: decision %s: %v", len(want), m.row.Digest, err)
			}
		}
		n := int64(len(want))
		a, err := tlog.TreeHash(n, tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) { return c.LogHashes(bg, room, 0, x) }))
		if err != nil {
			t.Fatal(err)
		}
		b, err := tlog.TreeHash(n, tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) { return s.LogHashes(bg, room, 0, x) }))
		if err != nil || a != b {
			t.Fatalf("after %d decisions: the crashed store's tree is %s, the running one's %s (%v)", n, a, b, err)
		}
		if err := boltInvariants(c); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s.jr.wmu.Lock()
	switches := s.jr.switches
	s.jr.wmu.Unlock()
	if replayed == 0 || switches < 4 {
		t.Fatalf("%d groups replayed, %d changes of region: the test did not crash a store with groups only in its journal, or reuse its regions", replayed, switches)
	}
	t.Logf("%d groups replayed from the crashed stores' journals; the writer changed region %d times", replayed, switches)
}

// tornSetup opens a store at a fresh path, makes 40 decisions of a room
// of 3 pathways (seed), and puts and applies the first 10: a store whose
// journal the test then writes to and breaks. put puts a group.
func tornSetup(t *testing.T, seed uint64) (string, *Bolt, []made, func([]made)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "waisteer.db")
	s := openTestBolt(t, path)
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, seed, 40, 6*scenario.Period, 50_000)
	put := func(g []made) {
		t.Helper()
		if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
			t.Fatal(err)
		}
	}
	put(ms[:10])
	if err := s.settle(bg); err != nil {
		t.Fatal(err)
	}
	return path, s, ms, put
}

// TestJournalTorn: a crash in the middle of an entry's write leaves it
// torn; Open applies the entries before it and not it, which was never
// answered, and the store goes on from there.
func TestJournalTorn(t *testing.T) {
	path, s, ms, put := tornSetup(t, 32)
	room := ms[0].row.Room
	var torn int64 // the last entry's end in the journal
	crashed := crashImage(t, s, path, "crashed.db", func() {
		put(ms[10:20]) // journaled, not applied
		put(ms[20:30]) // journaled, then torn
		torn = int64(s.jr.cur)*s.jr.region + s.jr.off
	})
	f, err := os.OpenFile(journalPath(crashed), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 100), torn-100); err != nil { // its last 100 bytes not written
		t.Fatal(err)
	}
	f.Close()
	c := openTestBolt(t, crashed)
	if c.jr.replayed != 1 {
		t.Fatalf("%d entries replayed, want 1 (the one before the torn one)", c.jr.replayed)
	}
	wantLog := func(ms []made) []LogEntry {
		var es []LogEntry
		for _, m := range ms {
			es = append(es, LogEntry{Digest: m.row.Digest, T: m.row.T})
		}
		return es
	}
	if got := logOf(t, c, room); !slices.Equal(got, wantLog(ms[:20])) {
		t.Fatalf("the log holds %d leaves, want the 20 before the torn entry", len(got))
	}
	if _, err := c.Decision(bg, ms[25].row.Digest); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a decision of the torn entry: %v, want not found", err)
	}
	// The store goes on: the torn entry's decisions put again, after it
	// is closed and opened again.
	if err := c.PutDecisions(bg, evidenceOf(ms[20:40]), rowsOf(ms[20:40])); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openTestBolt(t, crashed)
	if got := logOf(t, c, room); !slices.Equal(got, wantLog(ms)) {
		t.Fatalf("after the torn entry's decisions were put again: the log holds %d leaves, want 40 in order", len(got))
	}
	if c.jr.replayed != 0 {
		t.Fatalf("%d entries replayed after a clean close", c.jr.replayed)
	}
}

// TestJournalGarbledLength: an entry whose header says more bytes than
// its region holds (here 4 GiB - 1, what a garbled length field can say)
// is read as torn, as one whose bytes end early is: Open applies the
// entries before it, and reading it asks for no memory of that size: a
// region's reading takes at most the region's size (4 MiB here), not what
// a header says. FuzzJournalRegion found it: its workers stalled on such
// lengths, 1.17 GB each.
func TestJournalGarbledLength(t *testing.T) {
	path, s, ms, put := tornSetup(t, 30)
	var last int64 // the last entry's start in the journal
	crashed := crashImage(t, s, path, "crashed.db", func() {
		put(ms[10:20]) // journaled, not applied
		last = int64(s.jr.cur)*s.jr.region + s.jr.off
		put(ms[20:30]) // journaled, then its length garbled
	})
	f, err := os.OpenFile(journalPath(crashed), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var h [journalHeader]byte
	if _, err := f.ReadAt(h[:], last); err != nil || string(h[:4]) != journalMagic {
		t.Fatalf("the last entry's header at %d: %q, %v", last, h[:4], err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, last+4); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := openTestBolt(t, crashed)
	runtime.ReadMemStats(&after)
	if c.jr.replayed != 1 {
		t.Fatalf("%d entries replayed, want 1 (the one before the garbled one)", c.jr.replayed)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Fatalf("Open allocated %d MiB for a journal of two regions of %d bytes", grew>>20, c.jr.region)
	}
	if _, err := c.Decision(bg, ms[15].row.Digest); err != nil {
		t.Fatalf("a decision of the entry before the garbled one: %v", err)
	}
	if _, err := c.Decision(bg, ms[25].row.Digest); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a decision of the garbled entry: %v, want not found", err)
	}
}

// TestJournalBeside: a group the journal does not take (its snapshot held
// and not given) is written to the file after the journaled groups before
// it; a store opened without the journal applies what the journal holds;
// Close applies what is pending.
func TestJournalBeside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "waisteer.db")
	s := openTestBolt(t, path)
	sc := pathwaysScenario(t, 3, 8)
	room := sc.Room.ID()
	ms := makeDecisions(t, sc, 33, 30, 6*scenario.Period, 50_000)
	var want []LogEntry
	for i := 0; i < len(ms); i += 3 {
		g := ms[i : i+3]
		ev := evidenceOf(g)
		if i%2 == 1 {
			// Snapshots held: none given.
			if err := s.settle(bg); err != nil {
				t.Fatal(err)
			}
			held := true
			for _, e := range ev {
				if _, err := s.EvidenceSnapshot(bg, e.Key); err != nil {
					held = false
				}
			}
			if held {
				ev = nil
			}
		}
		if err := s.PutDecisions(bg, ev, rowsOf(g)); err != nil {
			t.Fatal(err)
		}
		for _, m := range g {
			want = append(want, LogEntry{Digest: m.row.Digest, T: m.row.T})
		}
	}
	if got := logOf(t, s, room); !slices.Equal(got, want) {
		t.Fatalf("the log holds %d leaves, not the %d put, in order", len(got), len(want))
	}
	// A crash with groups only in the journal, opened without it.
	more := makeDecisions(t, sc, 34, 6, 7*scenario.Period, 50_000)
	crashed := crashImage(t, s, path, "crashed.db", func() {
		if err := s.PutDecisions(bg, evidenceOf(more), rowsOf(more)); err != nil {
			t.Fatal(err)
		}
	})
	c := openTestBolt(t, crashed, WithoutJournal())
	if c.jr != nil {
		t.Fatal("a store opened without the journal keeps one")
	}
	for _, m := range more {
		want = append(want, LogEntry{Digest: m.row.Digest, T: m.row.T})
	}
	if got := logOf(t, c, room); !slices.Equal(got, want) {
		t.Fatalf("opened without the journal, the crashed store's log holds %d leaves, want %d", len(got), len(want))
	}
	// Close applies what is pending.
	last := makeDecisions(t, sc, 35, 5, 8*scenario.Period, 50_000)
	if err := s.PutDecisions(bg, evidenceOf(last), rowsOf(last)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(journalPath(path)); err != nil {
		t.Fatal(err)
	}
	c = openTestBolt(t, path, WithoutJournal())
	if d, err := c.Decision(bg, last[4].row.Digest); err != nil || d.Sig != last[4].row.Sig {
		t.Fatalf("a decision put before Close, its journal removed after: %v", err)
	}
}

// TestJournalEntry: an entry's payload reads back as the group written,
// and a payload cut short or lengthened is refused.
func TestJournalEntry(t *testing.T) {
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 36, 9, 6*scenario.Period, 50_000)
	ev, ds := evidenceOf(ms), rowsOf(ms)
	b, err := appendJournalPayload(nil, ev, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseJournalPayload(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.ev) != len(ev) || len(g.ds) != len(ds) {
		t.Fatalf("%d snapshots and %d decisions read, %d and %d written", len(g.ev), len(g.ds), len(ev), len(ds))
	}
	for i := range ev {
		if g.ev[i].Key != ev[i].Key || !bytes.Equal(g.ev[i].Body, ev[i].Body) {
			t.Fatalf("snapshot %d differs", i)
		}
	}
	for i := range ds {
		a, b := g.ds[i], ds[i]
		if a.Digest != b.Digest || a.Room != b.Room || a.Policy != b.Policy || a.T != b.T || a.Session != b.Session ||
			a.Protocol != b.Protocol || a.Report != b.Report || !slices.Equal(a.Loads, b.Loads) || a.Evidence != b.Evidence ||
			a.Signer != b.Signer || a.Sig != b.Sig {
			t.Fatalf("decision %d reads back as %+v, written %+v", i, a, b)
		}
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clip(b), 0), b[:3], nil} {
		if _, err := parseJournalPayload(bad); err == nil {
			t.Fatalf("a payload of %d bytes (of %d) read", len(bad), len(b))
		}
	}
	// journalable: every snapshot named given, as its key's body.
	if !journalable(ev, ds) || journalable(nil, ds) {
		t.Fatal("journalable: a group with its snapshots, or without them")
	}
	wrong := slices.Clone(ev)
	wrong[0].Body = append(slices.Clip(wrong[0].Body), 0)
	if journalable(wrong, ds) {
		t.Fatal("journalable: a snapshot whose body is not its key's")
	}
}

// TestJournalAllocs: a journaled group of 32 allocates a few objects a
// decision, the commits that apply them included.
func TestJournalAllocs(t *testing.T) {
	s := openTestBolt(t, "")
	sc := pathwaysScenario(t, 3, 8)
	base := makeDecisions(t, sc, 37, 1, 6*scenario.Period, 1)[0]
	ev := evidenceOf([]made{base})
	g := make([]Decision, 32)
	next := uint64(0)
	put := func() {
		for i := range g {
			g[i] = base.row
			g[i].T += 30 * next
			binary.LittleEndian.PutUint64(g[i].Digest[:], next)
			g[i].Digest = sha256.Sum256(g[i].Digest[:])
			next++
		}
		if err := s.PutDecisions(bg, ev, g); err != nil {
			t.Fatal(err)
		}
	}
	for range 64 {
		put()
	}
	perDecision := testing.AllocsPerRun(128, put) / float64(len(g))
	if err := s.settle(bg); err != nil {
		t.Fatal(err)
	}
	if perDecision > 12 {
		t.Fatalf("%.1f allocations a decision in journaled groups of 32, want at most 12", perDecision)
	}
	t.Logf("%.2f allocations a decision", perDecision)
}

// FuzzJournalRegion: any bytes as a region read without panic, and what
// is read is consecutive entries whose payloads write back as read.
func FuzzJournalRegion(f *testing.F) {
	sc := pathwaysScenario(f, 3, 8)
	ms := makeDecisions(f, sc, 38, 4, 6*scenario.Period, 50_000)
	var region []byte
	for i, seq := 0, uint64(7); i <= len(ms); i, seq = i+2, seq+1 {
		var p []byte
		var err error
		if i < len(ms) {
			p, err = appendJournalPayload(nil, evidenceOf(ms[i:i+2]), rowsOf(ms[i:i+2]), nil)
		} else {
			p, err = appendJournalPayload(nil, nil, nil, []Record{recordAt(sig.Hash{1}, 2, 3_000_000, 4)}) // an entry of records
		}
		if err != nil {
			f.Fatal(err)
		}
		h := make([]byte, journalHeader)
		copy(h, journalMagic)
		binary.BigEndian.PutUint32(h[4:], uint32(len(p)))
		binary.BigEndian.PutUint64(h[8:], seq)
		binary.BigEndian.PutUint32(h[16:], crc32Entry(h[8:16], p))
		region = append(append(region, h...), p...)
	}
	f.Add(region)
	f.Add(region[:len(region)-5])
	f.Add([]byte(journalMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		gs, err := readJournalRegion(io.NewSectionReader(bytes.NewReader(b), 0, int64(len(b))))
		if err != nil {
			return
		}
		for i, g := range gs {
			if i > 0 && g.seq != gs[i-1].seq+1 {
				t.Fatalf("entries %d and %d read in a row", gs[i-1].seq, g.seq)
			}
			p, err := appendJournalPayload(nil, g.ev, g.ds, g.rs)
			if err != nil {
				t.Fatalf("entry %d read, and refused written: %v", g.seq, err)
			}
			if q, err := parseJournalPayload(p); err != nil || len(q.ds) != len(g.ds) || len(q.rs) != len(g.rs) {
				t.Fatalf("entry %d written back does not read: %v", g.seq, err)
			}
		}
	})
}

// FuzzJournalPayload: any bytes as a payload are read or refused without
// panic, and one read writes back as the same bytes.
func FuzzJournalPayload(f *testing.F) {
	sc := pathwaysScenario(f, 3, 8)
	ms := makeDecisions(f, sc, 39, 3, 6*scenario.Period, 50_000)
	p, err := appendJournalPayload(nil, evidenceOf(ms), rowsOf(ms), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p)
	f.Add(p[:len(p)/2])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	rp, err := appendJournalPayload(nil, nil, nil, []Record{recordAt(sig.Hash{1}, 2, 3_000_000, 4), recordAt(sig.Hash{1}, 3, 4_000_000, 5)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rp)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := parseJournalPayload(b)
		if err != nil {
			return
		}
		again, err := appendJournalPayload(nil, g.ev, g.ds, g.rs)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("a payload of %d bytes read, written back as %d bytes (%v)", len(b), len(again), err)
		}
	})
}

// TestJournalMisses: reads of decisions not held while groups are put
// (a flood of them, say) wait for the applier's next commit and cost none
// of their own: over 300 ms of groups put every millisecond and misses
// read without pause, the applier commits about once a journalLinger, not
// once a miss. A decision of a group returned is found, once that commit
// is made.
func TestJournalMisses(t *testing.T) {
	s := openTestBolt(t, "")
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 40, 600, 6*scenario.Period, 50_000)
	s.jr.mu.Lock()
	before := s.jr.applies
	s.jr.mu.Unlock()
	stop := make(chan struct{})
	misses := make(chan int)
	for g := range 8 {
		go func() {
			n := 0
			for i := 0; ; i++ {
				select {
				case <-stop:
					misses <- n
					return
				default:
				}
				if _, err := s.Decision(bg, sha256.Sum256([]byte{byte(g), byte(i), byte(i >> 8), byte(i >> 16)})); !errors.Is(err, ErrNotFound) {
					t.Errorf("a decision not held: %v", err)
				}
				n++
			}
		}()
	}
	start := time.Now()
	put := 0
	for ; time.Since(start) < 300*time.Millisecond && put+2 <= len(ms); put += 2 {
		g := ms[put : put+2]
		if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
			t.Fatal(err)
		}
		if d, err := s.Decision(bg, g[1].row.Digest); err != nil || d.Sig != g[1].row.Sig {
			t.Fatalf("a decision put: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	close(stop)
	n := 0
	for range 8 {
		n += <-misses
	}
	s.jr.mu.Lock()
	applies := s.jr.applies - before
	s.jr.mu.Unlock()
	// The reads of the decisions put, and the misses, wait for the
	// commits that come every linger; none asks for one of its own.
	if limit := int(elapsed/journalLinger) + 4; applies > limit {
		t.Fatalf("%d groups put and %d misses read over %v: %d commits of the applier, want at most %d", put/2, n, elapsed, applies, limit)
	}
	t.Logf("%d groups put and %d misses read over %v: %d commits of the applier", put/2, n, elapsed, applies)
}
