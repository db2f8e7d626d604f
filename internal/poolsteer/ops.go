package poolsteer

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
// The server's route table finds the pool of a path (P/edges and what
// follows it, rest) and counts the request under its family ("pool_edges"
// for P/edges, "pool_change" for the rest); ServeEdges answers it.

// ServeEdges answers a request on the pool's operator routes: P/edges when
// rest is "", else P/edges/rest.
func (ph *Steerer) ServeEdges(w http.ResponseWriter, r *http.Request, rest string) {
	if rest == "" {
		if web.Allow(w, r, http.MethodGet, http.MethodHead) && web.NoQuery(w, r) && ph.d.Operator(w, r) {
			api.WriteJSON(w, http.StatusOK, ph.View(r.Context()))
		}
		return
	}
	pathway, what, ok := strings.Cut(rest, "/")
	switch {
	case !ok || pathway == "" || what != "drain" && what != "weight":
		web.Refuse(w, api.Errorf(api.NotFound, "no route at %q: an edge's routes are %s/edges/PATHWAY/drain and /weight", r.URL.Path, ph.route.Load().path))
		return
	case what == "drain" && !web.Allow(w, r, http.MethodPost, http.MethodDelete),
		what == "weight" && !web.Allow(w, r, http.MethodPut),
		!web.NoQuery(w, r), !ph.d.Operator(w, r):
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
	api.WriteJSON(w, http.StatusOK, ph.View(r.Context()))
}

func weightOf(p *pool.Pool, pathway string) uint32 {
	for _, e := range p.Edges() {
		if e.Pathway == pathway {
			return e.Weight
		}
	}
	return 0
}

// View is the operator's view of the pool now.
func (ph *Steerer) View(ctx context.Context) view.PoolView {
	return ph.ViewAt(ctx, ph.d.Clock())
}

// ViewAt is View with the live sessions as of loadsAt.
func (ph *Steerer) ViewAt(ctx context.Context, loadsAt uint64) view.PoolView {
	c := ph.p.Config()
	v := view.PoolView{Server: ph.d.Server, Pool: ph.name, Path: c.Path, Enabled: ph.p.Enabled(), TTLs: c.TTL, Assign: c.Assign, Edges: []view.EdgeView{}}
	edges := ph.p.Edges()
	loads, _ := ph.d.Loads.Snapshot(ctx, ph.id, len(edges), loadsAt)
	for i, e := range edges {
		ev := view.EdgeView{Pathway: e.Pathway, Host: e.Host, Weight: e.Weight, Checked: e.Checked, Drained: e.Drained,
			Health: view.HealthView{Up: e.Up}, First: e.First}
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
	if ph.d.Budgets != nil {
		v.Limited = ph.limited.View()
	}
	ph.mu.Lock()
	v.Changes = slices.Clone(ph.changes)
	ph.mu.Unlock()
	if v.Changes == nil {
		v.Changes = []view.EdgeChange{}
	}
	if c.QoE != nil {
		if w := ph.qoe.Load(); w != nil {
			v.QoE = w.w.View()
		} else {
			v.QoE = &view.QoEView{Cells: []view.QoECell{}, Moves: []view.QoEMove{}, Ignored: map[string]uint64{}}
		}
		n := ph.away.Len()
		v.QoE.KeptAway = &n
	}
	v.ReportsIgnored = ph.unread.View()
	return v
}

// headroom is the OTT seed's "1 + 1/(N−1) of its normal load": with one
// edge there is no other to fail over to, and its load is its own.
func headroom(load float64, n int) float64 {
	if n <= 1 {
		return load
	}
	return load * (1 + 1/float64(n-1))
}

// noteReload logs and notes what a reload changed of the pool's edges.
func (ph *Steerer) noteReload(before, after pool.Config) {
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
