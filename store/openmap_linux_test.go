package store

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The store's file is mapped defaultInitialMap (8 GiB) ahead from Open, so
// that its growth does not unmap and map it again under the requests
// (SPEC-NOTES "The file mapped ahead"); the map is address space, and the
// file itself stays the size of what it holds. Read from the process's
// own maps (/proc/self/maps), as the kernel holds them.
func TestOpenMapsAhead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "waisteer.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mapped := mappedBytes(t, path)
	if mapped < 8<<30 {
		t.Fatalf("the file is mapped over %d bytes, want 8 GiB ahead", mapped)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 64<<20 {
		t.Fatalf("a new store's file is %d bytes: the map ahead grew it", fi.Size())
	}
}

// mappedBytes adds up the lengths of this process's maps of path.
func mappedBytes(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[len(fields)-1] != path {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || b < a {
			t.Fatalf("a line of /proc/self/maps: %q", sc.Text())
		}
		total += int64(b - a)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}
