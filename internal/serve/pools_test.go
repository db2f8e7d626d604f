package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/store"
)

// TestSeedSteering: the station seed's example [steering] table
// (testdata/station-steering.toml, copied from
// station-content-steering.md as written) reads with the seed's defaults
// and serves its manifest.
func TestSeedSteering(t *testing.T) {
	cfg, err := serve.Load(filepath.Join("testdata", "station-steering.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Server.Pools) != 1 || len(cfg.Server.Rooms) != 0 {
		t.Fatalf("%d pools, %d rooms", len(cfg.Server.Pools), len(cfg.Server.Rooms))
	}
	p := cfg.Server.Pools[0]
	if p.Name != "" || p.Path != "/api/v1/steering" || p.TTL != 300 || p.CheckEvery != 5*time.Second ||
		p.CheckTimeout != 2*time.Second || p.DownAfter != 2 || p.CloneFrom != "." || len(p.Edges) != 3 {
		t.Fatalf("the seed's pool read as %+v", p)
	}
	for i, want := range []struct {
		pathway, host string
		weight        uint32
		check         string
	}{
		{"edge-1", "edge-1.edges.example", 1, "http://edge-1.edges.example/health"},
		{"edge-2", "edge-2.edges.example", 2, "http://edge-2.edges.example/health"},
		{"bunny", "kettle-cdn.example", 0, ""},
	} {
		e := p.Edges[i]
		if e.Pathway != want.pathway || e.Host != want.host || e.Weight != want.weight || e.CheckURL != want.check {
			t.Errorf("edge %d: %+v, want %+v", i, e, want)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Server.Logger = logger
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve.Serve(ctx, nil, logger, ln, cfg, store.NewMemory(), store.NewLoads(), func(u string) { urls <- u })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	u := <-urls
	resp, err := http.Get(u + "/api/v1/steering")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Version  int      `json:"VERSION"`
		TTL      int      `json:"TTL"`
		Reload   string   `json:"RELOAD-URI"`
		Priority []string `json:"PATHWAY-PRIORITY"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if m.Version != 1 || m.TTL != 300 || len(m.Priority) != 3 || m.Priority[2] != "bunny" || !strings.HasPrefix(m.Reload, u+"/api/v1/steering?session=") {
		t.Errorf("the seed's pool served %+v", m)
	}
}

// TestPoolConfigErrors: every setting out of the station seed's range,
// a duplicate pathway, a host with a port or a scheme, and a check_url
// over https or with userinfo is refused with its file, line and key.
func TestPoolConfigErrors(t *testing.T) {
	const head = "[steering]\n"
	edge := func(lines ...string) string {
		return "[[steering.edges]]\npathway = \"a\"\n" + strings.Join(lines, "\n") + "\n"
	}
	for _, c := range []struct{ name, doc, want string }{
		{"ttl 0", head + "ttl_s = 0\n" + edge(), "serve.toml:2: steering.ttl_s"},
		{"ttl over a day", head + "ttl_s = 86401\n" + edge(), "serve.toml:2: steering.ttl_s"},
		{"check_every 0", head + "check_every_s = 0\n" + edge(), "serve.toml:2: steering.check_every_s"},
		{"check_every 301", head + "check_every_s = 301\n" + edge(), "serve.toml:2: steering.check_every_s"},
		{"timeout 99", head + "check_timeout_ms = 99\n" + edge(), "serve.toml:2: steering.check_timeout_ms"},
		{"timeout past the period", head + "check_every_s = 1\ncheck_timeout_ms = 1001\n" + edge(), "serve.toml:3: steering.check_timeout_ms"},
		{"down_after 0", head + "down_after = 0\n" + edge(), "serve.toml:2: steering.down_after"},
		{"down_after 21", head + "down_after = 21\n" + edge(), "serve.toml:2: steering.down_after"},
		{"duplicate pathway", head + edge() + edge(), "serve.toml:6: steering.edges[1].pathway"},
		{"a bad pathway", head + "[[steering.edges]]\npathway = \"a b\"\n", "serve.toml:3: steering.edges[0].pathway"},
		{"host with a port", head + edge("host = \"edge.example:8443\""), "serve.toml:4: steering.edges[0].host"},
		{"host with a scheme", head + edge("host = \"https://edge.example\""), "serve.toml:4: steering.edges[0].host"},
		{"https check", head + edge("check_url = \"https://edge.example/health\""), "serve.toml:4: steering.edges[0].check_url"},
		{"userinfo check", head + edge("check_url = \"http://u:p@edge.example/health\""), "serve.toml:4: steering.edges[0].check_url"},
		{"negative weight", head + edge("weight = -1"), "serve.toml:4: steering.edges[0].weight"},
		{"unknown key", head + edge("colour = 1"), "serve.toml:4: steering.edges[0].colour: unknown key"},
		{"two pools on one path", "[[pool]]\nname = \"a\"\npath = \"/s\"\n[[pool]]\nname = \"b\"\npath = \"/s\"\n", "serve.toml:6: pool[1].path"},
		{"a front without an origin", head + edge() + "[front]\n[[front.playlists]]\npath = \"/hls/\"\n", "front.origin: is needed"},
		{"a front's bad base", head + edge() + "[front]\norigin = \"http://127.0.0.1:9\"\nbases = { a = \"ftp://x\" }\n[[front.playlists]]\npath = \"/hls/\"\n", "serve.toml:7: front.bases.a"},
		{"a front's playlist of no pool", head + edge() + "[front]\norigin = \"http://127.0.0.1:9\"\n[[front.playlists]]\npath = \"/hls/\"\npool = \"radio\"\n", "serve.toml:9: front.playlists[0].pool"},
		{"a front's relative path", head + edge() + "[front]\norigin = \"http://127.0.0.1:9\"\n[[front.playlists]]\npath = \"hls/\"\n", "serve.toml:8: front.playlists[0].path"},
		{"a room check over https", "[[room]]\ndescriptor = \"x\"\nsteering_key = \"y\"\ncheck_urls = { a = \"https://a.example/\" }\n", "room[0]"},
		// Issue 17: [steering.qoe] and a room's qoe.
		{"a qoe fraction of 1", head + edge() + "[steering.qoe]\nfraction = 1.0\n", "serve.toml:6: steering.qoe.fraction"},
		{"a qoe short TTL past the TTL", head + "ttl_s = 20\n" + edge() + "[steering.qoe]\nfraction = 0.5\nshort_ttl_s = 30\n", "serve.toml:8: steering.qoe.short_ttl_s"},
		{"a qoe unknown key", head + edge() + "[steering.qoe]\nfraction = 0.5\nfloor = 1\n", "serve.toml:7: steering.qoe.floor: unknown key"},
		{"a room's qoe with lowest_bps", "[[room]]\ndescriptor = \"x\"\nsteering_key = \"y\"\n[room.qoe]\nfraction = 0.5\nlowest_bps = 1\n", "serve.toml:6: room[0].qoe.lowest_bps: is a pool's"},
		{"a room's qoe that moves nothing", "[[room]]\ndescriptor = \"x\"\nsteering_key = \"y\"\n[room.qoe]\nwindow_s = 30\n", "serve.toml:4: room[0].qoe: neither floor_bps nor fraction"},
		{"a room's qoe window 0", "[[room]]\ndescriptor = \"x\"\nsteering_key = \"y\"\n[room.qoe]\nfraction = 0.5\nwindow_s = 0\n", "serve.toml:6: room[0].qoe.window_s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := serve.Parse("serve.toml", []byte(c.doc), func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v\nwant it to hold %q", err, c.want)
			}
		})
	}
}

// TestSIGHUPReloadsPools: `waisteer serve` (serve.Run) reads its file
// again on SIGHUP and steers by its pools (issue 12 item 7); a file that no
// longer reads changes nothing and the log says why.
func TestSIGHUPReloadsPools(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "serve.toml")
	write := func(doc string) {
		if err := os.WriteFile(name, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const base = "listen = \"127.0.0.1:0\"\n[steering]\nttl_s = 10\n[[steering.edges]]\npathway = \"a\"\n[[steering.edges]]\npathway = \"b\"\n"
	write(base)
	cfg, err := serve.Load(name, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedLog
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	cfg.Server.Logger = logger
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve.Run(ctx, nil, logger, cfg, func(u string) { urls <- u }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	u := <-urls
	priority := func() []string {
		resp, err := http.Get(u + "/api/v1/steering")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Priority []string `json:"PATHWAY-PRIORITY"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m.Priority
	}
	if p := priority(); len(p) != 2 {
		t.Fatalf("before the reload: %v", p)
	}
	write(base + "[[steering.edges]]\npathway = \"c\"\nweight = 0\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(priority()) != 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no third edge 5 s after SIGHUP:\n%s", logs.String())
		}
	}
	if p := priority(); p[2] != "c" {
		t.Errorf("after the reload: %v, want the last resort c last", p)
	}
	write(base + "[[steering.edges]]\npathway = \"c\"\nweight = -1\n")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "not reloaded"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a bad file on SIGHUP was not logged:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "steering.edges[2].weight") {
		t.Errorf("the log does not say where the file is wrong:\n%s", logs.String())
	}
	if p := priority(); len(p) != 3 {
		t.Errorf("a refused reload changed the pool: %v", p)
	}
}

type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPoolQoEReads: [steering.qoe] reads into the pool's QoE with the
// defaults it leaves out (issue 17): a 60 s window and hold, 30 sessions, a
// margin of 0.2, and a short TTL of 30 s.
func TestPoolQoEReads(t *testing.T) {
	doc := "[steering]\nttl_s = 60\ncohort_header = \"X-Region\"\n[[steering.edges]]\npathway = \"a\"\n[steering.qoe]\nfraction = 0.5\nlowest_bps = 800000\n"
	cfg, err := serve.Parse("serve.toml", []byte(doc), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	q := cfg.Server.Pools[0].QoE
	if q == nil || q.Fraction != 0.5 || q.Lowest != 800_000 || q.Window != time.Minute || q.Hold != time.Minute ||
		q.MinSessions != 30 || q.Margin != 0.2 || q.ShortTTL != 30 || q.Floor != 0 {
		t.Errorf("read %+v", q)
	}
}
