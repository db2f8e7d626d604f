package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// MTH is the Merkle Tree Hash of RFC 6962 §2.1, written from the RFC: of
// no leaves SHA-256 of nothing; of one, SHA-256 of 0x00 and the leaf; of
// n > 1, SHA-256 of 0x01, the hash of the first k leaves and the hash of
// the rest, k the largest power of two below n.
func MTH(leaves [][]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0}, leaves[0]...))
	}
	k := 1
	for 2*k < len(leaves) {
		k *= 2
	}
	l, r := MTH(leaves[:k]), MTH(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// testLog (issue 16): every decision a store holds is a leaf of its room's
// log, appended in commit order (the groups' order, and the order within a
// group), once; the tree its stored hashes give at every size is RFC 6962's
// over the leaves; a decision's inclusion proves from them; pruning
// removes no leaf.
func testLog(t *testing.T, e Engine) {
	s := e.Open(t, 0)
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 5, 150, 6*scenario.Period, 1000)
	other := hash("another room")
	for i := range ms {
		if i%3 == 2 {
			ms[i].row.Room = other
		}
	}
	want := map[sig.Hash][]store.LogEntry{}
	logged := map[sig.Hash]bool{} // a digest is a decision's: stored, and logged, once
	for i, size := 0, 1; i < len(ms); i, size = i+size, size%13+1 {
		g := ms[i:min(i+size, len(ms))]
		put := rowsOf(g)
		if size%4 == 0 && i > 0 {
			put = append(put, ms[i-1].row, put[0]) // one held, one twice: neither appended again
		}
		if err := s.PutDecisions(bg, evidenceOf(append(g, ms[max(i-1, 0)])), put); err != nil {
			t.Fatal(err)
		}
		for _, m := range g {
			if !logged[m.row.Digest] {
				logged[m.row.Digest] = true
				want[m.row.Room] = append(want[m.row.Room], store.LogEntry{Digest: m.row.Digest, T: m.row.T})
			}
		}
	}
	// Again, every one: nothing new.
	putAll(t, s, ms, 50)
	check := func(when string) {
		t.Helper()
		own := map[sig.Hash]int64{}
		for _, room := range []sig.Hash{sc.Room.ID(), other} {
			// One store's decisions are all in its own log of the room
			// (issue 31), which Logs lists with its size.
			mine, err := s.OwnLog(bg, room)
			if err != nil {
				t.Fatal(err)
			}
			own[room] = mine.N
			n, err := s.LogSize(bg, room, mine.N)
			if err != nil || n != int64(len(want[room])) || mine.Size != n {
				t.Fatalf("%s: room %s's log size %d (%d as its own), %v, want %d", when, room, n, mine.Size, err, len(want[room]))
			}
			logs, err := s.Logs(bg, room)
			if err != nil || !slices.ContainsFunc(logs, func(l store.LogInfo) bool { return l.N == mine.N && l.Size == n && !l.Sealed }) {
				t.Fatalf("%s: room %s's logs %+v, %v: its own, %d of %d leaves, is not among them", when, room, logs, err, mine.N, n)
			}
			// Each log read alone is as listed, and a number not listed
			// is not found (store.LogOf: the routes of one log).
			last := int64(-1)
			for _, li := range logs {
				if one, err := store.LogOf(bg, s, room, li.N); err != nil || one != li {
					t.Fatalf("%s: room %s's log %d alone: %+v, %v; listed %+v", when, room, li.N, one, err, li)
				}
				last = max(last, li.N)
			}
			for _, n := range []int64{last + 1, -1, 1 << 40} {
				if one, err := store.LogOf(bg, s, room, n); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("%s: room %s's log %d, not listed: %+v, %v; want store.ErrNotFound", when, room, n, one, err)
				}
			}
			got, err := s.LogEntries(bg, room, mine.N, 0, n)
			if err != nil || !slices.Equal(got, want[room]) {
				t.Fatalf("%s: room %s's log entries %v, want the decisions in commit order, %v", when, room, err, len(want[room]))
			}
			if mid, err := s.LogEntries(bg, room, mine.N, 3, 7); err != nil || !slices.Equal(mid, want[room][3:7]) {
				t.Errorf("%s: entries [3, 7): %v", when, err)
			}
			var leaves [][]byte
			for _, e := range want[room] {
				leaves = append(leaves, e.Leaf())
			}
			r := tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) { return s.LogHashes(bg, room, mine.N, x) })
			for m := int64(1); m <= n; m++ {
				root, err := tlog.TreeHash(m, r)
				if err != nil {
					t.Fatalf("%s: the tree of %d: %v", when, m, err)
				}
				if root != tlog.Hash(MTH(leaves[:m])) {
					t.Fatalf("%s: room %s's tree of %d leaves hashes to %s, RFC 6962's is %x", when, room, m, root, MTH(leaves[:m]))
				}
			}
			root, _ := tlog.TreeHash(n, r)
			for _, i := range []int64{0, n / 2, n - 1} {
				p, err := tlog.ProveRecord(n, i, r)
				if err != nil {
					t.Fatal(err)
				}
				if err := tlog.CheckRecord(p, n, root, i, tlog.RecordHash(leaves[i])); err != nil {
					t.Errorf("%s: leaf %d's inclusion: %v", when, i, err)
				}
			}
			if _, err := s.LogEntries(bg, room, mine.N, 0, n+1); err == nil {
				t.Errorf("%s: entries past the log's end were given", when)
			}
			if _, err := s.LogHashes(bg, room, mine.N, []int64{tlog.StoredHashCount(n)}); err == nil {
				t.Errorf("%s: a stored hash past the log's was given", when)
			}
		}
		if n, err := s.LogSize(bg, hash("no such room"), 0); err != nil || n != 0 {
			t.Errorf("a room with no decisions: log size %d, %v", n, err)
		}
		// A decision's index, by its digest: in its own room's log only.
		for _, room := range []sig.Hash{sc.Room.ID(), other} {
			for i, e := range want[room] {
				n, x, err := s.LogRef(bg, room, e.Digest)
				pruned := when == "pruned" && errors.Is(err, store.ErrNotFound)
				if !pruned && (err != nil || n != own[room] || x != int64(i)) {
					t.Fatalf("%s: decision %s's leaf %d of log %d, %v, want %d of %d", when, e.Digest, x, n, err, i, own[room])
				}
			}
		}
		if _, _, err := s.LogRef(bg, other, want[sc.Room.ID()][0].Digest); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: a decision found in another room's log: %v", when, err)
		}
		if _, _, err := s.LogRef(bg, other, hash("no such decision")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: an unknown digest: %v", when, err)
		}
	}
	check("stored")
	if _, err := s.Prune(bg, 0, 1<<63); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decision(bg, ms[0].row.Digest); err == nil {
		t.Fatal("the decisions were not pruned")
	}
	check("pruned")
}

// testKeyEpochs (issue 16): the heads a room has had are kept by seq, each
// once (the first put of a seq stays), and given back in ascending seq,
// seqs of 2^63 and above included. Each is put in the store's own log of
// the room (issue 31: an epoch starts in a log).
func testKeyEpochs(t *testing.T, e Engine) {
	s := e.Open(t, 0)
	room, other := hash("room"), hash("another room")
	put := func(r sig.Hash, ep store.KeyEpoch) {
		t.Helper()
		own, err := s.OwnLog(bg, r)
		if err != nil {
			t.Fatal(err)
		}
		ep.Log = own.N
		if err := s.PutKeyEpoch(bg, r, ep); err != nil {
			t.Fatal(err)
		}
	}
	put(room, store.KeyEpoch{Seq: 5, From: 10, Head: []byte("head 5"), Handover: []byte("checkpoint at 10")})
	put(room, store.KeyEpoch{Seq: 2, From: 0, Head: []byte("head 2")})
	put(room, store.KeyEpoch{Seq: 1<<63 + 1, From: 99, Head: []byte("head 2^63+1"), Handover: []byte("checkpoint at 99")})
	put(room, store.KeyEpoch{Seq: 5, From: 11, Head: []byte("another head 5")})
	put(other, store.KeyEpoch{Seq: 7, From: 3, Head: []byte("other head")})
	got, err := s.KeyEpochs(bg, room)
	if err != nil {
		t.Fatal(err)
	}
	own, err := s.OwnLog(bg, room)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.KeyEpoch{
		{Seq: 2, Log: own.N, From: 0, Head: []byte("head 2")},
		{Seq: 5, Log: own.N, From: 10, Head: []byte("head 5"), Handover: []byte("checkpoint at 10")},
		{Seq: 1<<63 + 1, Log: own.N, From: 99, Head: []byte("head 2^63+1"), Handover: []byte("checkpoint at 99")},
	}
	if len(got) != len(want) {
		t.Fatalf("%d epochs, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Log != w.Log || g.From != w.From || !bytes.Equal(g.Head, w.Head) || !bytes.Equal(g.Handover, w.Handover) || (g.Handover == nil) != (w.Handover == nil) {
			t.Errorf("epoch %d: %+v, want %+v", i, g, w)
		}
	}
	if got, err := s.KeyEpochs(bg, hash("no such room")); err != nil || len(got) != 0 {
		t.Errorf("a room with no heads: %v, %v", got, err)
	}
}
