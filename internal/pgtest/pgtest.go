// Package pgtest starts PostgreSQL servers for tests: each in a temporary
// directory of its own (initdb), on a loopback port, stopped when the test
// ends, so that no test depends on a server already running (issue 15).
// It finds Debian's binaries (the postgresql package, which .ci/run
// installs) on PATH or under /usr/lib/postgresql. PostgreSQL refuses to run
// as root; under root the server runs as the postgres user, or nobody.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a PostgreSQL server of a test's own.
type Server struct {
	bin  string // the directory of initdb, pg_ctl and postgres
	dir  string // its temporary directory: data/ and log
	port int
	cred *syscall.Credential // the user it runs as, under root
	dbs  atomic.Int64
}

// binDir finds the directory of PostgreSQL's programs, or says why not.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "initdb")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("pgtest: PostgreSQL's initdb and pg_ctl are neither on PATH nor under /usr/lib/postgresql/*/bin: install Debian's postgresql package (.ci/run does)")
}

// version is the major version in a path /usr/lib/postgresql/N/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start starts a server for t and stops it when t ends. A machine without
// PostgreSQL fails the test: the tests that need one must run.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// New starts a server that the caller closes (for a TestMain, which has
// no t).
func New() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	if s.dir, err = os.MkdirTemp("", "waisteer-pg-"); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if s.cred, err = unprivileged(); err != nil {
			return nil, err
		}
		// The server's user must reach its directory (MkdirTemp makes it
		// 0700) and own it.
		if err := os.Chmod(s.dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, err
		}
	}
	if out, err := s.run("initdb", "-D", s.data(), "-U", "waisteer", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		s.remove()
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	if s.port, err = freePort(); err != nil {
		s.remove()
		return nil, err
	}
	if err := s.Resume(); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// unprivileged is the user a server started by root runs as.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("pgtest: running as root, and neither a postgres nor a nobody user to run PostgreSQL as")
}

// freePort is a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// run runs one of PostgreSQL's programs as the server's user.
func (s *Server) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, prog), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// Resume starts the server (again, after Stop) and waits until it accepts
// connections.
func (s *Server) Resume() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories='' -c max_connections=200", s.port)
	// More settings, for a diagnosis (pg_stat_statements, for one):
	// WAISTEER_PGTEST_OPTIONS is added to the server's command line.
	if more := os.Getenv("WAISTEER_PGTEST_OPTIONS"); more != "" {
		opts += " " + more
	}
	if out, err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// Stop stops the server at once, as a crash or a lost database would
// (pg_ctl's immediate mode: no checkpoint, clients cut off), and waits for
// it to be gone.
func (s *Server) Stop() error {
	if out, err := s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
	s.remove()
}

func (s *Server) remove() { os.RemoveAll(s.dir) }

// PID is the process id of the server's postmaster, from the first line
// of its postmaster.pid: every other process of the server is its child,
// so that `waisteer bench` reads the server's CPU from /proc.
func (s *Server) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgtest: postmaster.pid begins with %q, not a process id", line)
	}
	return pid, nil
}

// Bin is the directory of the server's programs (its version is in it).
func (s *Server) Bin() string { return s.bin }

// DSN is the address of database db on the server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://waisteer@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Database creates a fresh, empty database for t and returns its DSN.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	dsn, err := s.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// NewDatabase creates a fresh, empty database and returns its DSN.
func (s *Server) NewDatabase() (string, error) {
	name := fmt.Sprintf("t%d", s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return s.DSN(name), nil
}

// Silent is the address of a loopback listener that takes connections and
// never answers (a database behind a wedged proxy, or stopped with
// SIGSTOP), for a DSN; its listener and connections are closed at cleanup.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}
