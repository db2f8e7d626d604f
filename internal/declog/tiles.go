package declog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// Height is the tiles' height (C2SP tlog-tiles): 256 hashes, or entries,
// to a full tile.
const Height = 8

// Width is a full tile's width.
const Width = 1 << Height

// EntriesLevel is tlog's level of a tile of entries (its "data" tiles).
const EntriesLevel = -1

// TilePath is a tile's path under the log's prefix, as C2SP tlog-tiles
// writes it: "tile/<L>/<N>" for hashes and "tile/entries/<N>" for entries,
// N in groups of three digits with an "x" before each but the last, and
// ".p/<W>" after a partial tile's.
func TilePath(t tlog.Tile) string {
	// tlog writes "tile/8/<L>/<N>", and "data" for the entries' level.
	p := strings.TrimPrefix(t.Path(), "tile/"+strconv.Itoa(Height)+"/")
	if t.L == EntriesLevel {
		p = "entries" + strings.TrimPrefix(p, "data")
	}
	return "tile/" + p
}

// ParseTilePath reads a tile's path as TilePath writes it, and only so.
func ParseTilePath(p string) (tlog.Tile, error) {
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return tlog.Tile{}, fmt.Errorf("declog: %q is not a tile's path: it does not start with tile/", clip(p))
	}
	level, n, ok := strings.Cut(rest, "/")
	if !ok {
		return tlog.Tile{}, fmt.Errorf("declog: %q is not a tile's path: no index after the level", clip(p))
	}
	if level == "entries" {
		level = "data"
	} else if l, err := strconv.Atoi(level); err != nil || l < 0 || l > 63/Height || strconv.Itoa(l) != level {
		return tlog.Tile{}, fmt.Errorf("declog: %q is not a tile's path: level %q is not entries or 0 to %d", clip(p), clip(level), 63/Height)
	}
	t, err := tlog.ParseTilePath("tile/" + strconv.Itoa(Height) + "/" + level + "/" + n)
	if err != nil || TilePath(t) != p {
		return tlog.Tile{}, fmt.Errorf("declog: %q is not a tile's path as C2SP tlog-tiles writes one", clip(p))
	}
	return t, nil
}

// entrySize is an entry's size in a bundle: a big-endian u16 length, then
// the leaf (C2SP tlog-tiles' entry bundle).
const entrySize = 2 + store.LogEntrySize

// AppendBundle appends the entries as a tile of entries: each leaf after
// its length as a big-endian u16.
func AppendBundle(dst []byte, es []store.LogEntry) []byte {
	for _, e := range es {
		dst = binary.BigEndian.AppendUint16(dst, store.LogEntrySize)
		dst = append(dst, e.Leaf()...)
	}
	return dst
}

// ParseBundle reads a tile of exactly w entries.
func ParseBundle(b []byte, w int) ([]store.LogEntry, error) {
	// A tile holds 1 to 256 (C2SP tlog-tiles: no empty tile is served),
	// and w sizes the slice below.
	if w < 1 || w > Width {
		return nil, fmt.Errorf("declog: a tile of entries of width %d, not 1 to %d", w, Width)
	}
	es := make([]store.LogEntry, 0, w)
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, errors.New("declog: a tile of entries ends inside a length")
		}
		n := int(binary.BigEndian.Uint16(b))
		if n != store.LogEntrySize {
			return nil, fmt.Errorf("declog: entry %d of a tile has %d bytes, not a leaf's %d", len(es), n, store.LogEntrySize)
		}
		if len(b) < 2+n {
			return nil, fmt.Errorf("declog: entry %d of a tile is cut short", len(es))
		}
		e, err := store.ParseLogEntry(b[2 : 2+n])
		if err != nil {
			return nil, err
		}
		es = append(es, e)
		b = b[2+n:]
	}
	if len(es) != w {
		return nil, fmt.Errorf("declog: a tile of %d entries, not %d", len(es), w)
	}
	return es, nil
}

// ErrBeyond is a tile or proof past the log's size.
var ErrBeyond = errors.New("declog: past the log's size")

// Within reports whether the tile is part of a log of size leaves: every
// hash, or entry, it holds is.
func Within(t tlog.Tile, size int64) bool {
	// Past level 7 a hash is of 2^64 leaves or more; the level's bound
	// comes first so that L·8 cannot overflow.
	if t.L < EntriesLevel || t.L > 63/Height || t.N < 0 || t.N > size>>Height || t.W < 1 || t.W > Width {
		return false
	}
	// Its end at its own level, unsigned: N·256 + 256 reaches 2^63 in a
	// tree of 2^63 − 1 leaves.
	end := uint64(t.N)<<Height + uint64(t.W)
	// A hash at level L·8 is of 2^(L·8) leaves.
	return end <= uint64(size)>>(max(t.L, 0)*Height)
}

// ReadTile reads a tile of log n of the room, of size leaves, from l.
func ReadTile(ctx context.Context, l store.Log, room sig.Hash, n int64, t tlog.Tile, size int64) ([]byte, error) {
	if t.H != Height || !Within(t, size) {
		return nil, ErrBeyond
	}
	if t.L == EntriesLevel {
		es, err := l.LogEntries(ctx, room, n, t.N*Width, t.N*Width+int64(t.W))
		if err != nil {
			return nil, err
		}
		return AppendBundle(make([]byte, 0, len(es)*entrySize), es), nil
	}
	return tlog.ReadTileData(t, HashReader(ctx, l, room, n))
}

// HashReader reads the stored hashes of log n of the room from l.
func HashReader(ctx context.Context, l store.Log, room sig.Hash, n int64) tlog.HashReader {
	return tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) { return l.LogHashes(ctx, room, n, x) })
}
