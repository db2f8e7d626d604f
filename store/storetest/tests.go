package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// testRooms: a room's descriptor and key log head (COMPANION §4) are kept
// exactly, no head apart from an empty one (a head given that does not read
// is key_log_invalid, no head key_log_missing), and PutRoom replaces.
func testRooms(t *testing.T, e Engine) {
	s := e.Open(t, 0)
	if rs, err := s.Rooms(bg); err != nil || len(rs) != 0 {
		t.Fatalf("an empty store has rooms %v, %v", rs, err)
	}
	a := store.Room{ID: hash("a"), Descriptor: []byte("descriptor a"), KeyLogHead: []byte("head 1")}
	b := store.Room{ID: hash("b"), Descriptor: []byte("descriptor b")}
	c := store.Room{ID: hash("c"), Descriptor: []byte("descriptor c"), KeyLogHead: []byte{}}
	for _, r := range []store.Room{a, b, c} {
		if err := s.PutRoom(bg, r); err != nil {
			t.Fatal(err)
		}
	}
	a.KeyLogHead = []byte("head 2, longer")
	if err := s.PutRoom(bg, a); err != nil {
		t.Fatal(err)
	}
	// The store holds its own copy: a change to the caller's slice after
	// PutRoom is not seen (a is compared with a fresh slice of the bytes put).
	a.KeyLogHead[0] = 'X'
	a.KeyLogHead = []byte("head 2, longer")
	rs, err := s.Rooms(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("%d rooms, want 3", len(rs))
	}
	for _, want := range []store.Room{a, b, c} {
		i := slices.IndexFunc(rs, func(r store.Room) bool { return r.ID == want.ID })
		if i < 0 || !sameRoom(rs[i], want) {
			t.Errorf("room %s: got %+v, want %+v", want.ID, rs, want)
		}
	}
}

// testPolicies: a policy is kept by its digest (§3.4); the active one
// switches per room and earlier ones stay available by digest.
func testPolicies(t *testing.T, e Engine) {
	s := e.Open(t, 0)
	room, other := hash("room"), hash("other")
	if _, _, err := s.ActivePolicy(bg, room); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no active policy: %v, want ErrNotFound", err)
	}
	if _, err := s.Policy(bg, hash("p1")); !errors.Is(err, store.ErrNotFound) {
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
}

// testRecords: records are kept idempotently by digest (a digest is never
// named twice, §7.2) with added flags; Records gives those whose end is
// after since, of the room only, as a starting server needs for its windows
// (§5.1).
func testRecords(t *testing.T, e Engine) {
	s := e.Open(t, 0)
	room, other := hash("room"), hash("other")
	var rs []store.Record
	for i := range 600 { // more than one read group of an engine that reads in groups (bolt reads 256)
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
	for _, r := range []store.Record{rs[0], rs[599]} {
		raw, err := s.Record(bg, r.Digest)
		if err != nil || !bytes.Equal(raw, r.Raw) {
			t.Errorf("record %s: %q, %v", r.Digest, raw, err)
		}
	}
	if _, err := s.Record(bg, hash("none")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no record: %v", err)
	}
	for _, since := range []uint64{0, 9, 10, 11, 2995, 5990, 5999, 6000, 1<<64 - 1} {
		var got []store.Record
		if err := s.Records(bg, room, since, func(r store.Record) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		var want []store.Record
		for _, r := range rs {
			if r.End > since {
				want = append(want, r)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("since %d: %d records, want %d", since, len(got), len(want))
		}
		slices.SortFunc(got, func(x, y store.Record) int { return bytes.Compare(x.Raw, y.Raw) })
		slices.SortFunc(want, func(x, y store.Record) int { return bytes.Compare(x.Raw, y.Raw) })
		for i := range got {
			g, w := got[i], want[i]
			if g.Digest != w.Digest || g.Room != w.Room || g.Hop != w.Hop || g.Start != w.Start || g.End != w.End || !bytes.Equal(g.Raw, w.Raw) {
				t.Fatalf("since %d: record %+v, want %+v", since, g, w)
			}
		}
	}
	stop := errors.New("stop")
	calls := 0
	if err := s.Records(bg, room, 0, func(store.Record) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("an error from fn: %v after %d calls", err, calls)
	}
}

// testDecisionsRoundTrip_7_1: decisions made from a scenario are stored
// compactly and rebuilt to their exact WSD1 bytes (§7.1), each checked
// against its digest (§7.3).
func testDecisionsRoundTrip_7_1(t *testing.T, e Engine) {
	sc := pathwaysScenario(t, 3, 12)
	ms := makeDecisions(t, sc, 1, 400, 6*scenario.Period+scenario.Period/2, scenario.Period/100)
	s := e.Open(t, 0)
	putAll(t, s, ms, 37)
	for _, m := range ms {
		checkRebuild(t, s, sc, m)
	}
}

// testPutDecisionsIdempotent: a decision put twice, in one group or two, is
// stored once and references its snapshot once.
func testPutDecisionsIdempotent(t *testing.T, e Engine) {
	sc := pathwaysScenario(t, 3, 12)
	ms := makeDecisions(t, sc, 3, 20, 6*scenario.Period, 1000)
	s := e.Open(t, 0)
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
}

// testPutDecisionsRefuses: a group with a decision whose snapshot is
// neither held nor given, or given with a key that is not its SHA-256, or
// a report the row cannot write back (§7.2), writes nothing.
func testPutDecisionsRefuses(t *testing.T, e Engine) {
	sc := pathwaysScenario(t, 3, 12)
	ms := makeDecisions(t, sc, 4, 3, 6*scenario.Period, 1000)
	s := e.Open(t, 0)
	rows := rowsOf(ms)
	if err := s.PutDecisions(bg, nil, rows); !errors.Is(err, store.ErrSnapshotMissing) {
		t.Errorf("no snapshot: %v, want ErrSnapshotMissing", err)
	}
	bad := ms[0].ev
	bad.Body = append(slices.Clone(bad.Body), 0)
	if err := s.PutDecisions(bg, []store.Evidence{bad}, rows); err == nil {
		t.Errorf("a snapshot whose key is not its SHA-256 was stored")
	}
	absent := slices.Clone(rows)
	absent[2].Report.Present = 0
	absent[2].Report.Buffer = 7
	if err := s.PutDecisions(bg, evidenceOf(ms), absent); err == nil {
		t.Errorf("an absent value of 7 was stored")
	}
	for _, m := range ms {
		if _, err := s.Decision(bg, m.row.Digest); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("decision %s after refusals: %v", m.row.Digest, err)
		}
	}
	if n := e.Snapshots(t, s); n != 0 {
		t.Errorf("%d snapshots after refusals", n)
	}
	// A snapshot given that no new decision references is not kept.
	if err := s.PutDecisions(bg, []store.Evidence{ms[0].ev}, nil); err != nil {
		t.Fatal(err)
	}
	if n := e.Snapshots(t, s); n != 0 {
		t.Errorf("%d snapshots for no decision", n)
	}
	if _, err := s.EvidenceSnapshot(bg, ms[0].ev.Key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("snapshot for no decision: %v", err)
	}
}

// testSnapshotsShared: N decisions made while the evidence did not change
// (one window, §5.1, no record arriving) share one snapshot, and each
// window's has its own.
func testSnapshotsShared(t *testing.T, e Engine) {
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
	s := e.Open(t, 0)
	putAll(t, s, one, 50)
	if n := e.Snapshots(t, s); n != 1 {
		t.Errorf("%d decisions in one window: %d snapshots, want 1", len(one), n)
	}
	putAll(t, s, three, 1) // one at a time, the snapshot given each time
	if n := e.Snapshots(t, s); n != len(windows) {
		t.Errorf("decisions over %d windows: %d snapshots", len(windows), n)
	}
	// The snapshot given with a decision already held is not written
	// again: the body stored is the first.
	body, err := s.EvidenceSnapshot(bg, one[0].ev.Key)
	if err != nil || !bytes.Equal(body, one[0].ev.Body) {
		t.Errorf("snapshot body: %v", err)
	}
}

// testPrune: records whose end, and decisions whose t, are before the
// instant go; snapshots go with the last decision referencing them; the rest
// stays, in groups smaller than what is removed.
func testPrune(t *testing.T, e Engine) {
	sc := pathwaysScenario(t, 3, 14)
	old := makeDecisions(t, sc, 7, 150, 6*scenario.Period+scenario.Period/2, scenario.Period/100) // t in [6.5P, 8P): windows 6, 7
	kept := makeDecisions(t, sc, 8, 150, 7*scenario.Period+scenario.Period/2, scenario.Period/100)
	cut := 8 * uint64(scenario.Period)
	s := e.Open(t, 7)
	putAll(t, s, old, 16)
	putAll(t, s, kept, 16)
	room := sc.Room.ID()
	var recs []store.Record
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
	if st != (store.PruneStats{Records: wantRecords, Decisions: wantDecisions, Snapshots: wantSnapshots}) {
		t.Errorf("pruned %+v, want %d records, %d decisions, %d snapshots", st, wantRecords, wantDecisions, wantSnapshots)
	}
	if wantSnapshots == 0 || len(live) == 0 {
		t.Fatalf("the scenario prunes %d snapshots and keeps %d: it tests nothing", wantSnapshots, len(live))
	}
	for _, m := range all {
		_, err := s.Decision(bg, m.row.Digest)
		if m.row.T < cut {
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("decision at %d after pruning before %d: %v", m.row.T, cut, err)
			}
			if _, err := s.EvidenceSnapshot(bg, m.ev.Key); !live[m.ev.Key] && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("unreferenced snapshot kept: %v", err)
			}
			continue
		}
		checkRebuild(t, s, sc, m)
	}
	for _, r := range recs {
		_, err := s.Record(bg, r.Digest)
		if (r.End < cut) != errors.Is(err, store.ErrNotFound) {
			t.Fatalf("record ending %d after pruning before %d: %v", r.End, cut, err)
		}
	}
	if st, err := s.Prune(bg, cut, cut); err != nil || st != (store.PruneStats{}) {
		t.Errorf("pruning again: %+v, %v", st, err)
	}
}

// testPruneCutoffsApart: records and decisions have cutoffs of their own; a
// decision past its cutoff goes while the records before the decisions'
// cutoff but after the records' stay.
func testPruneCutoffsApart(t *testing.T, e Engine) {
	sc := pathwaysScenario(t, 3, 14)
	old := makeDecisions(t, sc, 7, 20, 6*scenario.Period+scenario.Period/2, scenario.Period/100)
	s := e.Open(t, 7)
	putAll(t, s, old, 16)
	r := testRecord(sc.Room.ID(), 1, 2*scenario.Period, 3*scenario.Period)
	if _, err := s.PutRecords(bg, []store.Record{r}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Prune(bg, 2*scenario.Period, 1<<62)
	if err != nil || st.Decisions != len(old) || st.Records != 0 {
		t.Fatalf("pruned %+v, %v: want %d decisions and no record", st, err, len(old))
	}
	if _, err := s.Record(bg, r.Digest); err != nil {
		t.Errorf("the record ending at 3P went with a records cutoff of 2P: %v", err)
	}
}

// testPruneBesideWriters: Prune, in small groups, runs while writers put
// decisions and records and readers read them (run with -race); at the end
// exactly what is before the instant is gone and the counts of references
// are exact (the invariants checked on cleanup).
func testPruneBesideWriters(t *testing.T, e Engine) {
	sc := pathwaysScenario(t, 3, 14)
	old := makeDecisions(t, sc, 9, 200, 6*scenario.Period, scenario.Period/100)   // [6P, 8P)
	fresh := makeDecisions(t, sc, 10, 400, 8*scenario.Period, scenario.Period/80) // [8P, 13P)
	cut := 8 * uint64(scenario.Period)
	s := e.Open(t, 5)
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
				if _, err := s.PutRecords(bg, []store.Record{r}); err != nil {
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
		if _, err := s.Decision(bg, m.row.Digest); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("old decision kept: %v", err)
		}
	}
	for _, m := range fresh {
		checkRebuild(t, s, sc, m)
	}
}

// testContextCancelled: a cancelled context stops every method before it
// writes.
func testContextCancelled(t *testing.T, e Engine) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	s := e.Open(t, 0)
	if err := s.PutRoom(ctx, store.Room{ID: hash("r")}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutRoom: %v", err)
	}
	if _, err := s.PutRecords(ctx, []store.Record{testRecord(hash("r"), 1, 0, 1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutRecords: %v", err)
	}
	if _, err := s.Prune(ctx, 10, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("Prune: %v", err)
	}
	if rs, _ := s.Rooms(bg); len(rs) != 0 {
		t.Errorf("a room was written")
	}
}

// testSecret: a secret is made once and is the same at every later call;
// names are apart, and a length other than the one held is refused. That
// it outlives the store's closing is each durable engine's own test.
func testSecret(t *testing.T, e Engine) {
	s := e.Open(t, 0)
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
}
