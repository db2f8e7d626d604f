package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/demo"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/verify"
)

// testRoomFiles writes a demo room (fixed seed, URIs on http://127.0.0.1:
// the server answers by path, whatever its port) and a configuration that
// serves it on port 0 with its store in dir/data.
func testRoomFiles(t *testing.T, dir string) (*demo.Room, string) {
	t.Helper()
	r, err := demo.NewRoom("serve test", "http://127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.WriteFiles(dir, "127.0.0.1:0", "data")
	if err != nil {
		t.Fatal(err)
	}
	return r, cfg
}

// TestServeExampleConfig: the documented example parses, with each key as
// its comment says, once the files it names exist.
func TestServeExampleConfig(t *testing.T) {
	dir := t.TempDir()
	r, _ := testRoomFiles(t, dir)
	doc, err := os.ReadFile(filepath.Join("testdata", "serve", "example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "example.toml")
	if err := os.WriteFile(name, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := serve.Load(name, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q", cfg.Warnings)
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.TLS != nil || cfg.DataDir != filepath.Join(dir, "data") {
		t.Errorf("listen %q, tls %v, data_dir %q", cfg.Listen, cfg.TLS != nil, cfg.DataDir)
	}
	if cfg.Server.OperatorToken != r.Token || cfg.Server.SessionGrace != 20*time.Second || cfg.Server.Retention != 720*time.Hour {
		t.Errorf("token %q, grace %v, retention %v", cfg.Server.OperatorToken, cfg.Server.SessionGrace, cfg.Server.Retention)
	}
	want := serve.Limits{Engine: serve.EngineFast, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, ShutdownTimeout: 30 * time.Second, MaxHeaderBytes: 65536}
	if cfg.HTTP != want {
		t.Errorf("http %+v, want %+v", cfg.HTTP, want)
	}
	if !reflect.DeepEqual(cfg.Server.Limits, serve.DefaultBudgets()) {
		t.Errorf("limits %+v, want the defaults the example shows, %+v", cfg.Server.Limits, serve.DefaultBudgets())
	}
	if len(cfg.Server.Rooms) != 1 {
		t.Fatalf("%d rooms", len(cfg.Server.Rooms))
	}
	rc := cfg.Server.Rooms[0]
	if !bytes.Equal(rc.Descriptor, r.Descriptor) || !bytes.Equal(rc.KeyLogHead, r.Head) || !bytes.Equal(rc.Policy, r.PolicyBytes) || rc.SteeringKey.Public() != r.Steer.Public() {
		t.Error("the room's files are not the ones written")
	}
}

// TestServeConfigErrors: each mistake is reported with the file, the line
// and the key, and the room's files are checked as a verifier would check
// them (COMPANION §4.1, extension §3.3, §3.5).
func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	r, _ := testRoomFiles(t, dir)
	other, err := demo.NewRoom("another room", "http://127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"other.wsp1": other.PolicyBytes,
		"other.key":  sig.MarshalPrivateKey(other.Steer),
		"empty":      []byte("\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const room = `
[[room]]
descriptor = "room.cbor"
keylog = "keylog.cbor"
policy = "policy.wsp1"
steering_key = "steer.key"
`
	cases := []struct {
		name, doc, want string
	}{
		{"unknown key", "listen = \"127.0.0.1:0\"\ncolour = 1\n" + room, "serve.toml:2: colour: unknown key"},
		{"unknown room key", room + "steer_key = \"x\"\n", "serve.toml:7: room[0].steer_key: unknown key"},
		{"syntax", "listen = \n" + room, "serve.toml:1:"},
		{"wrong type", "retention = 3\n" + room, "serve.toml:1"},
		{"listen", "listen = \"8080\"\n" + room, `serve.toml:1: listen: "8080" is not HOST:PORT`},
		{"duration", "retention = \"forever\"\n" + room, `serve.toml:1: retention: "forever" is not a duration`},
		{"negative", "session_grace = \"-1s\"\n" + room, `serve.toml:1: session_grace: "-1s" is negative`},
		// The room's window (60 s), lag (2 s) and a period (10 s).
		{"retention short", "retention = \"71s\"\n" + room, "serve.toml:1: retention: 1m11s is shorter than room[0]'s window, lag and a period (1m12s)"},
		{"zero timeout", "[http]\nread_timeout = \"0s\"\n" + room, "serve.toml:2: http.read_timeout: is 0"},
		{"engine", "[http]\nengine = \"nginx\"\n" + room, `serve.toml:2: http.engine: "nginx" is not "fasthttp" or "net/http"`},
		{"header bytes", "[http]\nmax_header_bytes = 10\n" + room, "serve.toml:2: http.max_header_bytes: 10 is not"},
		{"tls half", "tls_key = \"key.pem\"\n" + room, "serve.toml:1: tls_key: is given without tls_cert"},
		{"tls files", "tls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n" + room, "serve.toml:1: tls_cert: open"},
		{"token twice", "operator_token_file = \"operator.token\"\noperator_token_env = \"T\"\n" + room, "serve.toml:2: operator_token_env: give operator_token_file or operator_token_env, not both"},
		{"token env", "operator_token_env = \"WAISTEER_UNSET\"\n" + room, "serve.toml:1: operator_token_env: the environment variable WAISTEER_UNSET is unset or empty"},
		{"token empty", "operator_token_file = \"empty\"\n" + room, "serve.toml:1: operator_token_file: " + filepath.Join(dir, "empty") + " holds no token"},
		{"no room", "listen = \"127.0.0.1:0\"\n", "serve.toml: room: nothing to steer: give a [[room]], a [steering] table or a [[pool]]"},
		{"missing file", strings.Replace(room, "policy.wsp1", "missing.wsp1", 1), "serve.toml:5: room[0].policy: open " + filepath.Join(dir, "missing.wsp1")},
		{"not a file", strings.Replace(room, "room.cbor", "/dev/zero", 1), "serve.toml:3: room[0].descriptor: /dev/zero is not a regular file"},
		{"missing key", strings.Replace(room, "steering_key = \"steer.key\"\n", "", 1), "serve.toml:2: room[0].steering_key: is needed"},
		// §9.1 step 2: the policy of another room is wrong_room.
		{"wrong room", strings.Replace(room, "policy.wsp1", "other.wsp1", 1), "serve.toml:5: room[0].policy: the policy is for room " + other.ID.String()},
		// §3.5: a key the key log does not list signs no decision.
		{"steering key", strings.Replace(room, "steer.key", "other.key", 1), "serve.toml:6: room[0].steering_key: the key " + other.Steer.Public().String() + " may not sign"},
		// COMPANION §4.1 step 3: a room with an origin needs its key log.
		{"no key log", strings.Replace(room, "keylog = \"keylog.cbor\"\n", "", 1), "serve.toml:3: room[0].descriptor: the room step refuses the room: key_log_missing"},
		{"two rooms", room + room, "serve.toml:8: room[1]: room " + r.ID.String() + " is room[0]'s too"},
		// Issue 15: the store's engine, and a DSN never in the file.
		{"store engine", "[store]\nengine = \"sqlite\"\n" + room, `serve.toml:2: store.engine: "sqlite" is not "bbolt" (the default, in data_dir) or "postgres"`},
		{"store dsn", "[store]\nengine = \"postgres\"\ndsn = \"postgres://u:pw@db/w\"\n" + room, "serve.toml:3: store.dsn: a DSN is not written in the configuration (it may hold a password)"},
		{"store no dsn", "[store]\nengine = \"postgres\"\n" + room, `serve.toml:2: store.engine: "postgres" needs the database's DSN: give dsn_env or dsn_file`},
		{"store dsn env", "[store]\nengine = \"postgres\"\ndsn_env = \"WAISTEER_UNSET\"\n" + room, "serve.toml:3: store.dsn_env: the environment variable WAISTEER_UNSET is unset or empty"},
		{"store dsn twice", "[store]\nengine = \"postgres\"\ndsn_env = \"D\"\ndsn_file = \"empty\"\n" + room, "serve.toml:4: store.dsn_file: give dsn_env or dsn_file, not both"},
		{"store dsn empty", "[store]\nengine = \"postgres\"\ndsn_file = \"empty\"\n" + room, "serve.toml:3: store.dsn_file: " + filepath.Join(dir, "empty") + " holds no DSN"},
		{"store bolt dsn", "[store]\ndsn_env = \"D\"\n" + room, `serve.toml:2: store.dsn_env: is PostgreSQL's: give engine = "postgres" with it`},
		// Issue 26 item 6: PostgreSQL's timeouts, read as durations.
		{"store bolt timeout", "[store]\nstatement_timeout = \"3s\"\n" + room, `serve.toml:2: store.statement_timeout: is PostgreSQL's: give engine = "postgres" with it`},
		{"store timeout", "[store]\nengine = \"postgres\"\ndsn_env = \"D\"\nconnect_timeout = \"soon\"\n" + room, `serve.toml:4: store.connect_timeout: "soon" is not a duration`},
		{"store keep foreign", "[store]\nkeep_foreign_rooms = \"yes\"\n" + room, "serve.toml:2"},
		{"store and data_dir", "data_dir = \"data\"\n[store]\nengine = \"postgres\"\ndsn_file = \"other.key\"\n" + room, `serve.toml:1: data_dir: is bbolt's directory; with [store] engine = "postgres" the state is in the database`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := filepath.Join(dir, "serve.toml")
			_, err := serve.Parse(name, []byte(c.doc), func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v\nwant it to hold %q", err, c.want)
			}
		})
	}

	// The token from the environment, and an unprotected token file warned
	// about.
	if err := os.WriteFile(filepath.Join(dir, "open.token"), []byte("t0k\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := serve.Parse(filepath.Join(dir, "serve.toml"), []byte("operator_token_env = \"TOKEN\"\n"+room),
		func(k string) string { return map[string]string{"TOKEN": " s3cret\n"}[k] })
	if err != nil || cfg.Server.OperatorToken != "s3cret" {
		t.Errorf("token from the environment: %v, %q", err, cfg.Server.OperatorToken)
	}
	cfg, err = serve.Parse(filepath.Join(dir, "serve.toml"), []byte("[store]\nengine = \"postgres\"\ndsn_env = \"DB\"\n"+room),
		func(k string) string { return map[string]string{"DB": " postgres://w@db/w\n"}[k] })
	if err != nil || cfg.Store != (serve.StoreConfig{Engine: serve.StorePostgres, DSN: "postgres://w@db/w"}) {
		t.Errorf("DSN from the environment: %v, %+v", err, cfg.Store)
	}
	cfg, err = serve.Parse(filepath.Join(dir, "serve.toml"), []byte("[store]\nengine = \"postgres\"\ndsn_env = \"DB\"\nkeep_foreign_rooms = true\nconnect_timeout = \"2s\"\nstatement_timeout = \"30s\"\n"+room),
		func(k string) string { return map[string]string{"DB": "postgres://w@db/w"}[k] })
	if want := (serve.StoreConfig{Engine: serve.StorePostgres, DSN: "postgres://w@db/w", ConnectTimeout: 2 * time.Second, StatementTimeout: 30 * time.Second}); err != nil || cfg.Store != want || !cfg.Server.KeepForeignRooms {
		t.Errorf("[store] keep_foreign_rooms and timeouts: %v, %+v, keep %v", err, cfg.Store, cfg.Server.KeepForeignRooms)
	}
	cfg, err = serve.Parse(filepath.Join(dir, "serve.toml"), []byte("operator_token_file = \"open.token\"\n"+room), os.Getenv)
	if err != nil || cfg.Server.OperatorToken != "t0k" || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "can be read by others") {
		t.Errorf("open token file: %v, %q, %q", err, cfg.Server.OperatorToken, cfg.Warnings)
	}
}

func TestServeUsage(t *testing.T) {
	if _, errs, code := waisteer(t, "", "serve"); code != 2 || !strings.Contains(errs, "-c FILE is required") {
		t.Errorf("exit %d: %s", code, errs)
	}
	if _, errs, code := waisteer(t, "", "serve", "-c", "x.toml", "-log", "xml"); code != 2 || !strings.Contains(errs, "text or json") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// buildWaisteer builds the command into dir, for tests that need a real
// process to kill.
func buildWaisteer(t *testing.T, dir string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "waisteer")
	out, err := exec.Command(goCmd, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveProc is a `waisteer serve` process.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	mu     sync.Mutex
	log    bytes.Buffer // its standard error: the log
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

func (p *serveProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// startServe starts `waisteer serve -c cfg` and waits for the URL it logs.
// The process is killed when the test ends.
func startServe(t *testing.T, bin, cfg string) *serveProc {
	t.Helper()
	return startServeEnv(t, bin, cfg, nil)
}

// startServeEnv is startServe with environment variables added.
func startServeEnv(t *testing.T, bin, cfg string, env []string) *serveProc {
	t.Helper()
	p := &serveProc{cmd: exec.Command(bin, "serve", "-c", cfg), exited: make(chan struct{})}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if strings.Contains(line, "msg=listening") {
				for f := range strings.FieldsSeq(line) {
					if u, ok := strings.CutPrefix(f, "url="); ok {
						urls <- u
					}
				}
			}
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	select {
	case p.url = <-urls:
	case <-p.exited:
		t.Fatalf("serve exited before listening: %v\n%s", p.err, p.logText())
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not listen within 20 s:\n%s", p.logText())
	}
	return p
}

// onServer rewrites a URI of the room's policy (http://127.0.0.1/...) to the
// server at base.
func onServer(uri, base string) string {
	return base + strings.TrimPrefix(uri, "http://127.0.0.1")
}

// TestServeProcess runs the real command as a process, built once, and
// stops it as an operator's machine would: by a crash, and by SIGTERM.
func TestServeProcess(t *testing.T) {
	bin := buildWaisteer(t, t.TempDir())
	t.Run("crash", func(t *testing.T) { testServeCrash(t, bin) })
	t.Run("SIGTERM", func(t *testing.T) { testServeSIGTERM(t, bin) })
}

// testServeCrash: a real server process is killed (SIGKILL) in the middle of
// a load of records and steering requests and restarted on the same
// data_dir. Every record it acknowledged and every decision whose manifest
// went out is still served, byte for byte, and each decision verifies (§9)
// against the manifest that was served with it (§8.4: the decision is kept
// as long as the records it names).
func testServeCrash(t *testing.T, bin string) {
	r, cfg := testRoomFiles(t, t.TempDir())
	srv := startServe(t, bin, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	if err := r.Backfill(ctx, &client.Client{HTTP: hc}, srv.url, time.Now()); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	acked := map[sig.Hash][]byte{}   // records the server acknowledged
	manifests := map[string][]byte{} // decision URI → the manifest that named it
	var order []string               // the decision URIs in the order answered
	var wg sync.WaitGroup
	p := r.Policy
	for g := range 3 { // hops posting records: new digests each time
		wg.Go(func() { hopLoad(ctx, t, hc, r, g, func(int) string { return srv.url }, &mu, acked) })
	}
	for g := range 6 { // players: new sessions, and sessions asking again
		wg.Go(func() {
			target := onServer(p.ServerURI, srv.url) + "?_HLS_pathway=%22cdn-a%22&_HLS_throughput=6000000"
			for n := 0; ctx.Err() == nil; n++ {
				m, err := (&client.Client{HTTP: hc}).Steer(ctx, target)
				if err != nil {
					continue
				}
				mu.Lock()
				if manifests[m.Decision] == nil {
					order = append(order, m.Decision)
				}
				manifests[m.Decision] = m.Raw
				mu.Unlock()
				if (n+g)%2 == 0 {
					target = onServer(m.Reload, srv.url) + "&_HLS_pathway=%22" + m.Priority[0] + "%22&_HLS_throughput=6000000"
				}
			}
		})
	}
	// The kill comes in the middle of the load, once it has gone on for a
	// while and acknowledged enough (a busy machine is slower).
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		enough := len(acked) >= 200 && len(manifests) >= 200
		mu.Unlock()
		if enough && time.Since(start) > time.Second {
			break
		}
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.exited
	cancel()
	wg.Wait()
	if len(acked) == 0 || len(manifests) == 0 {
		t.Fatalf("no load before the kill: %d records, %d manifests\n%s", len(acked), len(manifests), srv.logText())
	}
	t.Logf("killed after %d records and %d decisions acknowledged", len(acked), len(manifests))

	srv = startServe(t, bin, cfg)
	ctx = context.Background()
	// Every failure is counted; the first few are shown.
	k := newKeptCheck(t, hc)
	k.records(srv.url, acked)
	// Each decision, verified with the room's files and the records the
	// restarted server holds.
	k.decisions(r, srv.url, srv.url, order, manifests)
	// And through `verify -url`, as an auditor would, for the first
	// decision answered and the last before the kill.
	for _, uri := range []string{order[0], order[len(order)-1]} {
		out, errs, code := waisteer(t, "", "verify", "-url", onServer(uri, srv.url), "-authority", r.AuthorityPub.String())
		if code != 0 || !strings.HasPrefix(out, `{"outcome":"accept"`) {
			k.failf("verify -url %s: exit %d: %s %s", uri, code, out, errs)
		}
	}
}

// keptCheck checks, after a server was killed, that what it acknowledged
// is still served, counting every failure and showing the first few.
type keptCheck struct {
	t        *testing.T
	hc       *http.Client
	failures int
}

func newKeptCheck(t *testing.T, hc *http.Client) *keptCheck {
	k := &keptCheck{t: t, hc: hc}
	t.Cleanup(func() {
		if k.failures > 0 {
			t.Errorf("%d failures after the kill", k.failures)
		}
	})
	return k
}

func (k *keptCheck) failf(format string, args ...any) {
	k.t.Helper()
	if k.failures++; k.failures <= 5 {
		k.t.Errorf(format, args...)
	}
}

func (k *keptCheck) get(target string) []byte {
	b, err := (&client.Client{HTTP: k.hc}).Get(context.Background(), target, api.MaxDecisionBytes)
	if err != nil {
		k.failf("after the kill: %v", err)
	}
	return b
}

// records checks that the server at base serves each acknowledged record
// byte for byte.
func (k *keptCheck) records(base string, acked map[sig.Hash][]byte) {
	for d, raw := range acked {
		if b := k.get(base + "/v1/records/" + d.String()); b != nil && !bytes.Equal(b, raw) {
			k.failf("record %s: the server has other bytes", d)
		}
	}
}

// decisions fetches each decision of order from the server at
// decisionsAt and the records it names from recordsAt, and verifies it
// (§9) with the room's files against the manifest that named it.
func (k *keptCheck) decisions(r *demo.Room, decisionsAt, recordsAt string, order []string, manifests map[string][]byte) {
	base := verify.Input{Descriptor: r.Descriptor, KeyLogHead: r.Head, Policy: r.PolicyBytes}
	records := map[sig.Hash][]byte{}
	for _, uri := range order {
		in := base
		if in.Decision = k.get(onServer(uri, decisionsAt)); in.Decision == nil {
			continue
		}
		in.Manifest = manifests[uri]
		named, err := decisionOf(in.Decision)
		if err != nil {
			k.failf("%s: %v", uri, err)
			continue
		}
		for _, d := range named {
			if records[d] == nil {
				records[d] = k.get(recordsAt + "/v1/records/" + d.String())
			}
			in.Records = append(in.Records, records[d])
		}
		if _, err := verify.Verify(in); err != nil {
			k.failf("decision %s after the kill: %v", uri, err)
		}
	}
}

// hopLoad posts records as hop group g until ctx ends: one to three a POST,
// new digests each time, the n-th POST to the server at base(n). What a
// server acknowledges is added to acked, under mu; a POST that fails is
// not acknowledged.
func hopLoad(ctx context.Context, t *testing.T, hc *http.Client, r *demo.Room, g int, base func(n int) string, mu *sync.Mutex, acked map[sig.Hash][]byte) {
	p := r.Policy
	for n := 0; ctx.Err() == nil; n++ {
		end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
		var body []byte
		sent := map[sig.Hash][]byte{}
		for k := range 1 + n%3 {
			h := (n + k) % len(r.Hops)
			raw := r.Record(h, end-uint64(1+(n+k)%6)*p.PeriodUs, func(rec *evidence.Record) {
				rec.Sessions = uint32(1_000_000*(g+1) + 10*n + k)
			})
			sent[evidence.NamedDigest(raw)] = raw
			body = append(body, raw...)
		}
		results, err := postResults(ctx, hc, r.RecordsURL(base(n)), body)
		if err != nil {
			continue
		}
		mu.Lock()
		for _, res := range results {
			if res.Outcome != "accepted" && res.Outcome != "duplicate" {
				t.Errorf("record refused: %+v", res)
				continue
			}
			d, err := sig.ParseHash(res.Digest)
			if err != nil || sent[d] == nil {
				t.Errorf("a server acknowledged %q, which was not sent", res.Digest)
				continue
			}
			acked[d] = sent[d]
		}
		mu.Unlock()
	}
}

// decisionOf lists the digests a decision names.
func decisionOf(b []byte) ([]sig.Hash, error) {
	d, err := decision.Parse(b)
	if err != nil {
		return nil, err
	}
	var out []sig.Hash
	for i := range d.Pathways {
		out = append(out, d.Pathways[i].Records...)
	}
	return out, nil
}

// testServeSIGTERM: SIGTERM lets a request in flight finish (its record is
// acknowledged and durable), then the server writes its decisions, closes
// its store and exits 0.
func testServeSIGTERM(t *testing.T, bin string) {
	r, cfg := testRoomFiles(t, t.TempDir())
	srv := startServe(t, bin, cfg)

	raw := r.Record(0, uint64(time.Now().UnixMicro())/r.Policy.PeriodUs*r.Policy.PeriodUs-r.Policy.PeriodUs, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/rooms/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", r.ID, len(raw))
	conn.Write(raw[:100])
	time.Sleep(300 * time.Millisecond) // the handler is reading the body
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case <-srv.exited:
		t.Fatalf("the server exited with a request in flight: %v\n%s", srv.err, srv.logText())
	default:
	}
	conn.Write(raw[100:])
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v\n%s", err, srv.logText())
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"accepted"`) {
		t.Errorf("the request in flight: %s %s", resp.Status, body)
	}
	select {
	case <-srv.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the server did not exit after SIGTERM:\n%s", srv.logText())
	}
	if srv.err != nil {
		t.Errorf("exit: %v\n%s", srv.err, srv.logText())
	}
	for _, want := range []string{"msg=\"shutting down\"", "msg=\"store closed\"", "msg=stopped"} {
		if !strings.Contains(srv.logText(), want) {
			t.Errorf("the log lacks %s:\n%s", want, srv.logText())
		}
	}
	srv = startServe(t, bin, cfg)
	b, err := client.New().Get(context.Background(), srv.url+"/v1/records/"+evidence.NamedDigest(raw).String(), api.MaxRecordBytes)
	if err != nil || !bytes.Equal(b, raw) {
		t.Errorf("the record acknowledged during the shutdown, after a restart: %v", err)
	}
}

// verifyURLServer serves a scenario's decision and everything a verifier
// needs at the server's /v1/ routes, with edit changing what is served.
func verifyURLServer(t *testing.T, edit func(files map[string][]byte)) (url string, sc *scenario.Scenario, m *scenario.Made) {
	t.Helper()
	sc, err := scenario.Build(scenario.Spec{Name: "verify url", Periods: 10})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := report.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err = sc.Decide(scenario.Request{T: 8*scenario.Period + 10_000_000, Session: sess})
	if err != nil {
		t.Fatal(err)
	}
	id := sc.Room.ID().String()
	files := map[string][]byte{
		"/v1/decisions/" + m.Digest.String():          m.Bytes,
		"/v1/rooms/" + id + "/descriptor":             sc.Room.DescriptorBytes,
		"/v1/rooms/" + id + "/keylog":                 sc.Room.HeadBytes,
		"/v1/policies/" + sc.Policy.Digest().String(): sc.PolicyBytes,
	}
	for _, r := range sc.Records {
		files["/v1/records/"+evidence.NamedDigest(r).String()] = r
	}
	// The room's log of one decision (issue 16): its checkpoint, signed by
	// the steering key under the room's one head (seq 1, from leaf 0), the
	// head by seq, and the inclusion of leaf 0 in a tree of one, whose
	// root is the leaf's hash (RFC 6962 §2.1) and whose proof is empty.
	leaf := store.LogEntry{Digest: m.Digest, T: m.Decision.T}.Leaf()
	cp, err := declog.Sign(declog.Checkpoint{Room: sc.Room.ID(), Size: 1, Root: tlog.Hash(sha256.Sum256(append([]byte{0}, leaf...))),
		Keys: &declog.Epoch{Seq: 1, From: 0}}, sc.SteerKey)
	if err != nil {
		t.Fatal(err)
	}
	files["/v1/rooms/"+id+"/log/checkpoint"] = cp
	files["/v1/rooms/"+id+"/log/epochs"] = []byte(`[{"seq":1,"from":0,"handover":""}]`)
	files["/v1/rooms/"+id+"/keylog/1"] = sc.Room.HeadBytes
	files["/v1/rooms/"+id+"/log/inclusion/"+m.Digest.String()] = []byte(`{"index":0,"size":1,"proof":[]}`)
	// Its tiles (C2SP tlog-tiles): the one entry after its length, and the
	// one leaf hash.
	rh := sha256.Sum256(append([]byte{0}, leaf...))
	files["/v1/rooms/"+id+"/log/tile/entries/000.p/1"] = append([]byte{0, 40}, leaf...)
	files["/v1/rooms/"+id+"/log/tile/0/000.p/1"] = rh[:]
	if edit != nil {
		edit(files)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, sc, m
}

// TestVerifyURL: `verify -url` fetches a decision's inputs (§9.1) from its
// server's routes; a record the server does not hold is refused
// record_missing at its place (§9.1 step 4.1); a pinned authority refuses
// another room; and what is not the decision the URL names is an error.
func TestVerifyURL(t *testing.T) {
	base, sc, m := verifyURLServer(t, nil)
	u := base + "/v1/decisions/" + m.Digest.String()
	authority := sc.Room.AuthorityKey.Public().String()
	out, errs, code := waisteer(t, "", "verify", "-url", u, "-authority", authority)
	if code != 0 || !strings.HasPrefix(out, `{"outcome":"accept"`) || !strings.Contains(out, m.Digest.String()) {
		t.Errorf("exit %d: %s %s", code, out, errs)
	}
	// With the manifest served with it (§9.1 step 7): the right one, then
	// another.
	dir := t.TempDir()
	mf := filepath.Join(dir, "manifest.json")
	os.WriteFile(mf, m.Manifest, 0o644)
	if out, errs, code := waisteer(t, "", "verify", "-url", u, "-manifest", mf); code != 0 {
		t.Errorf("with its manifest: exit %d: %s %s", code, out, errs)
	}
	os.WriteFile(mf, bytes.Replace(m.Manifest, []byte(`"TTL":`), []byte(`"TTL":1`), 1), 0o644)
	if out, _, code := waisteer(t, "", "verify", "-url", u, "-manifest", mf); code != 1 || !strings.Contains(out, `"reason":"manifest_mismatch"`) {
		t.Errorf("with another manifest: exit %d: %s", code, out)
	}

	other := strings.Repeat("01", 32)
	// Refused before anything else is fetched, with an outcome object like
	// any refusal.
	if out, errs, code := waisteer(t, "", "verify", "-url", u, "-authority", other); code != 1 ||
		out != `{"outcome":"refuse","reason":"authority_mismatch","where":"room"}`+"\n" || !strings.Contains(errs, "not the pinned "+other) {
		t.Errorf("another authority pinned: exit %d: %s %s", code, out, errs)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no digest", []string{"-url", base + "/v1/decisions/"}, 2, "does not end in a decision's digest"},
		{"not http", []string{"-url", "ftp://x/" + m.Digest.String()}, 2, "an http or https URL is needed"},
		{"unknown decision", []string{"-url", base + "/v1/decisions/" + strings.Repeat("0", 64)}, 1, "404"},
		{"files too", []string{"-url", u, "-room", "room.cbor"}, 2, "give none of them as files"},
		{"authority alone", []string{"-authority", authority, "-room", "r", "-policy", "p", "-decision", "d"}, 2, "-authority goes with -url"},
		{"bad authority", []string{"-url", u, "-authority", "xyz"}, 2, "-authority"},
	} {
		out, errs, code := waisteer(t, "", append([]string{"verify"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d: %s %s", c.name, code, out, errs)
		}
	}

	// The log (issue 16): where the decision is, and the head it is
	// checked against.
	if out, errs, code := waisteer(t, "", "verify", "-url", u); code != 0 || !strings.Contains(out, `"log":{"index":0,"size":1,"key_log_seq":1}`) {
		t.Errorf("the log's facts: exit %d: %s %s", code, out, errs)
	}
	// A decision the log does not hold is refused, whatever §9 says.
	base2, _, m2 := verifyURLServer(t, func(f map[string][]byte) {
		for k := range f {
			if strings.Contains(k, "/log/inclusion/") {
				delete(f, k)
			}
		}
	})
	if out, errs, code := waisteer(t, "", "verify", "-url", base2+"/v1/decisions/"+m2.Digest.String()); code != 1 ||
		out != `{"outcome":"refuse","reason":"not_in_log","where":"log"}`+"\n" || !strings.Contains(errs, "404") {
		t.Errorf("not in the log: exit %d: %s %s", code, out, errs)
	}
	// Keys over time (issue 16 item 5): head 2 revokes the steering key
	// from leaf 1 on. The decision at leaf 0 was logged under head 1, and
	// still verifies; checked against today's head it would be
	// signer_revoked (§3.5).
	head2, seq2, err := room.Revoke(sc.Room.Room.Head(), sc.Room.OriginKey, sc.SteerKey.Public())
	if err != nil || seq2 != 2 {
		t.Fatal(seq2, err)
	}
	base3, _, m3 := verifyURLServer(t, func(f map[string][]byte) {
		id := sc.Room.ID().String()
		handover := f["/v1/rooms/"+id+"/log/checkpoint"] // of leaf 0, signed under head 1
		c, err := declog.Peek(handover, sc.Room.ID())
		if err != nil {
			t.Fatal(err)
		}
		c.Keys = &declog.Epoch{Seq: 2, From: 1}
		now, err := declog.Sign(c, sc.Room.AuthorityKey) // the steering key is revoked: the authority signs
		if err != nil {
			t.Fatal(err)
		}
		eps, _ := json.Marshal([]map[string]any{{"seq": 1, "from": 0, "handover": ""}, {"seq": 2, "from": 1, "handover": string(handover)}})
		f["/v1/rooms/"+id+"/log/checkpoint"], f["/v1/rooms/"+id+"/log/epochs"] = now, eps
		f["/v1/rooms/"+id+"/keylog/2"], f["/v1/rooms/"+id+"/keylog"] = head2, head2
	})
	u3 := base3 + "/v1/decisions/" + m3.Digest.String()
	if out, errs, code := waisteer(t, "", "verify", "-url", u3); code != 0 || !strings.Contains(out, `"key_log_seq":1}`) {
		t.Errorf("a decision logged before its signer's revocation: exit %d: %s %s", code, out, errs)
	}
	if out, _, code := waisteer(t, "", "verify", "-url", u3, "-log=false"); code != 1 || !strings.Contains(out, `"reason":"signer_revoked"`) {
		t.Errorf("the same against today's head: exit %d: %s", code, out)
	}

	// A record the server does not hold.
	first := m.Decision.Pathways[0].Records[0]
	base, _, m = verifyURLServer(t, func(f map[string][]byte) { delete(f, "/v1/records/"+first.String()) })
	out, _, code = waisteer(t, "", "verify", "-url", base+"/v1/decisions/"+m.Digest.String())
	if code != 1 || !strings.Contains(out, `"reason":"record_missing","where":"evidence/0/0"`) {
		t.Errorf("a record not held: exit %d: %s", code, out)
	}
	// Other bytes at the decision's URL, a policy not held, a record past
	// the limit: each an outcome object naming what could not be had, and
	// why on standard error.
	for _, c := range []struct {
		name    string
		edit    func(f map[string][]byte, m string)
		outcome string
		want    string
	}{
		{"other bytes", func(f map[string][]byte, d string) { f["/v1/decisions/"+d] = append(f["/v1/decisions/"+d], 0) },
			`{"outcome":"refuse","reason":"digest_mismatch","where":"decision"}`, "not the decision"},
		{"no policy", func(f map[string][]byte, _ string) {
			for k := range f {
				if strings.HasPrefix(k, "/v1/policies/") {
					delete(f, k)
				}
			}
		}, `{"outcome":"refuse","reason":"http_404","where":"policy"}`, "/v1/policies/"},
		{"big record", func(f map[string][]byte, _ string) {
			f["/v1/records/"+first.String()] = make([]byte, api.MaxRecordBytes+1)
		}, `{"outcome":"refuse","reason":"answer_too_large","where":"evidence/0/0"}`, "more than 4096 bytes"},
	} {
		var digest string
		base, _, m := verifyURLServer(t, func(f map[string][]byte) {
			for k := range f {
				if d, ok := strings.CutPrefix(k, "/v1/decisions/"); ok {
					digest = d
				}
			}
			c.edit(f, digest)
		})
		out, errs, code := waisteer(t, "", "verify", "-url", base+"/v1/decisions/"+m.Digest.String())
		if code != 1 || out != c.outcome+"\n" || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d: %s %s", c.name, code, out, errs)
		}
	}
}

// BenchmarkServeHTTP measures one room through HTTP on this machine: 32
// players in a closed loop (each asks again from its manifest's RELOAD-URI
// as soon as it has its answer), against the real server on the bbolt
// store, client and server in one process. It reports decisions per second
// and the bytes each stored decision takes in the store's decision buckets
// (bbolt's in-use bytes of its pages, evidence snapshots included) and in
// the file's growth.
//
// It runs once on each HTTP engine (http.engine).
//
//	go test -run=NONE -bench=ServeHTTP -benchtime=5s ./cmd/waisteer
func BenchmarkServeHTTP(b *testing.B) {
	for _, engine := range []string{serve.EngineFast, serve.EngineStd} {
		b.Run(strings.ReplaceAll(engine, "/", "-"), func(b *testing.B) { benchServeHTTP(b, engine) })
	}
}

func benchServeHTTP(b *testing.B, engine string) {
	b.ReportAllocs()
	dir := b.TempDir()
	r, err := demo.NewRoom("bench", "http://127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, serve.StoreFile)
	st, err := store.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg := &serve.Config{HTTP: serve.DefaultLimits()}
	cfg.HTTP.Engine = engine
	logger := slog.New(slog.DiscardHandler)
	cfg.Server = server.Config{Rooms: []server.RoomConfig{r.RoomConfig()}, Logger: logger}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	urls := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve.Serve(ctx, nil, logger, ln, cfg, st, store.NewLoads(), func(u string) { urls <- u })
	}()
	base := <-urls
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	if err := r.Backfill(ctx, &client.Client{HTTP: hc}, base, time.Now()); err != nil {
		b.Fatal(err)
	}
	var fileBefore int64
	if fi, err := os.Stat(path); err == nil {
		fileBefore = fi.Size()
	}

	var mu sync.Mutex
	decisions := 0
	b.SetParallelism(16) // 32 players on 2 cores
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		target := base + "/v1/steer?_HLS_pathway=%22cdn-a%22&_HLS_throughput=6000000"
		n := 0
		for pb.Next() {
			m, err := (&client.Client{HTTP: hc}).Steer(ctx, target)
			if err != nil {
				b.Error(err)
				return
			}
			n++
			target = onServer(m.Reload, base) + "&_HLS_pathway=%22" + m.Priority[0] + "%22&_HLS_throughput=6000000"
		}
		mu.Lock()
		decisions += n
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	// No decision was stored before the players began: the backfill
	// stores records only.
	var inUse int
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"decisions", "decision_digests", "contexts", "context_ids", "snapshots", "snapshot_bodies"} {
			bk := tx.Bucket([]byte(name))
			if bk == nil {
				return fmt.Errorf("the store has no bucket %q", name)
			}
			s := bk.Stats()
			inUse += s.LeafInuse + s.BranchInuse
		}
		return nil
	})
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(decisions)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(inUse)/float64(decisions), "B/decision")
	b.ReportMetric(float64(fi.Size()-fileBefore)/float64(decisions), "file-B/decision")
}

// TestServeTLS: with tls_cert and tls_key the server answers HTTPS, over
// HTTP/2 behind net/http (the default under TLS) and HTTP/1.1 behind
// fasthttp when http.engine asks for it, steers through it, and stops
// cleanly when its context ends.
func TestServeTLS(t *testing.T) {
	for _, c := range []struct{ engine, doc string }{
		{serve.EngineStd, ""},
		{serve.EngineFast, "[http]\nengine = \"fasthttp\"\n"},
	} {
		t.Run(strings.ReplaceAll(c.engine, "/", "-"), func(t *testing.T) { testServeTLS(t, c.doc, c.engine == serve.EngineStd) })
	}
}

func testServeTLS(t *testing.T, httpDoc string, wantHTTP2 bool) {
	dir := t.TempDir()
	testRoomFiles(t, dir)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "waisteer test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	doc := "tls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n" + httpDoc + "[[room]]\ndescriptor = \"room.cbor\"\nkeylog = \"keylog.cbor\"\npolicy = \"policy.wsp1\"\nsteering_key = \"steer.key\"\n"
	cfg, err := serve.Parse(filepath.Join(dir, "serve.toml"), []byte(doc), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logb lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logb, nil))
	ctx, stop := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve.Serve(ctx, nil, logger, ln, cfg, store.NewMemory(), store.NewLoads(), func(u string) { urls <- u })
	}()
	var u string
	select {
	case u = <-urls:
	case err := <-served:
		t.Fatalf("serve: %v", err)
	}
	if !strings.HasPrefix(u, "https://127.0.0.1:") {
		t.Errorf("url %q", u)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := hc.Get(u + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || (resp.ProtoMajor == 2) != wantHTTP2 {
		t.Errorf("%s over %s", resp.Status, resp.Proto)
	}
	resp, err = hc.Get(u + "/v1/steer")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != server.ManifestType || !bytes.Contains(body, []byte("PATHWAY-PRIORITY")) {
		t.Errorf("steering over TLS: %s %q %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	stop()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	if !strings.Contains(logb.String(), "msg=stopped") {
		t.Errorf("log:\n%s", logb.String())
	}
}

// postResults posts records and returns the server's result for each,
// refused ones included.
func postResults(ctx context.Context, hc *http.Client, target string, body []byte) ([]api.RecordResult, error) {
	a, err := (&client.Client{HTTP: hc}).PostRecords(ctx, target, body)
	if a == nil {
		return nil, err
	}
	return a.Results, nil
}

// TestAuditBadInput (issue 16): `audit` over a room's log served as files;
// a malformed checkpoint, one signed by a key the room does not list, a
// tile that is not the tree's or does not read, and `verify -url` given a
// malformed proof, each refused with the reason; the audit of the honest
// files holds, and a second one extends the checkpoint it kept.
func TestAuditBadInput(t *testing.T) {
	state := filepath.Join(t.TempDir(), "cp")
	base, sc, _ := verifyURLServer(t, nil)
	args := []string{"audit", "-url", base, "-room", sc.Room.ID().String(), "-state", state}
	for range 2 {
		if out, errs, code := waisteer(t, "", args...); code != 0 || !strings.Contains(out, "a log of 1 decisions") || !strings.Contains(out, "outcome: every check holds") {
			t.Fatalf("the honest log: exit %d: %s %s", code, out, errs)
		}
	}
	if out, _, _ := waisteer(t, "", args...); !strings.Contains(out, "consistent with the checkpoint seen before (1 decisions)") {
		t.Errorf("the second audit does not say it extends the first's checkpoint: %s", out)
	}
	id := sc.Room.ID().String()
	other, err := declog.Sign(declog.Checkpoint{Room: sc.Room.ID(), Size: 1, Keys: &declog.Epoch{Seq: 1}}, room.TestKey("not the room's"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		file string
		body []byte
		want string
	}{
		{"a checkpoint that is no note", "/log/checkpoint", []byte("hello\n"), "no signatures after its text"},
		{"a checkpoint with a size of 01", "/log/checkpoint", []byte("waisteer/rooms/" + id + "/log\n01\nAAAA\n\n— x AAAA\n"), "not a count in decimal"},
		{"a checkpoint by another key", "/log/checkpoint", other, "signed by no key that may sign for room"},
		{"a tile of entries cut short", "/log/tile/entries/000.p/1", []byte{0, 40, 1, 2}, "cut short"},
		{"a tile of entries not the tree's", "/log/tile/entries/000.p/1", append([]byte{0, 40}, make([]byte, 40)...), "leaf 0 is not the tree's"},
		{"epochs that do not read", "/log/epochs", []byte(`[{"seq":"1"}]`), "not the JSON expected"},
	} {
		base, _, _ := verifyURLServer(t, func(f map[string][]byte) { f["/v1/rooms/"+id+c.file] = c.body })
		out, errs, code := waisteer(t, "", "audit", "-url", base, "-room", id, "-state", filepath.Join(t.TempDir(), "cp"))
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, want 1 and %q: %s %s", c.name, code, c.want, out, errs)
		}
	}
	// verify -url given a proof that does not read, or does not prove.
	for _, c := range []struct {
		name string
		body string
		want string
	}{
		{"a proof that is no JSON", "{", "an inclusion proof"},
		{"a proof with a field more", `{"index":0,"size":1,"proof":[],"x":1}`, "unknown field"},
		{"a proof of another size", `{"index":0,"size":2,"proof":[]}`, "asked in 1"},
		{"a proof that does not prove", `{"index":0,"size":1,"proof":["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]}`, "is not the decision in the checkpoint's tree"},
	} {
		base, _, m := verifyURLServer(t, func(f map[string][]byte) {
			for k := range f {
				if strings.Contains(k, "/log/inclusion/") {
					f[k] = []byte(c.body)
				}
			}
		})
		out, errs, code := waisteer(t, "", "verify", "-url", base+"/v1/decisions/"+m.Digest.String())
		if code != 1 || !strings.Contains(out, `"reason":"not_in_log"`) || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, want 1 and %q: %s %s", c.name, code, c.want, out, errs)
		}
	}
	// Usage.
	for _, c := range [][]string{{"-url", "ftp://x", "-room", id}, {"-url", base, "-room", "xyz"}, {"-url", base + "/v1", "-room", id}} {
		if _, _, code := waisteer(t, "", append([]string{"audit"}, c...)...); code != 2 {
			t.Errorf("audit %v: exit %d, want 2", c, code)
		}
	}
}
