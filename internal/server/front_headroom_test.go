package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/store"
)

// newFrontEnvClock is newFrontEnv's server over a clock the test drives.
func newFrontEnvClock(t *testing.T, c pool.Config, clock func() uint64) *frontEnv {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hls"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hls", "live.m3u8"), []byte(frontMultivariant), 0o644); err != nil {
		t.Fatal(err)
	}
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &poolEnv{t: t, loads: store.NewLoads(), logs: &syncBuffer{}}
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{c}, OperatorToken: testToken, Clock: clock,
		Front:  &FrontConfig{Origin: og, Playlists: []FrontPlaylist{{Path: "/hls/"}}},
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}, store.NewMemory(), e.loads)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = serveTest(t, srv)
	t.Cleanup(func() { e.ts.Close(); srv.Close(context.Background()) })
	return &frontEnv{poolEnv: e, dir: dir}
}

// TestFrontHeadroomCountsViewers (issue 28: headroom counts live front
// viewers per edge; on 3085efd, 0 live sessions per edge after 4 000
// backup and 4 000 redirected viewers): each viewer the front redirects
// or gives backups is a live session of the pool on the edge its answer
// puts first (the Location's host, the first variant's host), read here
// from the answers and counted by hand; a viewer who comes back with its
// session, through the front or the steering route, counts once; the
// front's status shows the OTT seed's headroom, 1 + 1/(N−1) = 3/2 of
// each edge's count with N = 3 edges; and once the pool's TTL (300 s)
// and the session grace (20 s) have passed, no viewer counts.
func TestFrontHeadroomCountsViewers(t *testing.T) {
	const t0 = 1_800_000_000_000_000
	clock := newClock(t0)
	c := seedPool(nil, nil)
	c.Edges = []pool.Edge{{Pathway: "a", Host: "a.example", Weight: 1}, {Pathway: "b", Host: "b.example", Weight: 1},
		{Pathway: "c", Host: "c.example", Weight: 1}}
	e := newFrontEnvClock(t, c, clock.Load)
	port := e.ts.URL[strings.LastIndexByte(e.ts.URL, ':'):]
	edgeOf := func(host string) string {
		p, ok := strings.CutSuffix(strings.TrimSuffix(host, port), ".example")
		if !ok || len(p) != 1 || !strings.Contains("abc", p) {
			t.Fatalf("host %q is no edge of the pool", host)
		}
		return p
	}
	const backups, redirects = 300, 300
	count := map[string]int{}
	var sessions []string
	for range redirects {
		resp, _ := e.get("/hls/live.m3u8", "Lavf/60.16.100")
		u, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || err != nil {
			t.Fatalf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		count[edgeOf(u.Host)]++
		s := locationSession.FindStringSubmatch(u.String())
		if s == nil {
			t.Fatalf("Location %s carries no session", u)
		}
		sessions = append(sessions, s[1])
	}
	firstHost := func(b []byte) string {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "http://") {
				u, err := url.Parse(l)
				if err != nil {
					t.Fatal(err)
				}
				return u.Host
			}
		}
		t.Fatalf("a backup playlist with no variant:\n%s", b)
		return ""
	}
	for range backups {
		resp, b := e.get("/hls/live.m3u8", tizen2016UA)
		if resp.StatusCode != 200 || strings.Contains(string(b), "CONTENT-STEERING") {
			t.Fatalf("backups: %d\n%s", resp.StatusCode, b)
		}
		count[edgeOf(firstHost(b))]++
	}
	status := func(when string, want map[string]int) {
		t.Helper()
		st := frontStatusOf(t, e)
		if len(st.Pools) != 1 || st.Pools[0].N != 3 {
			t.Fatalf("%s: pools %+v", when, st.Pools)
		}
		for _, p := range []string{"a", "b", "c"} {
			if got, w := st.Pools[0].Edges[p], 1.5*float64(want[p]); got != w {
				t.Errorf("%s: %s's headroom %g, want 3/2 × %d = %g", when, p, got, want[p], w)
			}
		}
		loads, err := e.loads.Snapshot(context.Background(), poolsteer.LoadsID(""), 3, clock.Load())
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range []string{"a", "b", "c"} {
			if int(loads[i]) != want[p] {
				t.Errorf("%s: %s has %d live sessions, want %d", when, p, loads[i], want[p])
			}
		}
	}
	if count["a"]+count["b"]+count["c"] != backups+redirects {
		t.Fatalf("counted %v", count)
	}
	status("the viewers opened", count)

	// The redirected viewers come back with their sessions: as players
	// that redirect, as players given backups, and one steers. None
	// counts again, and each keeps its edge (no edge's health changed).
	clock.Add(100_000_000)
	for i, s := range sessions[:100] {
		ua := "Lavf/60.16.100"
		if i%2 == 1 {
			ua = tizen2016UA
		}
		if resp, _ := e.get("/hls/live.m3u8?session="+s, ua); resp.StatusCode >= 400 {
			t.Fatalf("viewer %d back: %d", i, resp.StatusCode)
		}
	}
	e.steer("/api/v1/steering?session=" + sessions[0])
	status("100 viewers back", count)

	// 300 s + 20 s after their openings, only those who came back count;
	// 1 µs later, those who did not are gone.
	first := map[string]int{}
	for _, s := range sessions[:100] {
		resp, _ := e.get("/hls/live.m3u8?session="+s, "Lavf/60.16.100")
		u, _ := url.Parse(resp.Header.Get("Location"))
		first[edgeOf(u.Host)]++ // a fourth opening, to know its edge; it counts once still
	}
	clock.Store(t0 + 320_000_000)
	status("at TTL + grace", count)
	clock.Store(t0 + 320_000_001)
	status("past TTL + grace", first)
	// The returning viewers' latest opening was 100 s later.
	clock.Store(t0 + 100_000_000 + 320_000_001)
	status("past their TTL + grace", map[string]int{})
}
