package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

// testLeaves are n leaves of distinct digests and t.
func testLeaves(n int) []LogEntry {
	es := make([]LogEntry, n)
	for i := range es {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		es[i] = LogEntry{Digest: sig.Hash(sha256.Sum256(b[:])), T: 1_000_000 + 30*uint64(i)}
	}
	return es
}

// TestLogHasherMatchesTlog (issue 30 item 3: the log's hashes stay
// byte-identical): the hashes the hasher appends, batch by batch, some of
// their left siblings held in memory and some in the tiles of a file, are
// those golang.org/x/mod's tlog.StoredHashes makes for the same leaves
// (RFC 6962 §2.1), for every log size to 600 and batches of 1 to 37.
func TestLogHasherMatchesTlog(t *testing.T) {
	es := testLeaves(600)
	var want []tlog.Hash
	r := tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(x))
		for i, j := range x {
			out[i] = want[j]
		}
		return out, nil
	})
	for i, e := range es {
		hs, err := tlog.StoredHashes(int64(i), e.Leaf(), r)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, hs...)
	}
	for _, batch := range []int{1, 2, 7, 37} {
		{
			// The siblings are read from memory here (held from 0); from
			// the file's tiles in TestBoltLogCrash and TestBoltLogTiles.
			var got []tlog.Hash
			h := logHasher{from: 0}
			for n := int64(0); n < int64(len(es)); n += int64(batch) {
				h.held = got
				end := min(n+int64(batch), int64(len(es)))
				fresh, err := h.appendHashes(nil, n, es[n:end])
				if err != nil {
					t.Fatalf("batch %d from %d: %v", batch, n, err)
				}
				got = append(got, fresh...)
			}
			if len(got) != len(want) {
				t.Fatalf("batch %d: %d hashes, want %d", batch, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("batch %d: stored hash %d is %x, want %x", batch, i, got[i], want[i])
				}
			}
		}
	}
	// RFC 6962 §2.1 by hand, for the first two leaves: MTH of one leaf is
	// SHA-256(0x00 ‖ leaf); of two, SHA-256(0x01 ‖ MTH(d0) ‖ MTH(d1)).
	l0 := sha256.Sum256(append([]byte{0}, es[0].Leaf()...))
	l1 := sha256.Sum256(append([]byte{0}, es[1].Leaf()...))
	n01 := sha256.Sum256(append(append([]byte{1}, l0[:]...), l1[:]...))
	if want[0] != tlog.Hash(l0) || want[1] != tlog.Hash(l1) || want[2] != tlog.Hash(n01) {
		t.Fatalf("stored hashes 0-2 are not RFC 6962's")
	}
}

// TestLogHasherAllocs (issue 30 item 3): hashing a batch of pending
// leaves whose siblings are in memory, into a reused buffer, allocates
// nothing (it allocated a leaf's bytes, a reader's slices and a read
// transaction a leaf before).
func TestLogHasherAllocs(t *testing.T) {
	es := testLeaves(1024)
	h := logHasher{}
	all, err := h.appendHashes(nil, 0, es[:992])
	if err != nil {
		t.Fatal(err)
	}
	h.held = all
	buf := make([]tlog.Hash, 0, 128)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := h.appendHashes(buf, 992, es[992:]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a batch of 32 leaves, want 0", allocs)
	}
}

// TestBoltLogTiles (issue 30 item 3): a Bolt's log, flushed every 23
// leaves and hashed by the hasher between commits, has at every size the
// tree hash and the tiles that tlog makes of its leaves on its own
// (golang.org/x/mod's StoredHashes and ReadTileData, RFC 6962 §2.1).
func TestBoltLogTiles(t *testing.T) {
	s := openTestBolt(t, "", WithLogFlush(23))
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 11, 700, 6*scenario.Period, 1_000)
	room := sc.Room.ID()
	var want []tlog.Hash
	r := tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(x))
		for i, j := range x {
			out[i] = want[j]
		}
		return out, nil
	})
	n := int64(0)
	for i, size := 0, 1; i < len(ms); i, size = i+size, size%40+1 {
		g := ms[i:min(i+size, len(ms))]
		if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
			t.Fatal(err)
		}
		for _, m := range g {
			hs, err := tlog.StoredHashes(n, LogEntry{Digest: m.row.Digest, T: m.row.T}.Leaf(), r)
			if err != nil {
				t.Fatal(err)
			}
			want, n = append(want, hs...), n+1
		}
		got, err := tlog.TreeHash(n, tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) { return s.LogHashes(bg, room, 0, x) }))
		if err != nil {
			t.Fatal(err)
		}
		if w, _ := tlog.TreeHash(n, r); got != w {
			t.Fatalf("at %d leaves the store's tree hash is %s, tlog's %s", n, got, w)
		}
	}
	if err := s.flushLog(); err != nil {
		t.Fatal(err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogTiles)
		for _, tile := range tlog.NewTiles(tileHeight, 0, n) {
			w, err := tlog.ReadTileData(tile, r)
			if err != nil {
				return err
			}
			if got := b.Get(tileKey(room, uint8(tile.L), tile.N)); !bytes.Equal(got, w) {
				t.Errorf("tile %d/%d/%d: %d bytes, not tlog's %d", tile.L, tile.N, tile.W, len(got), len(w))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPutDecisionsAllocs (issue 30 items 1 to 3): a group of 32 fresh
// decisions, at the steady state of a small store, allocates at most 12
// objects a decision, log hasher included (10.1 when written). What is left is bbolt's own (a
// cursor's stack and a key's copy in each Put, the pages it writes); the
// group's arena, keys and maps, the index's buffers and the hasher's
// leaves, slices and read transaction were another 4.5 a decision (14.6
// here before).
func TestPutDecisionsAllocs(t *testing.T) {
	// The commit's own allocations, without the journal in front of it
	// (TestJournalAllocs counts those of a journaled group).
	s := openTestBolt(t, "", WithoutJournal())
	s.db.NoSync = true // the count is the same synced; the test is faster
	sc := pathwaysScenario(t, 3, 8)
	base := makeDecisions(t, sc, 12, 1, 6*scenario.Period, 1)[0]
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
	for range 256 { // past the index's first runs and merges
		put()
	}
	// 128 groups: 4 runs of the index cut, and their merge.
	perDecision := testing.AllocsPerRun(128, put) / float64(len(g))
	if perDecision > 12 {
		t.Fatalf("%.1f allocations a decision in groups of 32, want at most 12", perDecision)
	}
	t.Logf("%.2f allocations a decision", perDecision)
}
