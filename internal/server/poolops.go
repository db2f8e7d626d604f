package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/steerroute"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
)

// The operator's routes of a pool, beside its steering path P (the station
// seed's /api/v1/steering/edges, and the changes it names):
//
//	GET    P/edges                      the pool and every edge, with its health
//	POST   P/edges/{pathway}/drain      out of every order, its sessions moved as if it were down
//	DELETE P/edges/{pathway}/drain      back
//	PUT    P/edges/{pathway}/weight     {"weight": N}: a new share of sessions
//
// Each needs the operator's token: 503 while none is set, 401 for another.

// poolPathFree refuses a pool path that is one of the server's own.
func poolPathFree(path string) error {
	if steerroute.IsReserved(path) || strings.HasPrefix(path, steerroute.StableDecisions) || steerroute.IsReserved(path+"/edges") {
		return api.Errorf(api.RouteConflict, "the pool's path %q is the server's own route", path)
	}
	if why := web.PathDefect(path); why != "" {
		return api.Errorf(api.RouteUnusable, "the pool's path %q %s", path, why)
	}
	return nil
}

// checkPools checks pools before any is opened: each name once, each
// path free of the server's own routes, each configuration by its rules.
func checkPools(cfgs []pool.Config) error {
	seen := map[string]bool{}
	for i, c := range cfgs {
		if seen[c.Name] {
			return fmt.Errorf("pool %d: the name %q is another pool's", i, c.Name)
		}
		seen[c.Name] = true
		if err := poolPathFree(c.Path); err != nil {
			return fmt.Errorf("pool %d: %w", i, err)
		}
		if probs := c.Check(); len(probs) > 0 {
			return fmt.Errorf("pool %d: %s: %s", i, probs[0].Key, probs[0].Rule)
		}
	}
	return nil
}

// poolEdges matches a path to a pool's operator routes: P/edges, and what
// follows it.
func (t *routeTable) poolEdges(path string) (*poolHub, string, bool) {
	if ph, ok := t.edges[path]; ok {
		return ph, "", true
	}
	i := strings.LastIndex(path, "/edges/")
	for i >= 0 {
		if ph, ok := t.edges[path[:i+len("/edges")]]; ok {
			return ph, path[i+len("/edges/"):], true
		}
		i = strings.LastIndex(path[:i], "/edges/")
	}
	return nil, "", false
}

func (s *Server) servePoolEdges(w http.ResponseWriter, r *http.Request, ph *poolHub, rest string) {
	if rest == "" {
		s.count(routePoolEdges, w, r, func(w http.ResponseWriter, r *http.Request) {
			if web.Allow(w, r, http.MethodGet, http.MethodHead) && web.NoQuery(w, r) && s.operator(w, r) {
				api.WriteJSON(w, http.StatusOK, s.poolView(r.Context(), ph))
			}
		})
		return
	}
	s.count(routePoolChange, w, r, func(w http.ResponseWriter, r *http.Request) {
		pathway, what, ok := strings.Cut(rest, "/")
		switch {
		case !ok || pathway == "" || what != "drain" && what != "weight":
			web.Refuse(w, api.Errorf(api.NotFound, "no route at %q: an edge's routes are %s/edges/PATHWAY/drain and /weight", r.URL.Path, ph.route.Load().path))
			return
		case what == "drain" && !web.Allow(w, r, http.MethodPost, http.MethodDelete),
			what == "weight" && !web.Allow(w, r, http.MethodPut),
			!web.NoQuery(w, r), !s.operator(w, r):
			return
		}
		var err error
		switch {
		case what == "drain":
			drained := r.Method == http.MethodPost
			if err = ph.p.Drain(pathway, drained); err == nil {
				verb := map[bool]string{true: "drained", false: "undrained"}[drained]
				ph.note(pathway, verb, "by the operator")
				ph.log(slog.LevelInfo, "edge "+verb, "pathway", pathway, "by", "operator")
			}
		default:
			var body []byte
			var aerr *api.Error
			if body, aerr = web.ReadBody(w, r, 4<<10); aerr != nil {
				web.Refuse(w, aerr)
				return
			}
			var v struct {
				Weight *uint32 `json:"weight"`
			}
			d := json.NewDecoder(bytes.NewReader(body))
			d.DisallowUnknownFields()
			if derr := d.Decode(&v); derr != nil || v.Weight == nil {
				web.Refuse(w, api.Errorf(api.BadBody, `the body is not {"weight": N} with N a whole number from 0: %v`, derr))
				return
			}
			old := weightOf(ph.p, pathway)
			if err = ph.p.SetWeight(pathway, *v.Weight); err == nil {
				ph.note(pathway, "weight", fmt.Sprintf("%d to %d, by the operator", old, *v.Weight))
				ph.log(slog.LevelInfo, "edge weight changed", "pathway", pathway, "from", old, "to", *v.Weight, "by", "operator")
			}
		}
		if err != nil {
			web.Refuse(w, api.Errorf(api.NotFound, "%s: %v", ph.Label(), err))
			return
		}
		api.WriteJSON(w, http.StatusOK, s.poolView(r.Context(), ph))
	})
}

func weightOf(p *pool.Pool, pathway string) uint32 {
	for _, e := range p.Edges() {
		if e.Pathway == pathway {
			return e.Weight
		}
	}
	return 0
}

// poolView is the operator's view of a pool now.
func (s *Server) poolView(ctx context.Context, ph *poolHub) PoolView {
	return s.poolViewAt(ctx, ph, s.clock())
}

// poolViewAt is poolView with the live sessions as of loadsAt.
func (s *Server) poolViewAt(ctx context.Context, ph *poolHub, loadsAt uint64) PoolView {
	c := ph.p.Config()
	v := PoolView{Server: s.name, Pool: ph.name, Path: c.Path, Enabled: ph.p.Enabled(), TTLs: c.TTL, Assign: c.Assign, Edges: []EdgeView{}}
	edges := ph.p.Edges()
	loads, _ := s.loads.Snapshot(ctx, ph.id, len(edges), loadsAt)
	for i, e := range edges {
		ev := EdgeView{Pathway: e.Pathway, Host: e.Host, Weight: e.Weight, Checked: e.Checked, Drained: e.Drained,
			Health: HealthView{Up: e.Up}, First: e.First}
		if i < len(loads) {
			ev.Sessions = loads[i]
		}
		if ph.checker != nil && e.Checked {
			if st, ok := ph.checker.Status(e.Pathway); ok {
				ev.Health = *view.HealthOf(st)
			}
		}
		v.Edges = append(v.Edges, ev)
	}
	n := 0
	for _, e := range v.Edges {
		if e.Health.Up && !e.Drained && e.Weight > 0 {
			n++
		}
	}
	for i := range v.Edges {
		v.Edges[i].Headroom = headroom(float64(v.Edges[i].Sessions), n)
	}
	if s.limits != nil {
		v.Limited = ph.limited.View()
	}
	ph.mu.Lock()
	v.Changes = slices.Clone(ph.changes)
	ph.mu.Unlock()
	if v.Changes == nil {
		v.Changes = []EdgeChange{}
	}
	if c.QoE != nil {
		if w := ph.qoe.Load(); w != nil {
			v.QoE = w.View()
		} else {
			v.QoE = &QoEView{Cells: []QoECell{}, Moves: []QoEMove{}, Ignored: map[string]uint64{}}
		}
		n := ph.away.Len()
		v.QoE.KeptAway = &n
	}
	v.ReportsIgnored = ph.unread.View()
	return v
}

// ReloadPools replaces the server's pools with cfgs (SIGHUP): a pool of a
// name the server steers is reconfigured in place, so that its edges kept
// keep their health, drains and sessions' orders (pool.Reconfigure); a new
// name is opened; a name gone is no longer steered. Everything is checked
// before anything changes.
func (s *Server) ReloadPools(ctx context.Context, cfgs []pool.Config) error {
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	old := map[string]*poolHub{}
	for _, ph := range s.poolsSorted() {
		old[ph.name] = ph
	}
	if err := checkPools(cfgs); err != nil {
		return err
	}
	var key [16]byte
	var next []*poolHub
	var fresh []*poolHub
	seen := map[string]bool{}
	for i, c := range cfgs {
		seen[c.Name] = true
		if ph, ok := old[c.Name]; ok {
			next = append(next, ph)
			continue
		}
		if key == ([16]byte{}) {
			k, err := s.poolKey(ctx)
			if err != nil {
				return err
			}
			key = k
		}
		ph, err := s.openPool(c, key)
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
	rt, err := buildRoutes(s.sortedHubs(), next, nil, nil, s.routes.Load().decisions)
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
			if err := s.loads.Reset(ctx, ph.id); err != nil {
				s.log.Error("resetting a pool's sessions after a reload", "pool", ph.logName(), "err", err)
			}
		}
		if err := ph.watch(cfgs[i]); err != nil {
			s.log.Error("updating a pool's QoE", "pool", ph.logName(), "err", err)
		}
		if err := ph.check(cfgs[i]); err != nil {
			s.log.Error("updating a pool's health checks", "pool", ph.logName(), "err", err)
		} else if ph.checker != nil && !ph.started {
			ph.checker.Start(s.bgCtx)
			ph.started = true
		}
	}
	for _, ph := range fresh {
		if ph.checker != nil {
			ph.checker.Start(s.bgCtx)
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
	s.poolsMu.Lock()
	s.pools = next
	s.poolsMu.Unlock()
	s.routes.Store(rt)
	return nil
}

// noteReload logs and notes what a reload changed of the pool's edges.
func (ph *poolHub) noteReload(before, after pool.Config) {
	was := map[string]pool.Edge{}
	for _, e := range before.Edges {
		was[e.Pathway] = e
	}
	for _, e := range after.Edges {
		b, ok := was[e.Pathway]
		delete(was, e.Pathway)
		switch {
		case !ok:
			ph.note(e.Pathway, "added", "by a reload")
			ph.log(slog.LevelInfo, "edge added", "pathway", e.Pathway, "by", "reload")
		case b.Weight != e.Weight:
			ph.note(e.Pathway, "weight", fmt.Sprintf("%d to %d, by a reload", b.Weight, e.Weight))
			ph.log(slog.LevelInfo, "edge weight changed", "pathway", e.Pathway, "from", b.Weight, "to", e.Weight, "by", "reload")
		}
	}
	for p := range was {
		ph.note(p, "removed", "by a reload")
		ph.log(slog.LevelInfo, "edge removed", "pathway", p, "by", "reload")
	}
}

// writePoolMetrics writes the pools' metrics: each edge's health, drain
// and weight; its checks by outcome and their durations; the manifests
// that put it first; and the live sessions it is first for.
func (s *Server) writePoolMetrics(ctx context.Context, b *bytes.Buffer) {
	pools := s.poolsSorted()
	type row struct {
		ph    *poolHub
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
	now := s.clock()
	for _, r := range rows {
		loads, err := s.loads.Snapshot(ctx, r.ph.id, len(r.edges), now)
		if err != nil {
			continue
		}
		for i, e := range r.edges {
			fmt.Fprintf(b, "waisteer_pool_sessions{pool=%q,first=%q} %d\n", r.ph.name, e.Pathway, loads[i])
		}
	}
}
