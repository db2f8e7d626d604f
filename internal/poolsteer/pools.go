package poolsteer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/web"
)

// Pools are the pools a server steers, by name; replaced whole by Reload.
type Pools struct {
	d   *Deps
	bg  context.Context // the background work's (Start): a reload starts checkers under it
	mu  sync.Mutex      // guards all
	all []*Steerer
}

// New checks cfgs and opens their pools, with their checkers made and not
// started (Start).
func New(ctx context.Context, d Deps, cfgs []pool.Config) (*Pools, error) {
	ps := &Pools{d: &d}
	if len(cfgs) == 0 {
		return ps, nil
	}
	if err := ps.check(cfgs); err != nil {
		return nil, err
	}
	key, err := ps.key(ctx)
	if err != nil {
		return nil, err
	}
	for i, c := range cfgs {
		ph, err := open(ps.d, c, key)
		if err != nil {
			return nil, fmt.Errorf("pool %d: %w", i, err)
		}
		ps.all = append(ps.all, ph)
	}
	return ps, nil
}

// check checks pools before any is opened: each name once, each path free
// of the server's own routes, each configuration by its rules.
func (ps *Pools) check(cfgs []pool.Config) error {
	seen := map[string]bool{}
	for i, c := range cfgs {
		if seen[c.Name] {
			return fmt.Errorf("pool %d: the name %q is another pool's", i, c.Name)
		}
		seen[c.Name] = true
		if err := ps.d.PathFree(c.Path); err != nil {
			return fmt.Errorf("pool %d: %w", i, err)
		}
		if probs := c.Check(); len(probs) > 0 {
			return fmt.Errorf("pool %d: %s: %s", i, probs[0].Key, probs[0].Rule)
		}
	}
	return nil
}

// key is the secret a pool's sessions are made with: one for every pool,
// in the store, so that a session outlives a restart and is known to every
// server on the store.
func (ps *Pools) key(ctx context.Context) ([16]byte, error) {
	var k [16]byte
	b, err := ps.d.Secrets.Secret(ctx, "pool-sessions", len(k))
	if err != nil {
		return k, fmt.Errorf("the pools' session secret: %w", err)
	}
	copy(k[:], b)
	return k, nil
}

// Sorted lists the pools by name ("" first).
func (ps *Pools) Sorted() []*Steerer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]*Steerer, len(ps.all))
	copy(out, ps.all)
	return out
}

// Len is how many pools there are.
func (ps *Pools) Len() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.all)
}

// Named is the pool of a name, as it stands after reloads; nil for none.
func (ps *Pools) Named(name string) *Steerer {
	for _, ph := range ps.Sorted() {
		if ph.name == name {
			return ph
		}
	}
	return nil
}

// Start starts every pool's checker, and any a reload makes later, under
// ctx.
func (ps *Pools) Start(ctx context.Context) {
	ps.bg = ctx
	for _, ph := range ps.Sorted() {
		if ph.checker != nil {
			ph.checker.Start(ctx)
			ph.started = true
		}
	}
}

// Stop stops every pool's checker.
func (ps *Pools) Stop() {
	for _, ph := range ps.Sorted() {
		if ph.checker != nil {
			ph.checker.Stop()
		}
	}
}

// SweepAway forgets, in every pool, the clients the per-client rule keeps
// away once their time is up at now.
func (ps *Pools) SweepAway(now time.Time) {
	for _, ph := range ps.Sorted() {
		ph.SweepAway(now)
	}
}

// Reload replaces the pools with cfgs (SIGHUP): a pool of a name the
// server steers is reconfigured in place, so that its edges kept keep
// their health, drains and sessions' orders (pool.Reconfigure); a new name
// is opened; a name gone is no longer steered. Everything is checked
// before anything changes, the route table with the others (Deps.Routes).
// The caller serialises it with every other rebuild of the route table.
func (ps *Pools) Reload(ctx context.Context, cfgs []pool.Config) error {
	old := map[string]*Steerer{}
	for _, ph := range ps.Sorted() {
		old[ph.name] = ph
	}
	if err := ps.check(cfgs); err != nil {
		return err
	}
	var key [16]byte
	var next []*Steerer
	var fresh []*Steerer
	seen := map[string]bool{}
	for i, c := range cfgs {
		seen[c.Name] = true
		if ph, ok := old[c.Name]; ok {
			next = append(next, ph)
			continue
		}
		if key == ([16]byte{}) {
			k, err := ps.key(ctx)
			if err != nil {
				return err
			}
			key = k
		}
		ph, err := open(ps.d, c, key)
		if err != nil {
			return fmt.Errorf("pool %d: %w", i, err)
		}
		next = append(next, ph)
		fresh = append(fresh, ph)
	}
	// The routes as they will be, with each kept pool at its new path.
	routes := make([]*poolRoute, len(next))
	for i, ph := range next {
		routes[i] = ph.route.Load()
		ph.route.Store(newPoolRoute(cfgs[i]))
	}
	restore := func() {
		for i, ph := range next {
			ph.route.Store(routes[i])
		}
	}
	publish, err := ps.d.Routes(next)
	if err != nil {
		restore()
		return err
	}
	for i, ph := range next {
		if slices.Contains(fresh, ph) {
			continue
		}
		before := ph.p.Config()
		if err := ph.p.Reconfigure(cfgs[i]); err != nil {
			restore()
			return fmt.Errorf("pool %d: %w", i, err)
		}
		ph.noteReload(before, cfgs[i])
		if !slices.Equal(routes[i].ids, newPoolRoute(cfgs[i]).ids) {
			// A session's first edge is an index into the edges.
			if err := ps.d.Loads.Reset(ctx, ph.id); err != nil {
				ps.d.Log.Error("resetting a pool's sessions after a reload", "pool", ph.logName(), "err", err)
			}
		}
		if err := ph.watch(cfgs[i]); err != nil {
			ps.d.Log.Error("updating a pool's QoE", "pool", ph.logName(), "err", err)
		}
		if err := ph.check(cfgs[i]); err != nil {
			ps.d.Log.Error("updating a pool's health checks", "pool", ph.logName(), "err", err)
		} else if ph.checker != nil && !ph.started {
			ph.checker.Start(ps.bg)
			ph.started = true
		}
	}
	for _, ph := range fresh {
		if ph.checker != nil {
			ph.checker.Start(ps.bg)
			ph.started = true
		}
		ph.log(slog.LevelInfo, "pool added", "path", ph.route.Load().path, "edges", len(cfgs[slices.Index(next, ph)].Edges))
	}
	for name, ph := range old {
		if !seen[name] {
			if ph.checker != nil {
				ph.checker.Stop()
			}
			ph.log(slog.LevelInfo, "pool removed")
		}
	}
	ps.mu.Lock()
	ps.all = next
	ps.mu.Unlock()
	publish()
	return nil
}

// WriteMetrics writes the pools' metrics: each edge's health, drain and
// weight; its checks by outcome and their durations; the manifests that
// put it first; and the live sessions it is first for.
func (ps *Pools) WriteMetrics(ctx context.Context, b *bytes.Buffer) {
	pools := ps.Sorted()
	type row struct {
		ph    *Steerer
		edges []pool.EdgeState
	}
	rows := make([]row, len(pools))
	for i, ph := range pools {
		rows[i] = row{ph, ph.p.Edges()}
	}
	gauge := func(name, help string, v func(e pool.EdgeState) uint64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, r := range rows {
			for _, e := range r.edges {
				fmt.Fprintf(b, "%s{pool=%q,pathway=%q} %d\n", name, r.ph.name, e.Pathway, v(e))
			}
		}
	}
	bit := func(ok bool) uint64 {
		if ok {
			return 1
		}
		return 0
	}
	gauge("waisteer_pool_edge_up", "1 while a pool's edge is up (its health checks pass, or it has none).", func(e pool.EdgeState) uint64 { return bit(e.Up) })
	gauge("waisteer_pool_edge_drained", "1 while the operator has drained a pool's edge.", func(e pool.EdgeState) uint64 { return bit(e.Drained) })
	gauge("waisteer_pool_edge_weight", "A pool's edge's weight (0: a last resort).", func(e pool.EdgeState) uint64 { return uint64(e.Weight) })

	b.WriteString("# HELP waisteer_pool_checks_total Health checks of a pool's edges, by outcome.\n# TYPE waisteer_pool_checks_total counter\n")
	for _, r := range rows {
		ks, vs := r.ph.checks.Sorted()
		for i, k := range ks {
			pathway, outcome, _ := strings.Cut(k, "\x00")
			fmt.Fprintf(b, "waisteer_pool_checks_total{pool=%q,pathway=%q,outcome=%q} %d\n", r.ph.name, pathway, outcome, vs[i])
		}
	}
	b.WriteString("# HELP waisteer_pool_check_duration_seconds Time of one health check of a pool's edge.\n# TYPE waisteer_pool_check_duration_seconds histogram\n")
	for _, r := range rows {
		for _, e := range r.edges {
			if v, ok := r.ph.latency.Load(e.Pathway); ok {
				v.(*web.Histogram).Write(b, "waisteer_pool_check_duration_seconds", fmt.Sprintf("pool=%q,pathway=%q", r.ph.name, e.Pathway))
			}
		}
	}
	b.WriteString("# HELP waisteer_pool_manifests_total Manifests a pool served, by the edge they put first.\n# TYPE waisteer_pool_manifests_total counter\n")
	for _, r := range rows {
		for _, e := range r.edges {
			fmt.Fprintf(b, "waisteer_pool_manifests_total{pool=%q,first=%q} %d\n", r.ph.name, e.Pathway, e.First)
		}
	}
	b.WriteString("# HELP waisteer_pool_sessions Live sessions of a pool, by the edge their latest manifest put first.\n# TYPE waisteer_pool_sessions gauge\n")
	now := ps.d.Clock()
	for _, r := range rows {
		loads, err := ps.d.Loads.Snapshot(ctx, r.ph.id, len(r.edges), now)
		if err != nil {
			continue
		}
		for i, e := range r.edges {
			fmt.Fprintf(b, "waisteer_pool_sessions{pool=%q,first=%q} %d\n", r.ph.name, e.Pathway, loads[i])
		}
	}
}
