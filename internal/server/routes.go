package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/internal/qoewatch"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/steerroute"
)

// A steerer answers the GETs of a steering route. The server has two: an
// energy room (roomsteer.Room), which decides each request by the rule
// (§6), signs the decision and stores it before it answers; and a pool
// (poolsteer.Steerer), which orders its edges by health and weight
// (internal/pool) and signs and stores nothing. Everything around them is
// the server's, the same for both: the routes, the preflight, the metrics,
// the logs and the operator's token.
type steerer interface {
	// ServeSteer answers a request on the route: a GET, or a refusal.
	ServeSteer(w http.ResponseWriter, r *http.Request)
	// Label names the steerer in messages: "room <id>", "pool <name>".
	Label() string
	// ReadsHost says whether the answer depends on the Host the request
	// reached (a pool's RELOAD-URI), which the fasthttp path then copies.
	ReadsHost() bool
	// ReportsTo is where a CMCD event report posted to the route goes:
	// the steerer's QoE watch (nil when it steers by none), its pathways
	// and the request's cohort.
	ReportsTo(r *http.Request) (*qoewatch.Watch, []string, string)
}

// routeTable maps paths to the rooms and pools that answer them. It is
// rebuilt when a policy changes or the pools are reloaded, and published
// whole (Server.routes).
type routeTable struct {
	steer     map[string][]steerTarget      // by escaped path
	decisions []string                      // prefixes (path, and query when decision_uri has one)
	edges     map[string]*poolsteer.Steerer // a pool's path + "/edges": the operator's view of its edges
}

type steerTarget struct {
	to    steerer
	route steerroute.Route
}

// buildRoutes makes the table for the hubs' states, with st in place of
// the state of hub h when st is not nil, the pools, and the decision
// prefixes already known (a replaced policy's stay). Two rooms or pools may
// not share a steering URI (path and query parts alike), and a pool's path
// takes no query. A room's retired steering URIs, those of policies it
// steered by before, still reach it unless another room or a pool now
// steers there: a player holding an earlier manifest's RELOAD-URI is
// answered, never 404 (players.md).
func buildRoutes(hubs []*roomsteer.Room, pools []*poolsteer.Steerer, h *roomsteer.Room, st *roomsteer.State, known []string) (*routeTable, error) {
	t := &routeTable{steer: map[string][]steerTarget{}, decisions: slices.Clone(known), edges: map[string]*poolsteer.Steerer{}}
	taken := func(r steerroute.Route) *steerTarget {
		for i, other := range t.steer[r.Path] {
			if other.route.Equal(r) {
				return &t.steer[r.Path][i]
			}
		}
		return nil
	}
	for _, ph := range pools {
		r := steerroute.PathOnly(ph.Path())
		if ts := t.steer[r.Path]; len(ts) > 0 {
			return nil, api.Errorf(api.RouteConflict, "%s and %s both steer at %q", ts[0].to.Label(), ph.Label(), r.Path)
		}
		t.steer[r.Path] = append(t.steer[r.Path], steerTarget{to: ph, route: r})
		t.edges[r.Path+"/edges"] = ph
	}
	for _, hb := range hubs {
		s := hb.State()
		if hb == h && st != nil {
			s = st
		}
		for _, r := range s.Steer() {
			if ts := t.steer[r.Path]; len(ts) > 0 && isPool(ts[0].to) {
				return nil, api.Errorf(api.RouteConflict, "%s and %s both steer at %q", ts[0].to.Label(), hb.Label(), r.Path)
			}
			if other := taken(r); other != nil {
				return nil, api.Errorf(api.RouteConflict, "%s and %s both steer at %q", other.to.Label(), hb.Label(), r.Path)
			}
			if ph := t.edges[r.Path]; ph != nil {
				return nil, api.Errorf(api.RouteConflict, "%s steers at %q, the path of %s's edges", hb.Label(), r.Path, ph.Label())
			}
			t.steer[r.Path] = append(t.steer[r.Path], steerTarget{to: hb, route: r})
		}
		if !slices.Contains(t.decisions, s.Decisions()) {
			t.decisions = append(t.decisions, s.Decisions())
		}
	}
	for _, hb := range hubs {
		for _, r := range hb.Retired() {
			if ts := t.steer[r.Path]; len(ts) > 0 && isPool(ts[0].to) || t.edges[r.Path] != nil {
				continue // a pool's now
			}
			if taken(r) == nil {
				t.steer[r.Path] = append(t.steer[r.Path], steerTarget{to: hb, route: r})
			}
		}
	}
	if !slices.Contains(t.decisions, steerroute.StableDecisions) {
		t.decisions = append(t.decisions, steerroute.StableDecisions)
	}
	// Longest prefix first, so that a request is matched to the most
	// specific one.
	slices.SortFunc(t.decisions, func(a, b string) int { return len(b) - len(a) })
	return t, nil
}

// steerHub finds the room or pool a steering request is for: the one at
// its path, or of several, the one whose query parts it holds most of. A
// query that gives a key of a room's parts another value than the room's
// names no room there: 404 room_not_found (issue 29: `?room=livee1` was
// steered by the only room at the path, live1's `?room=live1`, without a
// word). A query that names nothing is steered by the only room at its path,
// as before.
func (t *routeTable) steerHub(path, rawQuery string) (steerer, bool, *api.Error) {
	ts := t.steer[path]
	switch len(ts) {
	case 0:
		return nil, false, nil
	case 1:
		if _, ok := ts[0].route.Matches(rawQuery); !ok && ts[0].route.Contradicts(rawQuery) {
			return nil, true, roomNotAt(path, rawQuery)
		}
		return ts[0].to, true, nil
	}
	var best steerer
	bestN, tie := -1, false
	for _, c := range ts {
		n, ok := c.route.Matches(rawQuery)
		if !ok {
			continue
		}
		switch {
		case n > bestN:
			best, bestN, tie = c.to, n, false
		case n == bestN:
			tie = true
		}
	}
	if best == nil && !slices.ContainsFunc(ts, func(c steerTarget) bool { return !c.route.Contradicts(rawQuery) }) {
		return nil, true, roomNotAt(path, rawQuery)
	}
	if best == nil || tie {
		return nil, true, api.Errorf(api.RoomAmbiguous, "several rooms steer at %q, and the query names none of them", path)
	}
	return best, true, nil
}

// roomNotAt refuses a steering request whose query names no room of those
// at its path.
func roomNotAt(path, rawQuery string) *api.Error {
	return api.Errorf(api.RoomNotFound, "no room steers at %q with the query %q", path, rawQuery)
}

// decisionDigest matches a request to a decision prefix and returns the
// text after it, which must be a digest, and whether the prefix took in the
// query (a decision_uri with a query, §8.4).
func (t *routeTable) decisionDigest(path, rawQuery string) (string, bool, bool) {
	for _, d := range t.decisions {
		target, inQuery := path, strings.Contains(d, "?")
		if inQuery {
			target = path + "?" + rawQuery
		}
		if rest, ok := strings.CutPrefix(target, d); ok && rest != "" {
			return rest, inQuery, true
		}
	}
	return "", false, false
}

// isPool reports whether a steering route is a pool's, which holds its
// path whole: a room may not steer there, with or without a query.
func isPool(s steerer) bool {
	_, ok := s.(*poolsteer.Steerer)
	return ok
}

// poolEdges matches a path to a pool's operator routes: P/edges, and what
// follows it.
func (t *routeTable) poolEdges(path string) (*poolsteer.Steerer, string, bool) {
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
