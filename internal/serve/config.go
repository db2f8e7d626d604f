package serve

// The configuration file: its TOML schema, and Load and Parse that check it.

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"math"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/files"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/tlscert"
	"github.com/waisteer/waisteer/internal/tomlfile"
	"github.com/waisteer/waisteer/policy"
)

// Config is a configuration file, read and checked.
type Config struct {
	Listen   string
	TLS      *tls.Config   // nil: plain HTTP; its certificate is Cert's
	Cert     *tlscert.Cert // [http] cert and key; nil: plain HTTP
	DataDir  string        // "": in memory (bbolt's engine)
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
	TLSCert           *string         `toml:"tls_cert"` // http.cert's old name
	TLSKey            *string         `toml:"tls_key"`  // http.key's old name
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
	Cert              *string `toml:"cert"` // PEM chain (tls.go)
	Key               *string `toml:"key"`  // PEM private key
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

	r.cert(f, cfg) // tls.go

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
