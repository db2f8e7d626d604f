package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/demo"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/sig"
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
