package postgres

import (
	"testing"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// The tests of a group in one statement (once.go). What they check is the
// log's, from the text of issue 16 and RFC 6962 (checkLog), and the
// decisions' bytes: a group written at once or in two round trips must
// leave the same log, and one whose assumptions failed must leave nothing.

// atOnce is the store's count of groups written in one statement, and of
// those whose statement missed.
func atOnce(s *Store) (committed, missed uint64) {
	return s.metrics.atOnce.Load(), s.metrics.atOnceMissed.Load()
}

// inRoom is the decisions moved to another room.
func inRoom(ds []store.Decision, room sig.Hash) []store.Decision {
	for i := range ds {
		ds[i].Room = room
	}
	return ds
}

// TestGroupsAtOnce: the first group of a server in a room is written in
// two round trips (it knows neither its log's frontier nor its context's
// and snapshot's ids), and the next ones at once; the log holds every
// decision in the order put, its tree RFC 6962's.
func TestGroupsAtOnce(t *testing.T) {
	ctx := bg(t)
	s, _ := open(t)
	var all []store.Decision
	from := uint64(0)
	for g, n := range []int{3, 1, 40, 7, 300} {
		ds, ev := benchDecisions(n, from)
		from += uint64(n)
		if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
			t.Fatal(err)
		}
		all = append(all, ds...)
		if c, m := atOnce(s); c != uint64(g) || m != 0 {
			t.Fatalf("after group %d: %d at once, %d missed; want %d, 0", g, c, m, g)
		}
	}
	checkLog(t, s, ds0Room(), 1, all)
	for _, d := range []store.Decision{all[0], all[3], all[len(all)-1]} {
		got, err := s.Decision(ctx, d.Digest)
		if err != nil || got.Digest != d.Digest || got.T != d.T || got.Evidence != d.Evidence {
			t.Fatalf("decision %s read back %+v, %v", d.Digest, got, err)
		}
	}
}

// TestGroupAtOnceStaleFrontier: a group of two rooms whose server's
// frontier of one log is stale (as after a commit that succeeded but
// whose answer was lost) fails its statement whole, and is written in two
// round trips: had the statement moved the log it knew (the other room's)
// without its decisions, or appended the stale one at a taken index, the
// logs would not be exactly the decisions put.
func TestGroupAtOnceStaleFrontier(t *testing.T) {
	ctx := bg(t)
	s, _ := open(t)
	a, b := ds0Room(), sig.Digest([]byte("another room"))
	var inA, inB []store.Decision
	from := uint64(0)
	put := func(na, nb int) {
		t.Helper()
		da, ev := benchDecisions(na, from)
		from += uint64(na)
		db, _ := benchDecisions(nb, from)
		from += uint64(nb)
		inRoom(db, b)
		if err := s.PutDecisions(ctx, []store.Evidence{ev}, append(append([]store.Decision{}, da...), db...)); err != nil {
			t.Fatal(err)
		}
		inA, inB = append(inA, da...), append(inB, db...)
	}
	put(5, 4) // in two round trips: nothing known
	put(2, 3) // at once
	logB := s.own[b].id
	stale := s.frontiers[logB]
	put(260, 1) // at once; a tile of log A completes
	s.mu.Lock()
	s.frontiers[logB] = stale
	s.mu.Unlock()
	put(3, 2) // missed: log B's frontier is stale
	put(1, 1) // at once again
	if c, m := atOnce(s); c != 3 || m != 1 {
		t.Fatalf("%d groups at once, %d missed; want 3, 1", c, m)
	}
	checkLog(t, s, a, 1, inA)
	checkLog(t, s, b, 1, inB)
}

// TestGroupAtOnceSnapshotPruned: a snapshot this server remembers, pruned
// since with every decision that named it, misses the statement (it
// would reference a row that is gone); the group is written in two round
// trips, which write the snapshot again, and the decision reads back
// whole, its snapshot with it.
func TestGroupAtOnceSnapshotPruned(t *testing.T) {
	ctx := bg(t)
	s, _ := open(t)
	ds, ev := benchDecisions(4, 0)
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
		t.Fatal(err)
	}
	st, err := s.Prune(ctx, 0, ds[len(ds)-1].T+1)
	if err != nil || st.Decisions != 4 || st.Snapshots != 1 {
		t.Fatalf("pruned %+v, %v; want 4 decisions and their snapshot", st, err)
	}
	later, _ := benchDecisions(2, 100)
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, later); err != nil {
		t.Fatal(err)
	}
	if c, m := atOnce(s); c != 0 || m != 1 {
		t.Fatalf("%d groups at once, %d missed; want 0, 1", c, m)
	}
	for _, d := range later {
		got, err := s.Decision(ctx, d.Digest)
		if err != nil || got.Digest != d.Digest || got.Evidence != ev.Key {
			t.Fatalf("decision %s read back %+v, %v", d.Digest, got, err)
		}
	}
	body, err := s.EvidenceSnapshot(ctx, ev.Key)
	if err != nil || string(body) != string(ev.Body) {
		t.Fatalf("the snapshot reads %x, %v; want the evidence put", body, err)
	}
	checkLog(t, s, ds0Room(), 1, append(ds, later...))
}
