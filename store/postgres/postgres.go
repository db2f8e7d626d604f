// Package postgres is the store on PostgreSQL (issue 15): any number of
// waisteer instances keep one room's records, policies, key log heads and
// decisions in one database, where bbolt (package store) keeps one
// instance's. It stores what the bbolt store stores, as it stores it:
// decisions compactly (store.AppendDecisionRow, with their room, policy and
// signer by a shared context and their evidence by a shared snapshot), the
// exact bytes rebuilt on request (store.Rebuild).
//
// Every write is one transaction, durable when it returns (PostgreSQL's
// commit). Records, decisions and changes to rooms and active policies are
// numbered in commit order from one sequence, under a lock of their feed
// held to the commit, so that an instance that follows a feed by number
// misses nothing (migrate.go).
package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// Store is the store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	chunk    int
	instance int32 // this opening's row in waisteer.instances: the writer of its rows

	mu       sync.Mutex
	contexts map[context3]int64 // ids of the contexts known to be held
	// frontiers are the rooms' logs as this server last appended to them.
	frontiers map[sig.Hash]frontier
	loads     *Loads // the shared table on this store, closed first

	health *health // whether the database answers (health.go)
}

// context3 is a decision's room, policy and signer.
type context3 struct {
	room, policy sig.Hash
	signer       sig.PublicKey
}

var _ store.Store = (*Store)(nil)

const defaultPruneChunk = 1000

// Option configures Open.
type Option func(*options)

type options struct {
	chunk              int
	migrate            bool
	log                *slog.Logger
	connect, statement time.Duration
}

// The timeouts a DSN that names none gets (issue 26 item 6): a database
// that takes a connection and never answers fails the server's start
// within connect, rather than hanging it; a statement the database holds
// for longer than statement is cancelled by the database itself.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultStatementTimeout = 10 * time.Second
)

func defaultOptions() options {
	return options{chunk: defaultPruneChunk, log: slog.Default(), connect: DefaultConnectTimeout, statement: DefaultStatementTimeout}
}

// WithLogger has the store log its changes of state there (default
// slog.Default()): one line when the database cannot be reached, one when
// it is back (health.go).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithTimeouts sets the connect and statement timeouts of a DSN that names
// neither (connect_timeout, statement_timeout, or -c statement_timeout in
// its options): the DSN's own win. A zero leaves the default.
func WithTimeouts(connect, statement time.Duration) Option {
	return func(o *options) {
		if connect > 0 {
			o.connect = connect
		}
		if statement > 0 {
			o.statement = statement
		}
	}
}

// WithPruneChunk sets how many records, or decisions, Prune removes in each
// transaction (default 1000).
func WithPruneChunk(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.chunk = n
		}
	}
}

// WithMigrate has Open apply the pending migrations first (as waisteer
// serve does at start-up); without it Open refuses a database whose schema
// is not this build's.
func WithMigrate() Option { return func(o *options) { o.migrate = true } }

// Open connects to the database at dsn (a PostgreSQL connection string or
// URL, as pgx reads it) and checks its schema's version.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if o.migrate {
		if _, err := Migrate(ctx, dsn, opts...); err != nil {
			return nil, err
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: the DSN does not read: %w", err)
	}
	cc := cfg.ConnConfig
	timeouts(cc, dsn, o, true)
	s := &Store{chunk: o.chunk, contexts: map[context3]int64{}, frontiers: map[sig.Hash]frontier{}}
	// The probe makes a connection of its own: one the pool holds may
	// be to a backend not yet stopped (health.saw).
	probe := cc.Copy()
	s.health = newHealth(o.log, func(ctx context.Context) error {
		c, err := pgx.ConnectConfig(ctx, probe)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		return c.Ping(ctx)
	})
	cc.Tracer = tracer{s.health}
	cfg.BeforeClose = s.health.forget
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		s.health.close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.pool = p
	// A database that took the connection and then stopped answering
	// (one stopped, or behind a wedged proxy) cannot cancel a statement
	// itself: the start-up's statements are bounded here too.
	if cc.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cc.ConnectTimeout+o.statement)
		defer cancel()
	}
	if err := checkVersion(ctx, p); err != nil {
		s.closePool()
		return nil, connectErr(err, cc)
	}
	host, _ := os.Hostname()
	if err := p.QueryRow(ctx, "INSERT INTO waisteer.instances (host, pid) VALUES ($1, $2) RETURNING id", host, os.Getpid()).Scan(&s.instance); err != nil {
		s.closePool()
		return nil, fmt.Errorf("postgres: registering the instance: %w", connectErr(err, cc))
	}
	return s, nil
}

// timeouts gives cc, read from dsn, the timeouts of o where dsn names
// none; with statement, the statement timeout too (not for migrating, whose
// statements may rightly take long).
func timeouts(cc *pgx.ConnConfig, dsn string, o options, statement bool) {
	if cc.ConnectTimeout == 0 && !strings.Contains(dsn, "connect_timeout") && os.Getenv("PGCONNECT_TIMEOUT") == "" {
		cc.ConnectTimeout = o.connect
	}
	if _, ok := cc.RuntimeParams["statement_timeout"]; statement && !ok && !strings.Contains(cc.RuntimeParams["options"], "statement_timeout") {
		cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(o.statement.Milliseconds(), 10)
	}
}

// connectErr says, of a connection that timed out, after how long: a
// database that takes connections and never answers is otherwise a
// silence.
func connectErr(err error, cc *pgx.ConnConfig) error {
	if cc.ConnectTimeout > 0 && (errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)) {
		return fmt.Errorf("the database did not answer within the connect timeout, %v: %w", cc.ConnectTimeout, err)
	}
	return err
}

// closePool closes the connections and stops the health's probe.
func (s *Store) closePool() {
	s.pool.Close()
	s.health.close()
}

// Close closes the table of loads on the store, if any (writing its last
// sessions), then the connections.
func (s *Store) Close() error {
	s.mu.Lock()
	l := s.loads
	s.loads = nil
	s.mu.Unlock()
	var err error
	if l != nil {
		err = l.Close()
	}
	s.closePool()
	return err
}

// i64 writes a u64 of the room clock as a bigint of the same order.
func i64(u uint64) int64 { return int64(u ^ 1<<63) }

// u64 reads what i64 wrote.
func u64(i int64) uint64 { return uint64(i) ^ 1<<63 }

// nonNil keeps an empty value apart from NULL, which pgx writes for nil.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// hash reads a 32-byte column.
func hash(b []byte) (sig.Hash, error) {
	var h sig.Hash
	if len(b) != len(h) {
		return h, fmt.Errorf("postgres: a digest of %d bytes", len(b))
	}
	copy(h[:], b)
	return h, nil
}

// notFound turns pgx's no rows into store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// inTx runs fn in a transaction. A transaction that failed before anything
// reached the server (a connection the pool held had died with a database
// that went away and came back) is run again, on another connection: that
// is safe, nothing of it was done.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	var err error
	for range 3 {
		if err = pgx.BeginFunc(ctx, s.pool, fn); err == nil || !pgconn.SafeToRetry(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// inFeed runs fn in a transaction that holds the feed's lock, and notifies
// the feed's listeners when it commits.
func (s *Store) inFeed(ctx context.Context, lock int64, feed string, fn func(pgx.Tx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lock); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT pg_notify('waisteer', $1)", feed)
		return err
	})
}

// PutRoom stores a room, replacing its descriptor and key log head.
func (s *Store) PutRoom(ctx context.Context, r store.Room) error {
	return s.inFeed(ctx, lockChanges, "changes", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO waisteer.rooms (id, descriptor, key_log_head) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET descriptor = excluded.descriptor, key_log_head = excluded.key_log_head`,
			r.ID[:], nonNil(r.Descriptor), r.KeyLogHead); err != nil {
			return err
		}
		return s.addChange(ctx, tx, "room", r.ID)
	})
}

// addChange numbers a change of the room for the other servers (the feed
// of changes: kind "room" or "policy"); the changes' lock is held.
func (s *Store) addChange(ctx context.Context, tx pgx.Tx, kind string, room sig.Hash) error {
	_, err := tx.Exec(ctx, "INSERT INTO waisteer.changes (seq, writer, kind, room) VALUES (nextval('waisteer.feed'), $1, $2, $3)", s.instance, kind, room[:])
	return err
}

// Rooms returns every room held.
func (s *Store) Rooms(ctx context.Context) ([]store.Room, error) {
	rows, err := s.pool.Query(ctx, "SELECT id, descriptor, key_log_head FROM waisteer.rooms ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rs []store.Room
	for rows.Next() {
		var id, desc, head []byte
		if err := rows.Scan(&id, &desc, &head); err != nil {
			return nil, err
		}
		h, err := hash(id)
		if err != nil {
			return nil, err
		}
		rs = append(rs, store.Room{ID: h, Descriptor: nonNil(desc), KeyLogHead: head})
	}
	return rs, rows.Err()
}

// PutPolicy stores a policy by digest and, with active, makes it the room's
// active policy.
func (s *Store) PutPolicy(ctx context.Context, room sig.Hash, digest sig.Hash, raw []byte, active bool) error {
	put := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO waisteer.policies (digest, room, raw) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING",
			digest[:], room[:], nonNil(raw))
		return err
	}
	if !active {
		return s.inTx(ctx, put)
	}
	return s.inFeed(ctx, lockChanges, "changes", func(tx pgx.Tx) error {
		if err := put(tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO waisteer.active_policies (room, digest) VALUES ($1, $2)
			ON CONFLICT (room) DO UPDATE SET digest = excluded.digest`, room[:], digest[:]); err != nil {
			return err
		}
		return s.addChange(ctx, tx, "policy", room)
	})
}

// Policy returns the policy with the digest.
func (s *Store) Policy(ctx context.Context, digest sig.Hash) ([]byte, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, "SELECT raw FROM waisteer.policies WHERE digest = $1", digest[:]).Scan(&raw)
	return nonNil(raw), notFound(err)
}

// ActivePolicy returns the room's active policy.
func (s *Store) ActivePolicy(ctx context.Context, room sig.Hash) (sig.Hash, []byte, error) {
	var d, raw []byte
	err := s.pool.QueryRow(ctx, `SELECT a.digest, p.raw FROM waisteer.active_policies a
		JOIN waisteer.policies p ON p.digest = a.digest WHERE a.room = $1`, room[:]).Scan(&d, &raw)
	if err != nil {
		return sig.Hash{}, nil, notFound(err)
	}
	h, err := hash(d)
	return h, nonNil(raw), err
}

// PutRecords stores the records not yet held, in one transaction, and
// reports which were new; of one given twice, the first.
func (s *Store) PutRecords(ctx context.Context, rs []store.Record) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	added := make([]bool, len(rs))
	if len(rs) == 0 {
		return added, nil
	}
	digests, rooms, hops, raws := make([][]byte, len(rs)), make([][]byte, len(rs)), make([][]byte, len(rs)), make([][]byte, len(rs))
	starts, ends := make([]int64, len(rs)), make([]int64, len(rs))
	for i := range rs {
		r := &rs[i]
		digests[i], rooms[i], hops[i], raws[i] = r.Digest[:], r.Room[:], r.Hop[:], nonNil(r.Raw)
		starts[i], ends[i] = i64(r.Start), i64(r.End)
	}
	err := s.inFeed(ctx, lockRecords, "records", func(tx pgx.Tx) error {
		clear(added)
		rows, err := tx.Query(ctx, `INSERT INTO waisteer.records (digest, seq, writer, room, hop, start_t, end_t, raw)
			SELECT d, nextval('waisteer.feed'), $7, r, h, s, e, w
			FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[], $5::bigint[], $6::bytea[]) WITH ORDINALITY AS u(d, r, h, s, e, w, i)
			ORDER BY i
			ON CONFLICT (digest) DO NOTHING RETURNING digest`,
			digests, rooms, hops, starts, ends, raws, s.instance)
		if err != nil {
			return err
		}
		defer rows.Close()
		fresh := map[sig.Hash]bool{}
		for rows.Next() {
			var d []byte
			if err := rows.Scan(&d); err != nil {
				return err
			}
			h, err := hash(d)
			if err != nil {
				return err
			}
			fresh[h] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range rs {
			if fresh[rs[i].Digest] {
				added[i] = true
				delete(fresh, rs[i].Digest) // a later copy was not new
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// Record returns the WMH1 bytes of the record with the digest.
func (s *Store) Record(ctx context.Context, digest sig.Hash) ([]byte, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, "SELECT raw FROM waisteer.records WHERE digest = $1", digest[:]).Scan(&raw)
	return nonNil(raw), notFound(err)
}

// Records calls fn for each record of the room whose end is after since, in
// ascending order of end and then digest (the bbolt store's order).
func (s *Store) Records(ctx context.Context, room sig.Hash, since uint64, fn func(store.Record) error) error {
	rows, err := s.pool.Query(ctx, `SELECT digest, hop, start_t, end_t, raw FROM waisteer.records
		WHERE room = $1 AND end_t > $2 ORDER BY end_t, digest`, room[:], i64(since))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var d, hop, raw []byte
		var start, end int64
		if err := rows.Scan(&d, &hop, &start, &end, &raw); err != nil {
			return err
		}
		r, err := recordOf(d, room[:], hop, start, end, raw)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// recordOf is a record as waisteer.records holds it.
func recordOf(digest, room, hop []byte, start, end int64, raw []byte) (store.Record, error) {
	r := store.Record{Start: u64(start), End: u64(end), Raw: nonNil(raw)}
	var err1, err2 error
	r.Digest, err1 = hash(digest)
	r.Room, err2 = hash(room)
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("postgres: a record does not read: %w", err)
	}
	if len(hop) != len(r.Hop) {
		return r, fmt.Errorf("postgres: record %s's hop key has %d bytes", r.Digest, len(hop))
	}
	copy(r.Hop[:], hop)
	return r, nil
}

// PutDecisions stores the decisions not yet held and the snapshots they
// reference, in one transaction; a refusal writes nothing.
func (s *Store) PutDecisions(ctx context.Context, ev []store.Evidence, ds []store.Decision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rows := make([][]byte, len(ds))
	for i := range ds {
		var err error
		if rows[i], err = store.AppendDecisionRow(nil, &ds[i]); err != nil {
			return err
		}
	}
	if len(ds) == 0 {
		return nil
	}
	var fresh map[context3]int64
	var after map[sig.Hash]frontier // the rooms' logs once committed
	err := s.inFeed(ctx, lockDecisions, "decisions", func(tx pgx.Tx) error {
		fresh = map[context3]int64{}
		// Each decision once; one held already is left as it is (ON
		// CONFLICT below): a decision's bytes are its digest's.
		seen := make(map[sig.Hash]bool, len(ds))
		var todo []int
		for i := range ds {
			if !seen[ds[i].Digest] {
				seen[ds[i].Digest] = true
				todo = append(todo, i)
			}
		}
		snapshots, err := s.snapshotIDs(ctx, tx, ev, ds, todo)
		if err != nil {
			return err
		}
		digests, rowsOf := make([][]byte, 0, len(todo)), make([][]byte, 0, len(todo))
		ts, ctxs, snaps := make([]int64, 0, len(todo)), make([]int64, 0, len(todo)), make([]int64, 0, len(todo))
		for _, i := range todo {
			d := &ds[i]
			c := context3{d.Room, d.Policy, d.Signer}
			id, err := s.contextID(ctx, tx, c, fresh)
			if err != nil {
				return err
			}
			digests, rowsOf = append(digests, d.Digest[:]), append(rowsOf, rows[i])
			ts, ctxs, snaps = append(ts, i64(d.T)), append(ctxs, id), append(snaps, snapshots[d.Evidence])
		}
		rs, err := tx.Query(ctx, `INSERT INTO waisteer.decisions (digest, seq, writer, t, context, snapshot, row)
			SELECT d, nextval('waisteer.feed'), $6, t, c, s, r
			FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[]) WITH ORDINALITY AS u(d, t, c, s, r, i)
			ORDER BY i ON CONFLICT (digest) DO NOTHING RETURNING digest`, digests, ts, ctxs, snaps, rowsOf, s.instance)
		if err != nil {
			return err
		}
		defer rs.Close()
		added := map[sig.Hash]bool{}
		for rs.Next() {
			var b []byte
			if err := rs.Scan(&b); err != nil {
				return err
			}
			h, err := hash(b)
			if err != nil {
				return err
			}
			added[h] = true
		}
		if err := rs.Err(); err != nil {
			return err
		}
		var logged []store.Decision
		for _, i := range todo {
			if added[ds[i].Digest] {
				logged = append(logged, ds[i])
			}
		}
		after, err = s.appendLogs(ctx, tx, logged)
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	for c, id := range fresh {
		s.contexts[c] = id
	}
	maps.Copy(s.frontiers, after)
	s.mu.Unlock()
	return nil
}

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

// snapshotIDs returns the ids of the snapshots the decisions ds[todo]
// reference, writing those given in ev that are not held. Those held are
// locked (FOR KEY SHARE) to the commit, so that Prune cannot remove one that
// a decision written here is about to reference.
func (s *Store) snapshotIDs(ctx context.Context, tx pgx.Tx, ev []store.Evidence, ds []store.Decision, todo []int) (map[sig.Hash]int64, error) {
	var keys [][]byte
	need := map[sig.Hash]bool{}
	for _, i := range todo {
		if k := ds[i].Evidence; !need[k] {
			need[k] = true
			keys = append(keys, k[:])
		}
	}
	ids := map[sig.Hash]int64{}
	scan := func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id int64
			var k []byte
			if err := rows.Scan(&id, &k); err != nil {
				return err
			}
			h, err := hash(k)
			if err != nil {
				return err
			}
			ids[h] = id
		}
		return rows.Err()
	}
	rows, err := tx.Query(ctx, "SELECT id, key FROM waisteer.snapshots WHERE key = ANY($1) ORDER BY id FOR KEY SHARE", keys)
	if err != nil {
		return nil, err
	}
	if err := scan(rows); err != nil {
		return nil, err
	}
	var newKeys, bodies [][]byte
	for _, k := range keys {
		h := sig.Hash(k)
		if _, ok := ids[h]; ok {
			continue
		}
		j := slices.IndexFunc(ev, func(e store.Evidence) bool { return e.Key == h })
		if j < 0 {
			return nil, fmt.Errorf("%w: %s", store.ErrSnapshotMissing, h)
		}
		if sha256.Sum256(ev[j].Body) != h {
			return nil, fmt.Errorf("store: snapshot %s is not the SHA-256 of its body", h)
		}
		newKeys, bodies = append(newKeys, k), append(bodies, nonNil(ev[j].Body))
	}
	if len(newKeys) == 0 {
		return ids, nil
	}
	rows, err = tx.Query(ctx, `INSERT INTO waisteer.snapshots (key, body) SELECT k, b FROM unnest($1::bytea[], $2::bytea[]) AS u(k, b)
		RETURNING id, key`, newKeys, bodies)
	if err != nil {
		return nil, err
	}
	if err := scan(rows); err != nil {
		return nil, err
	}
	return ids, nil
}

// contextID returns the id of c, adding it when it is not held.
func (s *Store) contextID(ctx context.Context, tx pgx.Tx, c context3, fresh map[context3]int64) (int64, error) {
	if id, ok := fresh[c]; ok {
		return id, nil
	}
	s.mu.Lock()
	id, ok := s.contexts[c]
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	err := tx.QueryRow(ctx, `WITH n AS (
			INSERT INTO waisteer.contexts (room, policy, signer) VALUES ($1, $2, $3)
			ON CONFLICT (room, policy, signer) DO NOTHING RETURNING id)
		SELECT id FROM n UNION ALL SELECT id FROM waisteer.contexts WHERE room = $1 AND policy = $2 AND signer = $3`,
		c.room[:], c.policy[:], c.signer[:]).Scan(&id)
	if err != nil {
		return 0, err
	}
	fresh[c] = id
	return id, nil
}

// Decision returns the stored decision with the digest.
func (s *Store) Decision(ctx context.Context, digest sig.Hash) (store.Decision, error) {
	var t int64
	var room, policy, signer, key, row []byte
	err := s.pool.QueryRow(ctx, `SELECT d.t, c.room, c.policy, c.signer, n.key, d.row FROM waisteer.decisions d
		JOIN waisteer.contexts c ON c.id = d.context JOIN waisteer.snapshots n ON n.id = d.snapshot
		WHERE d.digest = $1`, digest[:]).Scan(&t, &room, &policy, &signer, &key, &row)
	if err != nil {
		return store.Decision{}, notFound(err)
	}
	d := store.Decision{Digest: digest, T: u64(t)}
	if err := store.ParseDecisionRow(row, &d); err != nil {
		return store.Decision{}, fmt.Errorf("postgres: decision %s: %w", digest, err)
	}
	if d.Room, err = hash(room); err != nil {
		return store.Decision{}, err
	}
	if d.Policy, err = hash(policy); err != nil {
		return store.Decision{}, err
	}
	if d.Evidence, err = hash(key); err != nil {
		return store.Decision{}, err
	}
	if len(signer) != len(d.Signer) {
		return store.Decision{}, fmt.Errorf("postgres: decision %s's signer has %d bytes", digest, len(signer))
	}
	copy(d.Signer[:], signer)
	return d, nil
}

// EvidenceSnapshot returns the body of the snapshot with the key.
func (s *Store) EvidenceSnapshot(ctx context.Context, key sig.Hash) ([]byte, error) {
	var body []byte
	err := s.pool.QueryRow(ctx, "SELECT body FROM waisteer.snapshots WHERE key = $1", key[:]).Scan(&body)
	return nonNil(body), notFound(err)
}

// Prune removes the records whose end is before recordsBefore, then the
// decisions whose t is before decisionsBefore and the snapshots no decision
// left references, each group of at most the prune chunk in a transaction
// of its own, so that the writers go on between them.
func (s *Store) Prune(ctx context.Context, recordsBefore, decisionsBefore uint64) (store.PruneStats, error) {
	var st store.PruneStats
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM waisteer.records WHERE digest IN
			(SELECT digest FROM waisteer.records WHERE end_t < $1 ORDER BY end_t LIMIT $2)`, i64(recordsBefore), s.chunk)
		if err != nil {
			return st, err
		}
		st.Records += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(s.chunk) {
			break
		}
	}
	for {
		var n, gone int
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			n, gone = 0, 0
			rows, err := tx.Query(ctx, `DELETE FROM waisteer.decisions WHERE digest IN
				(SELECT digest FROM waisteer.decisions WHERE t < $1 ORDER BY t LIMIT $2) RETURNING snapshot`, i64(decisionsBefore), s.chunk)
			if err != nil {
				return err
			}
			defer rows.Close()
			var snaps []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return err
				}
				n++
				if !slices.Contains(snaps, id) {
					snaps = append(snaps, id)
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(snaps) == 0 {
				return nil
			}
			gone, err = pruneSnapshots(ctx, tx, snaps)
			return err
		})
		if err != nil {
			return st, err
		}
		st.Decisions += n
		st.Snapshots += gone
		if n < s.chunk {
			return st, nil
		}
	}
}

// pruneSnapshots removes those of the snapshots no decision references. A
// writer that has just referenced one holds it locked; the removal then
// fails on the reference (a foreign key violation) once that writer
// commits, and the snapshot stays: that part is undone alone, at its
// savepoint, and the next Prune tries again.
func pruneSnapshots(ctx context.Context, tx pgx.Tx, ids []int64) (int, error) {
	var gone int
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		tag, err := sp.Exec(ctx, `DELETE FROM waisteer.snapshots n WHERE n.id = ANY($1)
			AND NOT EXISTS (SELECT 1 FROM waisteer.decisions d WHERE d.snapshot = n.id)`, ids)
		gone = int(tag.RowsAffected())
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" { // foreign_key_violation
		return 0, nil
	}
	return gone, err
}

// Secret returns the secret of that name, made at its first call by
// whichever instance asks first.
func (s *Store) Secret(ctx context.Context, name string, n int) ([]byte, error) {
	if n <= 0 || n > 1024 {
		return nil, fmt.Errorf("store: a secret of %d bytes", n)
	}
	v := make([]byte, n)
	if _, err := rand.Read(v); err != nil {
		return nil, fmt.Errorf("store: making a secret: %w", err)
	}
	var held []byte
	var err error
	// Of two instances asking first at once, the one whose insert waited
	// for the other's sees neither row in its statement's snapshot: it asks
	// again, and then reads the other's.
	for range 2 {
		err = s.pool.QueryRow(ctx, `WITH n AS (
				INSERT INTO waisteer.secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value)
			SELECT value FROM n UNION ALL SELECT value FROM waisteer.secrets WHERE name = $1`, name, v).Scan(&held)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if len(held) != n {
		return nil, fmt.Errorf("store: the secret %q is %d bytes, not %d", name, len(held), n)
	}
	return held, nil
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

// PutKeyEpoch keeps a head the room has had.
func (s *Store) PutKeyEpoch(ctx context.Context, room sig.Hash, e store.KeyEpoch) error {
	if e.From < 0 {
		return fmt.Errorf("postgres: a key epoch from %d", e.From)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO waisteer.key_epochs (room, seq, from_size, head, handover) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (room, seq) DO NOTHING`, room[:], i64(e.Seq), e.From, e.Head, e.Handover)
	return err
}

// KeyEpochs returns the heads the room has had.
func (s *Store) KeyEpochs(ctx context.Context, room sig.Hash) ([]store.KeyEpoch, error) {
	rows, err := s.pool.Query(ctx, "SELECT seq, from_size, head, handover FROM waisteer.key_epochs WHERE room = $1 ORDER BY seq", room[:])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var es []store.KeyEpoch
	for rows.Next() {
		var seq, from int64
		var e store.KeyEpoch
		if err := rows.Scan(&seq, &from, &e.Head, &e.Handover); err != nil {
			return nil, err
		}
		e.Seq, e.From = u64(seq), from
		es = append(es, e)
	}
	return es, rows.Err()
}
