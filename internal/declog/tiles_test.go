package declog_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

func tile(l int, n int64, w int) tlog.Tile { return tlog.Tile{H: 8, L: l, N: n, W: w} }

// refPath writes a tile's path as C2SP tlog-tiles says: "tile/<L>/<N>"
// or "tile/entries/<N>", N in zero-padded groups of three digits, each but
// the last after an "x", then ".p/<W>" for a partial tile.
func refPath(t tlog.Tile) string {
	level := strconv.Itoa(t.L)
	if t.L == -1 {
		level = "entries"
	}
	digits := strconv.FormatInt(t.N, 10)
	for len(digits)%3 != 0 {
		digits = "0" + digits
	}
	var groups []string
	for i := 0; i < len(digits); i += 3 {
		groups = append(groups, "x"+digits[i:i+3])
	}
	last := len(groups) - 1
	groups[last] = strings.TrimPrefix(groups[last], "x")
	p := "tile/" + level + "/" + strings.Join(groups, "/")
	if t.W < 256 {
		p += ".p/" + strconv.Itoa(t.W)
	}
	return p
}

// TestTilePath: paths written by hand from C2SP tlog-tiles' rules and its
// example (1234067 is x001/x234/067), both ways.
func TestTilePath(t *testing.T) {
	for _, tc := range []struct {
		t    tlog.Tile
		path string
	}{
		{tile(0, 0, 256), "tile/0/000"},
		{tile(0, 0, 1), "tile/0/000.p/1"},
		{tile(0, 7, 255), "tile/0/007.p/255"},
		{tile(0, 999, 256), "tile/0/999"},
		{tile(0, 1000, 256), "tile/0/x001/000"},
		{tile(0, 1234067, 256), "tile/0/x001/x234/067"},
		{tile(1, 1234067, 17), "tile/1/x001/x234/067.p/17"},
		{tile(2, 1, 1), "tile/2/001.p/1"},
		{tile(7, 0, 1), "tile/7/000.p/1"},
		{tile(-1, 0, 256), "tile/entries/000"},
		{tile(-1, 273, 112), "tile/entries/273.p/112"},
		{tile(-1, 1234067, 256), "tile/entries/x001/x234/067"},
		{tile(-1, 1000000, 3), "tile/entries/x001/x000/000.p/3"},
		{tile(0, math.MaxInt64>>8, 256), "tile/0/x036/x028/x797/x018/x963/967"},
		{tile(-1, math.MaxInt64, 256), "tile/entries/x009/x223/x372/x036/x854/x775/807"},
	} {
		if got := declog.TilePath(tc.t); got != tc.path {
			t.Errorf("TilePath(%+v) = %q, want %q", tc.t, got, tc.path)
		}
		if got, err := declog.ParseTilePath(tc.path); err != nil || got != tc.t {
			t.Errorf("ParseTilePath(%q) = %+v, %v, want %+v", tc.path, got, err, tc.t)
		}
	}
}

// randomTile is a tile of any level a tree of 63 bits has, any width,
// and an index of any length.
func randomTile(rng *rand.Rand) tlog.Tile {
	n := rng.Int64() >> rng.IntN(64)
	return tile(rng.IntN(9)-1, n, 1+rng.IntN(256))
}

// TestTilePathRandom: over random tiles, TilePath writes what refPath
// writes, and ParseTilePath reads it back.
func TestTilePathRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		tl := randomTile(rng)
		p := declog.TilePath(tl)
		if want := refPath(tl); p != want {
			t.Fatalf("TilePath(%+v) = %q, want %q", tl, p, want)
		}
		if got, err := declog.ParseTilePath(p); err != nil || got != tl {
			t.Fatalf("ParseTilePath(%q) = %+v, %v, want %+v", p, got, err, tl)
		}
	}
}

// TestParseTilePathRefuses: only the one path C2SP tlog-tiles gives a
// tile is read, and levels past what a tree of 2^63 − 1 leaves has are
// refused.
func TestParseTilePathRefuses(t *testing.T) {
	for _, p := range []string{
		"tile/8/0/000",        // Go's sumdb, with the height
		"tile/8/0/000.p/5",    // the same, partial
		"tile/8/data/000",     // Go's sumdb's entries
		"tile/data/000",       // tlog's name for the entries' level
		"tile/0/1",            // not three digits
		"tile/0/01",           // not three digits
		"tile/0/0000",         // four digits
		"tile/0/x001",         // an x on the last group
		"tile/0/001/000",      // no x before a group but the last
		"tile/0/x000/001",     // a leading zero group
		"tile/0/x1000/000",    // a group of four digits
		"tile/0/-01",          // negative
		"tile/0/+01",          // a sign
		"tile/0/000.p/0",      // an empty tile
		"tile/0/000.p/256",    // a full tile written as partial
		"tile/0/000.p/257",    // wider than a tile
		"tile/0/000.p/01",     // a leading zero in W
		"tile/0/000.p/-1",     // negative W
		"tile/0/000.p/",       // no W
		"tile/entries/000.p/", // no W
		"tile/entries/000.p",  // no W, no slash
		"tile/0/000.p/1/",     // a trailing slash after W
		"tile/0/000/",         // a trailing slash
		"tile/0/",             // no index
		"tile/0",              // no index
		"tile/",               // nothing
		"tile",                // nothing
		"",                    // empty
		"tile//000",           // no level
		"tile/-1/000",         // tlog's level of the entries, written
		"tile/00/000",         // a leading zero in L
		"tile/+1/000",         // a sign in L
		"tile/ 1/000",         // a space
		"tile/8/000",          // a level whose hashes each cover 2^64 leaves
		"tile/9/000",          // further still
		"tile/63/000",         // tlog-tiles' largest level: beyond 63 bits
		"tile/entries/x009/x223/x372/x036/x854/x775/808", // 2^63, past int64
		"tile/0/x999/x999/x999/x999/x999/x999/x999/999",  // far past int64
		"/tile/0/000",        // a leading slash
		"tiles/0/000",        // another prefix
		"tile/Entries/000",   // capitals
		"tile/0/000.P/5",     // capitals
		"tile/0/000.p/5.p/5", // twice
		"tile/0/abc",         // not digits
	} {
		tl, err := declog.ParseTilePath(p)
		if err == nil {
			t.Errorf("ParseTilePath(%q) = %+v, want an error", p, tl)
			continue
		}
		if !strings.HasPrefix(err.Error(), "declog: ") || !strings.Contains(err.Error(), "is not a tile's path") {
			t.Errorf("ParseTilePath(%q): %v, want an error that says the path is not a tile's", p, err)
		}
	}
}

// withinRef is C2SP tlog-tiles' rule, in exact arithmetic: a tile at
// level L (the entries' at level 0), index N, width W holds the subtrees
// (N·256 + i)·256^L … (N·256 + i + 1)·256^L for i below W, and so is
// part of a tree of size s iff (N·256 + W)·256^L ≤ s, with 1 ≤ W ≤ 256.
func withinRef(t tlog.Tile, size int64) bool {
	if t.L < -1 || t.N < 0 || t.W < 1 || t.W > 256 {
		return false
	}
	l := max(t.L, 0)
	if l > 64 {
		l = 64 // 256^64 already passes any int64, as any larger level does
	}
	end := new(big.Int).Mul(big.NewInt(t.N), big.NewInt(256))
	end.Add(end, big.NewInt(int64(t.W)))
	end.Mul(end, new(big.Int).Exp(big.NewInt(256), big.NewInt(int64(l)), nil))
	return end.Cmp(big.NewInt(size)) <= 0
}

// TestWithinC2SP: C2SP tlog-tiles' example, "a tree of size 70,000 will
// be represented by 273 full level 0 tiles, one partial level 0 tile of
// width 112, one full level 1 tile, one partial level 1 tile of width 17,
// and one partial level 2 tile of width 1", and "a tree of size 256 ...
// by a full level 0 tile and a partial level 1 tile of width 1": the
// widest tile Within allows at each place is that tree's.
func TestWithinC2SP(t *testing.T) {
	type place struct {
		l int
		n int64
	}
	for _, tc := range []struct {
		size  int64
		width map[place]int // the tree's tiles; every other place has none
	}{
		{70000, func() map[place]int {
			m := map[place]int{{0, 273}: 112, {1, 0}: 256, {1, 1}: 17, {2, 0}: 1}
			for n := range int64(273) {
				m[place{0, n}] = 256
			}
			return m
		}()},
		{256, map[place]int{{0, 0}: 256, {1, 0}: 1}},
		{0, map[place]int{}},
	} {
		for l := -1; l <= 8; l++ {
			for n := range int64(300) {
				widest := 0
				for w := 1; w <= 256; w++ {
					if declog.Within(tile(l, n, w), tc.size) {
						widest = w
					}
				}
				want := tc.width[place{max(l, 0), n}]
				if widest != want {
					t.Errorf("size %d: the widest tile at level %d, index %d is %d, want %d", tc.size, l, n, widest, want)
				}
			}
		}
	}
}

// TestWithinRandom: Within agrees with withinRef over random tiles and
// sizes, at the edges of each tile's end and of int64 (no overflow).
func TestWithinRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	failures := 0
	check := func(tl tlog.Tile, size int64) {
		t.Helper()
		if got, want := declog.Within(tl, size), withinRef(tl, size); got != want {
			t.Errorf("Within(%+v, %d) = %v, want %v", tl, size, got, want)
			if failures++; failures == 20 {
				t.FailNow()
			}
		}
	}
	// The largest tiles of the largest trees.
	for _, size := range []int64{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 255, math.MaxInt64 - 256, 1 << 62, 0, -1, math.MinInt64} {
		for _, n := range []int64{math.MaxInt64, math.MaxInt64 >> 8, math.MaxInt64>>8 - 1, math.MaxInt64 >> 16, math.MaxInt64>>16 - 1, math.MaxInt64 >> 56, 1 << 47, 0, -1, math.MinInt64} {
			for _, w := range []int{-1, 0, 1, 127, 255, 256, 257} {
				for _, l := range []int{-2, -1, 0, 1, 2, 6, 7, 8, 9, 63, 64, 1 << 40, 1 << 61, math.MaxInt, math.MinInt} {
					check(tile(l, n, w), size)
				}
			}
		}
	}
	for range 200000 {
		tl := randomTile(rng)
		if rng.IntN(8) == 0 {
			tl.W = rng.IntN(260) - 2
		}
		size := rng.Int64() >> rng.IntN(64)
		if rng.IntN(2) == 0 {
			// Near the tile's end, where Within turns.
			end := new(big.Int).Mul(big.NewInt(tl.N), big.NewInt(256))
			end.Add(end, big.NewInt(int64(tl.W)))
			end.Lsh(end, uint(8*max(tl.L, 0)))
			end.Add(end, big.NewInt(rng.Int64N(5)-2))
			if end.IsInt64() {
				size = end.Int64()
			}
		}
		check(tl, size)
	}
}

// bundleRef is an entry bundle written by hand from C2SP tlog-tiles: each
// entry after its length as a big-endian u16; an entry is the digest,
// then t as a big-endian u64 (SPEC-NOTES, issue 16, "A leaf").
func bundleRef(es []store.LogEntry) []byte {
	var b []byte
	for _, e := range es {
		b = append(b, 0, 40)
		b = append(b, e.Digest[:]...)
		for s := 56; s >= 0; s -= 8 {
			b = append(b, byte(e.T>>s))
		}
	}
	return b
}

func entries(rng *rand.Rand, n int) []store.LogEntry {
	es := make([]store.LogEntry, n)
	for i := range es {
		es[i] = store.LogEntry{Digest: sig.Digest(fmt.Appendf(nil, "decision %d %d", i, rng.Uint64())), T: rng.Uint64() >> rng.IntN(64)}
	}
	return es
}

// parseBundle is ParseBundle, with a panic as an error.
func parseBundle(b []byte, w int) (es []store.LogEntry, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return declog.ParseBundle(b, w)
}

// TestBundle: AppendBundle writes the entry bundle of C2SP tlog-tiles, and
// ParseBundle reads it back, of every width.
func TestBundle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, w := range []int{1, 2, 3, 100, 255, 256} {
		es := entries(rng, w)
		b := declog.AppendBundle(nil, es)
		if want := bundleRef(es); !bytes.Equal(b, want) {
			t.Fatalf("AppendBundle of %d entries = %x, want %x", w, b, want)
		}
		if got := declog.AppendBundle([]byte("prefix"), es); string(got[:6]) != "prefix" || !bytes.Equal(got[6:], b) {
			t.Errorf("AppendBundle does not append")
		}
		got, err := parseBundle(b, w)
		if err != nil || len(got) != w {
			t.Fatalf("ParseBundle(%d entries): %d, %v", w, len(got), err)
		}
		for i := range es {
			if got[i] != es[i] {
				t.Fatalf("ParseBundle: entry %d is %+v, want %+v", i, got[i], es[i])
			}
		}
	}
}

// TestParseBundleRefuses: a bundle of another width, an entry whose length
// is not a leaf's, or a bundle cut inside a length or an entry, is
// refused, and so is a width no tile has (tlog-tiles: 1 to 256).
func TestParseBundleRefuses(t *testing.T) {
	es := entries(rand.New(rand.NewPCG(7, 8)), 3)
	b := bundleRef(es)
	withLength := func(i int, n uint16) []byte {
		c := bytes.Clone(b)
		c[42*i], c[42*i+1] = byte(n>>8), byte(n)
		return c
	}
	for _, tc := range []struct {
		name string
		b    []byte
		w    int
		want string
	}{
		{"fewer than the width", b, 4, "tile of 3 entries, not 4"},
		{"more than the width", b, 2, "tile of 3 entries, not 2"},
		{"width 0", b, 0, ""},
		{"width 257", b, 257, ""},
		{"width −1", b, -1, ""},
		{"empty, width 0", nil, 0, ""},
		{"empty, width 1", nil, 1, "not 1"},
		{"an empty bundle of width −1", nil, -1, ""},
		{"length 39", withLength(1, 39), 3, "entry 1 of a tile has 39 bytes"},
		{"length 41", withLength(0, 41), 3, "entry 0 of a tile has 41 bytes"},
		{"length 0", withLength(2, 0), 3, "entry 2 of a tile has 0 bytes"},
		{"length 65535", withLength(0, 65535), 3, "65535 bytes"},
		{"length 296 (256 + 40)", withLength(0, 296), 3, "296 bytes"},
		{"a cut length", append(bytes.Clone(b), 0), 4, "ends inside a length"},
		{"a cut entry", b[:len(b)-1], 3, "entry 2 of a tile is cut short"},
		{"a length alone", b[:42*2+2], 3, "entry 2 of a tile is cut short"},
		{"one byte", []byte{0}, 1, "ends inside a length"},
	} {
		got, err := parseBundle(tc.b, tc.w)
		if err == nil {
			t.Errorf("%s: ParseBundle = %d entries, want an error", tc.name, len(got))
			continue
		}
		if !strings.HasPrefix(err.Error(), "declog: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseBundle: %v, want an error that says %q", tc.name, err, tc.want)
		}
	}
}

// buildLog is a store.Memory holding room's log of n leaves, interleaved
// with another room's, and the leaves. A decision needs only a digest, a
// room, a t and its snapshot to be stored.
func buildLog(room sig.Hash, n int) (*store.Memory, [][]byte, error) {
	ctx := context.Background()
	m := store.NewMemory()
	body := []byte("a snapshot")
	ev := []store.Evidence{{Key: sha256.Sum256(body), Body: body}}
	other := sig.Digest([]byte("the other room"))
	var leaves [][]byte
	var batch []store.Decision
	for i := range n {
		d := store.Decision{Digest: sig.Digest(fmt.Appendf(nil, "decision %d", i)), Room: room, T: uint64(1e12) + uint64(i)*977, Evidence: ev[0].Key}
		leaves = append(leaves, store.LogEntry{Digest: d.Digest, T: d.T}.Leaf())
		batch = append(batch, d)
		if i%5 == 0 {
			batch = append(batch, store.Decision{Digest: sig.Digest(fmt.Appendf(nil, "other %d", i)), Room: other, T: uint64(i), Evidence: ev[0].Key})
		}
		if len(batch) >= 1000 || i == n-1 {
			if err := m.PutDecisions(ctx, ev, batch); err != nil {
				return nil, nil, err
			}
			batch = batch[:0]
		}
	}
	if got, err := m.LogSize(ctx, room, 0); err != nil || got != int64(n) {
		return nil, nil, fmt.Errorf("the log's size %d, %v, want %d", got, err, n)
	}
	return m, leaves, nil
}

type builtLog struct {
	m      *store.Memory
	leaves [][]byte
}

// bigLog is a log of C2SP tlog-tiles' example size, 70,000 leaves, built
// once for the tests that read it.
var bigLog = sync.OnceValues(func() (builtLog, error) {
	m, leaves, err := buildLog(logRoom, 70000)
	return builtLog{m, leaves}, err
})

func mustBigLog(t testing.TB) (*store.Memory, [][]byte) {
	t.Helper()
	l, err := bigLog()
	if err != nil {
		t.Fatal(err)
	}
	return l.m, l.leaves
}

var logRoom = sig.Digest([]byte("the log's room"))

// treeTiles are the tiles of a tree of size leaves (tlog-tiles): at each
// level, the full tiles, then the partial one of width floor(s/256^l) mod
// 256 if that is not 0; the entries' as level 0's.
func treeTiles(size int64) []tlog.Tile {
	var ts []tlog.Tile
	for l := -1; l <= 7; l++ {
		span := int64(1) << (8 * max(l, 0)) // leaves under one hash
		full := size / span / 256
		for n := range full {
			ts = append(ts, tile(l, n, 256))
		}
		if w := size / span % 256; w > 0 {
			ts = append(ts, tile(l, full, int(w)))
		}
	}
	return ts
}

// TestReadTile: every tile of the tree of 70,000 leaves, and the partial
// tiles of smaller trees, are read as tlog-tiles defines them over RFC
// 6962's hashes (refTree, and tlog.ReadTileData over hashes computed by
// refTree), and the entries' as their bundles; a tile past the size, or
// of another height, is ErrBeyond.
func TestReadTile(t *testing.T) {
	ctx := context.Background()
	m, leaves := mustBigLog(t)
	ref := newRefTree(leaves)
	const size = 70000
	ts := treeTiles(size)
	if len(ts) != 2*274+2+1 {
		t.Fatalf("%d tiles in the tree of 70,000", len(ts))
	}
	// Smaller trees' partial tiles.
	for w := 1; w < 112; w++ {
		ts = append(ts, tile(0, 273, w), tile(-1, 273, w))
	}
	for w := 1; w < 17; w++ {
		ts = append(ts, tile(1, 1, w))
	}
	for _, w := range []int{1, 2, 100, 255} {
		ts = append(ts, tile(0, 0, w), tile(-1, 100, w), tile(1, 0, w))
	}
	for _, tl := range ts {
		got, err := declog.ReadTile(ctx, m, logRoom, 0, tl, size)
		if err != nil {
			t.Fatalf("ReadTile(%s): %v", declog.TilePath(tl), err)
		}
		if want := ref.tile(tl.L, tl.N, tl.W); !bytes.Equal(got, want) {
			t.Fatalf("ReadTile(%s) is not the tile tlog-tiles defines", declog.TilePath(tl))
		}
		if tl.L >= 0 {
			want, err := tlog.ReadTileData(tl, ref.storedHashes())
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("ReadTile(%s) is not tlog.ReadTileData's, %v", declog.TilePath(tl), err)
			}
		}
	}
	// A smaller tree of the same log: its tiles read, what passes it not.
	for _, tl := range []tlog.Tile{tile(0, 3, 232), tile(-1, 3, 232), tile(1, 0, 3)} {
		got, err := declog.ReadTile(ctx, m, logRoom, 0, tl, 1000)
		if err != nil || !bytes.Equal(got, ref.tile(tl.L, tl.N, tl.W)) {
			t.Errorf("ReadTile(%s) of the tree of 1000: %v", declog.TilePath(tl), err)
		}
	}
	for _, tc := range []struct {
		t    tlog.Tile
		size int64
	}{
		{tile(0, 273, 113), size}, {tile(-1, 273, 113), size}, {tile(0, 274, 1), size}, {tile(-1, 274, 256), size},
		{tile(1, 1, 18), size}, {tile(1, 2, 1), size}, {tile(2, 0, 2), size}, {tile(3, 0, 1), size}, {tile(7, 0, 1), size},
		{tile(0, 3, 233), 1000}, {tile(1, 0, 4), 1000}, {tile(0, 0, 1), 0}, {tile(-1, 0, 1), 0},
		{tlog.Tile{H: 4, L: 0, N: 0, W: 16}, size}, {tlog.Tile{H: 16, L: 0, N: 0, W: 1}, size},
		{tile(0, 0, 0), size}, {tile(0, -1, 256), size}, {tile(0, 0, 257), size},
	} {
		if got, err := declog.ReadTile(ctx, m, logRoom, 0, tc.t, tc.size); !errors.Is(err, declog.ErrBeyond) {
			t.Errorf("ReadTile(%+v) of the tree of %d = %d bytes, %v, want ErrBeyond", tc.t, tc.size, len(got), err)
		}
	}
}

// tileReader is a client's tlog.TileReader over ReadTile, with a hook
// that may change what it reads.
type tileReader struct {
	ctx    context.Context
	log    store.Log
	size   int64
	change func(tlog.Tile, []byte)
}

func (r tileReader) Height() int { return declog.Height }

func (r tileReader) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		b, err := declog.ReadTile(r.ctx, r.log, logRoom, 0, t, r.size)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", declog.TilePath(t), err)
		}
		if r.change != nil {
			r.change(t, b)
		}
		out[i] = b
	}
	return out, nil
}

func (tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// TestReadTileProves: a client that holds only a tree's size and root
// (from refTree) reads the hashes it needs from the tiles, checked
// against the root by tlog.TileHashReader, and proves every leaf it asks
// for (RFC 6962 §2.1.1) and the tree's consistency with smaller trees
// (§2.1.2); a tile changed in one bit fails the check.
func TestReadTileProves(t *testing.T) {
	ctx := context.Background()
	m, leaves := mustBigLog(t)
	ref := newRefTree(leaves)
	for _, size := range []int64{70000, 65536, 1000, 256, 255, 1} {
		tree := tlog.Tree{N: size, Hash: ref.mth(0, size)}
		hr := tlog.TileHashReader(tree, tileReader{ctx: ctx, log: m, size: size})
		for _, i := range []int64{0, 1, 254, 255, 256, 999, 65535, 65536, 69999, size / 3, size - 1} {
			if i >= size {
				continue
			}
			p, err := tlog.ProveRecord(size, i, hr)
			if err != nil {
				t.Fatalf("tree of %d: proving leaf %d from the tiles: %v", size, i, err)
			}
			if err := tlog.CheckRecord(p, size, tree.Hash, i, ref.hashes[i]); err != nil {
				t.Fatalf("tree of %d: leaf %d: %v", size, i, err)
			}
		}
		for _, from := range []int64{1, 2, 255, 256, 1000, 65536, size - 1} {
			if from < 1 || from >= size {
				continue
			}
			p, err := tlog.ProveTree(size, from, hr)
			if err != nil {
				t.Fatalf("tree of %d: proving it extends the tree of %d: %v", size, from, err)
			}
			if err := tlog.CheckTree(p, size, tree.Hash, from, ref.mth(0, from)); err != nil {
				t.Fatalf("tree of %d from %d: %v", size, from, err)
			}
		}
	}
	// A changed tile is caught: the client checks tiles against the root.
	for _, level := range []int{0, 1, 2} {
		bad := tileReader{ctx: ctx, log: m, size: 70000, change: func(t tlog.Tile, b []byte) {
			if t.L == level {
				b[len(b)-1] ^= 1
			}
		}}
		hr := tlog.TileHashReader(tlog.Tree{N: 70000, Hash: ref.mth(0, 70000)}, bad)
		if _, err := tlog.ProveRecord(70000, 69999, hr); err == nil {
			t.Errorf("a level %d tile changed, and the proof still reads", level)
		}
	}
}
