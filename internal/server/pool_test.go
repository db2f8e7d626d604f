package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/store"
)

// The station seed (station-content-steering.md) is the specification of
// pools: its settings, its route and its manifest.

// poolManifest is a pool's manifest as a player reads it.
type poolManifest struct {
	Version  int      `json:"VERSION"`
	TTL      int      `json:"TTL"`
	Reload   string   `json:"RELOAD-URI"`
	Priority []string `json:"PATHWAY-PRIORITY"`
	Clones   []struct {
		Base string `json:"BASE-ID"`
		ID   string `json:"ID"`
		URI  struct {
			Host   string            `json:"HOST"`
			Params map[string]string `json:"PARAMS"`
		} `json:"URI-REPLACEMENT"`
	} `json:"PATHWAY-CLONES"`
	raw []byte
}

// healthEdge is an edge's health endpoint: it passes while up is set, and
// can be killed (its listener closed, as a machine that stops) and
// started again on the same address.
type healthEdge struct {
	t    testing.TB
	addr string
	up   atomic.Bool
	mu   sync.Mutex
	srv  *http.Server
}

func newHealthEdge(t testing.TB) *healthEdge {
	h := &healthEdge{t: t}
	h.up.Store(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	h.serve(ln)
	t.Cleanup(h.kill)
	return h
}

func (h *healthEdge) url() string { return "http://" + h.addr + "/health" }

func (h *healthEdge) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})}
	h.mu.Lock()
	h.srv = srv
	h.mu.Unlock()
	go srv.Serve(ln)
}

// kill stops the edge: its listener and every connection closed at once.
func (h *healthEdge) kill() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.srv != nil {
		h.srv.Close()
		h.srv = nil
	}
}

// seedPool is the station seed's example pool, with its check URLs on
// loopback: edge-1 and edge-2 (weight 2) checked, bunny a last resort.
func seedPool(e1, e2 *healthEdge) pool.Config {
	c := pool.Config{
		Path: pool.DefaultPath, TTL: 300, CheckEvery: time.Second, CheckTimeout: 500 * time.Millisecond, DownAfter: 2,
		CloneFrom: ".", Assign: pool.AssignRendezvous, Buckets: 12,
		Edges: []pool.Edge{
			{Pathway: "edge-1", Host: "edge-1.edges.example", Weight: 1},
			{Pathway: "edge-2", Host: "edge-2.edges.example", Weight: 2},
			{Pathway: "bunny", Host: "kettle-cdn.example", Weight: 0},
		},
	}
	if e1 != nil {
		c.Edges[0].CheckURL = e1.url()
	}
	if e2 != nil {
		c.Edges[1].CheckURL = e2.url()
	}
	return c
}

// poolEnv is a server steering pools only.
type poolEnv struct {
	t     testing.TB
	srv   *Server
	ts    *testFront
	loads *store.MemLoads
	logs  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newPoolEnv(t testing.TB, token string, pools ...pool.Config) *poolEnv {
	t.Helper()
	loads := store.NewLoads()
	e := newPoolEnvOn(t, store.NewMemory(), loads, token, pools...)
	e.loads = loads
	return e
}

// newPoolEnvOn is newPoolEnv on a store and table of loads of the test's.
func newPoolEnvOn(t testing.TB, st store.Store, loads store.Loads, token string, pools ...pool.Config) *poolEnv {
	t.Helper()
	return newPoolEnvWith(t, st, loads, nil, token, pools...)
}

// newPoolEnvWith is newPoolEnvOn on a room clock of the test's (nil: the
// time now).
func newPoolEnvWith(t testing.TB, st store.Store, loads store.Loads, clock func() uint64, token string, pools ...pool.Config) *poolEnv {
	t.Helper()
	noPanics(t)
	e := &poolEnv{t: t, logs: &syncBuffer{}}
	srv, err := New(context.Background(), Config{
		Pools: pools, OperatorToken: token, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, st, loads)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = serveTest(t, srv)
	t.Cleanup(func() {
		e.ts.Close()
		srv.Close(context.Background())
	})
	return e
}

func (e *poolEnv) do(method, target string, body string, header http.Header) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+target, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// steer GETs target (a path, or a RELOAD-URI) and reads its manifest.
func (e *poolEnv) steer(target string) *poolManifest {
	e.t.Helper()
	target = strings.TrimPrefix(target, e.ts.URL)
	resp, b := e.do("GET", target, "", nil)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", target, resp.StatusCode, b)
	}
	for k, want := range map[string]string{"Cache-Control": "no-store", "Access-Control-Allow-Origin": "*", "Content-Type": "application/json"} {
		if got := resp.Header.Get(k); got != want {
			e.t.Errorf("GET %s: %s %q, want %q (the station seed's route)", target, k, got, want)
		}
	}
	var m poolManifest
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("GET %s: %v: %s", target, err, b)
	}
	m.raw = b
	return &m
}

var sessionParam = regexp.MustCompile(`[?&]session=([0-9a-f]{32})(&|$)`)

func (m *poolManifest) session(t testing.TB) string {
	t.Helper()
	s := sessionParam.FindStringSubmatch(m.Reload)
	if s == nil {
		t.Fatalf("RELOAD-URI %q carries no session of 32 hex digits (the station seed's)", m.Reload)
	}
	return s[1]
}

// TestPoolManifest: the station seed's example pool answers its route with
// the seed's manifest: VERSION 1, TTL ttl_s, an absolute RELOAD-URI with
// the session, every edge in PATHWAY-PRIORITY (the last resort last), and
// a clone of clone_from for every edge with a host. The same session gets
// the same order at every reload, the players' parameters and CMCD are
// accepted, and a session the server did not mint gets a fresh one.
func TestPoolManifest(t *testing.T) {
	e := newPoolEnv(t, testToken, seedPool(newHealthEdge(t), newHealthEdge(t)))
	m := e.steer("/api/v1/steering")
	if m.Version != 1 || m.TTL != 300 {
		t.Errorf("VERSION %d, TTL %d: want 1 and ttl_s 300: %s", m.Version, m.TTL, m.raw)
	}
	if !strings.HasPrefix(m.Reload, e.ts.URL+"/api/v1/steering?") {
		t.Errorf("RELOAD-URI %q is not absolute on the route (players.md)", m.Reload)
	}
	if strings.Contains(m.Reload, "_HLS_") || strings.Contains(m.Reload, "_DASH_") {
		t.Errorf("RELOAD-URI %q carries a player's parameter", m.Reload)
	}
	session := m.session(t)
	if len(m.Priority) != 3 || m.Priority[2] != "bunny" || !slices.Contains(m.Priority, "edge-1") || !slices.Contains(m.Priority, "edge-2") {
		t.Errorf("PATHWAY-PRIORITY %v: want both edges, then the last resort bunny", m.Priority)
	}
	hosts := map[string]string{"edge-1": "edge-1.edges.example", "edge-2": "edge-2.edges.example", "bunny": "kettle-cdn.example"}
	if len(m.Clones) != 3 {
		t.Fatalf("%d clones, want one per edge with a host: %s", len(m.Clones), m.raw)
	}
	for _, c := range m.Clones {
		if c.Base != "." || hosts[c.ID] != c.URI.Host {
			t.Errorf("clone %+v: want BASE-ID \".\" and the edge's host %q", c, hosts[c.ID])
		}
	}
	for i := 0; i < 5; i++ {
		next := e.steer(m.Reload + "&_HLS_pathway=" + m.Priority[0] + "&_HLS_throughput=500000&CMCD=bl%3D3000")
		if next.session(t) != session || !slices.Equal(next.Priority, m.Priority) {
			t.Fatalf("reload %d: session %s order %v; the first gave %s %v", i, next.session(t), next.Priority, session, m.Priority)
		}
	}
	dash := e.steer(m.Reload + `&_DASH_pathway="edge-1,edge-2"&_DASH_throughput="1000,2000"`)
	if dash.session(t) != session {
		t.Errorf("a DASH reload changed the session: %s", dash.raw)
	}
	forged := e.steer("/api/v1/steering?session=00112233445566778899aabbccddeeff")
	if forged.session(t) == "00112233445566778899aabbccddeeff" {
		t.Errorf("a session the server did not mint was kept: %s", forged.raw)
	}
	if resp, b := e.do("POST", "/api/v1/steering", "", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d %s", resp.StatusCode, b)
	}
	if resp, _ := e.do("OPTIONS", "/api/v1/steering", "", nil); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("OPTIONS: %d", resp.StatusCode)
	}
}

// TestPoolOff: with no edges steering is off and the route answers 404
// (the station seed); the edges route still answers the operator.
func TestPoolOff(t *testing.T) {
	c := seedPool(nil, nil)
	c.Edges = nil
	e := newPoolEnv(t, testToken, c)
	resp, b := e.do("GET", "/api/v1/steering", "", nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "steering is off") {
		t.Errorf("a pool of no edges: %d %s, want 404", resp.StatusCode, b)
	}
	resp, b = e.do("GET", "/api/v1/steering/edges", "", http.Header{"Authorization": {"Bearer " + testToken}})
	var v PoolView
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil || v.Enabled || len(v.Edges) != 0 {
		t.Errorf("edges of a pool of none: %d %s", resp.StatusCode, b)
	}
}

// TestPoolEdgesRoute: GET /api/v1/steering/edges answers only the
// operator's token, 503 while none is set and 401 for another (the
// station seed), with the seed's fields for every edge.
func TestPoolEdgesRoute(t *testing.T) {
	off := newPoolEnv(t, "", seedPool(nil, nil))
	if resp, b := off.do("GET", "/api/v1/steering/edges", "", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("no token set: %d %s, want 503", resp.StatusCode, b)
	}
	e1, e2 := newHealthEdge(t), newHealthEdge(t)
	e := newPoolEnv(t, testToken, seedPool(e1, e2))
	if resp, b := e.do("GET", "/api/v1/steering/edges", "", http.Header{"Authorization": {"Bearer wrong"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d %s, want 401", resp.StatusCode, b)
	}
	if resp, b := e.do("GET", "/api/v1/steering/edges", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d %s, want 401", resp.StatusCode, b)
	}
	for i := 0; i < 30; i++ {
		e.steer("/api/v1/steering")
	}
	v := e.view()
	if !v.Enabled || v.TTLs != 300 || len(v.Edges) != 3 {
		t.Fatalf("view %+v", v)
	}
	var firsts uint64
	for _, ed := range v.Edges {
		firsts += ed.First
		if ed.Pathway == "bunny" && (ed.Checked || !ed.Health.Up || ed.Weight != 0) {
			t.Errorf("bunny: %+v: never checked, always up, weight 0", ed)
		}
		if ed.Pathway == "edge-2" && (!ed.Checked || ed.Weight != 2 || ed.Host != "edge-2.edges.example") {
			t.Errorf("edge-2: %+v", ed)
		}
	}
	if firsts != 30 {
		t.Errorf("first counts sum to %d over 30 manifests", firsts)
	}
	// The raw answer has every key the seed lists.
	_, b := e.do("GET", "/api/v1/steering/edges", "", http.Header{"Authorization": {"Bearer " + testToken}})
	for _, k := range []string{`"enabled"`, `"ttl_s"`, `"pathway"`, `"host"`, `"weight"`, `"checked"`, `"health"`, `"up"`, `"failures"`, `"last_check"`, `"last_error"`, `"last_ms"`, `"since"`, `"first"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("the edges answer has no %s: %s", k, b)
		}
	}
}

func (e *poolEnv) view() PoolView {
	return e.viewAt("/api/v1/steering/edges")
}

func (e *poolEnv) viewAt(path string) PoolView {
	e.t.Helper()
	resp, b := e.do("GET", path, "", http.Header{"Authorization": {"Bearer " + testToken}})
	var v PoolView
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil {
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return v
}

// sessions mints n sessions and returns their reload URIs and orders.
func (e *poolEnv) sessions(path string, n int) ([]string, [][]string) {
	reloads, orders := make([]string, n), make([][]string, n)
	for i := range n {
		m := e.steer(path)
		reloads[i], orders[i] = m.Reload, m.Priority
	}
	return reloads, orders
}

// TestPoolDrainAndWeight: a drained edge leaves every order and its
// sessions move as if it were down; undrained, every session has its order
// back. A weight changed by the operator moves sessions only to or from
// that edge (issue 12 item 7); each change is logged.
func TestPoolDrainAndWeight(t *testing.T) {
	e := newPoolEnv(t, testToken, seedPool(nil, nil))
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	reloads, before := e.sessions("/api/v1/steering", 200)
	if resp, b := e.do("POST", "/api/v1/steering/edges/edge-2/drain", "", auth); resp.StatusCode != http.StatusOK {
		t.Fatalf("drain: %d %s", resp.StatusCode, b)
	}
	for i, r := range reloads {
		got := e.steer(r).Priority
		want := slices.DeleteFunc(slices.Clone(before[i]), func(p string) bool { return p == "edge-2" })
		if !slices.Equal(got, want) {
			t.Fatalf("session %d drained: %v, want %v (its order without edge-2)", i, got, want)
		}
	}
	if resp, b := e.do("DELETE", "/api/v1/steering/edges/edge-2/drain", "", auth); resp.StatusCode != http.StatusOK {
		t.Fatalf("undrain: %d %s", resp.StatusCode, b)
	}
	for i, r := range reloads {
		if got := e.steer(r).Priority; !slices.Equal(got, before[i]) {
			t.Fatalf("session %d undrained: %v, want its order back %v", i, got, before[i])
		}
	}
	if resp, b := e.do("PUT", "/api/v1/steering/edges/edge-1/weight", `{"weight": 5}`, auth); resp.StatusCode != http.StatusOK {
		t.Fatalf("weight: %d %s", resp.StatusCode, b)
	}
	for i, r := range reloads {
		got := e.steer(r).Priority
		if got[0] != before[i][0] && got[0] != "edge-1" {
			t.Fatalf("session %d: first %s, was %s: a weight of edge-1 moved it elsewhere than to edge-1", i, got[0], before[i][0])
		}
	}
	if v := e.view(); v.Edges[0].Weight != 5 {
		t.Errorf("edge-1's weight %d after PUT 5", v.Edges[0].Weight)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/api/v1/steering/edges/nope/drain", "", 404},
		{"PUT", "/api/v1/steering/edges/edge-1/weight", `{"weight": -1}`, 400},
		{"PUT", "/api/v1/steering/edges/edge-1/weight", `{"weight": 1, "more": 2}`, 400},
		{"PUT", "/api/v1/steering/edges/edge-1/weight", `garbage`, 400},
		{"GET", "/api/v1/steering/edges/edge-1/drain", "", 405},
		{"POST", "/api/v1/steering/edges/edge-1/else", "", 404},
	} {
		if resp, b := e.do(c.method, c.path, c.body, auth); resp.StatusCode != c.status {
			t.Errorf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, resp.StatusCode, b, c.status)
		}
	}
	if resp, _ := e.do("POST", "/api/v1/steering/edges/edge-2/drain", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a drain without the token: %d", resp.StatusCode)
	}
	logs := e.logs.String()
	for _, want := range []string{"edge drained", "edge undrained", "edge weight changed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %q:\n%s", want, logs)
		}
	}
	if v := e.view(); len(v.Changes) != 3 {
		t.Errorf("changes %+v, want the drain, the undrain and the weight", v.Changes)
	}
}

// waitFor polls cond every 10 ms until it holds or limit passes.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
