package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

var bg = context.Background()

// implementations are the stores the shared suite runs against, each made
// fresh per test and checked when it ends.
var implementations = []struct {
	name string
	open func(t *testing.T, chunk int) Store
}{
	{"memory", func(t *testing.T, chunk int) Store {
		m := NewMemory()
		if chunk > 0 {
			m.chunk = chunk
		}
		t.Cleanup(func() {
			if err := memoryInvariants(m); err != nil {
				t.Error(err)
			}
		})
		return m
	}},
	{"bolt", func(t *testing.T, chunk int) Store {
		return openTestBolt(t, "", WithPruneChunk(chunk))
	}},
}

// eachStore runs f against each implementation.
func eachStore(t *testing.T, chunk int, f func(t *testing.T, s Store)) {
	for _, impl := range implementations {
		t.Run(impl.name, func(t *testing.T) { f(t, impl.open(t, chunk)) })
	}
}

func hash(label string) sig.Hash { return sig.Digest([]byte(label)) }

func sameRoom(a, b Room) bool {
	return a.ID == b.ID && bytes.Equal(a.Descriptor, b.Descriptor) &&
		bytes.Equal(a.KeyLogHead, b.KeyLogHead) && (a.KeyLogHead == nil) == (b.KeyLogHead == nil)
}

func sameDecision(a, b Decision) bool {
	return a.Digest == b.Digest && a.Room == b.Room && a.Policy == b.Policy && a.T == b.T &&
		a.Session == b.Session && a.Protocol == b.Protocol && a.Report == b.Report &&
		slices.Equal(a.Loads, b.Loads) && a.Evidence == b.Evidence && a.Signer == b.Signer && a.Sig == b.Sig
}

// TestRooms: a room's descriptor and key log head (COMPANION §4) are kept
// exactly, no head apart from an empty one (a head given that does not read
// is key_log_invalid, no head key_log_missing), and PutRoom replaces.
func TestRooms(t *testing.T) {
	eachStore(t, 0, func(t *testing.T, s Store) {
		if rs, err := s.Rooms(bg); err != nil || len(rs) != 0 {
			t.Fatalf("an empty store has rooms %v, %v", rs, err)
		}
		a := Room{ID: hash("a"), Descriptor: []byte("descriptor a"), KeyLogHead: []byte("head 1")}
		b := Room{ID: hash("b"), Descriptor: []byte("descriptor b")}
		c := Room{ID: hash("c"), Descriptor: []byte("descriptor c"), KeyLogHead: []byte{}}
		for _, r := range []Room{a, b, c} {
			if err := s.PutRoom(bg, r); err != nil {
				t.Fatal(err)
			}
		}
		a.KeyLogHead = []byte("head 2, longer")
		if err := s.PutRoom(bg, a); err != nil {
			t.Fatal(err)
		}
		a.KeyLogHead[0] = 'X' // the store holds its own copy
		a.KeyLogHead[0] = 'h'
		rs, err := s.Rooms(bg)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 3 {
			t.Fatalf("%d rooms, want 3", len(rs))
		}
		for _, want := range []Room{a, b, c} {
			i := slices.IndexFunc(rs, func(r Room) bool { return r.ID == want.ID })
			if i < 0 || !sameRoom(rs[i], want) {
				t.Errorf("room %s: got %+v, want %+v", want.ID, rs, want)
			}
		}
	})
}

// TestPolicies: a policy is kept by its digest (§3.4); the active one
// switches per room and earlier ones stay available by digest.
func TestPolicies(t *testing.T) {
	eachStore(t, 0, func(t *testing.T, s Store) {
		room, other := hash("room"), hash("other")
		if _, _, err := s.ActivePolicy(bg, room); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no active policy: %v, want ErrNotFound", err)
		}
		if _, err := s.Policy(bg, hash("p1")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no policy: %v, want ErrNotFound", err)
		}
		put := func(room sig.Hash, name string, active bool) {
			if err := s.PutPolicy(bg, room, hash(name), []byte("WSP1 "+name), active); err != nil {
				t.Fatal(err)
			}
		}
		want := func(room sig.Hash, name string) {
			t.Helper()
			d, raw, err := s.ActivePolicy(bg, room)
			if err != nil || d != hash(name) || string(raw) != "WSP1 "+name {
				t.Errorf("active %s, %q, %v; want %s", d, raw, err, name)
			}
		}
		put(room, "p1", true)
		put(room, "p2", false)
		want(room, "p1")
		put(room, "p2", true)
		want(room, "p2")
		put(other, "q1", true)
		want(other, "q1")
		want(room, "p2")
		put(room, "p1", true) // switching back
		want(room, "p1")
		for _, name := range []string{"p1", "p2", "q1"} {
			raw, err := s.Policy(bg, hash(name))
			if err != nil || string(raw) != "WSP1 "+name {
				t.Errorf("policy %s: %q, %v", name, raw, err)
			}
		}
	})
}

// testRecord is a record of room with the given span; the store reads no
// record, so its bytes need only be distinct.
func testRecord(room sig.Hash, hop byte, start, end uint64) Record {
	raw := fmt.Appendf(nil, "WMH1 %s %d %d %d", room, hop, start, end)
	return Record{Digest: sig.Digest(raw), Room: room, Hop: sig.PublicKey{0: hop}, Start: start, End: end, Raw: raw}
}

// TestRecords: records are kept idempotently by digest (a digest is never
// named twice, §7.2) with added flags; Records gives those whose end is
// after since, of the room only, as a starting server needs for its windows
// (§5.1).
func TestRecords(t *testing.T) {
	eachStore(t, 0, func(t *testing.T, s Store) {
		room, other := hash("room"), hash("other")
		var rs []Record
		for i := range 600 { // more than one of Bolt's read groups
			rs = append(rs, testRecord(room, byte(i%7), uint64(i)*10, uint64(i)*10+10))
		}
		added, err := s.PutRecords(bg, append(slices.Clone(rs[:300]), rs[5]))
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range added {
			if a != (i < 300) {
				t.Fatalf("added[%d] = %v", i, a)
			}
		}
		added, err = s.PutRecords(bg, append(rs[250:], testRecord(other, 1, 0, 10000)))
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range added {
			if a != (i >= 50) {
				t.Fatalf("second put: added[%d] = %v", i, a)
			}
		}
		for _, r := range []Record{rs[0], rs[599]} {
			raw, err := s.Record(bg, r.Digest)
			if err != nil || !bytes.Equal(raw, r.Raw) {
				t.Errorf("record %s: %q, %v", r.Digest, raw, err)
			}
		}
		if _, err := s.Record(bg, hash("none")); !errors.Is(err, ErrNotFound) {
			t.Errorf("no record: %v", err)
		}
		for _, since := range []uint64{0, 9, 10, 11, 2995, 5990, 5999, 6000, 1<<64 - 1} {
			var got []Record
			if err := s.Records(bg, room, since, func(r Record) error { got = append(got, r); return nil }); err != nil {
				t.Fatal(err)
			}
			var want []Record
			for _, r := range rs {
				if r.End > since {
					want = append(want, r)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("since %d: %d records, want %d", since, len(got), len(want))
			}
			slices.SortFunc(got, func(x, y Record) int { return bytes.Compare(x.Raw, y.Raw) })
			slices.SortFunc(want, func(x, y Record) int { return bytes.Compare(x.Raw, y.Raw) })
			for i := range got {
				g, w := got[i], want[i]
				if g.Digest != w.Digest || g.Room != w.Room || g.Hop != w.Hop || g.Start != w.Start || g.End != w.End || !bytes.Equal(g.Raw, w.Raw) {
					t.Fatalf("since %d: record %+v, want %+v", since, g, w)
				}
			}
		}
		stop := errors.New("stop")
		calls := 0
		if err := s.Records(bg, room, 0, func(Record) error { calls++; return stop }); err != stop || calls != 1 {
			t.Errorf("an error from fn: %v after %d calls", err, calls)
		}
	})
}

// TestDecisionsRoundTrip_7_1: decisions made from a scenario are stored
// compactly and rebuilt to their exact WSD1 bytes (§7.1), each checked
// against its digest (§7.3).
func TestDecisionsRoundTrip_7_1(t *testing.T) {
	sc := pathwaysScenario(t, 3, 12)
	ms := makeDecisions(t, sc, 1, 400, 6*scenario.Period+scenario.Period/2, scenario.Period/100)
	eachStore(t, 0, func(t *testing.T, s Store) {
		putAll(t, s, ms, 37)
		for _, m := range ms {
			checkRebuild(t, s, sc, m)
		}
	})
}

// checkRebuild reads m back from s and rebuilds its bytes.
func checkRebuild(t *testing.T, s Store, sc *scenario.Scenario, m made) {
	t.Helper()
	row, err := s.Decision(bg, m.row.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if !sameDecision(row, m.row) {
		t.Fatalf("decision %s: got %+v, want %+v", m.row.Digest, row, m.row)
	}
	body, err := s.EvidenceSnapshot(bg, row.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Rebuild(sc.Policy, sc.Policy.Digest(), row, body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, m.bytes) {
		t.Fatalf("decision %s: rebuilt %d bytes differ from the %d signed", m.row.Digest, len(got), len(m.bytes))
	}
}

// TestBoltReopen: what Bolt stores survives closing and opening the file,
// contexts and snapshots included, and still rebuilds byte for byte (§7.1).
func TestBoltReopen(t *testing.T) {
	sc := pathwaysScenario(t, 3, 12)
	ms := makeDecisions(t, sc, 2, 200, 6*scenario.Period, scenario.Period/40)
	path := filepath.Join(t.TempDir(), "reopen.db")
	s := openTestBolt(t, path)
	putAll(t, s, ms[:100], 16)
	room := Room{ID: sc.Room.ID(), Descriptor: []byte("d"), KeyLogHead: []byte("h")}
	if err := s.PutRoom(bg, room); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPolicy(bg, room.ID, sc.Policy.Digest(), sc.PolicyBytes, true); err != nil {
		t.Fatal(err)
	}
	rec := testRecord(room.ID, 1, 0, 10)
	if _, err := s.PutRecords(bg, []Record{rec}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestBolt(t, path)
	putAll(t, s, ms[100:], 16) // the contexts of the first half are found again
	for _, m := range ms {
		checkRebuild(t, s, sc, m)
	}
	if rs, err := s.Rooms(bg); err != nil || len(rs) != 1 || !sameRoom(rs[0], room) {
		t.Errorf("rooms after reopening: %v, %v", rs, err)
	}
	if d, raw, err := s.ActivePolicy(bg, room.ID); err != nil || d != sc.Policy.Digest() || !bytes.Equal(raw, sc.PolicyBytes) {
		t.Errorf("active policy after reopening: %s, %v", d, err)
	}
	if raw, err := s.Record(bg, rec.Digest); err != nil || !bytes.Equal(raw, rec.Raw) {
		t.Errorf("record after reopening: %v", err)
	}
	s.mu.RLock()
	contexts := len(s.contexts)
	s.mu.RUnlock()
	if contexts != 1 {
		t.Errorf("%d contexts for one room, policy and signer", contexts)
	}

	// A reader or writer that misses the cache of contexts (a commit not
	// yet published to it) finds them in the file, and adds none.
	s.mu.Lock()
	s.contexts, s.contextIDs = map[decisionContext]uint64{}, map[uint64]decisionContext{}
	s.mu.Unlock()
	checkRebuild(t, s, sc, ms[0])
	more := makeDecisions(t, sc, 13, 5, 7*scenario.Period, 1000)
	putAll(t, s, more, 5)
	checkRebuild(t, s, sc, more[4])
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketContexts).Stats().KeyN; n != 1 {
			t.Errorf("%d contexts in the file for one room, policy and signer", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPutDecisionsIdempotent: a decision put twice, in one group or two, is
// stored once and references its snapshot once.
func TestPutDecisionsIdempotent(t *testing.T) {
	sc := pathwaysScenario(t, 3, 12)
	ms := makeDecisions(t, sc, 3, 20, 6*scenario.Period, 1000)
	eachStore(t, 0, func(t *testing.T, s Store) {
		g := append(slices.Clone(ms), ms...)
		if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
			t.Fatal(err)
		}
		putAll(t, s, ms, 7)
		for _, m := range ms {
			checkRebuild(t, s, sc, m)
		}
		st, err := s.Prune(bg, 1<<64-1, 1<<64-1)
		if err != nil || st.Decisions != len(ms) || st.Snapshots != 1 {
			t.Errorf("pruning everything: %+v, %v; want %d decisions, 1 snapshot", st, err, len(ms))
		}
	})
}

// TestPutDecisionsRefuses: a group with a decision whose snapshot is
// neither held nor given, or given with a key that is not its SHA-256, or
// a report the row cannot write back (§7.2), writes nothing.
func TestPutDecisionsRefuses(t *testing.T) {
	sc := pathwaysScenario(t, 3, 12)
	ms := makeDecisions(t, sc, 4, 3, 6*scenario.Period, 1000)
	eachStore(t, 0, func(t *testing.T, s Store) {
		rows := rowsOf(ms)
		if err := s.PutDecisions(bg, nil, rows); !errors.Is(err, ErrSnapshotMissing) {
			t.Errorf("no snapshot: %v, want ErrSnapshotMissing", err)
		}
		bad := ms[0].ev
		bad.Body = append(slices.Clone(bad.Body), 0)
		if err := s.PutDecisions(bg, []Evidence{bad}, rows); err == nil {
			t.Errorf("a snapshot whose key is not its SHA-256 was stored")
		}
		absent := slices.Clone(rows)
		absent[2].Report.Present = 0
		absent[2].Report.Buffer = 7
		if err := s.PutDecisions(bg, evidenceOf(ms), absent); err == nil {
			t.Errorf("an absent value of 7 was stored")
		}
		for _, m := range ms {
			if _, err := s.Decision(bg, m.row.Digest); !errors.Is(err, ErrNotFound) {
				t.Errorf("decision %s after refusals: %v", m.row.Digest, err)
			}
		}
		if n := snapshotCount(t, s); n != 0 {
			t.Errorf("%d snapshots after refusals", n)
		}
		// A snapshot given that no new decision references is not kept.
		if err := s.PutDecisions(bg, []Evidence{ms[0].ev}, nil); err != nil {
			t.Fatal(err)
		}
		if n := snapshotCount(t, s); n != 0 {
			t.Errorf("%d snapshots for no decision", n)
		}
		if _, err := s.EvidenceSnapshot(bg, ms[0].ev.Key); !errors.Is(err, ErrNotFound) {
			t.Errorf("snapshot for no decision: %v", err)
		}
	})
}

// TestSnapshotsShared: N decisions made while the evidence did not change
// (one window, §5.1, no record arriving) share one snapshot, and each
// window's has its own.
func TestSnapshotsShared(t *testing.T) {
	sc := pathwaysScenario(t, 3, 12)
	// 300 decisions within one period: one window.
	one := makeDecisions(t, sc, 5, 300, 7*scenario.Period+scenario.Period/5, 1000)
	// 300 more over three periods: three or four windows more.
	three := makeDecisions(t, sc, 6, 300, 8*scenario.Period+scenario.Period/5, scenario.Period/100)
	windows := map[[2]uint64]bool{}
	for _, m := range append(slices.Clone(one), three...) {
		a, b := evidence.PolicyWindow(sc.Policy, m.row.T)
		windows[[2]uint64{a, b}] = true
	}
	if len(windows) < 4 {
		t.Fatalf("the decisions span %d windows", len(windows))
	}
	eachStore(t, 0, func(t *testing.T, s Store) {
		putAll(t, s, one, 50)
		if n := snapshotCount(t, s); n != 1 {
			t.Errorf("%d decisions in one window: %d snapshots, want 1", len(one), n)
		}
		putAll(t, s, three, 1) // one at a time, the snapshot given each time
		if n := snapshotCount(t, s); n != len(windows) {
			t.Errorf("decisions over %d windows: %d snapshots", len(windows), n)
		}
		// The snapshot given with a decision already held is not written
		// again: the body stored is the first.
		body, err := s.EvidenceSnapshot(bg, one[0].ev.Key)
		if err != nil || !bytes.Equal(body, one[0].ev.Body) {
			t.Errorf("snapshot body: %v", err)
		}
	})
}

// TestPrune: records whose end, and decisions whose t, are before the
// instant go; snapshots go with the last decision referencing them; the rest
// stays, in groups smaller than what is removed.
func TestPrune(t *testing.T) {
	sc := pathwaysScenario(t, 3, 14)
	old := makeDecisions(t, sc, 7, 150, 6*scenario.Period+scenario.Period/2, scenario.Period/100) // t in [6.5P, 8P): windows 6, 7
	kept := makeDecisions(t, sc, 8, 150, 7*scenario.Period+scenario.Period/2, scenario.Period/100)
	cut := 8 * uint64(scenario.Period)
	eachStore(t, 7, func(t *testing.T, s Store) {
		putAll(t, s, old, 16)
		putAll(t, s, kept, 16)
		room := sc.Room.ID()
		var recs []Record
		for i := range 40 {
			recs = append(recs, testRecord(room, 1, uint64(i)*scenario.Period/4, uint64(i+1)*scenario.Period/4))
			recs = append(recs, testRecord(hash("other"), 2, uint64(i)*scenario.Period/4, uint64(i+1)*scenario.Period/4))
		}
		if _, err := s.PutRecords(bg, recs); err != nil {
			t.Fatal(err)
		}
		all := append(slices.Clone(old), kept...)
		var wantDecisions int
		live := map[sig.Hash]bool{}
		for _, m := range all {
			if m.row.T < cut {
				wantDecisions++
			} else {
				live[m.ev.Key] = true
			}
		}
		wantSnapshots := len(evidenceOf(all)) - len(live)
		wantRecords := 0
		for _, r := range recs {
			if r.End < cut {
				wantRecords++
			}
		}
		st, err := s.Prune(bg, cut, cut)
		if err != nil {
			t.Fatal(err)
		}
		if st != (PruneStats{Records: wantRecords, Decisions: wantDecisions, Snapshots: wantSnapshots}) {
			t.Errorf("pruned %+v, want %d records, %d decisions, %d snapshots", st, wantRecords, wantDecisions, wantSnapshots)
		}
		if wantSnapshots == 0 || len(live) == 0 {
			t.Fatalf("the scenario prunes %d snapshots and keeps %d: it tests nothing", wantSnapshots, len(live))
		}
		for _, m := range all {
			_, err := s.Decision(bg, m.row.Digest)
			if m.row.T < cut {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("decision at %d after pruning before %d: %v", m.row.T, cut, err)
				}
				if _, err := s.EvidenceSnapshot(bg, m.ev.Key); !live[m.ev.Key] && !errors.Is(err, ErrNotFound) {
					t.Fatalf("unreferenced snapshot kept: %v", err)
				}
				continue
			}
			checkRebuild(t, s, sc, m)
		}
		for _, r := range recs {
			_, err := s.Record(bg, r.Digest)
			if (r.End < cut) != errors.Is(err, ErrNotFound) {
				t.Fatalf("record ending %d after pruning before %d: %v", r.End, cut, err)
			}
		}
		if st, err := s.Prune(bg, cut, cut); err != nil || st != (PruneStats{}) {
			t.Errorf("pruning again: %+v, %v", st, err)
		}
	})
}

// TestPruneCutoffsApart: records and decisions have cutoffs of their own; a
// decision past its cutoff goes while the records before the decisions'
// cutoff but after the records' stay.
func TestPruneCutoffsApart(t *testing.T) {
	sc := pathwaysScenario(t, 3, 14)
	old := makeDecisions(t, sc, 7, 20, 6*scenario.Period+scenario.Period/2, scenario.Period/100)
	eachStore(t, 7, func(t *testing.T, s Store) {
		putAll(t, s, old, 16)
		r := testRecord(sc.Room.ID(), 1, 2*scenario.Period, 3*scenario.Period)
		if _, err := s.PutRecords(bg, []Record{r}); err != nil {
			t.Fatal(err)
		}
		st, err := s.Prune(bg, 2*scenario.Period, 1<<62)
		if err != nil || st.Decisions != len(old) || st.Records != 0 {
			t.Fatalf("pruned %+v, %v: want %d decisions and no record", st, err, len(old))
		}
		if _, err := s.Record(bg, r.Digest); err != nil {
			t.Errorf("the record ending at 3P went with a records cutoff of 2P: %v", err)
		}
	})
}

// TestPruneBesideWriters: Prune, in small groups, runs while writers put
// decisions and records and readers read them (run with -race); at the end
// exactly what is before the instant is gone and the counts of references
// are exact (the invariants checked on cleanup).
func TestPruneBesideWriters(t *testing.T) {
	sc := pathwaysScenario(t, 3, 14)
	old := makeDecisions(t, sc, 9, 200, 6*scenario.Period, scenario.Period/100)   // [6P, 8P)
	fresh := makeDecisions(t, sc, 10, 400, 8*scenario.Period, scenario.Period/80) // [8P, 13P)
	cut := 8 * uint64(scenario.Period)
	eachStore(t, 5, func(t *testing.T, s Store) {
		putAll(t, s, old, 10)
		room := sc.Room.ID()
		var wg sync.WaitGroup
		var pruned atomic.Int64
		const writers = 4
		for w := range writers {
			wg.Go(func() {
				for i := w * 8; i < len(fresh); i += writers * 8 {
					g := fresh[i:min(i+8, len(fresh))]
					if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
						t.Error(err)
						return
					}
					r := testRecord(room, byte(w), cut+uint64(i), cut+uint64(i)+1)
					if _, err := s.PutRecords(bg, []Record{r}); err != nil {
						t.Error(err)
						return
					}
					if _, err := s.Decision(bg, g[0].row.Digest); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Go(func() {
			for range 5 {
				st, err := s.Prune(bg, cut, cut)
				if err != nil {
					t.Error(err)
					return
				}
				pruned.Add(int64(st.Decisions))
			}
		})
		wg.Wait()
		if pruned.Load() != int64(len(old)) {
			t.Errorf("pruned %d decisions, want %d", pruned.Load(), len(old))
		}
		for _, m := range old {
			if _, err := s.Decision(bg, m.row.Digest); !errors.Is(err, ErrNotFound) {
				t.Fatalf("old decision kept: %v", err)
			}
		}
		for _, m := range fresh {
			checkRebuild(t, s, sc, m)
		}
	})
}

// TestContextCancelled: a cancelled context stops every method before it
// writes.
func TestContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	eachStore(t, 0, func(t *testing.T, s Store) {
		if err := s.PutRoom(ctx, Room{ID: hash("r")}); !errors.Is(err, context.Canceled) {
			t.Errorf("PutRoom: %v", err)
		}
		if _, err := s.PutRecords(ctx, []Record{testRecord(hash("r"), 1, 0, 1)}); !errors.Is(err, context.Canceled) {
			t.Errorf("PutRecords: %v", err)
		}
		if _, err := s.Prune(ctx, 10, 10); !errors.Is(err, context.Canceled) {
			t.Errorf("Prune: %v", err)
		}
		if rs, _ := s.Rooms(bg); len(rs) != 0 {
			t.Errorf("a room was written")
		}
	})
}

// TestRebuildRefuses_7_3: a row that does not rebuild to its digest is
// refused, never served: another loads, report or signer changes the bytes.
func TestRebuildRefuses_7_3(t *testing.T) {
	sc := pathwaysScenario(t, 3, 12)
	m := makeDecisions(t, sc, 11, 1, 7*scenario.Period, 0)[0]
	p, pd := sc.Policy, sc.Policy.Digest()
	if _, err := Rebuild(p, pd, m.row, m.ev.Body); err != nil {
		t.Fatal(err)
	}
	edits := map[string]func(r *Decision){
		"loads":    func(r *Decision) { r.Loads = slices.Clone(r.Loads); r.Loads[0]++ },
		"t":        func(r *Decision) { r.T++ },
		"session":  func(r *Decision) { r.Session[0] ^= 1 },
		"protocol": func(r *Decision) { r.Protocol = 3 - r.Protocol },
		"signer":   func(r *Decision) { r.Signer[0] ^= 1 },
		"digest":   func(r *Decision) { r.Digest[0] ^= 1 },
	}
	for name, edit := range edits {
		r := m.row
		edit(&r)
		if _, err := Rebuild(p, pd, r, m.ev.Body); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s changed: %v, want ErrMismatch", name, err)
		}
	}
	// A signature changed is not covered by the digest (§7.3): the bytes
	// rebuild with the stored signature, which a verifier then refuses.
	r := m.row
	r.Sig[0] ^= 1
	b, err := Rebuild(p, pd, r, m.ev.Body)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decision.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.VerifySignature() == nil {
		t.Errorf("a changed signature verifies")
	}
	// Evidence of another window, a policy other than the row's, and loads
	// for another count of pathways are refused before any bytes.
	other := makeDecisions(t, sc, 12, 1, 9*scenario.Period, 0)[0]
	if _, err := Rebuild(p, pd, m.row, other.ev.Body); !errors.Is(err, ErrMismatch) {
		t.Errorf("another window's evidence: %v, want ErrMismatch", err)
	}
	if _, err := Rebuild(p, hash("other"), m.row, m.ev.Body); err == nil {
		t.Errorf("another policy's digest: rebuilt")
	}
	r = m.row
	r.Loads = r.Loads[:2]
	if _, err := Rebuild(p, pd, r, m.ev.Body); err == nil || errors.Is(err, ErrMismatch) {
		t.Errorf("two loads for three pathways: %v", err)
	}
}

// TestSecret: a secret is made once and is the same at every later call,
// in the bolt file after it is reopened too; names are apart, and a
// length other than the one held is refused.
func TestSecret(t *testing.T) {
	eachStore(t, 0, func(t *testing.T, s Store) {
		a, err := s.Secret(bg, "pool", 16)
		if err != nil || len(a) != 16 {
			t.Fatalf("Secret: %x, %v", a, err)
		}
		if bytes.Equal(a, make([]byte, 16)) {
			t.Fatal("the secret is all zeros")
		}
		b, err := s.Secret(bg, "pool", 16)
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("second call: %x, %v; the first gave %x", b, err, a)
		}
		b[0] ^= 1 // the caller's copy is its own
		if c, _ := s.Secret(bg, "pool", 16); !bytes.Equal(a, c) {
			t.Fatalf("a caller's change reached the store: %x", c)
		}
		if o, err := s.Secret(bg, "other", 16); err != nil || bytes.Equal(o, a) {
			t.Fatalf("another name: %x, %v", o, err)
		}
		if _, err := s.Secret(bg, "pool", 32); err == nil {
			t.Fatal("a secret of 16 bytes was given as 32")
		}
	})
	path := filepath.Join(t.TempDir(), "secret.db")
	s := openTestBolt(t, path)
	a, err := s.Secret(bg, "pool", 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestBolt(t, path)
	if b, err := s.Secret(bg, "pool", 16); err != nil || !bytes.Equal(a, b) {
		t.Fatalf("after reopening: %x, %v; before %x", b, err, a)
	}
}
