package bench

// `waisteer demo` under the steering load, in its own process, its hops
// posting by themselves; and the start-up of a server on a store a run
// left behind.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/policy"
)

// benchDemo is what the demo's phases measured.
type benchDemo struct {
	conns     int
	sat, half benchServed
	records   uint64 // records its hops had accepted over the phases
	stored    uint64 // the store's decisions once it stopped
	leaves    uint64 // its log's leaves then
	answered  uint64 // its steering route's 200s over its life
}

// demoReady reads the demo's curl line, which names its steering route:
//
//	curl 'http://127.0.0.1:PORT/v1/steer?_HLS_pathway=...'
func demoReady(c *benchChild, line string) {
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "curl 'http://")
	if !ok || !strings.Contains(u, "?_HLS_pathway=") {
		return
	}
	u, _, _ = strings.Cut(u, "?")
	host, path, ok := strings.Cut(u, "/")
	if ok {
		c.addr, c.path = host, "/"+path
	}
}

// demo measures the demo saturated, then paced at rate (issue 30: the
// same offered rate as serve's half-rate phase, to compare their p99s).
func (b *bencher) demo(ctx context.Context, rate float64) (*benchDemo, error) {
	dir := filepath.Join(b.tmp, "demo")
	c, err := b.startChild(ctx, demoReady, "demo", "-listen", "127.0.0.1:0", "-dir", dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if c != nil {
			c.kill()
		}
	}()
	raw, err := os.ReadFile(filepath.Join(dir, "policy.wsp1"))
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse(raw)
	if err != nil {
		return nil, err
	}
	d := &benchDemo{conns: b.o.halfConns()}
	l := newBenchLoad(c.addr, c.path, p.IDs(), int(p.Initial), d.conns, b.o.Players)
	defer l.close()
	if err := l.prime(ctx); err != nil {
		return nil, fmt.Errorf("the players' first manifests: %w", err)
	}
	s, err := b.newServer("waisteer demo", c, l, true)
	if err != nil {
		return nil, err
	}
	if err := b.warm(ctx, s); err != nil {
		return nil, err
	}
	before, _ := settledCounts(c.addr)
	if err := b.saturate(ctx, b.o.Duration, s); err != nil {
		return nil, err
	}
	if d.sat, err = b.served(s); err != nil {
		return nil, err
	}
	if d.half, err = b.pace(ctx, s, rate); err != nil {
		return nil, err
	}
	after, _ := settledCounts(c.addr)
	d.records, d.answered = after.records-before.records, after.answered
	b.logf("the demo: %s decisions/s, p99 %s; at half rate p99 %s; %d records from its hops meanwhile", benchRate(d.sat.rate), benchDur(d.sat.pct[1]), benchDur(d.half.pct[1]), d.records)
	l.close()
	err = c.stop()
	c = nil
	if err != nil {
		return nil, err
	}
	d.stored, _, d.leaves, err = benchStoredLogged(filepath.Join(dir, "data", serve.StoreFile))
	return d, err
}

// benchStartup is the time from spawning a server on a store to its first
// 200 on the steering route.
type benchStartup struct {
	took      time.Duration
	decisions uint64
	bytes     int64
}

// startup restarts bench serve on the configuration cfgFile (whose store
// is storeFile) on a port chosen beforehand, so that the clock runs from
// the spawn, and asks its steering route every 2 ms until it answers 200.
func (b *bencher) startup(ctx context.Context, cfgFile, path, storeFile string) (*benchStartup, error) {
	st, c, err := b.startupChild(ctx, cfgFile, path, storeFile)
	if err != nil {
		return nil, err
	}
	return st, c.stop()
}

// startupChild is startup, leaving the server running.
func (b *bencher) startupChild(ctx context.Context, cfgFile, path, storeFile string) (*benchStartup, *benchChild, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg, err := os.ReadFile(cfgFile)
	if err != nil {
		return nil, nil, err
	}
	cfg = []byte(strings.Replace(string(cfg), `listen = "127.0.0.1:0"`, fmt.Sprintf("listen = %q", addr), 1))
	restart := filepath.Join(filepath.Dir(cfgFile), "serve-restart.toml")
	if err := os.WriteFile(restart, cfg, 0o600); err != nil {
		return nil, nil, err
	}
	st := &benchStartup{bytes: benchFileSize(storeFile)}
	args := []string{"bench", "serve", "-c", restart}
	var pprof string
	if b.o.Profile != "" { // a profile of the recount beside steering
		pl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		pprof = pl.Addr().String()
		pl.Close()
		args = append(args, "-pprof", pprof)
	}
	cmd, err := Spawn(args...)
	if err != nil {
		return nil, nil, err
	}
	cmd = b.pin.wrap(cmd, b.pin.serverCore())
	c := &benchChild{cmd: cmd, addr: addr, pprof: pprof, stderr: &benchTail{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = io.Discard, c.stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	go func() { c.done <- cmd.Wait() }()
	hc := &http.Client{Timeout: 5 * time.Second}
	url := "http://" + addr + path + "?_HLS_pathway=%22p00%22&_HLS_throughput=5000000"
	for {
		resp, err := hc.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(start) > 60*time.Second {
			c.kill()
			return nil, nil, fmt.Errorf("no 200 in 60 s: %v: %s", err, c.stderr)
		}
		select {
		case err := <-c.done:
			return nil, nil, fmt.Errorf("the server exited: %v: %s", err, c.stderr)
		case <-ctx.Done():
			c.kill()
			return nil, nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	st.took = time.Since(start)
	b.logf("start-up: %s to the first 200", benchDur(st.took))
	return st, c, nil
}
