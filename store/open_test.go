package store

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenReadsNoGrowingState: start-up must not scan what grows with the
// decisions kept (issue 14). bbolt reads a file's free pages from the list
// its last commit wrote, or, when that commit wrote none (the meta page's
// freelist field is all ones), walks every page of the file to find them.
// So every commit must leave a list behind: the meta page of the latest
// transaction names one, after a clean close and after a crash (the file as
// the last commit left it, without Close).
func TestOpenReadsNoGrowingState(t *testing.T) {
	sc := sizeScenario(t, sizeCases[0], 8)
	base, snaps, _ := signedRows(t, sc, 1, 0, 0)
	var ev []Evidence
	for _, e := range snaps {
		ev = append(ev, e)
	}
	for _, closed := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "waisteer.db")
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		g := make([]Decision, 64)
		for k := range 20 {
			for i := range g {
				g[i] = base[0]
				g[i].T += uint64(k*len(g) + i)
				binary.BigEndian.PutUint64(g[i].Digest[:], uint64(k*len(g)+i+1))
			}
			if err := s.PutDecisions(bg, ev, g); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Prune(bg, 0, base[0].T+600); err != nil { // frees pages
			t.Fatal(err)
		}
		if err := s.PutDecisions(bg, ev, g[:1]); err != nil {
			t.Fatal(err)
		}
		if closed {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !closed {
			s.Close()
		}
		if fl := latestMetaFreelist(t, raw); fl == 1<<64-1 {
			t.Errorf("closed=%v: the latest meta page names no freelist: Open would walk the whole file", closed)
		}
	}
}

// latestMetaFreelist reads bbolt's two meta pages (pages 0 and 1, at the
// file's page size) and returns the freelist page id of the one with the
// greater transaction id. A meta page: a page header of 16 bytes, then
// magic, version, page size, flags (u32 each), the root bucket (root page
// id, sequence: u64 each), freelist page id, high-water page id,
// transaction id (u64 each), native byte order (little-endian here).
func latestMetaFreelist(t *testing.T, raw []byte) uint64 {
	t.Helper()
	if len(raw) < 4096 {
		t.Fatalf("a file of %d bytes", len(raw))
	}
	le := binary.LittleEndian
	pageSize := int(le.Uint32(raw[16+8:]))
	if pageSize < 512 || len(raw) < 2*pageSize {
		t.Fatalf("page size %d in a file of %d bytes", pageSize, len(raw))
	}
	var best, freelist uint64
	for i := range 2 {
		m := raw[i*pageSize+16:]
		if le.Uint32(m) != 0xED0CDAED {
			t.Fatalf("meta page %d has magic %x", i, le.Uint32(m))
		}
		txid := le.Uint64(m[16+16+16:])
		if i == 0 || txid > best {
			best, freelist = txid, le.Uint64(m[16+16:])
		}
	}
	return freelist
}
