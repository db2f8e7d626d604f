package postgres

// The rooms' decision logs (issue 16; issue 31's layout): a log is a row of
// waisteer.logs, numbered in its room (0 for the one log of schema 4, then
// 1, 2, … in the order made), written by one opening of the store only
// (its writer) until sealed; its leaves are its decisions' rows (log, idx,
// digest, t), and its stored hashes are tlog's tiles of height 8 in
// log_tiles: a row for each complete tile of the bottom level (256 leaf
// hashes, 8 KiB, written once), and above it a row for each hash of tree
// level 8L, the
// bottom of tile level L (one for every 256^L leaves, written once), from
// which tlog reads the levels between. The partial bottom tile is not
// stored: its hashes are its leaves' (RFC 6962 §2.1), read from the rows.
// Nothing is written twice; a decision costs its row and 32 bytes of tile,
// not a leaf row and two hash rows.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// tileHeight is the tiles' height: 256 hashes to a tile, as the bbolt
// store's and C2SP tlog-tiles'.
const (
	tileHeight = 8
	tileWidth  = 1 << tileHeight
)

// A frontier is what a server knows of its log after its own last append:
// its size and, for each tile level L, the hashes (of tree level 8L) of the
// level's partial tile, which are all that appending reads. It holds while
// the log's size in waisteer.logs still says that size: sizes only grow,
// and only by the log's own server.
type frontier struct {
	size  int64
	tails [][]byte // tails[L]: the partial tile of level L, 32 bytes a hash
}

// count is the number of hashes of tree level 8L in a log of n leaves.
func count(n int64, level int) int64 { return n >> (tileHeight * level) }

// peaks is the stored hash indexes of the peaks of a tree of n leaves.
func peaks(n int64) []int64 {
	var xs []int64
	start := int64(0)
	for l := 62; l >= 0; l-- {
		if n&(1<<l) != 0 {
			xs = append(xs, tlog.StoredHashIndex(l, start>>l))
			start += 1 << l
		}
	}
	return xs
}

// A tileRow is a tile to write: complete, or the partial one of its level.
type tileRow struct {
	level int
	n     int64
	data  []byte
}

// appendTo appends the leaves to the log f describes: the frontier after,
// and the tiles that changed. f is left as it was.
func appendTo(f frontier, es []store.LogEntry) (frontier, []tileRow, error) {
	n := f.size
	bs := make([][]byte, len(es))
	for k, e := range es {
		bs[k] = e.Leaf()
	}
	fresh, err := store.AppendLog(n, bs, func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			t := tlog.TileForIndex(tileHeight, x)
			if t.L >= len(f.tails) || t.N != count(n, t.L)>>tileHeight || len(f.tails[t.L]) < t.W*tlog.HashSize {
				return nil, fmt.Errorf("postgres: log hash %d is not in the partial tiles of %d leaves", x, n)
			}
			t.W = len(f.tails[t.L]) / tlog.HashSize
			h, err := tlog.HashFromTile(t, f.tails[t.L], x)
			if err != nil {
				return nil, err
			}
			out[i] = h
		}
		return out, nil
	})
	if err != nil {
		return f, nil, err
	}
	next := frontier{size: n + int64(len(es)), tails: make([][]byte, len(f.tails))}
	for L := range f.tails {
		next.tails[L] = slices.Clone(f.tails[L])
	}
	var rows []tileRow
	base := tlog.StoredHashCount(n)
	for i, h := range fresh {
		level, k := tlog.SplitStoredHashIndex(base + int64(i))
		if level%tileHeight != 0 {
			continue
		}
		L := level / tileHeight
		for len(next.tails) <= L {
			next.tails = append(next.tails, nil)
		}
		next.tails[L] = append(next.tails[L], h[:]...)
		switch {
		case L > 0:
			rows = append(rows, tileRow{level: L, n: k, data: h[:]})
		case len(next.tails[L]) == tileWidth*tlog.HashSize:
			rows = append(rows, tileRow{level: L, n: k >> tileHeight, data: next.tails[L]})
		}
		if len(next.tails[L]) == tileWidth*tlog.HashSize {
			next.tails[L] = nil
		}
	}
	for L := range next.tails {
		if w := count(next.size, L) % tileWidth; int64(len(next.tails[L])) != w*tlog.HashSize {
			return f, nil, fmt.Errorf("postgres: %d leaves leave %d hashes of tile level %d, not %d", next.size, len(next.tails[L])/tlog.HashSize, L, w)
		}
	}
	return next, rows, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// readLeaves reads the leaves [start, end) of the log through q.
func readLeaves(ctx context.Context, q querier, log int32, start, end int64) ([]store.LogEntry, error) {
	if start < 0 || start > end {
		return nil, fmt.Errorf("postgres: log entries [%d, %d)", start, end)
	}
	rows, err := q.Query(ctx, "SELECT idx, digest, t FROM waisteer.decisions WHERE log = $1 AND idx >= $2 AND idx < $3 ORDER BY idx", log, start, end)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	es := make([]store.LogEntry, 0, end-start)
	for rows.Next() {
		var x, t int64
		var d []byte
		if err := rows.Scan(&x, &d, &t); err != nil {
			return nil, err
		}
		h, err := hash(d)
		if err != nil {
			return nil, err
		}
		if x != start+int64(len(es)) {
			return nil, fmt.Errorf("postgres: log %d has no entry %d", log, start+int64(len(es)))
		}
		es = append(es, store.LogEntry{Digest: h, T: u64(t)})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if int64(len(es)) != end-start {
		return nil, fmt.Errorf("postgres: log %d has no entry %d", log, start+int64(len(es)))
	}
	return es, nil
}

// A tileKey is a tile: its level and index.
type tileKey struct {
	level int
	n     int64
}

// tiles reads the stored tiles of the log, each as wide as held up to the
// width asked: a bottom tile's row, or the rows of a higher one's hashes.
func tiles(ctx context.Context, q querier, log int32, want map[tileKey]int) (map[tileKey][]byte, error) {
	out := map[tileKey][]byte{}
	if len(want) == 0 {
		return out, nil
	}
	var levels []int16
	var los, his []int64
	for k, w := range want {
		levels = append(levels, int16(k.level))
		if k.level == 0 {
			los, his = append(los, k.n), append(his, k.n+1)
		} else {
			los, his = append(los, k.n<<tileHeight), append(his, k.n<<tileHeight+int64(w))
		}
	}
	rows, err := q.Query(ctx, `SELECT t.level, t.n, t.hashes FROM waisteer.log_tiles t
		JOIN unnest($2::smallint[], $3::bigint[], $4::bigint[]) AS u(l, lo, hi) ON t.level = u.l AND t.n >= u.lo AND t.n < u.hi
		WHERE t.log = $1 ORDER BY t.level, t.n`, log, levels, los, his)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var l int16
		var n int64
		var b []byte
		if err := rows.Scan(&l, &n, &b); err != nil {
			return nil, err
		}
		k := tileKey{int(l), n}
		switch {
		case l == 0 && len(b) == tileWidth*tlog.HashSize:
			out[k] = b
		case l > 0 && len(b) == tlog.HashSize:
			k.n = n >> tileHeight
			if int64(len(out[k])) != (n%tileWidth)*tlog.HashSize {
				return nil, fmt.Errorf("postgres: log %d lacks hash %d of level %d", log, n-1, l)
			}
			out[k] = append(out[k], b...)
		default:
			return nil, fmt.Errorf("postgres: log %d's tile row %d/%d has %d bytes", log, l, n, len(b))
		}
	}
	return out, rows.Err()
}

// leafTile is the bottom tile of the leaves [start, end), hashed.
func leafTile(es []store.LogEntry) []byte {
	b := make([]byte, 0, len(es)*tlog.HashSize)
	for _, e := range es {
		h := tlog.RecordHash(e.Leaf())
		b = append(b, h[:]...)
	}
	return b
}

// readFrontier reads the partial tiles of the log of n leaves: the bottom
// one from its leaves, those above from log_tiles.
func readFrontier(ctx context.Context, q querier, log int32, n int64) (frontier, error) {
	f := frontier{size: n}
	want := map[tileKey]int{}
	for L := 0; count(n, L) > 0; L++ {
		f.tails = append(f.tails, nil)
		if w := count(n, L) % tileWidth; L > 0 && w > 0 {
			want[tileKey{L, count(n, L) >> tileHeight}] = int(w)
		}
	}
	if w := n % tileWidth; w > 0 {
		es, err := readLeaves(ctx, q, log, n-w, n)
		if err != nil {
			return f, err
		}
		f.tails[0] = leafTile(es)
	}
	ts, err := tiles(ctx, q, log, want)
	if err != nil {
		return f, err
	}
	for k, w := range want {
		b := ts[k]
		if len(b) != w*tlog.HashSize {
			return f, fmt.Errorf("postgres: log %d of %d leaves lacks its tile %d/%d of %d hashes", log, n, k.level, k.n, w)
		}
		f.tails[k.level] = b
	}
	return f, nil
}

// readHashes reads the log's stored hashes at the indexes, each below
// tlog.StoredHashCount(n), n its size.
func readHashes(ctx context.Context, q querier, log int32, n int64, indexes []int64) ([]tlog.Hash, error) {
	need := map[tileKey]int{} // each tile asked for, and the width its hashes need
	for _, x := range indexes {
		if x < 0 || x >= tlog.StoredHashCount(n) {
			return nil, fmt.Errorf("postgres: log %d's hash %d is not held (%d leaves)", log, x, n)
		}
		t := tlog.TileForIndex(tileHeight, x)
		k := tileKey{t.L, t.N}
		need[k] = max(need[k], t.W)
	}
	ts, err := tiles(ctx, q, log, need)
	if err != nil {
		return nil, err
	}
	for k, w := range need {
		if _, ok := ts[k]; ok || k.level != 0 {
			continue
		}
		// The partial bottom tile: its leaves' hashes.
		es, err := readLeaves(ctx, q, log, k.n*tileWidth, k.n*tileWidth+int64(w))
		if err != nil {
			return nil, err
		}
		ts[k] = leafTile(es)
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		t := tlog.TileForIndex(tileHeight, x)
		b := ts[tileKey{t.L, t.N}]
		if len(b) < t.W*tlog.HashSize {
			return nil, fmt.Errorf("postgres: log %d's hash %d: its tile %d/%d holds %d bytes", log, x, t.L, t.N, len(b))
		}
		t.W = len(b) / tlog.HashSize
		h, err := tlog.HashFromTile(t, b, x)
		if err != nil {
			return nil, fmt.Errorf("postgres: log %d's hash %d: %w", log, x, err)
		}
		out[i] = h
	}
	return out, nil
}

// writeTiles writes the tiles in tx.
func writeTiles(ctx context.Context, tx pgx.Tx, log int32, ts []tileRow) error {
	if len(ts) == 0 {
		return nil
	}
	levels, ns, data := make([]int16, len(ts)), make([]int64, len(ts)), make([][]byte, len(ts))
	for i, t := range ts {
		levels[i], ns[i], data[i] = int16(t.level), t.n, t.data
	}
	_, err := tx.Exec(ctx, `INSERT INTO waisteer.log_tiles (log, level, n, hashes) SELECT $1, l, n, h FROM unnest($2::smallint[], $3::bigint[], $4::bytea[]) AS u(l, n, h)`,
		log, levels, ns, data)
	return err
}

// An ownLog is a log this server appends to: its row and its number.
type ownLog struct {
	id int32
	n  int64
}

// logRow reads the row of log n of the room: its id and its size, or
// false when the room has no such log.
func logRow(ctx context.Context, q querier, room sig.Hash, n int64) (int32, int64, bool, error) {
	if n < 0 || n > math.MaxInt32 {
		return 0, 0, false, nil
	}
	var id int32
	var size int64
	err := q.QueryRow(ctx, "SELECT id, size FROM waisteer.logs WHERE room = $1 AND n = $2", room[:], n).Scan(&id, &size)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, nil
	}
	return id, size, err == nil, err
}

// errNoSuchLog is a log number the room has not.
func errNoSuchLog(room sig.Hash, n int64) error {
	return fmt.Errorf("postgres: room %s has no log %d", room, n)
}

// maxLogTries bounds the tries at making a log whose number another server
// took meanwhile.
const maxLogTries = 16

// ownLogOf is the log this server appends the room's decisions to: the one
// known, or its open one of the room, or one it makes, numbered after the
// room's last. Two servers making a log of one room at once both take the
// next number: the unique (room, n) makes the second's insert wait for the
// first's and then insert nothing, and it tries the number after.
//
// A log made in a room that has had key log heads starts under the latest
// (SPEC-NOTES "Keys over time"): its start in the log, at 0 with no
// handover, is written with the log, so that no decision of the log is
// without a head, whenever the log is made.
func (s *Store) ownLogOf(ctx context.Context, room sig.Hash) (ownLog, error) {
	s.mu.Lock()
	l, ok := s.own[room]
	s.mu.Unlock()
	if ok {
		return l, nil
	}
	for range maxLogTries {
		err := s.pool.QueryRow(ctx, "SELECT id, n FROM waisteer.logs WHERE room = $1 AND writer = $2 AND sealed IS NULL",
			room[:], s.instance).Scan(&l.id, &l.n)
		if errors.Is(err, pgx.ErrNoRows) {
			if s.closing.Load() {
				return l, errors.New("postgres: the store is closed: no log is made")
			}
			// Making a log is a sign of life too: the new log must not
			// be sealed at once for a seen left old by a pause.
			err = s.pool.QueryRow(ctx, `WITH alive AS (UPDATE waisteer.instances SET seen = now() WHERE id = $2),
				made AS (INSERT INTO waisteer.logs (room, n, writer) SELECT $1, coalesce(max(n) + 1, 1), $2 FROM waisteer.logs WHERE room = $1
					ON CONFLICT DO NOTHING RETURNING id, n),
				started AS (INSERT INTO waisteer.key_epoch_starts (room, seq, log, from_size)
					SELECT $1, k.seq, m.n, 0 FROM made m, (SELECT max(seq) AS seq FROM waisteer.key_epochs WHERE room = $1) k WHERE k.seq IS NOT NULL)
				SELECT id, n FROM made`, room[:], s.instance).Scan(&l.id, &l.n)
			if errors.Is(err, pgx.ErrNoRows) {
				continue // its number was taken meanwhile
			}
			if err == nil {
				s.metrics.logsMade.Add(1)
			}
		}
		if err != nil {
			return l, err
		}
		s.mu.Lock()
		s.own[room] = l
		s.mu.Unlock()
		return l, nil
	}
	return l, fmt.Errorf("postgres: room %s: no log number was free in %d tries", room, maxLogTries)
}

// forgetOwn forgets the room's log that this server found sealed under it,
// so that its next group makes another.
func (s *Store) forgetOwn(ids map[int32]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for room, l := range s.own {
		if ids[l.id] {
			delete(s.own, room)
			delete(s.frontiers, l.id)
		}
	}
}

// Logs returns the room's logs by number, each with its writer ("host
// pid"; "" for log 0 of schema 4), its committed size and whether it is
// sealed; the logs of servers gone are sealed first (live.go).
func (s *Store) Logs(ctx context.Context, room sig.Hash) ([]store.LogInfo, error) {
	if err := s.sealGoneSometimes(ctx, room); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT l.n, i.host, i.pid, l.size, l.sealed IS NOT NULL FROM waisteer.logs l
		LEFT JOIN waisteer.instances i ON i.id = l.writer WHERE l.room = $1 ORDER BY l.n`, room[:])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ls []store.LogInfo
	for rows.Next() {
		l, err := scanLogInfo(rows)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, rows.Err()
}

// LogOf is log n of the room alone (store.OneLog), as Logs lists it, or
// store.ErrNotFound: the route of one log (every tile of it asks) reads
// its row, however many logs the room's servers have made.
func (s *Store) LogOf(ctx context.Context, room sig.Hash, n int64) (store.LogInfo, error) {
	if n < 0 || n > math.MaxInt32 {
		return store.LogInfo{}, store.ErrNotFound
	}
	if err := s.sealGoneSometimes(ctx, room); err != nil {
		return store.LogInfo{}, err
	}
	l, err := scanLogInfo(s.pool.QueryRow(ctx, `SELECT l.n, i.host, i.pid, l.size, l.sealed IS NOT NULL FROM waisteer.logs l
		LEFT JOIN waisteer.instances i ON i.id = l.writer WHERE l.room = $1 AND l.n = $2`, room[:], int32(n)))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.LogInfo{}, store.ErrNotFound
	}
	return l, err
}

// sealGoneSometimes seals the gone servers' logs of the room, at most once
// a beat: Logs and LogOf answer public routes, which must not turn a flood
// of GETs into as many writes; the sweep seals them too (live.go).
func (s *Store) sealGoneSometimes(ctx context.Context, room sig.Hash) error {
	if last := s.listed.Load(); time.Since(time.Unix(0, last)) >= s.live.beat && s.listed.CompareAndSwap(last, time.Now().UnixNano()) {
		if _, err := s.sealGone(ctx, &room); err != nil {
			return err
		}
	}
	return nil
}

// scanLogInfo reads a row of (n, host, pid, size, sealed).
func scanLogInfo(row pgx.Row) (store.LogInfo, error) {
	var l store.LogInfo
	var n int32
	var host *string
	var pid *int32
	if err := row.Scan(&n, &host, &pid, &l.Size, &l.Sealed); err != nil {
		return store.LogInfo{}, err
	}
	l.N = int64(n)
	if host != nil && pid != nil {
		l.Server = *host + " " + strconv.Itoa(int(*pid))
	}
	return l, nil
}

// OwnLog is the log this server appends the room's decisions to, made
// (empty) when it has none open.
func (s *Store) OwnLog(ctx context.Context, room sig.Hash) (store.LogInfo, error) {
	l, err := s.ownLogOf(ctx, room)
	if err != nil {
		return store.LogInfo{}, err
	}
	info := store.LogInfo{N: l.n, Server: s.server}
	var sealed bool
	if err := s.pool.QueryRow(ctx, "SELECT size, sealed IS NOT NULL FROM waisteer.logs WHERE id = $1", l.id).Scan(&info.Size, &sealed); err != nil {
		return store.LogInfo{}, err
	}
	if sealed {
		// Sealed under this server (it was gone for a while): the next
		// is made now, empty.
		s.forgetOwn(map[int32]bool{l.id: true})
		return s.OwnLog(ctx, room)
	}
	return info, nil
}

// LogSize is the number of leaves in log n of the room: 0 for a log it
// has not.
func (s *Store) LogSize(ctx context.Context, room sig.Hash, n int64) (int64, error) {
	_, size, _, err := logRow(ctx, s.pool, room, n)
	return size, err
}

// LogEntries returns the leaves [start, end) of log n of the room.
func (s *Store) LogEntries(ctx context.Context, room sig.Hash, n, start, end int64) ([]store.LogEntry, error) {
	if start < 0 || start > end {
		return nil, fmt.Errorf("postgres: log entries [%d, %d)", start, end)
	}
	id, size, ok, err := logRow(ctx, s.pool, room, n)
	switch {
	case err != nil:
		return nil, err
	case !ok && end > 0:
		return nil, errNoSuchLog(room, n)
	case end > size:
		return nil, fmt.Errorf("postgres: log entries [%d, %d) of log %d of %d leaves", start, end, n, size)
	}
	return readLeaves(ctx, s.pool, id, start, end)
}

// LogHashes returns the stored hashes of log n of the room at the indexes.
func (s *Store) LogHashes(ctx context.Context, room sig.Hash, n int64, indexes []int64) ([]tlog.Hash, error) {
	id, size, _, err := logRow(ctx, s.pool, room, n)
	if err != nil {
		return nil, err
	}
	return readHashes(ctx, s.pool, id, size, indexes)
}

// LogRef is the log and the index of the decision's leaf in the room.
func (s *Store) LogRef(ctx context.Context, room sig.Hash, digest sig.Hash) (int64, int64, error) {
	var n int32
	var x int64
	err := s.pool.QueryRow(ctx, `SELECT l.n, d.idx FROM waisteer.decisions d JOIN waisteer.logs l ON l.id = d.log
		WHERE d.digest = $1 AND l.room = $2`, digest[:], room[:]).Scan(&n, &x)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, store.ErrNotFound
	}
	return int64(n), x, err
}
