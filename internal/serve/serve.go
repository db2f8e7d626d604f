// Package serve runs the steering server (internal/server) over HTTP as
// `waisteer serve` does: the rooms of a TOML configuration (the schema is
// cmd/waisteer/testdata/serve/example.toml, key by key), read and checked
// before anything listens; a durable store; structured logs; bounded
// timeouts; and a graceful shutdown that answers the requests in flight and
// writes the pending decisions before the store closes.
package serve

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/files"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/tomlfile"
	"github.com/waisteer/waisteer/policy"
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
	logger.Info("store opened", "path", path)
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
			ln = tls.NewListener(ln, cfg.TLS)
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
				// ServeTLS, not Serve on a TLS listener: it offers HTTP/2 too.
				hs.TLSConfig = cfg.TLS
				return hs.ServeTLS(ln, "", "")
			}
			return hs.Serve(ln)
		},
		shutdown: hs.Shutdown,
		close:    func() { hs.Close() },
	}
}

// Config is a configuration file, read and checked.
type Config struct {
	Listen   string
	TLS      *tls.Config // nil: plain HTTP
	DataDir  string      // "": in memory (bbolt's engine)
	Store    StoreConfig
	HTTP     Limits
	Server   server.Config
	Warnings []string // what the operator should know, each placed in the file

	// source and getenv read the file again on SIGHUP (Run); "" for a
	// configuration Parse was given no file name of.
	source string
	getenv func(string) string
	// Reloads, when not nil, asks for the file to be read again and its
	// pools steered by (SIGHUP; Run sets it).
	Reloads <-chan struct{}
}

// The store's engines ([store] engine).
const (
	StoreBolt     = "bbolt"
	StorePostgres = "postgres"
)

// StoreConfig is the [store] table: the engine that keeps the server's
// state, and for PostgreSQL the database's DSN, read from the environment
// or a file named there, never from the configuration itself (a DSN may
// hold a password).
type StoreConfig struct {
	Engine string
	DSN    string
	// PostgreSQL's timeouts where the DSN names none (0: the store's
	// defaults, postgres.DefaultConnectTimeout and
	// postgres.DefaultStatementTimeout).
	ConnectTimeout, StatementTimeout time.Duration
}

// Limits are the HTTP server's: its engine and its bounds.
type Limits struct {
	Engine                                                                     string // EngineFast or EngineStd
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout, ShutdownTimeout time.Duration
	MaxHeaderBytes                                                             int
}

// DefaultLimits are the limits of a configuration that gives none, on
// fasthttp.
func DefaultLimits() Limits {
	return Limits{EngineFast, DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultWriteTimeout,
		DefaultIdleTimeout, DefaultShutdownTimeout, DefaultMaxHeaderBytes}
}

// The TOML schema (testdata/serve/example.toml). Pointers tell a key left
// out from a zero.
type serveFile struct {
	Listen            *string         `toml:"listen"`
	TLSCert           *string         `toml:"tls_cert"`
	TLSKey            *string         `toml:"tls_key"`
	DataDir           *string         `toml:"data_dir"`
	Store             *storeFile      `toml:"store"`
	OperatorTokenFile *string         `toml:"operator_token_file"`
	OperatorTokenEnv  *string         `toml:"operator_token_env"`
	SessionGrace      *string         `toml:"session_grace"`
	Retention         *string         `toml:"retention"`
	HTTP              httpFile        `toml:"http"`
	Room              []serveRoomFile `toml:"room"`
	// Pools: the station seed's [steering] table, and [[pool]] tables of
	// the same keys with a name and a path (internal/pool).
	Steering *pool.File  `toml:"steering"`
	Pool     []pool.File `toml:"pool"`
	// Front serves the origin's playlists with the steering line added.
	Front *frontFile `toml:"front"`
	// Limits are the steering routes' budgets (limits.go).
	Limits *limitsFile `toml:"limits"`
}

type storeFile struct {
	Engine  *string `toml:"engine"`
	DSN     *string `toml:"dsn"` // refused: a DSN may hold a password
	DSNEnv  *string `toml:"dsn_env"`
	DSNFile *string `toml:"dsn_file"`
	// Rooms the store holds and the configuration does not name are
	// refused at start unless this is true (server.Config).
	KeepForeignRooms *bool   `toml:"keep_foreign_rooms"`
	ConnectTimeout   *string `toml:"connect_timeout"`
	StatementTimeout *string `toml:"statement_timeout"`
}

type httpFile struct {
	Engine            *string `toml:"engine"`
	ReadHeaderTimeout *string `toml:"read_header_timeout"`
	ReadTimeout       *string `toml:"read_timeout"`
	WriteTimeout      *string `toml:"write_timeout"`
	IdleTimeout       *string `toml:"idle_timeout"`
	ShutdownTimeout   *string `toml:"shutdown_timeout"`
	MaxHeaderBytes    *int64  `toml:"max_header_bytes"`
}

type serveRoomFile struct {
	Descriptor  *string `toml:"descriptor"`
	KeyLog      *string `toml:"keylog"`
	Policy      *string `toml:"policy"`
	SteeringKey *string `toml:"steering_key"`
	// The pathways' health checks (issue 12 item 8), with a pool's keys
	// and ranges.
	CheckURLs      map[string]string `toml:"check_urls"`
	CheckEverys    *int64            `toml:"check_every_s"`
	CheckTimeoutMs *int64            `toml:"check_timeout_ms"`
	DownAfter      *int64            `toml:"down_after"`
	// Steering by what players report (issue 17 item 4), a pool's
	// [steering.qoe] keys less the pool's own.
	QoE *pool.QoEFile `toml:"qoe"`
}

// serveReader is what Load knows of the file while it reads it.
type serveReader struct {
	*tomlfile.File
	dir string
}

// Load reads and checks a configuration file: every file it names
// (relative to its directory) is read and checked here, so that a mistake is
// reported with its line before the server starts. getenv reads the
// environment (os.Getenv; tests give their own).
func Load(name string, getenv func(string) string) (*Config, error) {
	doc, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return Parse(name, doc, getenv)
}

// Parse is Load of a document already read.
func Parse(name string, doc []byte, getenv func(string) string) (*Config, error) {
	var f serveFile
	tf, err := tomlfile.Decode(name, doc, &f)
	if err != nil {
		return nil, err
	}
	r := &serveReader{File: tf, dir: filepath.Dir(name)}
	cfg := r.build(&f, getenv)
	if r.Failed() {
		return nil, r.Err()
	}
	cfg.source, cfg.getenv = name, getenv
	return cfg, nil
}

func (r *serveReader) build(f *serveFile, getenv func(string) string) *Config {
	cfg := &Config{Listen: "127.0.0.1:8080"}
	if f.Listen != nil {
		cfg.Listen = *f.Listen
		if _, port, err := net.SplitHostPort(cfg.Listen); err != nil || port == "" {
			r.Errorf("listen", "%q is not HOST:PORT, such as \"127.0.0.1:8080\" or \":443\"", cfg.Listen)
		}
	}

	// TLS: both files or neither. They are loaded now, so that a bad pair
	// stops the server before it listens.
	switch {
	case f.TLSCert != nil && f.TLSKey == nil:
		r.Errorf("tls_cert", "is given without tls_key: TLS takes a certificate and its key")
	case f.TLSCert == nil && f.TLSKey != nil:
		r.Errorf("tls_key", "is given without tls_cert: TLS takes a certificate and its key")
	case f.TLSCert != nil:
		certPEM, err := files.Read(r.path(*f.TLSCert), maxPEMBytes)
		if err != nil {
			r.Errorf("tls_cert", "%v", err)
			break
		}
		keyPEM, err := files.Read(r.path(*f.TLSKey), maxPEMBytes)
		if err != nil {
			r.Errorf("tls_key", "%v", err)
			break
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			r.Errorf("tls_cert", "%s and %s: %v", *f.TLSCert, *f.TLSKey, err)
			break
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	if f.DataDir != nil && *f.DataDir != "" {
		cfg.DataDir = r.path(*f.DataDir)
	}
	cfg.Store = r.store(f.Store, getenv)
	if f.Store != nil && f.Store.KeepForeignRooms != nil {
		cfg.Server.KeepForeignRooms = *f.Store.KeepForeignRooms
	}
	if cfg.Store.Engine == StorePostgres && cfg.DataDir != "" {
		r.Errorf("data_dir", "is bbolt's directory; with [store] engine = %q the state is in the database", StorePostgres)
	}

	// The operator's token: from a file or from the environment, never
	// written in the configuration itself.
	switch {
	case f.OperatorTokenFile != nil && f.OperatorTokenEnv != nil:
		r.Errorf("operator_token_env", "give operator_token_file or operator_token_env, not both")
	case f.OperatorTokenFile != nil:
		path := r.path(*f.OperatorTokenFile)
		if cfg.Server.OperatorToken = r.fromFile("operator_token_file", path, maxTokenBytes, "token"); cfg.Server.OperatorToken != "" {
			if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
				cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s: the operator token file %s can be read by others (mode %v)", r.At("operator_token_file"), path, st.Mode().Perm()))
			}
		}
	case f.OperatorTokenEnv != nil:
		cfg.Server.OperatorToken = r.fromEnv("operator_token_env", *f.OperatorTokenEnv, getenv)
	default:
		cfg.Warnings = append(cfg.Warnings, r.Name+": no operator_token_file or operator_token_env: the operator's routes (policy, key log, status) are off")
	}

	cfg.Server.SessionGrace = r.duration("session_grace", f.SessionGrace, 0)
	cfg.Server.Retention = r.duration("retention", f.Retention, 0)
	cfg.Server.Limits = r.limits(f.Limits)

	cfg.HTTP = Limits{
		ReadHeaderTimeout: r.duration("http.read_header_timeout", f.HTTP.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       r.duration("http.read_timeout", f.HTTP.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      r.duration("http.write_timeout", f.HTTP.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       r.duration("http.idle_timeout", f.HTTP.IdleTimeout, DefaultIdleTimeout),
		ShutdownTimeout:   r.duration("http.shutdown_timeout", f.HTTP.ShutdownTimeout, DefaultShutdownTimeout),
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
	}
	// fasthttp by default; net/http by default under TLS, for HTTP/2.
	switch {
	case f.HTTP.Engine != nil && *f.HTTP.Engine != EngineFast && *f.HTTP.Engine != EngineStd:
		r.Errorf("http.engine", "%q is not %q or %q", *f.HTTP.Engine, EngineFast, EngineStd)
	case f.HTTP.Engine != nil:
		cfg.HTTP.Engine = *f.HTTP.Engine
	case cfg.TLS != nil:
		cfg.HTTP.Engine = EngineStd
	default:
		cfg.HTTP.Engine = EngineFast
	}
	if m := f.HTTP.MaxHeaderBytes; m != nil {
		if *m < 4096 || *m > 1<<24 {
			r.Errorf("http.max_header_bytes", "%d is not 4096 to 16777216", *m)
		} else {
			cfg.HTTP.MaxHeaderBytes = int(*m)
		}
	}
	for _, k := range []struct {
		key string
		v   time.Duration
	}{{"http.read_header_timeout", cfg.HTTP.ReadHeaderTimeout}, {"http.read_timeout", cfg.HTTP.ReadTimeout},
		{"http.write_timeout", cfg.HTTP.WriteTimeout}, {"http.idle_timeout", cfg.HTTP.IdleTimeout},
		{"http.shutdown_timeout", cfg.HTTP.ShutdownTimeout}} {
		if k.v == 0 && r.Line(k.key) > 0 {
			// net/http reads 0 as no limit: a server without one is
			// what the limits are for.
			r.Errorf(k.key, "is 0, which net/http reads as no limit; leave it out for %s", map[string]time.Duration{
				"http.read_header_timeout": DefaultReadHeaderTimeout, "http.read_timeout": DefaultReadTimeout,
				"http.write_timeout": DefaultWriteTimeout, "http.idle_timeout": DefaultIdleTimeout,
				"http.shutdown_timeout": DefaultShutdownTimeout}[k.key])
		}
	}

	r.pools(f, cfg)
	r.front(f.Front, cfg)
	if len(f.Room) == 0 && f.Steering == nil && len(f.Pool) == 0 {
		r.Errorf("room", "nothing to steer: give a [[room]], a [steering] table or a [[pool]]")
	}
	seen := map[sig.Hash]int{}
	for i, rf := range f.Room {
		rc, p, id, ok := r.room(i, &rf)
		if !ok {
			continue
		}
		k := "room[" + strconv.Itoa(i) + "]"
		if j, dup := seen[id]; dup {
			r.Errorf(k, "room %s is room[%d]'s too: one [[room]] per room", id, j)
			continue
		}
		seen[id] = i
		// Records in the window must outlive it: pruning one a decision
		// still needs would make the pathway stale (§5.2). A room steered
		// by the store's active policy is not known here.
		if p != nil && cfg.Server.Retention > 0 {
			need, c1 := bits.Add64(p.WindowUs, p.LagUs, 0)
			need, c2 := bits.Add64(need, p.PeriodUs, 0)
			if have := uint64(cfg.Server.Retention / time.Microsecond); c1+c2 != 0 || have < need {
				text := "more than 2^64 µs"
				if c1+c2 == 0 {
					text = strconv.FormatUint(need, 10) + " µs"
					if need <= math.MaxInt64/1000 {
						text = (time.Duration(need) * time.Microsecond).String()
					}
				}
				r.Errorf("retention", "%v is shorter than room[%d]'s window, lag and a period (%s): records it still needs would be pruned", cfg.Server.Retention, i, text)
			}
		}
		cfg.Server.Rooms = append(cfg.Server.Rooms, rc)
	}
	return cfg
}

// The most a file the configuration names may hold, beside the limits of
// verify.go for the room's files: a key file is 65 bytes.
const (
	maxTokenBytes = 4 << 10
	maxDSNBytes   = 4 << 10
	maxPEMBytes   = 1 << 20
)

// store reads the [store] table.
func (r *serveReader) store(f *storeFile, getenv func(string) string) StoreConfig {
	sc := StoreConfig{Engine: StoreBolt}
	if f == nil {
		return sc
	}
	if f.Engine != nil {
		sc.Engine = *f.Engine
	}
	if sc.Engine != StoreBolt && sc.Engine != StorePostgres {
		r.Errorf("store.engine", "%q is not %q (the default, in data_dir) or %q", sc.Engine, StoreBolt, StorePostgres)
		return sc
	}
	if f.DSN != nil {
		r.Errorf("store.dsn", "a DSN is not written in the configuration (it may hold a password): give dsn_env, the environment variable that holds it, or dsn_file, a file that does")
	}
	if sc.Engine == StoreBolt {
		if f.ConnectTimeout != nil {
			r.Errorf("store.connect_timeout", "is PostgreSQL's: give engine = %q with it, or leave it out", StorePostgres)
		}
		if f.StatementTimeout != nil {
			r.Errorf("store.statement_timeout", "is PostgreSQL's: give engine = %q with it, or leave it out", StorePostgres)
		}
		if f.DSNEnv != nil {
			r.Errorf("store.dsn_env", "is PostgreSQL's: give engine = %q with it, or leave it out", StorePostgres)
		}
		if f.DSNFile != nil {
			r.Errorf("store.dsn_file", "is PostgreSQL's: give engine = %q with it, or leave it out", StorePostgres)
		}
		return sc
	}
	sc.ConnectTimeout = r.duration("store.connect_timeout", f.ConnectTimeout, 0)
	sc.StatementTimeout = r.duration("store.statement_timeout", f.StatementTimeout, 0)
	switch {
	case f.DSNEnv != nil && f.DSNFile != nil:
		r.Errorf("store.dsn_file", "give dsn_env or dsn_file, not both")
	case f.DSNEnv != nil:
		sc.DSN = r.fromEnv("store.dsn_env", *f.DSNEnv, getenv)
	case f.DSNFile != nil:
		sc.DSN = r.fromFile("store.dsn_file", r.path(*f.DSNFile), maxDSNBytes, "DSN")
	default:
		r.Errorf("store.engine", "%q needs the database's DSN: give dsn_env or dsn_file", StorePostgres)
	}
	return sc
}

// fromFile reads a value the configuration names but never holds (a
// token, a DSN: what) from the file at path, white space around it
// removed; "" once it has reported at key why there is none.
func (r *serveReader) fromFile(key, path string, limit int64, what string) string {
	b, err := files.Read(path, limit)
	switch {
	case err != nil:
		r.Errorf(key, "%v", err)
	case len(bytes.TrimSpace(b)) == 0:
		r.Errorf(key, "%s holds no %s", path, what)
	}
	return string(bytes.TrimSpace(b))
}

// fromEnv is fromFile of the environment variable name.
func (r *serveReader) fromEnv(key, name string, getenv func(string) string) string {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		r.Errorf(key, "the environment variable %s is unset or empty", name)
	}
	return v
}

// path resolves a path of the file relative to the file's directory.
func (r *serveReader) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.dir, p)
}

// duration reads a duration of time.ParseDuration's form ("90s", "1h30m",
// "720h"); or when the key is absent.
func (r *serveReader) duration(key string, s *string, or time.Duration) time.Duration {
	if s == nil {
		return or
	}
	d, err := time.ParseDuration(*s)
	switch {
	case err != nil:
		r.Errorf(key, "%q is not a duration such as \"90s\", \"15m\" or \"720h\"", *s)
	case d < 0:
		r.Errorf(key, "%q is negative", *s)
	}
	return d
}

// room reads one [[room]]: its files, and the checks a verifier will make of
// them (COMPANION §4.1, extension §3.3 and §3.5), so that the server never
// signs a decision no verifier accepts.
// It returns the room's policy (nil when the file names none) and id.
func (r *serveReader) room(i int, f *serveRoomFile) (server.RoomConfig, *policy.Policy, sig.Hash, bool) {
	k := "room[" + strconv.Itoa(i) + "]"
	n := r.Mistakes()
	read := func(key string, p *string, required bool, limit int64) []byte {
		if p == nil {
			if required {
				r.Errorf(k+"."+key, "is needed")
			}
			return nil
		}
		b, err := files.Read(r.path(*p), limit)
		if err != nil {
			r.Errorf(k+"."+key, "%v", err)
			return nil
		}
		return b
	}
	rc := server.RoomConfig{
		Descriptor: read("descriptor", f.Descriptor, true, api.MaxDescriptorBytes),
		KeyLogHead: read("keylog", f.KeyLog, false, api.MaxKeyLogBytes),
		Policy:     read("policy", f.Policy, false, api.MaxPolicyBytes),
	}
	if kb := read("steering_key", f.SteeringKey, true, maxTokenBytes); kb != nil {
		key, err := sig.ParsePrivateKey(kb)
		if err != nil {
			r.Errorf(k+".steering_key", "%s: %v", *f.SteeringKey, err)
		}
		rc.SteeringKey = key
	}
	rc.Checks = r.roomChecks(k, f)
	rc.QoE = r.roomQoE(k, f)
	if r.Mistakes() > n {
		return rc, nil, sig.Hash{}, false
	}

	// The room step (COMPANION §4.1).
	rm, err := room.Open(rc.Descriptor, rc.KeyLogHead)
	if err != nil {
		key := k + ".descriptor"
		if rc.KeyLogHead != nil || f.KeyLog != nil {
			key = k + ".keylog"
		}
		r.Errorf(key, "the room step refuses the room: %v", err)
		return rc, nil, sig.Hash{}, false
	}
	if rc.KeyLogHead != nil && rm.Head() == nil {
		r.Errorf(k+".keylog", "room %s names no origin, so it has no key log: leave keylog out", rm.ID())
		return rc, nil, sig.Hash{}, false
	}
	// The steering key signs decisions (§3.5): it needs live/steer; the
	// classes its entry must also hold depend on the figures, which the
	// server checks.
	if err := rm.MaySignDecision(rc.SteeringKey.Public(), nil); err != nil {
		r.Errorf(k+".steering_key", "the key %s may not sign the room's decisions: %v", rc.SteeringKey.Public(), err)
		return rc, nil, rm.ID(), false
	}
	// A pathway's health makes the steering key sign the policy it
	// calls for (server.RoomChecks).
	if len(rc.Checks.URLs) > 0 {
		if err := rm.MaySignPolicy(rc.SteeringKey.Public()); err != nil {
			r.Errorf(k+".check_urls", "the steering key %s signs the policy a pathway's health calls for, and may not sign the room's policies: %v", rc.SteeringKey.Public(), err)
			return rc, nil, rm.ID(), false
		}
	}
	if rc.QoE != nil {
		if err := rm.MaySignPolicy(rc.SteeringKey.Public()); err != nil {
			r.Errorf(k+".qoe", "the steering key %s signs the policy a degraded pathway calls for, and may not sign the room's policies: %v", rc.SteeringKey.Public(), err)
			return rc, nil, rm.ID(), false
		}
	}
	if f.Policy == nil {
		return rc, nil, rm.ID(), true // the store's active policy (server.RoomConfig)
	}
	// The policy (§3.3, §3.5), as §9.1 step 2 checks it.
	p, err := policy.Parse(rc.Policy)
	if err == nil && p.Room != rm.ID() {
		err = fmt.Errorf("the policy is for room %s, the descriptor's is %s", p.Room, rm.ID())
	}
	if err == nil {
		err = p.VerifySignature()
	}
	if err == nil {
		err = rm.MaySignPolicy(p.Signer)
	}
	if err != nil {
		r.Errorf(k+".policy", "%v", err)
		return rc, nil, rm.ID(), false
	}
	for id := range rc.Checks.URLs {
		if _, ok := p.Index(id); !ok {
			r.Errorf(k+".check_urls."+id, "the policy has no pathway %q (it has %s)", id, strings.Join(p.IDs(), ", "))
		}
	}
	return rc, p, rm.ID(), true
}
