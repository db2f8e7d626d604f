package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/front"
	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/internal/reach"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/steerroute"
	"github.com/waisteer/waisteer/internal/web"
)

// FrontConfig is the front's configuration (internal/front): the origin,
// and which pool or room steers each playlist path.
type FrontConfig struct {
	Origin                       *origin.Origin
	Playlists                    []FrontPlaylist
	Bases                        map[string]string // declared pathways' URL bases
	RedirectAgents, BackupAgents []string
	SteerAgents                  []string      // players to steer, over the built-in classes (issue 28)
	CacheTTL                     time.Duration // the origin cache's cap (front.Config); 0: none
	MaxStreams                   int           // the pass-through streams at once (front.Config); 0: front.DefaultMaxStreams
}

// FrontPlaylist is a path of the front (exact, or a prefix ending in "/")
// and what steers it: a pool by name ("" for [steering]) or, with Room
// set, an energy room by id or by name.
type FrontPlaylist struct {
	Path string
	Pool string
	Room string
}

// openFront makes the front, each playlist steered by its pool or room.
func (s *Server) openFront(fc *FrontConfig) (*front.Front, error) {
	var pls []front.Playlist
	for i, p := range fc.Playlists {
		var st front.Steering
		if p.Room != "" {
			h := s.hubNamed(p.Room)
			if h == nil {
				return nil, fmt.Errorf("front playlist %d (%s): no room %q", i, p.Path, p.Room)
			}
			st = &roomFront{s: s, h: h}
		} else {
			name := p.Pool
			st = &poolFront{s: s, name: name}
			if s.poolNamed(name) == nil {
				return nil, fmt.Errorf("front playlist %d (%s): no pool %q", i, p.Path, name)
			}
		}
		if steerroute.IsReserved(p.Path) || strings.HasPrefix(p.Path, steerroute.StableDecisions) {
			return nil, api.Errorf(api.RouteConflict, "front playlist %d: %q is the server's own route", i, p.Path)
		}
		pls = append(pls, front.Playlist{Path: p.Path, Steering: st})
	}
	return front.New(front.Config{Origin: fc.Origin, Playlists: pls, Bases: fc.Bases,
		RedirectAgents: fc.RedirectAgents, BackupAgents: fc.BackupAgents, SteerAgents: fc.SteerAgents, Logger: s.log,
		CacheTTL: fc.CacheTTL, MaxStreams: fc.MaxStreams})
}

// hubNamed finds a room by its id or its descriptor's name.
func (s *Server) hubNamed(name string) *roomsteer.Room {
	for _, h := range s.sortedHubs() {
		if h.ID().String() == name || h.State().Room().Name() == name {
			return h
		}
	}
	return nil
}

// poolNamed finds a pool by name, as it stands after reloads.
func (s *Server) poolNamed(name string) *poolsteer.Steerer { return s.pools.Named(name) }

// poolFront is a pool as the front sees it; it finds the pool by name at
// each request, so that a reload is followed.
type poolFront struct {
	s    *Server
	name string
}

func (f *poolFront) pool() *poolsteer.Steerer { return f.s.poolNamed(f.name) }

func (f *poolFront) Name() string { return "pool " + f.name }

// Tags are the station seed's line (SERVER-URI the pool's path on the
// host the playlist came from, PATHWAY-ID clone_from, left out when
// empty), and a DASH element of the same: none while the pool has no edges.
// The path is relative, which the player resolves against the URL it
// reached, unless the pool's public_url or the server's gives a base.
func (f *poolFront) Tags() (string, string) {
	ph := f.pool()
	if ph == nil || !ph.Pool().Enabled() {
		return "", ""
	}
	c := ph.Pool().Config()
	uri := c.Path
	if c.PublicURL != "" {
		uri = c.PublicURL + c.Path
	} else if pub := f.s.reach.Public(); pub.Host != "" {
		uri = pub.String() + c.Path // the server's public_url (issue 28)
	}
	tag := `#EXT-X-CONTENT-STEERING:SERVER-URI="` + uri + `"`
	el := `<ContentSteering`
	if c.CloneFrom != "" {
		tag += `,PATHWAY-ID="` + c.CloneFrom + `"`
		el += ` defaultServiceLocation="` + c.CloneFrom + `"`
	}
	el += ` queryBeforeStart="false">` + strings.ReplaceAll(uri, "&", "&amp;") + `</ContentSteering>`
	return tag, el
}

func (f *poolFront) Open(ctx context.Context, rawQuery string, h http.Header) (front.Opening, error) {
	ph := f.pool()
	if ph == nil {
		return front.Opening{}, errors.New("the pool is no longer configured")
	}
	req := pool.Request{RawQuery: rawQuery}
	if name := ph.CohortHeader(); name != "" {
		req.Cohort = h.Get(name)
	}
	o, ok := ph.Pool().Order(&req)
	if !ok {
		return front.Opening{}, errors.New("the pool has no edges")
	}
	// The front opens a pool's viewer only to redirect it or give it
	// backups: it counts on its first edge as a steering session would
	// (issue 28: headroom counts live front viewers). The count is the
	// operator's view; the viewer's answer does not depend on it.
	if err := ph.CountViewer(ctx, o.Session, o.Order[0], req.TTL); err != nil {
		f.s.log.Warn("counting a front viewer", "pool", f.name, "err", err)
	}
	return front.Opening{Order: o.Order, Query: o.Query}, nil
}

// Clone is the edge's clone as the pool's steering manifest sends it
// (internal/pool: an edge with a host, when clone_from is set): a clone
// of clone_from, on its host, with its params.
func (f *poolFront) Clone(pathway string) (string, string, [][2]string, bool) {
	ph := f.pool()
	if ph == nil {
		return "", "", nil, false
	}
	c := ph.Pool().Config()
	if c.CloneFrom == "" {
		return "", "", nil, false
	}
	for _, e := range c.Edges {
		if e.Pathway != pathway || e.Host == "" {
			continue
		}
		var params [][2]string
		for k, v := range e.Params {
			params = append(params, [2]string{k, v})
		}
		return c.CloneFrom, e.Host, params, true
	}
	return "", "", nil, false
}

func (f *poolFront) Pathways() []string {
	ph := f.pool()
	if ph == nil {
		return nil
	}
	var out []string
	for _, e := range ph.Pool().Edges() {
		out = append(out, e.Pathway)
	}
	return out
}

// roomFront is an energy room as the front sees it.
type roomFront struct {
	s *Server
	h *roomsteer.Room
}

func (f *roomFront) Name() string { return f.h.Label() }

// Tags are §8.2's tag and §8.3's element for the policy the room steers by.
func (f *roomFront) Tags() (string, string) {
	p := f.h.State().Policy()
	return decision.HLSTag(p), decision.DASHElement(p)
}

// Open decides for the viewer as a steering request would (§6), and
// stores the decision before the redirect names it (§8.4), so that an
// auditor can fetch it from the WAI-Decision header's URI.
func (f *roomFront) Open(ctx context.Context, rawQuery string, h http.Header) (front.Opening, error) {
	order, session, uri, err := f.h.DecideFor(ctx, rawQuery, h)
	if err != nil {
		return front.Opening{}, err
	}
	return front.Opening{Order: order, Query: "wai_session=" + session.String(), Decision: uri}, nil
}

// Clone is the policy's clone (§3.2): its base, host and params, as
// §8.1's PATHWAY-CLONES sends them.
func (f *roomFront) Clone(pathway string) (string, string, [][2]string, bool) {
	p := f.h.State().Policy()
	i, ok := p.Index(pathway)
	if !ok || !p.Pathways[i].IsClone() || int(p.Pathways[i].Base) >= len(p.Pathways) {
		return "", "", nil, false
	}
	c := &p.Pathways[i]
	var params [][2]string
	for _, q := range c.Params {
		params = append(params, [2]string{q.Name, q.Value})
	}
	return p.Pathways[c.Base].ID, c.Host, params, true
}

func (f *roomFront) Pathways() []string { return f.h.State().IDs() }

// serveFront answers a path of the front.
func (s *Server) serveFront(w http.ResponseWriter, r *http.Request, st front.Steering) {
	if r.Method == http.MethodOptions {
		s.count(routePreflight, w, r, func(w http.ResponseWriter, _ *http.Request) { front.Preflight(w) })
		return
	}
	// What the viewer reached, through the trusted proxies, is the base
	// of the redirects and backups the front writes (reach.BaseOf).
	viewer := s.reach.Of(r)
	ctx := reach.With(r.Context(), viewer)
	if s.limits != nil {
		// A room's viewer who is redirected or given backups is decided
		// for as a steering request is: the budgets of its address apply
		// (decideFor).
		ctx = roomsteer.WithViewer(ctx, viewer.Client)
	}
	r = r.WithContext(ctx)
	s.count(routeFront, w, r, func(w http.ResponseWriter, r *http.Request) {
		s.front.Serve(w, r, st)
	})
}

func (s *Server) serveFrontStatus(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) || !s.operator(w, r) {
		return
	}
	if s.front == nil {
		web.Refuse(w, api.Errorf(api.NotFound, "the server has no front"))
		return
	}
	api.WriteJSON(w, http.StatusOK, s.frontStatus(r.Context()))
}

// frontStatus is the front's status now; s.front is set.
func (s *Server) frontStatus(ctx context.Context) FrontStatus {
	st := FrontStatus{Opens: s.front.Opens()}
	for _, ph := range s.poolsSorted() {
		v := ph.View(ctx)
		ph := PoolHeadroom{Pool: ph.Name(), Edges: map[string]float64{}}
		for _, e := range v.Edges {
			if e.Health.Up && !e.Drained && e.Weight > 0 {
				ph.N++
			}
		}
		for _, e := range v.Edges {
			ph.Edges[e.Pathway] = e.Headroom // the OTT seed's 1 + 1/(N−1) of its load, as the pool's view has it
		}
		st.Pools = append(st.Pools, ph)
	}
	return st
}

// writeFrontMetrics writes who opened the front's playlists: by class
// (steers, backup, redirect) and family, and the share that steers (the
// multi-CDN seed's pitfall 5).
func (s *Server) writeFrontMetrics(b *bytes.Buffer) {
	if s.front == nil {
		return
	}
	o := s.front.Opens()
	b.WriteString("# HELP waisteer_front_opens_total Playlists opened through the front, by what the player can do and its family (User-Agent).\n# TYPE waisteer_front_opens_total counter\n")
	for _, c := range slices.Sorted(maps.Keys(o.ByFamily)) {
		for _, fam := range slices.Sorted(maps.Keys(o.ByFamily[c])) {
			fmt.Fprintf(b, "waisteer_front_opens_total{class=%q,family=%q} %d\n", c, fam, o.ByFamily[c][fam])
		}
	}
	b.WriteString("# HELP waisteer_front_class_rules_total Playlists opened through the front, by class and the rule that decided it (an operator's list, a built-in rule, or waisteer_mode).\n# TYPE waisteer_front_class_rules_total counter\n")
	for _, c := range slices.Sorted(maps.Keys(o.ByRule)) {
		for _, rule := range slices.Sorted(maps.Keys(o.ByRule[c])) {
			fmt.Fprintf(b, "waisteer_front_class_rules_total{class=%q,rule=%q} %d\n", c, rule, o.ByRule[c][rule])
		}
	}
	b.WriteString("# HELP waisteer_front_steering_share The share of the front's openings by players that steer.\n# TYPE waisteer_front_steering_share gauge\n")
	fmt.Fprintf(b, "waisteer_front_steering_share %g\n", o.SteeringShare)
	b.WriteString("# HELP waisteer_front_redirects_total Players that cannot steer, redirected on opening.\n# TYPE waisteer_front_redirects_total counter\n")
	fmt.Fprintf(b, "waisteer_front_redirects_total %d\n", o.Redirects)
	b.WriteString("# HELP waisteer_front_pathway_warnings Playlists served naming in their steering line a pathway they do not declare (the front's status lists them).\n# TYPE waisteer_front_pathway_warnings gauge\n")
	fmt.Fprintf(b, "waisteer_front_pathway_warnings %d\n", len(o.Warnings))
	b.WriteString("# HELP waisteer_front_failures_total Playlists the front could not serve, by code.\n# TYPE waisteer_front_failures_total counter\n")
	for _, k := range slices.Sorted(maps.Keys(o.Failures)) {
		fmt.Fprintf(b, "waisteer_front_failures_total{code=%q} %d\n", k, o.Failures[k])
	}
}
