package poolsteer

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/waisteer/waisteer/internal/pool"
)

// TestCountViewer (issue 28: headroom counts live front viewers per edge):
// a viewer the front redirects or gives backups counts on the edge its
// order puts first, once per session (a viewer who reopens moves to its
// latest first edge), until its TTL and the grace have passed, as a
// steering request's session does; the view's headroom is the OTT seed's
// 1 + 1/(N−1) of that load. The seed's pool has N = 2 edges that take
// viewers (bunny's weight is 0), so the headroom is twice the load.
func TestCountViewer(t *testing.T) {
	d, loads, _ := testDeps(t)
	const t0 = 1_700_000_000_000_000
	var clock atomic.Uint64
	clock.Store(t0)
	d.Clock = clock.Load
	ps, err := New(context.Background(), d, []pool.Config{testPool()})
	if err != nil {
		t.Fatal(err)
	}
	ph := ps.Named("")
	ctx := context.Background()
	s := func(b byte) pool.Session { return pool.Session{b} }
	for _, c := range []struct {
		s     pool.Session
		first string
	}{{s(1), "edge-1"}, {s(2), "edge-2"}, {s(3), "edge-2"}, {s(1), "edge-1"}, {s(4), "bunny"}} {
		if err := ph.CountViewer(ctx, c.s, c.first, 300); err != nil {
			t.Fatal(err)
		}
	}
	// By hand: edge-1 {1}, edge-2 {2, 3}, bunny {4}; session 1 twice is one.
	want := func(at uint64, w map[string]uint32) {
		t.Helper()
		v := ph.ViewAt(ctx, at)
		for _, e := range v.Edges {
			if e.Sessions != w[e.Pathway] || e.Headroom != 2*float64(w[e.Pathway]) {
				t.Errorf("at t0%+d µs: %s has %d sessions (headroom %g), want %d (%g)", int64(at-t0), e.Pathway, e.Sessions, e.Headroom, w[e.Pathway], 2*float64(w[e.Pathway]))
			}
		}
	}
	want(t0, map[string]uint32{"edge-1": 1, "edge-2": 2, "bunny": 1})
	// Session 1 reopens and its order now puts edge-2 first: it moves.
	if err := ph.CountViewer(ctx, s(1), "edge-2", 300); err != nil {
		t.Fatal(err)
	}
	want(t0, map[string]uint32{"edge-2": 3, "bunny": 1})
	if err := ph.CountViewer(ctx, s(5), "edge-9", 300); err == nil {
		t.Error("an edge the pool lacks was counted")
	}
	if n := loads.Sessions(LoadsID("")); n != 4 {
		t.Errorf("%d sessions in the table, want 4", n)
	}
	// Session 2 reopens 100 s later: its count lasts 100 s longer.
	clock.Store(t0 + 100_000_000)
	if err := ph.CountViewer(ctx, s(2), "edge-2", 300); err != nil {
		t.Fatal(err)
	}
	// Each counts while now ≤ its TTL (300 s) + the grace (20 s) past its
	// latest opening. The table reads at non-decreasing instants.
	const life = 300_000_000 + 20_000_000
	want(t0+life-1, map[string]uint32{"edge-2": 3, "bunny": 1})
	want(t0+1+life, map[string]uint32{"edge-2": 1})
	want(t0+100_000_000+life, map[string]uint32{"edge-2": 1})
	want(t0+100_000_001+life, map[string]uint32{})
}
