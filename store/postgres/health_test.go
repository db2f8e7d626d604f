package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waisteer/waisteer/internal/pgtest"
)

// Issue 26 item 6: a database that accepts connections and never answers
// fails Open within 10 s with the reason (the default connect timeout,
// 5 s), where bd4ceba waited for as long as its context (serve's: for
// ever). The DSN's own connect_timeout wins over the default and over
// WithTimeouts.
func TestOpenSilentDatabase(t *testing.T) {
	addr := pgtest.Silent(t)
	for _, c := range []struct {
		name    string
		dsn     string
		opts    []Option
		atLeast time.Duration
		atMost  time.Duration
		says    string
	}{
		{"the default", "postgres://waisteer@" + addr + "/db?sslmode=disable", nil, DefaultConnectTimeout, 10 * time.Second, "within the connect timeout, 5s"},
		{"WithTimeouts", "postgres://waisteer@" + addr + "/db?sslmode=disable", []Option{WithTimeouts(time.Second, 0)}, time.Second, 3 * time.Second, "within the connect timeout, 1s"},
		{"the DSN's", "postgres://waisteer@" + addr + "/db?sslmode=disable&connect_timeout=1", []Option{WithTimeouts(4*time.Second, 0)}, time.Second, 3 * time.Second, "within the connect timeout, 1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The context is serve's: it never ends by itself. The test's
			// guard is only so that a hang fails rather than blocks.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				st, err := Open(ctx, c.dsn, append(c.opts, WithMigrate(), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))...)
				if err == nil {
					st.Close()
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(c.atMost):
				t.Fatalf("Open of a silent database had not returned after %v", c.atMost)
			}
			took := time.Since(start)
			if err == nil {
				t.Fatal("a silent database was opened")
			}
			if took < c.atLeast-100*time.Millisecond {
				t.Errorf("refused after %v, before the connect timeout %v", took, c.atLeast)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("the refusal %q does not say %q", err, c.says)
			}
			t.Logf("refused after %v: %v", took.Round(time.Millisecond), err)
		})
	}
}

// Issue 26 item 6: a DSN that names no statement timeout gets the default
// (10 s) or WithTimeouts'; one that names it, in its parameters or its
// options, keeps its own.
func TestStatementTimeout(t *testing.T) {
	base := server.Database(t)
	if _, err := Migrate(bg(t), base); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		query string
		opts  []Option
		want  string
	}{
		{"the default", "", nil, "10s"},
		{"WithTimeouts", "", []Option{WithTimeouts(0, 3*time.Second)}, "3s"},
		{"the DSN's parameter", "&statement_timeout=2500", []Option{WithTimeouts(0, 3*time.Second)}, "2500ms"},
		{"the DSN's options", "&options=-c%20statement_timeout%3D7s", nil, "7s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := Open(bg(t), base+c.query, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var got string
			if err := st.pool.QueryRow(bg(t), "SHOW statement_timeout").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("statement_timeout %q, want %q", got, c.want)
			}
		})
	}
	// The timeout is the database's: a statement longer than it fails.
	st, err := Open(bg(t), base, WithTimeouts(0, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.pool.Exec(bg(t), "SELECT pg_sleep(2)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Errorf("a statement of 2 s under a timeout of 200 ms: %v, want query_canceled (57014)", err)
	}
}

// countLog counts the lines a logger writes, by message.
type countLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *countLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *countLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.n[r.Message]++
	l.mu.Unlock()
	return nil
}
func (l *countLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *countLog) WithGroup(string) slog.Handler      { return l }

func (l *countLog) get(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[msg]
}

// Issue 26 item 6: with no request to tell it, a store whose database
// went away says so once, and says it is back within its probe's cap
// (500 ms, with jitter) of the database's return, once; Back is closed
// then. The loads' table meanwhile retries with a backoff, not every
// 50 ms: on bd4ceba it logged a line per retry.
func TestHealthOutage(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	log := &countLog{n: map[string]int{}}
	st, err := Open(bg(t), dsn, WithMigrate(), WithLogger(slog.New(log)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	loads, err := NewLoads(bg(t), st, slog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	defer loads.Close()
	if !st.Up() {
		t.Fatal("a store just opened is down")
	}
	select {
	case <-st.Back():
	default:
		t.Fatal("Back is not closed while the store is up")
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st.Up() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st.Up() {
		t.Fatal("the store is up 5 s after its database stopped")
	}
	back := st.Back()
	time.Sleep(3 * time.Second)
	retries := log.get("sharing the loads: retrying")
	// 50 ms doubling, each drawn in its upper half: in 3 s at most
	// 25+50+100+200+400+800+1600 ms fit, 7 waits, and an attempt each.
	if retries > 8 {
		t.Errorf("the loads' table retried %d times in 3 s, over the 8 of its backoff", retries)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	returned := time.Now()
	select {
	case <-back:
	case <-time.After(3 * time.Second):
		t.Fatal("Back not closed 3 s after the database's return")
	}
	if took := time.Since(returned); took > time.Second {
		t.Errorf("the store knew it was back %v after the database's return, over a second", took)
	}
	if !st.Up() || st.Outages() != 1 {
		t.Errorf("after one outage: up %v, outages %d", st.Up(), st.Outages())
	}
	if d, u := log.get("shared store unreachable"), log.get("shared store back"); d != 1 || u != 1 {
		t.Errorf("the outage logged %d lines unreachable and %d back, want one each", d, u)
	}
	t.Logf("the loads' table retried %d times in 3 s of outage; back %v after the return", retries, time.Since(returned).Round(time.Millisecond))
}

// unreachable reads the database's absence, not its answers: a refusal
// (a constraint, a syntax error) is an answer, a lost connection, a
// timeout or a server shutting down is not.
func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "23505"}, false}, // unique_violation
		{&pgconn.PgError{Code: "42601"}, false}, // syntax_error
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "42P01"}), false},
		{pgx.ErrNoRows, false},
		{pgx.ErrTxClosed, false},
		{&pgconn.PgError{Code: "57P01"}, true}, // admin_shutdown
		{&pgconn.PgError{Code: "57P03"}, true}, // cannot_connect_now
		{&pgconn.PgError{Code: "57014"}, true}, // query_canceled: a statement timeout
		{&pgconn.PgError{Code: "08006"}, true}, // connection_failure
		{&pgconn.PgError{Code: "53300"}, true}, // too_many_connections
		{io.ErrUnexpectedEOF, true},
		{context.DeadlineExceeded, true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A caller that gives up says nothing of the database: a player that went
// away mid-request must not start an outage; the store's own deadline
// (the committer's 5 s) does.
func TestHealthCallerCancels(t *testing.T) {
	st, _ := open(t)
	ctx, cancel := context.WithCancel(bg(t))
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if _, err := st.pool.Exec(ctx, "SELECT pg_sleep(2)"); err == nil {
		t.Fatal("a cancelled statement succeeded")
	}
	if !st.Up() || st.Outages() != 0 {
		t.Errorf("after a caller's cancellation: up %v, outages %d", st.Up(), st.Outages())
	}
	ctx, cancel = context.WithTimeout(bg(t), 100*time.Millisecond)
	defer cancel()
	if _, err := st.pool.Exec(ctx, "SELECT pg_sleep(2)"); err == nil {
		t.Fatal("a statement past its deadline succeeded")
	}
	if st.Up() || st.Outages() != 1 {
		t.Errorf("after a statement past its deadline: up %v, outages %d", st.Up(), st.Outages())
	}
	// The probe's connection ends it.
	select {
	case <-st.Back():
	case <-time.After(time.Second):
		t.Error("still down a second after a statement past its deadline, the database answering")
	}
}
