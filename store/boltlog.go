package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
)

// The rooms' logs in a Bolt file (log.go).
//
// A decision's leaf is fixed when its group commits: its row names its
// index in its room's log (rowLogged), and its key holds the leaf's digest
// and t. Writing the leaf and its hashes to buckets of their own in the
// same transaction would rewrite and sync pages beside the decisions'
// (a 1.6 to 2 times dearer commit, measured), so they are written in
// batches, as the index of digests is (index.go):
//
//   - pending: the leaves past a room's written ones are held in memory,
//     and their stored hashes too, computed by a goroutine of their own
//     after each commit (or when a reader or a flush needs them first), so
//     that a group commit, which every steering answer waits for, does not
//     hash;
//   - a flush, in a PutDecisions transaction once a flush's worth is
//     pending (and in Prune's, and at Close), writes them to log_tiles as
//     the tiles they change (tlog's tiles of height 8: the leaves, 256 to
//     a tile, and the hashes of each level), and each room's count to
//     log_sizes. A tile is a few Puts of kilobytes: a leaf and its hashes
//     written as keys of their own were 3 Puts a decision, which cost more
//     than the decisions' own;
//   - after a crash, Open reads the pending leaves again from the rows at
//     or after log_scan_from, a key the last flush wrote a margin behind
//     the latest t. A decision whose t is before it is committed with a
//     flush, so that no row that names a leaf not yet written is before
//     it.
//
// What a reader sees is the written leaves and the pending ones: all of
// them committed.

// Buckets and keys of the logs.
var (
	bucketKeyEpochs = []byte("key_epochs") // room ‖ seq BE → appendKeyEpoch
	bucketLogTiles  = []byte("log_tiles")  // tileKey → the tile's hashes, or its leaves' bytes
	bucketLogSizes  = []byte("log_sizes")  // room → leaves written, u64 BE
	metaLogScanFrom = []byte("log_scan_from")
)

// tileHeight is the tiles' height: 256 leaves, or hashes, to a tile.
const (
	tileHeight = 8
	tileWidth  = 1 << tileHeight
	dataLevel  = 0xff // tileKey's level of a tile of leaves
)

// tileKey is room ‖ level (u8; dataLevel for leaves) ‖ the tile's index
// (u64 BE). A partial tile is written again, wider, under the same key.
func tileKey(room sig.Hash, level uint8, n int64) []byte {
	k := append(make([]byte, 0, sig.HashSize+9), room[:]...)
	k = append(k, level)
	return binary.BigEndian.AppendUint64(k, uint64(n))
}

// tileHashes reads written stored hashes (index below StoredHashCount of
// the written leaves) from the tiles that hold them.
func tileHashes(b *bolt.Bucket, id sig.Hash, indexes []int64, out []tlog.Hash, at []int) error {
	var last tlog.Tile // most indexes asked at once are of one tile
	var data []byte
	for _, i := range at {
		x := indexes[i]
		t := tlog.TileForIndex(tileHeight, x)
		if data == nil || t.L != last.L || t.N != last.N {
			data, last = b.Get(tileKey(id, uint8(t.L), t.N)), t
		}
		if len(data) < t.W*tlog.HashSize {
			return fmt.Errorf("store: room %s's log hash %d: its tile %d/%d holds %d bytes", id, x, t.L, t.N, len(data))
		}
		h, err := tlog.HashFromTile(t, data, x)
		if err != nil {
			return fmt.Errorf("store: room %s's log hash %d: %w", id, x, err)
		}
		out[i] = h
	}
	return nil
}

// defaultLogFlush is how many pending leaves make a flush.
const defaultLogFlush = 1024

type boltLog struct {
	flush  int
	margin uint64 // µs, as the index's

	// hashing wakes the goroutine that hashes pending leaves (hasher);
	// stop ends it, and done says it has.
	hashing    chan struct{}
	stop, done chan struct{}

	mu       sync.RWMutex // guards the fields below against readers
	rooms    map[sig.Hash]*roomLog
	pending  int    // leaves pending, over all rooms
	scanFrom uint64 // as written at log_scan_from
	latest   uint64 // the latest t logged since Open

	// spare is a logChange's map of leaves, emptied once applied, for
	// the next: the committer's groups are one after another (under the
	// index's lock), so one suffices.
	spare map[sig.Hash][]LogEntry
}

type roomLog struct {
	written int64      // leaves in log_entries
	pending []LogEntry // the leaves after them
	// hashes are the stored hashes from StoredHashCount(written) on of the
	// first hashed pending leaves; the committer writes pending and
	// written, the hasher hashes and hashed, each under mu.
	hashes []tlog.Hash
	hashed int
}

func (r *roomLog) size() int64 { return r.written + int64(len(r.pending)) }

// A logChange is what a transaction adds to the logs, applied once it has
// committed.
type logChange struct {
	leaves   map[sig.Hash][]LogEntry
	hashes   map[sig.Hash][]tlog.Hash // from StoredHashCount of the room's size before
	latest   uint64                   // the latest t of the leaves
	flushed  bool
	scanFrom uint64
}

func (lg *boltLog) room(id sig.Hash) *roomLog {
	r := lg.rooms[id]
	if r == nil {
		r = &roomLog{}
		lg.rooms[id] = r
	}
	return r
}

// sizeOf is the room's size with what ch has added. The caller holds the
// store's write lock, under which only it changes the logs.
func (lg *boltLog) sizeOf(id sig.Hash, ch *logChange) int64 {
	n := int64(len(ch.leaves[id]))
	if r := lg.rooms[id]; r != nil {
		n += r.size()
	}
	return n
}

// add appends a leaf to ch: its index in the room's log.
func (lg *boltLog) add(id sig.Hash, e LogEntry, ch *logChange) int64 {
	x := lg.sizeOf(id, ch)
	if ch.leaves == nil {
		ch.leaves = lg.spare
		lg.spare = nil
		if ch.leaves == nil {
			ch.leaves = map[sig.Hash][]LogEntry{}
		}
	}
	ch.leaves[id] = append(ch.leaves[id], e)
	ch.latest = max(ch.latest, e.T)
	return x
}

// hashesIn reads stored hashes of a room's log r: those past its written
// ones from r.hashes and then more, the others from the bucket.
func hashesIn(b *bolt.Bucket, id sig.Hash, r *roomLog, more []tlog.Hash, indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	from := tlog.StoredHashCount(r.written)
	mid := from + int64(len(r.hashes)) // where more begins
	var disk []int
	for i, x := range indexes {
		switch {
		case x >= mid+int64(len(more)):
			return nil, fmt.Errorf("store: room %s's log hash %d is not held", id, x)
		case x >= mid:
			out[i] = more[x-mid]
		case x >= from:
			out[i] = r.hashes[x-from]
		default:
			disk = append(disk, i)
		}
	}
	return out, tileHashes(b, id, indexes, out, disk)
}

// commit writes every pending leaf in tx, and ch's, when a flush is due or
// asked for, or a leaf's t is before log_scan_from.
func (lg *boltLog) commit(tx *bolt.Tx, ch *logChange, force bool) error {
	due := force || lg.pending > 0 && lg.pending >= lg.flush
	for _, es := range ch.leaves {
		for _, e := range es {
			if e.T < lg.scanFrom {
				due = true
			}
		}
	}
	pending := lg.pending + countLeaves(ch)
	if !(due || pending >= lg.flush) || pending == 0 {
		return nil
	}
	ch.hashes = map[sig.Hash][]tlog.Hash{}
	tiles, sizes := tx.Bucket(bucketLogTiles), tx.Bucket(bucketLogSizes)
	ids := slices.Collect(maps.Keys(lg.rooms))
	for id := range ch.leaves {
		if lg.rooms[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b sig.Hash) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		lg.mu.RLock() // the hasher writes hashes beside
		r := roomLog{}
		if p := lg.rooms[id]; p != nil {
			r = *p
		}
		lg.mu.RUnlock()
		es := append(slices.Clip(r.pending), ch.leaves[id]...)
		if len(es) == 0 {
			continue
		}
		old, size := r.written, r.written+int64(len(es))
		// The hashes the hasher has not made yet.
		h := logHasher{room: id, from: tlog.StoredHashCount(r.written), held: r.hashes}
		h.tx = tx
		fresh, err := h.appendHashes(nil, old+int64(r.hashed), es[r.hashed:])
		if err != nil {
			return err
		}
		ch.hashes[id] = fresh
		// The tiles of leaves: the last one's bytes written so far, then
		// the new leaves, a tile at a time.
		for n := old / tileWidth; n*tileWidth < size; n++ {
			var data []byte
			if first := n * tileWidth; first < old {
				data = slices.Clone(tiles.Get(tileKey(id, dataLevel, n)))
				if int64(len(data)) != (old-first)*LogEntrySize {
					return fmt.Errorf("store: room %s's log tile of leaves %d holds %d bytes, not %d leaves'", id, n, len(data), old-first)
				}
			}
			for x := max(old, n*tileWidth); x < min(size, (n+1)*tileWidth); x++ {
				data = append(data, es[x-old].Leaf()...)
			}
			if err := tiles.Put(tileKey(id, dataLevel, n), data); err != nil {
				return err
			}
		}
		// The tiles of hashes the new leaves change.
		hr := tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) { return hashesIn(tiles, id, &r, fresh, x) })
		for _, t := range tlog.NewTiles(tileHeight, old, size) {
			data, err := tlog.ReadTileData(t, hr)
			if err != nil {
				return err
			}
			if err := tiles.Put(tileKey(id, uint8(t.L), t.N), data); err != nil {
				return err
			}
		}
		if err := sizes.Put(clone(id[:]), binary.BigEndian.AppendUint64(nil, uint64(size))); err != nil {
			return err
		}
	}
	ch.flushed = true
	latest := max(lg.latest, ch.latest)
	ch.scanFrom = max(lg.scanFrom, latest-min(latest, lg.margin))
	return tx.Bucket(bucketMeta).Put(metaLogScanFrom, binary.BigEndian.AppendUint64(nil, ch.scanFrom))
}

func countLeaves(ch *logChange) int {
	n := 0
	for _, es := range ch.leaves {
		n += len(es)
	}
	return n
}

// apply takes a committed change into memory.
func (lg *boltLog) apply(ch *logChange) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.latest = max(lg.latest, ch.latest)
	for id, es := range ch.leaves {
		r := lg.room(id)
		r.pending = append(r.pending, es...)
		lg.pending += len(es)
	}
	// ch's leaves are copied: its map, and each room's array, serve the
	// next change. A room without leaves in it keeps an empty entry,
	// which adds nothing.
	if ch.leaves != nil && lg.spare == nil && len(ch.leaves) <= 64 {
		for id, es := range ch.leaves {
			ch.leaves[id] = es[:0]
		}
		lg.spare = ch.leaves
	}
	if ch.flushed {
		for _, r := range lg.rooms {
			r.written += int64(len(r.pending))
			r.pending, r.hashes, r.hashed = nil, nil, 0
		}
		lg.pending = 0
		lg.scanFrom = ch.scanFrom
	} else if len(ch.leaves) > 0 && lg.hashing != nil {
		select {
		case lg.hashing <- struct{}{}:
		default:
		}
	}
}

// hasher hashes the pending leaves of every room after each commit.
func (s *Bolt) hasher() {
	defer close(s.lg.done)
	var ids []sig.Hash
	var scratch []tlog.Hash
	for {
		select {
		case <-s.lg.stop:
			return
		case <-s.lg.hashing:
		}
		s.lg.mu.RLock()
		ids = ids[:0]
		for id := range s.lg.rooms {
			ids = append(ids, id)
		}
		s.lg.mu.RUnlock()
		for _, id := range ids {
			s.hashPending(id, &scratch) // a failure is a reader's to see (LogHashes)
		}
	}
}

// hashPending computes the stored hashes of the room's pending leaves not
// hashed yet. What it computes is kept only if no flush or other hashing
// changed the room's log meanwhile.
//
// It reads the written hashes it needs in a read transaction begun only
// when one is (a subtree that spans written leaves completes: rarely,
// once most of a flush's leaves are pending); scratch, when not nil, is
// the caller's buffer for the hashes made, reused from call to call.
func (s *Bolt) hashPending(id sig.Hash, scratch *[]tlog.Hash) error {
	lg := &s.lg
	lg.mu.RLock()
	r := roomLog{}
	if p := lg.rooms[id]; p != nil {
		r = *p
	}
	lg.mu.RUnlock()
	if r.hashed == len(r.pending) {
		return nil
	}
	var buf []tlog.Hash
	if scratch != nil {
		buf = *scratch
	}
	// r's slices are a copy of the room's headers: the committer only
	// appends past them, and a flush replaces them, so what they show
	// stays as read.
	h := logHasher{db: s.db, room: id, from: tlog.StoredHashCount(r.written), held: r.hashes}
	fresh, err := h.appendHashes(buf, r.written+int64(r.hashed), r.pending[r.hashed:])
	h.done()
	if scratch != nil && fresh != nil {
		*scratch = fresh[:0]
	}
	if err != nil {
		return err
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if p := lg.rooms[id]; p != nil && p.written == r.written && p.hashed == r.hashed {
		p.hashes = append(p.hashes, fresh...)
		p.hashed = len(r.pending)
	}
	return nil
}

// openLog reads the logs' written sizes and, from the rows at or after
// log_scan_from, their pending leaves. A file without log_scan_from has
// logged nothing yet: its logs start after its latest row.
func (s *Bolt) openLog(tx *bolt.Tx) error {
	lg := &s.lg
	lg.rooms = map[sig.Hash]*roomLog{}
	err := tx.Bucket(bucketLogSizes).ForEach(func(k, v []byte) error {
		if len(k) != sig.HashSize || len(v) != 8 {
			return fmt.Errorf("a log size of %d bytes under a key of %d", len(v), len(k))
		}
		lg.room(sig.Hash(k)).written = int64(binary.BigEndian.Uint64(v))
		return nil
	})
	if err != nil {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	v := meta.Get(metaLogScanFrom)
	if v == nil {
		var from uint64
		if k, _ := tx.Bucket(bucketDecisions).Cursor().Last(); len(k) >= 8 {
			from = binary.BigEndian.Uint64(k) + 1
		}
		lg.scanFrom = from
		return meta.Put(metaLogScanFrom, binary.BigEndian.AppendUint64(nil, from))
	}
	if len(v) != 8 {
		return fmt.Errorf("log_scan_from has %d bytes", len(v))
	}
	lg.scanFrom = binary.BigEndian.Uint64(v)
	type found struct {
		room sig.Hash
		e    LogEntry
		x    int64
	}
	var fs []found
	c := tx.Bucket(bucketDecisions).Cursor()
	for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, lg.scanFrom)); k != nil; k, v = c.Next() {
		if len(k) != 8+sig.HashSize {
			return fmt.Errorf("a decision key of %d bytes", len(k))
		}
		r, err := parseRow(v)
		if err != nil {
			return fmt.Errorf("decision %x: %w", k[8:], err)
		}
		if r.logIndex < 0 {
			continue
		}
		dc, err := s.decisionContextOf(tx, r.context)
		if err != nil {
			return err
		}
		if r.logIndex >= lg.room(dc.room).written {
			fs = append(fs, found{dc.room, LogEntry{Digest: sig.Hash(k[8:]), T: binary.BigEndian.Uint64(k)}, r.logIndex})
		}
	}
	slices.SortFunc(fs, func(a, b found) int { return cmp.Compare(a.x, b.x) })
	var ch logChange
	for _, f := range fs {
		if x := lg.add(f.room, f.e, &ch); x != f.x {
			return fmt.Errorf("room %s's log holds leaves to %d, and a decision after them names leaf %d", f.room, x-1, f.x)
		}
	}
	if err := lg.commit(tx, &ch, false); err != nil {
		return err
	}
	lg.apply(&ch)
	return nil
}

// flushLog writes the pending leaves, if any (Close).
func (s *Bolt) flushLog() error {
	s.ix.mu.Lock()
	defer s.ix.mu.Unlock()
	if s.lg.pending == 0 {
		return nil
	}
	var ch logChange
	err := s.db.Update(func(tx *bolt.Tx) error {
		ch = logChange{}
		return s.lg.commit(tx, &ch, true)
	})
	if err == nil {
		s.lg.apply(&ch)
	}
	return err
}

// Logs returns the room's one log, when it has one.
func (s *Bolt) Logs(ctx context.Context, room sig.Hash) ([]LogInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	s.lg.mu.RLock()
	defer s.lg.mu.RUnlock()
	if r := s.lg.rooms[room]; r != nil {
		return []LogInfo{{Size: r.size()}}, nil
	}
	return nil, nil
}

// OwnLog is the room's one log, 0: it is made at the room's first
// decision, and is empty until then.
func (s *Bolt) OwnLog(ctx context.Context, room sig.Hash) (LogInfo, error) {
	n, err := s.LogSize(ctx, room, 0)
	return LogInfo{Size: n}, err
}

// LogSize is the number of leaves in the room's log.
func (s *Bolt) LogSize(ctx context.Context, room sig.Hash, n int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.settle(ctx); err != nil {
		return 0, err
	}
	s.lg.mu.RLock()
	defer s.lg.mu.RUnlock()
	if r := s.lg.rooms[room]; r != nil && n == 0 {
		return r.size(), nil
	}
	return 0, nil
}

// logView is what a reader holds of a room's log in memory.
func (s *Bolt) logView(room sig.Hash) (written int64, pending []LogEntry) {
	s.lg.mu.RLock()
	defer s.lg.mu.RUnlock()
	if r := s.lg.rooms[room]; r != nil {
		return r.written, r.pending[:len(r.pending):len(r.pending)]
	}
	return 0, nil
}

// LogEntries returns the leaves [start, end) of the room's log.
func (s *Bolt) LogEntries(ctx context.Context, room sig.Hash, n, start, end int64) ([]LogEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n != 0 {
		return nil, errNoSuchLog(n)
	}
	written, pending := s.logView(room)
	if end > written+int64(len(pending)) {
		// Leaves not applied yet, or none.
		if err := s.settle(ctx); err != nil {
			return nil, err
		}
		written, pending = s.logView(room)
	}
	if start < 0 || start > end || end > written+int64(len(pending)) {
		return nil, fmt.Errorf("store: log entries [%d, %d) of a log of %d", start, end, written+int64(len(pending)))
	}
	es := make([]LogEntry, 0, end-start)
	if start < written {
		err := s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketLogTiles)
			for n := start / tileWidth; n*tileWidth < min(end, written); n++ {
				data := b.Get(tileKey(room, dataLevel, n))
				for x := max(start, n*tileWidth); x < min(end, written, (n+1)*tileWidth); x++ {
					at := (x - n*tileWidth) * LogEntrySize
					if int64(len(data)) < at+LogEntrySize {
						return fmt.Errorf("store: room %s's log has no entry %d", room, x)
					}
					e, err := ParseLogEntry(data[at : at+LogEntrySize])
					if err != nil {
						return err
					}
					es = append(es, e)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for i := max(start, written); i < end; i++ {
		es = append(es, pending[i-written])
	}
	return es, nil
}

// LogHashes returns the room's stored log hashes at the indexes: those of
// pending leaves the hasher has not made yet are made first.
func (s *Bolt) LogHashes(ctx context.Context, room sig.Hash, n int64, indexes []int64) ([]tlog.Hash, error) {
	if n != 0 {
		return nil, errNoSuchLog(n)
	}
	if written, pending := s.logView(room); slices.ContainsFunc(indexes, func(x int64) bool { return x >= tlog.StoredHashCount(written+int64(len(pending))) }) {
		// Of leaves not applied yet, or of none.
		if err := s.settle(ctx); err != nil {
			return nil, err
		}
	}
	for range 3 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out, hashed, err := s.logHashes(room, indexes)
		if err != nil || hashed {
			return out, err
		}
		if err := s.hashPending(room, nil); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("store: room %s's log changed three times while its hashes were read", room)
}

// logHashes reads the hashes, or reports that pending leaves it needs are
// not hashed yet.
func (s *Bolt) logHashes(room sig.Hash, indexes []int64) ([]tlog.Hash, bool, error) {
	out := make([]tlog.Hash, len(indexes))
	var disk []int
	s.lg.mu.RLock()
	r := s.lg.rooms[room]
	var from, count int64
	if r != nil {
		from, count = tlog.StoredHashCount(r.written), tlog.StoredHashCount(r.size())
	}
	for i, x := range indexes {
		switch {
		case x < 0 || x >= count:
			s.lg.mu.RUnlock()
			return nil, false, fmt.Errorf("store: room %s's log has no stored hash %d", room, x)
		case x >= from+int64(len(r.hashes)):
			s.lg.mu.RUnlock()
			return nil, false, nil
		case x >= from:
			out[i] = r.hashes[x-from]
		default:
			disk = append(disk, i)
		}
	}
	s.lg.mu.RUnlock()
	if len(disk) == 0 {
		return out, true, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tileHashes(tx.Bucket(bucketLogTiles), room, indexes, out, disk)
	})
	return out, err == nil, err
}

// LogRef is the index the decision's row names, in the room's one log: a
// pruned decision's is not found (one not found is looked for again as
// Decision does).
func (s *Bolt) LogRef(ctx context.Context, room sig.Hash, digest sig.Hash) (int64, int64, error) {
	var n int64
	x, err := settled(s, ctx, func() (x int64, err error) {
		n, x, err = s.logRef(ctx, room, digest)
		return x, err
	})
	return n, x, err
}

func (s *Bolt) logRef(ctx context.Context, room sig.Hash, digest sig.Hash) (int64, int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	x := int64(-1)
	err := s.db.View(func(tx *bolt.Tx) error {
		t, found, err := lookup(tx, digest)
		if err != nil || !found {
			return err
		}
		v := tx.Bucket(bucketDecisions).Get(rowKey(t, digest))
		if v == nil {
			return nil
		}
		r, err := parseRow(v)
		if err != nil {
			return fmt.Errorf("store: decision %s: %w", digest, err)
		}
		dc, err := s.decisionContextOf(tx, r.context)
		if err != nil || dc.room != room {
			return err
		}
		x = r.logIndex
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if x < 0 {
		return 0, 0, ErrNotFound
	}
	return 0, x, nil
}

// PutKeyEpoch keeps a head the room has had.
func (s *Bolt) PutKeyEpoch(ctx context.Context, room sig.Hash, e KeyEpoch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.From < 0 {
		return fmt.Errorf("store: a key epoch from %d", e.From)
	}
	if e.Log != 0 {
		return errNoSuchLog(e.Log)
	}
	key := binary.BigEndian.AppendUint64(append(make([]byte, 0, sig.HashSize+8), room[:]...), e.Seq)
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKeyEpochs)
		if b.Get(key) != nil {
			return nil
		}
		return b.Put(key, appendKeyEpoch(nil, e))
	})
}

// KeyEpochs returns the heads the room has had.
func (s *Bolt) KeyEpochs(ctx context.Context, room sig.Hash) ([]KeyEpoch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var es []KeyEpoch
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketKeyEpochs).Cursor()
		for k, v := c.Seek(room[:]); k != nil && bytes.HasPrefix(k, room[:]); k, v = c.Next() {
			if len(k) != sig.HashSize+8 {
				return fmt.Errorf("store: a key epoch's key of %d bytes", len(k))
			}
			e, err := parseKeyEpoch(binary.BigEndian.Uint64(k[sig.HashSize:]), v)
			if err != nil {
				return err
			}
			es = append(es, e)
		}
		return nil
	})
	return es, err
}
