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
// misses nothing (migrate.go). Each instance appends a room's decisions to
// a log of its own (issue 31, schema 5: log.go, group.go), sealed when it
// closes or is gone (live.go), so that no instance's commit waits for
// another's.
package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// Store is the store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	chunk    int
	instance int32  // this opening's row in waisteer.instances: the writer of its rows
	server   string // "host pid" of this opening, as Logs names a log's writer

	mu       sync.Mutex
	contexts map[context3]int64 // ids of the contexts known to be held
	// frontiers are this server's own logs as it last appended to them.
	frontiers map[int32]frontier
	// snapshotIDs are the snapshots' ids this server's groups read or
	// wrote, for the next to name them at once (once.go).
	snapshotIDs map[sig.Hash]int64
	own         map[sig.Hash]ownLog // the rooms' logs this server appends to
	loads       *Loads              // the shared table on this store, closed first

	live    liveness      // how often this opening says it is alive, and when others are gone
	upSince atomic.Int64  // since when (UnixNano) every beat reached the database; 0 after a failed one
	listed  atomic.Int64  // when Logs last sealed the gone servers' logs, ns since 1970: at most once a beat
	stop    chan struct{} // closed by Close: the beat stops
	beating sync.WaitGroup
	closing atomic.Bool // set by Close: no log is made any more

	health  *health // whether the database answers (health.go)
	metrics *storeMetrics
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
	live               liveness
}

// liveness is how often an opening of the store refreshes its instance's
// seen (beat), how long one not refreshed is alive still (gone), and every
// how many beats it seals the logs of the gone (sweep).
type liveness struct {
	beat, gone time.Duration
	sweep      int
}

// The liveness of SPEC-NOTES "One log per server and room": a beat each
// second, gone after ten without one.
var defaultLiveness = liveness{beat: time.Second, gone: 10 * time.Second, sweep: 5}

// The timeouts a DSN that names none gets (issue 26 item 6): a database
// that takes a connection and never answers fails the server's start
// within connect, rather than hanging it; a statement the database holds
// for longer than statement is cancelled by the database itself.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultStatementTimeout = 10 * time.Second
)

func defaultOptions() options {
	return options{chunk: defaultPruneChunk, log: slog.Default(), connect: DefaultConnectTimeout, statement: DefaultStatementTimeout, live: defaultLiveness}
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
	s := &Store{chunk: o.chunk, contexts: map[context3]int64{}, frontiers: map[int32]frontier{}, snapshotIDs: map[sig.Hash]int64{}, own: map[sig.Hash]ownLog{},
		live: o.live, stop: make(chan struct{}), metrics: newStoreMetrics()}
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
	s.server = host + " " + strconv.Itoa(os.Getpid())
	s.upSince.Store(time.Now().UnixNano())
	s.beating.Add(1)
	go s.beat()
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
	// The store's statements are prepared once a connection (pgx's cache)
	// and their plans do not depend on the values: a group's insert of
	// unnest()ed arrays was planned again at every execution (a custom
	// plan, costed on the arrays' lengths), 11 % of PostgreSQL's CPU at
	// saturation (issue 31, perf). Its generic plan is made once.
	if _, ok := cc.RuntimeParams["plan_cache_mode"]; statement && !ok && !strings.Contains(cc.RuntimeParams["options"], "plan_cache_mode") {
		cc.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
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
// sessions), seals this server's logs at their size (nothing is appended
// to them again: a server started anew makes logs of its own), then closes
// the connections. A group committing meanwhile is waited for, and its
// leaves are in the sealed log; one that begins after fails.
func (s *Store) Close() error {
	if s.closing.Swap(true) {
		return nil
	}
	close(s.stop)
	s.beating.Wait()
	s.mu.Lock()
	l := s.loads
	s.loads = nil
	s.mu.Unlock()
	var err error
	if l != nil {
		err = l.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, serr := s.pool.Exec(ctx, "UPDATE waisteer.logs SET sealed = size WHERE writer = $1 AND sealed IS NULL", s.instance); serr != nil && err == nil {
		err = fmt.Errorf("postgres: sealing this server's logs: %w", serr)
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

// PutKeyEpoch keeps a head the room has had, and its start in log e.Log
// of the room: the head's bytes once for its seq (the first put's), the
// start once for its seq and log (the first put's).
func (s *Store) PutKeyEpoch(ctx context.Context, room sig.Hash, e store.KeyEpoch) error {
	if e.From < 0 {
		return fmt.Errorf("postgres: a key epoch from %d", e.From)
	}
	if e.Log < 0 || e.Log > math.MaxInt32 {
		return errNoSuchLog(room, e.Log)
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var held bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM waisteer.logs WHERE room = $1 AND n = $2)", room[:], e.Log).Scan(&held); err != nil {
			return err
		}
		if !held {
			return errNoSuchLog(room, e.Log)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO waisteer.key_epochs (room, seq, head) VALUES ($1, $2, $3) ON CONFLICT (room, seq) DO NOTHING",
			room[:], i64(e.Seq), e.Head); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO waisteer.key_epoch_starts (room, seq, log, from_size, handover) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (room, seq, log) DO NOTHING`, room[:], i64(e.Seq), e.Log, e.From, e.Handover)
		return err
	})
}

// KeyEpochs returns the heads the room has had, each with each of its
// starts, by seq and then log.
func (s *Store) KeyEpochs(ctx context.Context, room sig.Hash) ([]store.KeyEpoch, error) {
	rows, err := s.pool.Query(ctx, `SELECT k.seq, t.log, t.from_size, k.head, t.handover FROM waisteer.key_epochs k
		JOIN waisteer.key_epoch_starts t ON t.room = k.room AND t.seq = k.seq WHERE k.room = $1 ORDER BY k.seq, t.log`, room[:])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var es []store.KeyEpoch
	for rows.Next() {
		var seq, from int64
		var n int32
		var e store.KeyEpoch
		if err := rows.Scan(&seq, &n, &from, &e.Head, &e.Handover); err != nil {
			return nil, err
		}
		e.Seq, e.Log, e.From = u64(seq), int64(n), from
		es = append(es, e)
	}
	return es, rows.Err()
}
