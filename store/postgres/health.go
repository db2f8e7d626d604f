package postgres

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waisteer/waisteer/internal/retry"
	"github.com/waisteer/waisteer/store"
)

var _ store.Health = (*Store)(nil)

// health is whether the database answers (issue 26 item 6), as every
// statement and connection of the store's pool tells it (a pgx tracer): a
// statement that fails for want of the database marks it down, and one that
// the database answers marks it up again. Each change is logged once, down
// with its reason and up with the outage's length, so that an outage is two
// lines however many loops and requests retry meanwhile. While it is down,
// a probe connects to the database every probeMax at most, so that the
// store is known back within that of its return even when nothing else
// asks.
type health struct {
	log   *slog.Logger
	probe func(context.Context) error

	up      atomic.Bool
	outages atomic.Uint64
	changed atomic.Int64 // when up last changed, Unix ns
	conns   sync.Map     // *pgx.Conn → when it was made, Unix ns

	mu      sync.Mutex
	since   time.Time     // when the outage began
	back    chan struct{} // closed while up
	probing bool
	ctx     context.Context // the probe's: ended by close
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// The probe's waits while the database is down: short, since a ping to a
// database that is down costs it nothing, and the servers' followers wait
// for it (issue 15: the others' records within 1 s).
const (
	probeFirst   = 50 * time.Millisecond
	probeMax     = 500 * time.Millisecond
	probeTimeout = 2 * time.Second
)

func newHealth(log *slog.Logger, probe func(context.Context) error) *health {
	h := &health{log: log, probe: probe, back: make(chan struct{})}
	close(h.back)
	h.up.Store(true)
	h.ctx, h.stop = context.WithCancel(context.Background())
	return h
}

// close stops the probe.
func (h *health) close() {
	h.stop()
	h.wg.Wait()
}

// Up is false from a failure to reach the database to the next statement it
// answers.
func (s *Store) Up() bool { return s.health.up.Load() }

// Outages counts the database's outages since the store opened.
func (s *Store) Outages() uint64 { return s.health.outages.Load() }

// Back is closed once the database answers: at once while it does.
func (s *Store) Back() <-chan struct{} {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.back
}

// saw notes a statement's or a connection's outcome, on conn: one the
// database answered, even with a refusal, says it is up; one that failed
// for want of it, down; any other (a transaction already closed, the
// caller's own cancellation) says nothing. Nor does one that began before
// the last change of state: statements in flight when the database went
// end in any order. And only a connection made since the outage began can
// end it: while a database shuts down, a backend not yet stopped still
// answers for a few milliseconds on a connection made before.
func (h *health) saw(ctx context.Context, conn *pgx.Conn, err error) {
	if began, ok := ctx.Value(beganKey{}).(int64); ok && began < h.changed.Load() {
		return
	}
	var pe *pgconn.PgError
	switch {
	case err == nil || errors.As(err, &pe) && !unreachable(err):
		if h.up.Load() {
			return
		}
		if at, ok := h.conns.Load(conn); ok && at.(int64) >= h.changed.Load() {
			h.markUp()
		}
	case errors.Is(ctx.Err(), context.Canceled):
		// The caller gave up (a player that went away), whatever pgx
		// made of it: the database said nothing.
	case unreachable(err):
		h.markDown(err)
	}
}

// connected notes when conn was made; forget drops it once closed.
func (h *health) connected(conn *pgx.Conn) { h.conns.Store(conn, time.Now().UnixNano()) }
func (h *health) forget(conn *pgx.Conn)    { h.conns.Delete(conn) }

// beganKey is the context key of when a traced statement or connection
// began, Unix ns.
type beganKey struct{}

func began(ctx context.Context) context.Context {
	return context.WithValue(ctx, beganKey{}, time.Now().UnixNano())
}

func (h *health) markDown(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.up.Load() {
		return
	}
	h.up.Store(false)
	h.outages.Add(1)
	h.since = time.Now()
	h.changed.Store(h.since.UnixNano())
	h.back = make(chan struct{})
	h.log.Warn("shared store unreachable", "err", err)
	if !h.probing && h.ctx.Err() == nil {
		h.probing = true
		h.wg.Add(1)
		go h.run()
	}
}

func (h *health) markUp() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.up.Load() {
		return
	}
	h.up.Store(true)
	h.changed.Store(time.Now().UnixNano())
	// Said before Back is closed: whoever waits on Back finds it said.
	h.log.Info("shared store back", "after", time.Since(h.since).Round(time.Millisecond).String())
	close(h.back)
}

// run pings the database until it is up, or the store closes.
func (h *health) run() {
	defer h.wg.Done()
	b := retry.Backoff{First: probeFirst, Max: probeMax}
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(b.Next()):
		}
		h.mu.Lock()
		if h.up.Load() {
			h.probing = false // a later outage starts a probe of its own
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(h.ctx, probeTimeout)
		if h.probe(ctx) == nil {
			h.markUp()
		}
		cancel()
	}
}

// unreachable says whether err is the database's absence rather than its
// answer: a connection that failed or was lost, a timeout, or the server
// shutting down, in recovery or out of connections (SQLSTATE classes 08,
// 53, 57 and 58; 57014 is a statement timeout). A constraint or a query the
// database refused is an answer: it is up.
func unreachable(err error) bool {
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, pgx.ErrTxClosed) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "53", "57", "58":
			return true
		}
		return false
	}
	return true
}

// tracer tells the store's health what each statement and connection of
// the pool met.
type tracer struct{ h *health }

var (
	_ pgx.QueryTracer   = tracer{}
	_ pgx.ConnectTracer = tracer{}
	_ pgx.BatchTracer   = tracer{}
)

func (tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return began(ctx)
}

func (t tracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	t.h.saw(ctx, conn, d.Err)
}

func (tracer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return began(ctx)
}

// TraceConnectEnd marks the database down when a connection fails; one
// that succeeds says nothing until a statement on it does.
func (t tracer) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if d.Err != nil {
		t.h.saw(ctx, nil, d.Err)
		return
	}
	t.h.connected(d.Conn)
}

func (tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return began(ctx)
}

func (t tracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.h.saw(ctx, conn, d.Err)
}

func (t tracer) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchEndData) {
	t.h.saw(ctx, conn, d.Err)
}
