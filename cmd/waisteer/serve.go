package main

// `waisteer serve -c FILE` runs the steering server (internal/server) over
// HTTP: the rooms of a TOML configuration, a durable store, structured logs,
// bounded timeouts and a graceful shutdown. The configuration's schema is
// documented by testdata/serve/example.toml.

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
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "run the steering server for the rooms of a TOML configuration",
		run:     runServe,
	})
}

// The HTTP server's limits when the configuration leaves them out. A
// steering request is a GET with a short query; the largest body is a hop's
// POST of records, which the server's handler bounds itself.
const (
	defaultReadHeaderTimeout = 5 * time.Second
	defaultReadTimeout       = 30 * time.Second
	defaultWriteTimeout      = 30 * time.Second
	defaultIdleTimeout       = 2 * time.Minute
	defaultShutdownTimeout   = 30 * time.Second
	defaultMaxHeaderBytes    = 64 << 10
)

// boltFile is the name of the store's file in data_dir.
const boltFile = "waisteer.db"

func runServe(e *env, args []string) error {
	fs := newFlags(e, "serve", "-c FILE [-log text|json] [-log-level LEVEL]")
	cfgFile := fs.String("c", "", "the configuration `file` (TOML; cmd/waisteer/testdata/serve/example.toml documents it)")
	logFormat := fs.String("log", "text", "the log's format: text or json")
	logLevel := fs.String("log-level", "info", "the least level logged: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *cfgFile == "" {
		return usagef("-c FILE is required")
	}
	logger, err := newLogger(e.stderr, *logFormat, *logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	cfg, err := loadServeConfig(*cfgFile, os.Getenv)
	if err != nil {
		return err
	}
	for _, w := range cfg.warnings {
		logger.Warn(w)
	}
	cfg.server.Logger = logger

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return openAndServe(ctx, stop, logger, cfg, nil)
}

// openAndServe opens cfg's store, listens on cfg's address and serves
// (serveOn) until ctx is done.
func openAndServe(ctx context.Context, stop func(), logger *slog.Logger, cfg *serveConfig, ready func(url string)) error {
	st, loads, err := openStore(cfg.dataDir, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		st.Close()
		return err
	}
	return serveOn(ctx, stop, logger, ln, cfg, st, loads, ready)
}

// newLogger makes the structured logger of -log and -log-level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
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

// openStore opens the bbolt store in dir, or keeps everything in memory when
// dir is empty.
func openStore(dir string, logger *slog.Logger) (store.Store, store.Loads, error) {
	if dir == "" {
		logger.Warn("no data_dir: the store is in memory, and records and decisions are lost when the server stops")
		return store.NewMemory(), store.NewLoads(), nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, boltFile)
	st, err := store.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the store %s: %w", path, err)
	}
	logger.Info("store opened", "path", path)
	return st, store.NewLoads(), nil
}

// serveOn serves the rooms of cfg on ln until ctx is done, then shuts down in
// order: no new connections and every request in flight finished
// (http.Server.Shutdown), the server's pending decisions written
// (server.Close), then the store closed. stop, when not nil, is called when
// the shutdown starts, so that a second signal ends the process at once;
// ready, when not nil, once the server is serving, with its URL. st is
// closed whatever happens.
func serveOn(ctx context.Context, stop func(), logger *slog.Logger, ln net.Listener, cfg *serveConfig, st store.Store, loads store.Loads, ready func(url string)) (err error) {
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
	srv, err := server.New(ctx, cfg.server, st, loads)
	if err != nil {
		ln.Close()
		return err
	}
	front := newFront(cfg, srv, logger, ln)
	scheme := "http"
	if cfg.tls != nil {
		scheme = "https"
	}
	served := make(chan error, 1)
	go func() { served <- front.serve() }()
	u := scheme + "://" + ln.Addr().String()
	logger.Info("listening", "url", u, "rooms", len(cfg.server.Rooms), "engine", cfg.http.engine)
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
	logger.Info("shutting down", "timeout", cfg.http.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.http.shutdownTimeout)
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
	cctx, ccancel := context.WithTimeout(context.Background(), cfg.http.shutdownTimeout)
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
	engineFast = "fasthttp" // plain HTTP/1.1: fasthttp, the steering route on its own requests
	engineStd  = "net/http" // net/http, with HTTP/2 over TLS
)

// front is the HTTP server in front of the steering server.
type front struct {
	serve    func() error // returns http.ErrServerClosed, or nil, once shut down
	shutdown func(context.Context) error
	close    func()
}

// newFront makes the HTTP server of cfg's engine for srv, on ln.
func newFront(cfg *serveConfig, srv *server.Server, logger *slog.Logger, ln net.Listener) front {
	if cfg.http.engine == engineFast {
		fs := srv.FastServer(server.FastLimits{
			ReadHeaderTimeout: cfg.http.readHeaderTimeout, ReadTimeout: cfg.http.readTimeout,
			WriteTimeout: cfg.http.writeTimeout, IdleTimeout: cfg.http.idleTimeout,
			MaxHeaderBytes: cfg.http.maxHeaderBytes, Logger: logger,
		})
		if cfg.tls != nil {
			ln = tls.NewListener(ln, cfg.tls)
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
		ReadHeaderTimeout: cfg.http.readHeaderTimeout,
		ReadTimeout:       cfg.http.readTimeout,
		WriteTimeout:      cfg.http.writeTimeout,
		IdleTimeout:       cfg.http.idleTimeout,
		MaxHeaderBytes:    cfg.http.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return front{
		serve: func() error {
			if cfg.tls != nil {
				// ServeTLS, not Serve on a TLS listener: it offers HTTP/2 too.
				hs.TLSConfig = cfg.tls
				return hs.ServeTLS(ln, "", "")
			}
			return hs.Serve(ln)
		},
		shutdown: hs.Shutdown,
		close:    func() { hs.Close() },
	}
}

// serveConfig is a configuration file, read and checked.
type serveConfig struct {
	listen   string
	tls      *tls.Config // nil: plain HTTP
	dataDir  string      // "": in memory
	http     httpLimits
	server   server.Config
	warnings []string
}

type httpLimits struct {
	engine                                                                     string // engineFast or engineStd
	readHeaderTimeout, readTimeout, writeTimeout, idleTimeout, shutdownTimeout time.Duration
	maxHeaderBytes                                                             int
}

// The TOML schema (testdata/serve/example.toml). Pointers tell a key left
// out from a zero.
type serveFile struct {
	Listen            *string         `toml:"listen"`
	TLSCert           *string         `toml:"tls_cert"`
	TLSKey            *string         `toml:"tls_key"`
	DataDir           *string         `toml:"data_dir"`
	OperatorTokenFile *string         `toml:"operator_token_file"`
	OperatorTokenEnv  *string         `toml:"operator_token_env"`
	SessionGrace      *string         `toml:"session_grace"`
	Retention         *string         `toml:"retention"`
	HTTP              httpFile        `toml:"http"`
	Room              []serveRoomFile `toml:"room"`
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
}

// serveReader is what loadServeConfig knows of the file while it reads it.
type serveReader struct {
	compiled // the policy command's file, line and error bookkeeping
	dir      string
}

// loadServeConfig reads and checks a configuration file: every file it names
// (relative to its directory) is read and checked here, so that a mistake is
// reported with its line before the server starts. getenv reads the
// environment (os.Getenv; tests give their own).
func loadServeConfig(name string, getenv func(string) string) (*serveConfig, error) {
	doc, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return parseServeConfig(name, doc, getenv)
}

func parseServeConfig(name string, doc []byte, getenv func(string) string) (*serveConfig, error) {
	var f serveFile
	d := toml.NewDecoder(bytes.NewReader(doc))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, tomlError(name, doc, err)
	}
	r := &serveReader{compiled: compiled{name: name, lines: keyLines(doc)}, dir: filepath.Dir(name)}
	cfg := r.build(&f, getenv)
	if len(r.errs) > 0 {
		return nil, r.err()
	}
	return cfg, nil
}

func (r *serveReader) build(f *serveFile, getenv func(string) string) *serveConfig {
	cfg := &serveConfig{listen: "127.0.0.1:8080"}
	if f.Listen != nil {
		cfg.listen = *f.Listen
		if _, port, err := net.SplitHostPort(cfg.listen); err != nil || port == "" {
			r.errorf("listen", "%q is not HOST:PORT, such as \"127.0.0.1:8080\" or \":443\"", cfg.listen)
		}
	}

	// TLS: both files or neither. They are loaded now, so that a bad pair
	// stops the server before it listens.
	switch {
	case f.TLSCert != nil && f.TLSKey == nil:
		r.errorf("tls_cert", "is given without tls_key: TLS takes a certificate and its key")
	case f.TLSCert == nil && f.TLSKey != nil:
		r.errorf("tls_key", "is given without tls_cert: TLS takes a certificate and its key")
	case f.TLSCert != nil:
		certPEM, err := readConfigFile(r.path(*f.TLSCert), maxPEMBytes)
		if err != nil {
			r.errorf("tls_cert", "%v", err)
			break
		}
		keyPEM, err := readConfigFile(r.path(*f.TLSKey), maxPEMBytes)
		if err != nil {
			r.errorf("tls_key", "%v", err)
			break
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			r.errorf("tls_cert", "%s and %s: %v", *f.TLSCert, *f.TLSKey, err)
			break
		}
		cfg.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	if f.DataDir != nil && *f.DataDir != "" {
		cfg.dataDir = r.path(*f.DataDir)
	}

	// The operator's token: from a file or from the environment, never
	// written in the configuration itself.
	switch {
	case f.OperatorTokenFile != nil && f.OperatorTokenEnv != nil:
		r.errorf("operator_token_env", "give operator_token_file or operator_token_env, not both")
	case f.OperatorTokenFile != nil:
		path := r.path(*f.OperatorTokenFile)
		b, err := readConfigFile(path, maxTokenBytes)
		switch {
		case err != nil:
			r.errorf("operator_token_file", "%v", err)
		case len(bytes.TrimSpace(b)) == 0:
			r.errorf("operator_token_file", "%s holds no token", path)
		default:
			cfg.server.OperatorToken = string(bytes.TrimSpace(b))
			if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
				cfg.warnings = append(cfg.warnings, fmt.Sprintf("%s: the operator token file %s can be read by others (mode %v)", r.at("operator_token_file"), path, st.Mode().Perm()))
			}
		}
	case f.OperatorTokenEnv != nil:
		v := strings.TrimSpace(getenv(*f.OperatorTokenEnv))
		if v == "" {
			r.errorf("operator_token_env", "the environment variable %s is unset or empty", *f.OperatorTokenEnv)
		}
		cfg.server.OperatorToken = v
	default:
		cfg.warnings = append(cfg.warnings, r.name+": no operator_token_file or operator_token_env: the operator's routes (policy, key log, status) are off")
	}

	cfg.server.SessionGrace = r.duration("session_grace", f.SessionGrace, 0)
	cfg.server.Retention = r.duration("retention", f.Retention, 0)

	cfg.http = httpLimits{
		readHeaderTimeout: r.duration("http.read_header_timeout", f.HTTP.ReadHeaderTimeout, defaultReadHeaderTimeout),
		readTimeout:       r.duration("http.read_timeout", f.HTTP.ReadTimeout, defaultReadTimeout),
		writeTimeout:      r.duration("http.write_timeout", f.HTTP.WriteTimeout, defaultWriteTimeout),
		idleTimeout:       r.duration("http.idle_timeout", f.HTTP.IdleTimeout, defaultIdleTimeout),
		shutdownTimeout:   r.duration("http.shutdown_timeout", f.HTTP.ShutdownTimeout, defaultShutdownTimeout),
		maxHeaderBytes:    defaultMaxHeaderBytes,
	}
	// fasthttp by default; net/http by default under TLS, for HTTP/2.
	switch {
	case f.HTTP.Engine != nil && *f.HTTP.Engine != engineFast && *f.HTTP.Engine != engineStd:
		r.errorf("http.engine", "%q is not %q or %q", *f.HTTP.Engine, engineFast, engineStd)
	case f.HTTP.Engine != nil:
		cfg.http.engine = *f.HTTP.Engine
	case cfg.tls != nil:
		cfg.http.engine = engineStd
	default:
		cfg.http.engine = engineFast
	}
	if m := f.HTTP.MaxHeaderBytes; m != nil {
		if *m < 4096 || *m > 1<<24 {
			r.errorf("http.max_header_bytes", "%d is not 4096 to 16777216", *m)
		} else {
			cfg.http.maxHeaderBytes = int(*m)
		}
	}
	for _, k := range []struct {
		key string
		v   time.Duration
	}{{"http.read_header_timeout", cfg.http.readHeaderTimeout}, {"http.read_timeout", cfg.http.readTimeout},
		{"http.write_timeout", cfg.http.writeTimeout}, {"http.idle_timeout", cfg.http.idleTimeout},
		{"http.shutdown_timeout", cfg.http.shutdownTimeout}} {
		if k.v == 0 && r.line(k.key) > 0 {
			// net/http reads 0 as no limit: a server without one is
			// what the limits are for.
			r.errorf(k.key, "is 0, which net/http reads as no limit; leave it out for %s", map[string]time.Duration{
				"http.read_header_timeout": defaultReadHeaderTimeout, "http.read_timeout": defaultReadTimeout,
				"http.write_timeout": defaultWriteTimeout, "http.idle_timeout": defaultIdleTimeout,
				"http.shutdown_timeout": defaultShutdownTimeout}[k.key])
		}
	}

	if len(f.Room) == 0 {
		r.errorf("room", "at least one [[room]] is needed")
	}
	seen := map[sig.Hash]int{}
	for i, rf := range f.Room {
		rc, p, id, ok := r.room(i, &rf)
		if !ok {
			continue
		}
		k := "room[" + strconv.Itoa(i) + "]"
		if j, dup := seen[id]; dup {
			r.errorf(k, "room %s is room[%d]'s too: one [[room]] per room", id, j)
			continue
		}
		seen[id] = i
		// Records in the window must outlive it: pruning one a decision
		// still needs would make the pathway stale (§5.2). A room steered
		// by the store's active policy is not known here.
		if p != nil && cfg.server.Retention > 0 {
			need, c1 := bits.Add64(p.WindowUs, p.LagUs, 0)
			need, c2 := bits.Add64(need, p.PeriodUs, 0)
			if have := uint64(cfg.server.Retention / time.Microsecond); c1+c2 != 0 || have < need {
				text := "more than 2^64 µs"
				if c1+c2 == 0 {
					text = strconv.FormatUint(need, 10) + " µs"
					if need <= math.MaxInt64/1000 {
						text = (time.Duration(need) * time.Microsecond).String()
					}
				}
				r.errorf("retention", "%v is shorter than room[%d]'s window, lag and a period (%s): records it still needs would be pruned", cfg.server.Retention, i, text)
			}
		}
		cfg.server.Rooms = append(cfg.server.Rooms, rc)
	}
	return cfg
}

// The most a file the configuration names may hold, beside the limits of
// verify.go for the room's files: a key file is 65 bytes.
const (
	maxTokenBytes = 4 << 10
	maxPEMBytes   = 1 << 20
)

// readConfigFile reads a regular file of at most limit bytes: a path such as
// /dev/zero or a pipe is a mistake to report, not to wait on.
func readConfigFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is more than %d bytes", path, limit)
	}
	return b, nil
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
		r.errorf(key, "%q is not a duration such as \"90s\", \"15m\" or \"720h\"", *s)
	case d < 0:
		r.errorf(key, "%q is negative", *s)
	}
	return d
}

// room reads one [[room]]: its files, and the checks a verifier will make of
// them (COMPANION §4.1, extension §3.3 and §3.5), so that the server never
// signs a decision no verifier accepts.
// It returns the room's policy (nil when the file names none) and id.
func (r *serveReader) room(i int, f *serveRoomFile) (server.RoomConfig, *policy.Policy, sig.Hash, bool) {
	k := "room[" + strconv.Itoa(i) + "]"
	n := len(r.errs)
	read := func(key string, p *string, required bool, limit int64) []byte {
		if p == nil {
			if required {
				r.errorf(k+"."+key, "is needed")
			}
			return nil
		}
		b, err := readConfigFile(r.path(*p), limit)
		if err != nil {
			r.errorf(k+"."+key, "%v", err)
			return nil
		}
		return b
	}
	rc := server.RoomConfig{
		Descriptor: read("descriptor", f.Descriptor, true, maxDescriptorBytes),
		KeyLogHead: read("keylog", f.KeyLog, false, maxKeyLogBytes),
		Policy:     read("policy", f.Policy, false, maxPolicyBytes),
	}
	if kb := read("steering_key", f.SteeringKey, true, maxTokenBytes); kb != nil {
		key, err := sig.ParsePrivateKey(kb)
		if err != nil {
			r.errorf(k+".steering_key", "%s: %v", *f.SteeringKey, err)
		}
		rc.SteeringKey = key
	}
	if len(r.errs) > n {
		return rc, nil, sig.Hash{}, false
	}

	// The room step (COMPANION §4.1).
	rm, err := room.Open(rc.Descriptor, rc.KeyLogHead)
	if err != nil {
		key := k + ".descriptor"
		if rc.KeyLogHead != nil || f.KeyLog != nil {
			key = k + ".keylog"
		}
		r.errorf(key, "the room step refuses the room: %v", err)
		return rc, nil, sig.Hash{}, false
	}
	if rc.KeyLogHead != nil && rm.Head() == nil {
		r.errorf(k+".keylog", "room %s names no origin, so it has no key log: leave keylog out", rm.ID())
		return rc, nil, sig.Hash{}, false
	}
	// The steering key signs decisions (§3.5): it needs live/steer; the
	// classes its entry must also hold depend on the figures, which the
	// server checks.
	if err := rm.MaySignDecision(rc.SteeringKey.Public(), nil); err != nil {
		r.errorf(k+".steering_key", "the key %s may not sign the room's decisions: %v", rc.SteeringKey.Public(), err)
		return rc, nil, rm.ID(), false
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
		r.errorf(k+".policy", "%v", err)
		return rc, nil, rm.ID(), false
	}
	return rc, p, rm.ID(), true
}
