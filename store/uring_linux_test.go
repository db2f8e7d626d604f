package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/waisteer/waisteer/internal/scenario"
)

// ringOrWhyNot sets up a ring, or checks that the kernel's refusal is one
// newURing's comment names: no io_uring, or one turned off or filtered.
func ringOrWhyNot(t *testing.T) *uring {
	u, err := newURing()
	if err != nil {
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
			t.Fatalf("io_uring refused for another reason: %v", err)
		}
		t.Logf("no io_uring here (%v): the journal syncs with fdatasync(2)", err)
	}
	return u
}

// TestURingSync syncs a file through the ring more times than the ring has
// entries, then a closed file: the kernel's error comes back, as
// fdatasync(2)'s would.
func TestURingSync(t *testing.T) {
	u := ringOrWhyNot(t)
	if u == nil {
		return
	}
	defer u.close()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 * uringEntries {
		if _, err := f.WriteAt([]byte{byte(i)}, int64(i)<<12); err != nil {
			t.Fatal(err)
		}
		if err := u.fdatasync(f); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	g, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if err := u.fdatasync(g); !errors.Is(err, unix.EBADF) {
		t.Fatalf("sync of a closed file: %v, want EBADF", err)
	}
	if err := u.fdatasync(f); err != nil {
		t.Fatalf("sync after an error: %v", err)
	}
	f.Close()
}

// TestJournalRing runs a store's journal through the ring and through
// fdatasync(2), and checks the way JournalSync names: the decisions put are
// read back, before and after the store is closed and opened again without
// the journal.
func TestJournalRing(t *testing.T) {
	hasRing := ringOrWhyNot(t) != nil
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 32, 40, 6*scenario.Period, 50_000)
	for _, ring := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "waisteer.db")
		s := openTestBolt(t, path, withJournalRing(ring))
		want := "fdatasync"
		if ring && hasRing {
			want = "io_uring"
		}
		if got := s.JournalSync(); got != want || (s.jr.ring != nil) != (want == "io_uring") {
			t.Fatalf("ring %v: the store syncs by %s, want %s", ring, got, want)
		}
		for i := 0; i < len(ms); i += 5 {
			g := ms[i:min(i+5, len(ms))]
			if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
				t.Fatal(err)
			}
		}
		check := func(s *Bolt, when string) {
			for _, m := range ms {
				if d, err := s.Decision(bg, m.row.Digest); err != nil || d.Sig != m.row.Sig {
					t.Fatalf("ring %v, %s: decision %s: %v", ring, when, m.row.Digest, err)
				}
			}
		}
		check(s, "before closing")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		c := openTestBolt(t, path, withJournalRing(!ring), WithoutJournal())
		check(c, "opened again without the journal")
		if got := c.JournalSync(); got != "bbolt" {
			t.Fatalf("without the journal, the store syncs by %s", got)
		}
	}
}
