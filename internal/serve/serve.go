// Package serve runs the steering server (internal/server) over HTTP as
// `waisteer serve` does: the rooms of a TOML configuration (the schema is
// cmd/waisteer/testdata/serve/example.toml, key by key), read and checked
// before anything listens; a durable store; structured logs; bounded
// timeouts; HTTPS on either engine, its certificate read again on SIGHUP
// (tls.go, internal/tlscert); and a graceful shutdown that answers the
// requests in flight and writes the pending decisions before the store
// closes.
package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/waisteer/waisteer/internal/fastserve"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/store/postgres"
)

// The HTTP server's limits when the configuration leaves them out. A
// steering request is a GET with a short query; the largest body is a hop's
// POST of records, which the server's handler bounds itself.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// StoreFile is the name of the store's file in data_dir.
const StoreFile = "waisteer.db"

// Run opens cfg's store, listens on cfg's address and serves
// (Serve) until ctx is done. On SIGHUP it reads cfg's file again and
// steers by its pools (a configuration Load read).
func Run(ctx context.Context, stop func(), logger *slog.Logger, cfg *Config, ready func(url string)) error {
	if cfg.Reloads == nil && cfg.source != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer func() { signal.Stop(hup); close(hup) }()
		reloads := make(chan struct{}, 1)
		go func() {
			for range hup {
				select {
				case reloads <- struct{}{}:
				default: // one is already waiting
				}
			}
		}()
		cfg.Reloads = reloads
	}
	st, loads, err := OpenStore(ctx, cfg.Store, cfg.DataDir, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		st.Close()
		return err
	}
	return Serve(ctx, stop, logger, ln, cfg, st, loads, ready)
}

// NewLogger makes the structured logger of -log and -log-level.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log %q: text or json", format)
}

// OpenStore opens the store of sc: on PostgreSQL, migrating its schema
// first (one instance at a time); otherwise the bbolt store in dir, or
// everything in memory when dir is empty.
func OpenStore(ctx context.Context, sc StoreConfig, dir string, logger *slog.Logger) (store.Store, store.Loads, error) {
	if sc.Engine == StorePostgres {
		st, err := postgres.Open(ctx, sc.DSN, postgres.WithMigrate(), postgres.WithLogger(logger),
			postgres.WithTimeouts(sc.ConnectTimeout, sc.StatementTimeout))
		if err != nil {
			return nil, nil, fmt.Errorf("opening the store: %w", err)
		}
		loads, err := postgres.NewLoads(ctx, st, logger)
		if err != nil {
			st.Close()
			return nil, nil, fmt.Errorf("opening the shared table of loads: %w", err)
		}
		logger.Info("store opened", "engine", StorePostgres, "schema", postgres.Version)
		return st, loads, nil
	}
	if dir == "" {
		logger.Warn("no data_dir: the store is in memory, and records and decisions are lost when the server stops")
		return store.NewMemory(), store.NewLoads(), nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, StoreFile)
	st, err := store.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the store %s: %w", path, err)
	}
	logger.Info("store opened", "path", path, "sync", st.JournalSync())
	return st, store.NewLoads(), nil
}

// spareProc runs spare once in a process, whichever of its servers starts
// first.
var spareProc sync.Once

// spare gives the Go scheduler one processor more than it would take by
// itself, unless GOMAXPROCS is set. The group committer's fdatasync is a
// blocking system call, and the processor that makes it is held in the call
// until the runtime's monitor takes it back, which it does only after a
// tick that grows to 10 ms while it finds nothing to take: on a server of
// one core (issue 14 pins one), nothing was decided while the disk synced,
// the core idled through every sync, and the groups shrank to one
// decision. With a spare processor the other requests are decided and
// signed on the same core meanwhile, and a group holds what was decided
// during the last sync.
//
// It also lets the heap grow to five times what is live before a
// collection (GOGC 400), unless GOGC is set: the server's live heap is
// small (the loads' table, the evidence) beside what each request
// allocates and drops, so at Go's default the collector runs every few
// thousand requests (issue 14's profiles: allocation and the collector's
// assists fell from 6.3 % to 2.3 % of a decision's CPU).
func spare() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGOGC)
	}
}

// gcPercent is the collector's GOGC as spare left it: the environment's,
// or serverGOGC.
func gcPercent() string {
	if v := os.Getenv("GOGC"); v != "" {
		return v
	}
	return strconv.Itoa(serverGOGC)
}

// serverGOGC is the GOGC the server runs with when GOGC is not set.
const serverGOGC = 400

// Serve serves the rooms of cfg on ln until ctx is done, then shuts down in
// order: no new connections and every request in flight finished
// (http.Server.Shutdown), the server's pending decisions written
// (server.Close), then the store closed. stop, when not nil, is called when
// the shutdown starts, so that a second signal ends the process at once;
// ready, when not nil, once the server is serving, with its URL. st is
// closed whatever happens.
func Serve(ctx context.Context, stop func(), logger *slog.Logger, ln net.Listener, cfg *Config, st store.Store, loads store.Loads, ready func(url string)) (err error) {
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
		} else {
			logger.Info("store closed")
		}
		if err == nil {
			logger.Info("stopped")
		}
	}()
	spareProc.Do(spare)
	srv, err := server.New(ctx, cfg.Server, st, loads)
	if err != nil {
		ln.Close()
		return err
	}
	front := newFront(cfg, srv, logger, ln)
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	served := make(chan error, 1)
	go func() { served <- front.serve() }()
	if cfg.Reloads != nil && cfg.source != "" {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-cfg.Reloads:
					guard.Do(logger, "reload", func() { reload(ctx, cfg, srv, logger) })
				}
			}
		}()
	}
	u := scheme + "://" + ln.Addr().String()
	if cfg.Cert != nil {
		logCert(logger, "certificate", cfg.Cert)
	}
	logger.Info("listening", "url", u, "rooms", len(cfg.Server.Rooms), "pools", len(cfg.Server.Pools), "engine", cfg.HTTP.Engine, "gomaxprocs", runtime.GOMAXPROCS(0), "gogc", gcPercent())
	if ready != nil {
		ready(u)
	}

	var serveErr error
	select {
	case serveErr = <-served: // the listener failed: still flush and close
	case <-ctx.Done():
	}
	if stop != nil {
		stop()
	}
	logger.Info("shutting down", "timeout", cfg.HTTP.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if serr := front.shutdown(sctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("finishing the requests in flight: %w", serr))
		front.close()
	}
	if serveErr == nil {
		if e := <-served; !errors.Is(e, http.ErrServerClosed) {
			serveErr = e
		}
	}
	// The pending decisions get their own time: a request that outlived
	// the shutdown's must not cost the decisions already answered.
	cctx, ccancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer ccancel()
	if cerr := srv.Close(cctx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("writing the pending decisions: %w", cerr))
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(serveErr, err)
	}
	return err
}

// The HTTP servers serve can run (http.engine).
const (
	EngineFast = "fasthttp" // plain HTTP/1.1: fasthttp, the steering route on its own requests
	EngineStd  = "net/http" // net/http, with HTTP/2 over TLS
)

// front is the HTTP server in front of the steering server.
type front struct {
	serve    func() error // returns http.ErrServerClosed, or nil, once shut down
	shutdown func(context.Context) error
	close    func()
}

// newFront makes the HTTP server of cfg's engine for srv, on ln.
func newFront(cfg *Config, srv *server.Server, logger *slog.Logger, ln net.Listener) front {
	if cfg.HTTP.Engine == EngineFast {
		fs := srv.FastServer(server.FastLimits{
			ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, ReadTimeout: cfg.HTTP.ReadTimeout,
			WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
			MaxHeaderBytes: cfg.HTTP.MaxHeaderBytes, Logger: logger,
		})
		if cfg.TLS != nil {
			tc := cfg.TLS.Clone()
			tc.NextProtos = fastProtos
			ln = tls.NewListener(ln, tc)
		} else {
			ln = fastserve.Listener(ln) // a request's wait in one read
		}
		// fasthttp's Shutdown closes only the listeners Serve has taken
		// up, so the listener is closed here too: a Serve that had not
		// begun then returns at once.
		var shut atomic.Bool
		return front{
			serve: func() error {
				err := fs.Serve(ln)
				if shut.Load() {
					return http.ErrServerClosed
				}
				return err
			},
			shutdown: func(ctx context.Context) error {
				shut.Store(true)
				err := fs.ShutdownWithContext(ctx)
				ln.Close()
				return err
			},
			// After a shutdown that timed out: the requests left are
			// cut when the process ends.
			close: func() {},
		}
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    cfg.HTTP.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return front{
		serve: func() error {
			if cfg.TLS != nil {
				// ServeTLS, not Serve on a TLS listener: it sets up
				// HTTP/2 too. The certificate is cfg.Cert's (GetCertificate).
				hs.TLSConfig = cfg.TLS.Clone()
				hs.TLSConfig.NextProtos = stdProtos
				return hs.ServeTLS(ln, "", "")
			}
			return hs.Serve(ln)
		},
		shutdown: hs.Shutdown,
		close:    func() { hs.Close() },
	}
}
