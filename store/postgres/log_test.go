package postgres

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/store"
)

// refLog is a log kept by tlog alone, in memory: every stored hash, as
// tlog.StoredHashes gives them (RFC 6962 §2.1), to check the tiles against.
type refLog struct {
	hashes []tlog.Hash
	n      int64
}

func (r *refLog) ReadHashes(xs []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(xs))
	for i, x := range xs {
		out[i] = r.hashes[x]
	}
	return out, nil
}

func (r *refLog) add(t *testing.T, e store.LogEntry) {
	hs, err := tlog.StoredHashes(r.n, e.Leaf(), r)
	if err != nil {
		t.Fatal(err)
	}
	r.hashes = append(r.hashes, hs...)
	r.n++
}

// TestLogTiles (issue 31, "hashes in tiles, not a row per node"): a room's
// log of 66 000 leaves, appended in groups of 1 to 900 by its server, which
// now and then forgets its frontier (as after a commit whose outcome it
// did not learn) and reads the partial tiles again, holds every stored
// hash tlog computes for those leaves, through the bottom tile's
// completion (256 leaves), the first tile of level 1's (65 536) and past
// it; its root at each size asked, read by its server and by another, is
// tlog's, and each leaf's inclusion proof checks against it.
func TestLogTiles(t *testing.T) {
	a, b := openTwo(t)
	ctx := bg(t)
	rng := rand.New(rand.NewPCG(31, 16))
	var ref refLog
	room := ds0Room()
	own, err := a.OwnLog(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	const total = 66_000
	check := func(n int64) {
		t.Helper()
		if got, err := b.LogSize(ctx, room, own.N); err != nil || got != n {
			t.Fatalf("size %d, %v; want %d", got, err, n)
		}
		for _, s := range []*Store{a, b} {
			r := tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) { return s.LogHashes(ctx, room, own.N, xs) })
			got, err := tlog.TreeHash(n, r)
			if err != nil {
				t.Fatalf("root of %d: %v", n, err)
			}
			want, _ := tlog.TreeHash(n, &ref)
			if got != want {
				t.Fatalf("root of %d leaves: %v, tlog's %v", n, got, want)
			}
			for range 3 {
				i := rng.Int64N(n)
				p, err := tlog.ProveRecord(n, i, r)
				if err != nil {
					t.Fatalf("proof of %d in %d: %v", i, n, err)
				}
				if err := tlog.CheckRecord(p, n, want, i, ref.hashes[tlog.StoredHashIndex(0, i)]); err != nil {
					t.Fatalf("proof of %d in %d: %v", i, n, err)
				}
			}
		}
	}
	// Every stored hash, read back in batches as tlog asks them.
	all := func(n int64) {
		t.Helper()
		count := tlog.StoredHashCount(n)
		for x := int64(0); x < count; x += 5000 {
			var xs []int64
			for y := x; y < min(count, x+5000); y++ {
				xs = append(xs, y)
			}
			got, err := b.LogHashes(ctx, room, own.N, xs)
			if err != nil {
				t.Fatal(err)
			}
			for i, y := range xs {
				if got[i] != ref.hashes[y] {
					l, k := tlog.SplitStoredHashIndex(y)
					t.Fatalf("stored hash %d (level %d, %d) of %d leaves differs from tlog's", y, l, k, n)
				}
			}
		}
	}
	next, turn := 0, 0
	for next < total {
		k := 1 + rng.IntN(900)
		switch {
		case next < 256 && next+k > 256:
			k = 256 - next // the first bottom tile exactly
		case next < 65536 && next+k > 65536:
			k = 65536 - next
		}
		k = min(k, total-next)
		ds, ev := benchDecisions(k, uint64(next))
		// In turns 1 and 3 of every ten, a forgets its frontier.
		if turn%10 < 5 && turn%2 == 1 {
			a.mu.Lock()
			clear(a.frontiers)
			a.mu.Unlock()
		}
		turn++
		if err := a.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			ref.add(t, store.LogEntry{Digest: d.Digest, T: d.T})
		}
		next += k
		if next <= 300 || next == 65536 || next == total || turn%20 == 0 {
			check(int64(next))
		}
	}
	all(total)
	var rows int
	if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM waisteer.log_tiles").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	// 257 complete bottom tiles, 257 hashes of level 8, 1 of level 16.
	if want := total/256 + total/256 + 1; rows != want {
		t.Errorf("%d rows of tiles for %d leaves, want %d", rows, total, want)
	}
}

// TestPutHeldAgain (issue 31, group.go): a group written as if none of
// its decisions were held, with some held (put before, one of them
// pruned), is written again leaving those out: the new ones are the next
// leaves, in order, with no hole and no leaf twice; a group of held ones
// alone changes nothing.
func TestPutHeldAgain(t *testing.T) {
	s, _ := open(t)
	ctx := bg(t)
	room := ds0Room()
	ds, ev := benchDecisions(20, 0)
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds[:10]); err != nil {
		t.Fatal(err)
	}
	// Decision 0 pruned: its leaf stays, its row without bytes.
	if _, err := s.pool.Exec(ctx, "UPDATE waisteer.decisions SET row = NULL, context = NULL, snapshot = NULL WHERE digest = $1", ds[0].Digest[:]); err != nil {
		t.Fatal(err)
	}
	again := []store.Decision{ds[10], ds[0], ds[11], ds[5], ds[12], ds[12]}
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, again); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds[3:6]); err != nil {
		t.Fatal(err)
	}
	own, err := s.OwnLog(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.LogEntries(ctx, room, own.N, 0, 13)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range append(ds[:10:10], ds[10], ds[11], ds[12]) {
		if es[i].Digest != want.Digest {
			t.Fatalf("leaf %d is not the decision put %d-th", i, i)
		}
	}
	if n, err := s.LogSize(ctx, room, own.N); err != nil || n != 13 || own.Size != 13 {
		t.Fatalf("size %d, %v; want 13", n, err)
	}
}
