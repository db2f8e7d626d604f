package poolsteer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/store"
)

// testPool is the station seed's [steering] pool, unchecked.
func testPool() pool.Config {
	return pool.Config{
		Path: pool.DefaultPath, TTL: 300, CheckEvery: time.Second, CheckTimeout: 500 * time.Millisecond, DownAfter: 2,
		CloneFrom: ".", Assign: pool.AssignRendezvous, Buckets: 12,
		Edges: []pool.Edge{
			{Pathway: "edge-1", Host: "edge-1.edges.example", Weight: 1},
			{Pathway: "edge-2", Host: "edge-2.edges.example", Weight: 2},
			{Pathway: "bunny", Host: "kettle-cdn.example", Weight: 0},
		},
	}
}

// testDeps are Deps over a memory store, with no budget, an operator that
// always passes and every route table accepted.
func testDeps(t *testing.T) (Deps, *store.MemLoads, *int) {
	loads := store.NewLoads()
	published := new(int)
	return Deps{
		Server:   "test",
		Secrets:  store.NewMemory(),
		Loads:    loads,
		Clock:    func() uint64 { return 1_700_000_000_000_000 },
		Grace:    20_000_000,
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Operator: func(http.ResponseWriter, *http.Request) bool { return true },
		PathFree: func(path string) error {
			if strings.HasPrefix(path, "/v1/") {
				return errors.New("the server's own")
			}
			return nil
		},
		Routes: func([]*Steerer) (func(), error) { return func() { *published++ }, nil },
	}, loads, published
}

// TestPoolsCheck: a name twice, a path the server holds, or a
// configuration its rules refuse is refused before any pool is opened.
func TestPoolsCheck(t *testing.T) {
	d, _, _ := testDeps(t)
	a, b := testPool(), testPool()
	b.Path = "/other"
	if _, err := New(context.Background(), d, []pool.Config{a, b}); err == nil || !strings.Contains(err.Error(), `pool 1: the name "" is another pool's`) {
		t.Fatalf("a name twice: %v", err)
	}
	a.Path = "/v1/pool"
	if _, err := New(context.Background(), d, []pool.Config{a}); err == nil || !strings.Contains(err.Error(), "pool 0: the server's own") {
		t.Fatalf("a path of the server's: %v", err)
	}
	ps, err := New(context.Background(), d, nil)
	if err != nil || ps.Len() != 0 {
		t.Fatalf("no pools: %v, %d", err, ps.Len())
	}
}

// TestSteerCounts: a pool's manifest counts its session in the table of
// loads under the pool's key, on the edge the manifest puts first.
func TestSteerCounts(t *testing.T) {
	d, loads, _ := testDeps(t)
	ps, err := New(context.Background(), d, []pool.Config{testPool()})
	if err != nil {
		t.Fatal(err)
	}
	ph := ps.Named("")
	if ph == nil || ph.Label() != "pool [steering]" || ph.Path() != pool.DefaultPath {
		t.Fatalf("the pool: %v", ph)
	}
	rec := httptest.NewRecorder()
	ph.ServeSteer(rec, httptest.NewRequest(http.MethodGet, pool.DefaultPath, nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var m struct {
		Priority []string `json:"PATHWAY-PRIORITY"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || len(m.Priority) == 0 {
		t.Fatalf("manifest %s: %v", rec.Body, err)
	}
	if n := loads.Sessions(LoadsID("")); n != 1 {
		t.Fatalf("sessions counted: %d", n)
	}
	v := ph.View(context.Background())
	var sessions uint32
	for _, e := range v.Edges {
		if e.Pathway == m.Priority[0] {
			sessions = e.Sessions
		}
	}
	if sessions != 1 || v.Server != "test" {
		t.Fatalf("view: %+v", v)
	}
	if LoadsID("") == LoadsID("a") {
		t.Fatal("two pools share a key")
	}
}

// TestReloadRestores: a reload whose route table conflicts leaves every
// pool as it was, and publishes nothing.
func TestReloadRestores(t *testing.T) {
	d, _, published := testDeps(t)
	ps, err := New(context.Background(), d, []pool.Config{testPool()})
	if err != nil {
		t.Fatal(err)
	}
	ps.Start(context.Background())
	defer ps.Stop()
	ps.d.Routes = func([]*Steerer) (func(), error) { return nil, errors.New("conflict") }
	c := testPool()
	c.Path = "/moved"
	if err := ps.Reload(context.Background(), []pool.Config{c}); err == nil {
		t.Fatal("a conflicting reload taken")
	}
	if p := ps.Named("").Path(); p != pool.DefaultPath || *published != 0 {
		t.Fatalf("after a refused reload: path %q, published %d", p, *published)
	}
	ps.d.Routes = func([]*Steerer) (func(), error) { return func() { *published++ }, nil }
	c.Edges[1].Weight = 5
	if err := ps.Reload(context.Background(), []pool.Config{c}); err != nil {
		t.Fatal(err)
	}
	ph := ps.Named("")
	if ph.Path() != "/moved" || *published != 1 {
		t.Fatalf("after a reload: path %q, published %d", ph.Path(), *published)
	}
	v := ph.View(context.Background())
	if len(v.Changes) != 1 || v.Changes[0].Pathway != "edge-2" || v.Changes[0].Detail != "2 to 5, by a reload" {
		t.Fatalf("changes: %+v", v.Changes)
	}
}

// TestHeadroom is the OTT seed's 1 + 1/(N−1).
func TestHeadroom(t *testing.T) {
	for _, c := range []struct {
		load float64
		n    int
		want float64
	}{{10, 0, 10}, {10, 1, 10}, {10, 2, 20}, {10, 3, 15}} {
		if got := headroom(c.load, c.n); got != c.want {
			t.Errorf("headroom(%v, %d) = %v, want %v", c.load, c.n, got, c.want)
		}
	}
}

// TestServeEdgesWeight: the operator's weight is taken, noted and shown.
func TestServeEdgesWeight(t *testing.T) {
	d, _, _ := testDeps(t)
	ps, err := New(context.Background(), d, []pool.Config{testPool()})
	if err != nil {
		t.Fatal(err)
	}
	ph := ps.Named("")
	rec := httptest.NewRecorder()
	ph.ServeEdges(rec, httptest.NewRequest(http.MethodPut, pool.DefaultPath+"/edges/edge-1/weight", bytes.NewReader([]byte(`{"weight": 7}`))), "edge-1/weight")
	var v view.PoolView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	if v.Edges[0].Weight != 7 || len(v.Changes) != 1 || v.Changes[0].Detail != "1 to 7, by the operator" {
		t.Fatalf("view: %+v", v)
	}
	rec = httptest.NewRecorder()
	ph.ServeEdges(rec, httptest.NewRequest(http.MethodPut, pool.DefaultPath+"/edges/edge-1/other", nil), "edge-1/other")
	if rec.Code != http.StatusNotFound {
		t.Fatalf("an unknown change: %d", rec.Code)
	}
}
