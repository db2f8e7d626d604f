package postgres

// The rooms' decision logs: appends, frontiers and reads of their leaves.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// A frontier is what a server knows of a room's log after its own last
// append: the size, and the stored hashes of the tree's peaks (its largest
// complete subtrees, at most one per level), which are all that appending
// to it reads. It holds while log_sizes still says that size: sizes only
// grow, so no other server has appended meanwhile.
type frontier struct {
	size  int64
	peaks map[int64]tlog.Hash
}

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

// appendLogs appends the decisions to their rooms' logs in tx, which holds
// the decisions' lock (one sequence for every server: item 7 of issue 16):
// a round trip for the size, one for the peaks when this server's frontier
// is not the log's, and one for the leaves, hashes and size. It returns
// the rooms' frontiers after it, for the caller to keep once tx commits.
func (s *Store) appendLogs(ctx context.Context, tx pgx.Tx, ds []store.Decision) (map[sig.Hash]frontier, error) {
	var rooms []sig.Hash
	leaves := map[sig.Hash][]store.LogEntry{}
	for _, d := range ds {
		if _, ok := leaves[d.Room]; !ok {
			rooms = append(rooms, d.Room)
		}
		leaves[d.Room] = append(leaves[d.Room], store.LogEntry{Digest: d.Digest, T: d.T})
	}
	after := map[sig.Hash]frontier{}
	for _, room := range rooms {
		var n int64
		err := tx.QueryRow(ctx, "SELECT size FROM waisteer.log_sizes WHERE room = $1", room[:]).Scan(&n)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
		s.mu.Lock()
		f, known := s.frontiers[room]
		s.mu.Unlock()
		if !known || f.size != n {
			if f, err = readFrontier(ctx, tx, room, n); err != nil {
				return nil, err
			}
		}
		es := leaves[room]
		bs := make([][]byte, len(es))
		digests, ts, idx := make([][]byte, len(es)), make([]int64, len(es)), make([]int64, len(es))
		for k, e := range es {
			bs[k] = e.Leaf()
			digests[k], ts[k], idx[k] = e.Digest[:], i64(e.T), n+int64(k)
		}
		fresh, err := store.AppendLog(n, bs, func(indexes []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(indexes))
			for i, x := range indexes {
				h, ok := f.peaks[x]
				if !ok {
					return nil, fmt.Errorf("postgres: room %s's log hash %d is not a peak of its %d leaves", room, x, n)
				}
				out[i] = h
			}
			return out, nil
		})
		if err != nil {
			return nil, err
		}
		base := tlog.StoredHashCount(n)
		hx, hv := make([]int64, 0, len(fresh)), make([][]byte, 0, len(fresh))
		for k := range fresh {
			hx, hv = append(hx, base+int64(k)), append(hv, fresh[k][:])
		}
		size := n + int64(len(es))
		if _, err := tx.Exec(ctx, `WITH e AS (
				INSERT INTO waisteer.log_entries (room, idx, digest, t) SELECT $1, i, d, t FROM unnest($2::bigint[], $3::bytea[], $4::bigint[]) AS u(i, d, t)
			), h AS (
				INSERT INTO waisteer.log_hashes (room, idx, hash) SELECT $1, i, h FROM unnest($5::bigint[], $6::bytea[]) AS u(i, h)
			)
			INSERT INTO waisteer.log_sizes (room, size) VALUES ($1, $7) ON CONFLICT (room) DO UPDATE SET size = excluded.size`,
			room[:], idx, digests, ts, hx, hv, size); err != nil {
			return nil, err
		}
		next := frontier{size: size, peaks: map[int64]tlog.Hash{}}
		for _, x := range peaks(size) {
			switch {
			case x >= base:
				next.peaks[x] = fresh[x-base]
			default:
				next.peaks[x] = f.peaks[x] // a peak of n leaves still
			}
		}
		after[room] = next
	}
	return after, nil
}

// readFrontier reads the peaks of the room's log of n leaves.
func readFrontier(ctx context.Context, tx pgx.Tx, room sig.Hash, n int64) (frontier, error) {
	f := frontier{size: n, peaks: map[int64]tlog.Hash{}}
	need := peaks(n)
	if len(need) == 0 {
		return f, nil
	}
	rows, err := tx.Query(ctx, "SELECT idx, hash FROM waisteer.log_hashes WHERE room = $1 AND idx = ANY($2)", room[:], need)
	if err != nil {
		return f, err
	}
	defer rows.Close()
	for rows.Next() {
		var x int64
		var h []byte
		if err := rows.Scan(&x, &h); err != nil {
			return f, err
		}
		if len(h) != tlog.HashSize {
			return f, fmt.Errorf("postgres: room %s's log hash %d has %d bytes", room, x, len(h))
		}
		f.peaks[x] = tlog.Hash(h)
	}
	if err := rows.Err(); err != nil {
		return f, err
	}
	if len(f.peaks) != len(need) {
		return f, fmt.Errorf("postgres: room %s's log of %d leaves holds %d of its %d peaks", room, n, len(f.peaks), len(need))
	}
	return f, nil
}

// LogSize is the number of leaves in the room's log.
func (s *Store) LogSize(ctx context.Context, room sig.Hash) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT size FROM waisteer.log_sizes WHERE room = $1", room[:]).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// LogEntries returns the leaves [start, end) of the room's log.
func (s *Store) LogEntries(ctx context.Context, room sig.Hash, start, end int64) ([]store.LogEntry, error) {
	if start < 0 || start > end {
		return nil, fmt.Errorf("postgres: log entries [%d, %d)", start, end)
	}
	rows, err := s.pool.Query(ctx, "SELECT idx, digest, t FROM waisteer.log_entries WHERE room = $1 AND idx >= $2 AND idx < $3 ORDER BY idx", room[:], start, end)
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
			return nil, fmt.Errorf("postgres: room %s's log has no entry %d", room, start+int64(len(es)))
		}
		es = append(es, store.LogEntry{Digest: h, T: u64(t)})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if int64(len(es)) != end-start {
		return nil, fmt.Errorf("postgres: room %s's log has no entry %d", room, start+int64(len(es)))
	}
	return es, nil
}

// LogHashes returns the room's stored log hashes at the indexes.
func (s *Store) LogHashes(ctx context.Context, room sig.Hash, indexes []int64) ([]tlog.Hash, error) {
	rows, err := s.pool.Query(ctx, "SELECT idx, hash FROM waisteer.log_hashes WHERE room = $1 AND idx = ANY($2)", room[:], indexes)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[int64]tlog.Hash{}
	for rows.Next() {
		var x int64
		var h []byte
		if err := rows.Scan(&x, &h); err != nil {
			return nil, err
		}
		if len(h) != tlog.HashSize {
			return nil, fmt.Errorf("postgres: room %s's log hash %d has %d bytes", room, x, len(h))
		}
		got[x] = tlog.Hash(h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := got[x]
		if !ok {
			return nil, fmt.Errorf("postgres: room %s's log hash %d is not held", room, x)
		}
		out[i] = h
	}
	return out, nil
}

// LogIndex is the index of the decision's leaf in the room's log.
func (s *Store) LogIndex(ctx context.Context, room sig.Hash, digest sig.Hash) (int64, error) {
	var x int64
	err := s.pool.QueryRow(ctx, "SELECT idx FROM waisteer.log_entries WHERE digest = $1 AND room = $2", digest[:], room[:]).Scan(&x)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	return x, err
}
