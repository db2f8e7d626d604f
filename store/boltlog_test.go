package store

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

// TestBoltLogCrash (issue 16): a Bolt file copied after any commit, as a
// crash leaves it, opens with every committed decision in its room's log,
// at the index its commit gave it, though the leaves were written in
// batches (boltlog.go): those pending at the crash are read again from the
// rows. A decision whose t is before log_scan_from (a late one) is
// committed with a flush, and is found too.
func TestBoltLogCrash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "waisteer.db")
	// Each group a commit of its own, so that the copies fall between
	// commits: TestJournalCrash crashes a store with its journal.
	s := openTestBolt(t, path, WithLogFlush(23), WithoutJournal())
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 9, 400, 6*scenario.Period, 700_000) // 0.7 s apart: past the margin
	late := makeDecisions(t, sc, 10, 60, 6*scenario.Period+350_000, 700_000)
	room := sc.Room.ID()
	var want []LogEntry
	for i, size, k, li := 0, 1, 0, 0; i < len(ms); i, size, k = i+size, size%9+1, k+1 {
		g := ms[i:min(i+size, len(ms))]
		if k%5 == 4 && i > li+20 && li < len(late) {
			// A late decision: from seconds before the latest.
			g = append(slices.Clip(g), late[li])
			li++
		}
		if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
			t.Fatal(err)
		}
		for _, m := range g {
			if !slices.Contains(want, LogEntry{Digest: m.row.Digest, T: m.row.T}) {
				want = append(want, LogEntry{Digest: m.row.Digest, T: m.row.T})
			}
		}
		if k%7 != 3 {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		crashed := filepath.Join(dir, "crashed.db")
		if err := os.WriteFile(crashed, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Open(crashed)
		if err != nil {
			t.Fatalf("after %d decisions: %v", len(want), err)
		}
		n, _ := c.LogSize(bg, room, 0)
		got, err := c.LogEntries(bg, room, 0, 0, n)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("after %d decisions (%d pending in the crashed store): its log holds %d leaves (%v), not the decisions in commit order",
				len(want), s.lg.pending, len(got), err)
		}
		// Its tree is the running store's.
		r := tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) { return c.LogHashes(bg, room, 0, x) })
		a, err := tlog.TreeHash(n, r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := tlog.TreeHash(n, tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) { return s.LogHashes(bg, room, 0, x) }))
		if a != b {
			t.Fatalf("after %d decisions: the crashed store's tree is %s, the running one's %s", len(want), a, b)
		}
		if err := boltInvariants(c); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if s.lg.pending == 0 {
		t.Fatal("nothing pending at the end: the test never read pending leaves after a crash")
	}
	// A clean close writes what is pending; opening reads no row again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c := openTestBolt(t, path)
	if c.lg.pending != 0 {
		t.Errorf("%d leaves pending after a clean close", c.lg.pending)
	}
	if n, _ := c.LogSize(bg, room, 0); n != int64(len(want)) {
		t.Errorf("%d leaves after a clean close, want %d", n, len(want))
	}
	// No other room's log has a leaf.
	if n, _ := c.LogSize(bg, sig.Hash{1}, 0); n != 0 {
		t.Errorf("another room's log has %d leaves", n)
	}
}
