package server

import (
	"net/url"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/policy"
)

// The routes of a policy are the paths of its URIs (§3.1): a steering
// request is a GET of server_uri or of the last manifest's RELOAD-URI (§4),
// and a decision is served at decision_uri followed by its digest (§8.4).
// The host part is ignored: the server answers whatever name it is reached
// by.

// steerRoute is one steering URI of a room: its path, and the parts of its
// query, which tell apart rooms whose steering URIs share a path.
type steerRoute struct {
	path  string   // escaped, as r.URL.EscapedPath() gives it
	query []string // the URI's query parts, as sent
}

// The paths of the server's own routes, which no policy may take.
var reserved = []string{"/v1/policies/", "/v1/records/", "/v1/rooms/", "/v1/front/", "/v1/dashboard", "/v1/dashboard/", "/dashboard", "/dashboard/", "/healthz", "/readyz", "/metrics"}

// stableDecisions is the server's own prefix for decisions, served beside
// each policy's decision_uri so that a decision stays reachable after its
// policy is replaced by one with another decision_uri.
const stableDecisions = "/v1/decisions/"

// policyRoutes returns the steering routes and the decision prefix of p.
func policyRoutes(p *policy.Policy) ([]steerRoute, string, error) {
	var rs []steerRoute
	for _, uri := range []string{p.ServerURI, p.ReloadURI} {
		u, err := routeURL(uri, "a steering URI")
		if err != nil {
			return nil, "", err
		}
		r := steerRoute{path: u.EscapedPath(), query: queryParts(u.RawQuery)}
		if isReserved(r.path) || strings.HasPrefix(r.path, stableDecisions) {
			return nil, "", api.Errorf(api.RouteConflict, "the steering URI %q's path is the server's own route", uri)
		}
		if !slices.ContainsFunc(rs, r.equal) {
			rs = append(rs, r)
		}
	}
	u, err := routeURL(p.DecisionURI, "decision_uri")
	if err != nil {
		return nil, "", err
	}
	prefix := u.EscapedPath()
	if strings.Contains(p.DecisionURI, "?") {
		// The digest follows the query: decision_uri + digest (§8.4).
		prefix += "?" + u.RawQuery
	}
	if isReserved(prefix) {
		return nil, "", api.Errorf(api.RouteConflict, "decision_uri %q's path is the server's own route", p.DecisionURI)
	}
	return rs, prefix, nil
}

// routeURL reads a policy URI (§3.3 has made it RFC 3986 characters) and
// requires an absolute path: a relative reference resolves against a
// content description the server does not know.
func routeURL(uri, what string) (*url.URL, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, api.Errorf(api.RouteUnusable, "%s %q does not parse as a URI: %v", what, uri, err)
	}
	if u.Opaque != "" || !strings.HasPrefix(u.EscapedPath(), "/") && u.Host == "" {
		return nil, api.Errorf(api.RouteUnusable, "%s %q has no absolute path for the server to answer", what, uri)
	}
	if u.EscapedPath() == "" {
		u.Path, u.RawPath = "/", ""
	}
	if why := pathDefect(u.EscapedPath()); why != "" {
		// No request could reach it: the server refuses such paths (cleanPath).
		return nil, api.Errorf(api.RouteUnusable, "%s %q: its path %s", what, uri, why)
	}
	return u, nil
}

func isReserved(path string) bool {
	for _, p := range reserved {
		if path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// queryParts cuts a raw query at each & (§4.1's cut), keeping non-empty
// parts as sent.
func queryParts(raw string) []string {
	var parts []string
	for part := range strings.SplitSeq(raw, "&") {
		if part != "" {
			parts = append(parts, part)
		}
	}
	slices.Sort(parts)
	return slices.Compact(parts)
}

func (r steerRoute) equal(o steerRoute) bool {
	return r.path == o.path && slices.Equal(r.query, o.query)
}

// matches reports how many of the route's query parts the request's raw
// query holds, and whether it holds all of them.
func (r steerRoute) matches(rawQuery string) (int, bool) {
	if len(r.query) == 0 {
		return 0, true
	}
	n := 0
	for part := range strings.SplitSeq(rawQuery, "&") {
		if _, ok := slices.BinarySearch(r.query, part); ok {
			n++
		}
	}
	return n, n >= len(r.query)
}

// routeTable maps paths to the rooms and pools that answer them. It is
// rebuilt when a policy changes or the pools are reloaded, and published
// whole (Server.routes).
type routeTable struct {
	steer     map[string][]steerTarget // by escaped path
	decisions []string                 // prefixes (path, and query when decision_uri has one)
	edges     map[string]*poolHub      // a pool's path + "/edges": the operator's view of its edges
}

type steerTarget struct {
	to    steerer
	route steerRoute
}

// buildRoutes makes the table for the hubs' states, with st in place of
// the state of hub h when st is not nil, the pools, and the decision
// prefixes already known (a replaced policy's stay). Two rooms or pools may
// not share a steering URI (path and query parts alike), and a pool's path
// takes no query. A room's retired steering URIs, those of policies it
// steered by before, still reach it unless another room or a pool now
// steers there: a player holding an earlier manifest's RELOAD-URI is
// answered, never 404 (players.md).
func buildRoutes(hubs []*hub, pools []*poolHub, h *hub, st *roomState, known []string) (*routeTable, error) {
	t := &routeTable{steer: map[string][]steerTarget{}, decisions: slices.Clone(known), edges: map[string]*poolHub{}}
	taken := func(r steerRoute) *steerTarget {
		for i, other := range t.steer[r.path] {
			if other.route.equal(r) {
				return &t.steer[r.path][i]
			}
		}
		return nil
	}
	for _, ph := range pools {
		rt := ph.route.Load()
		r := steerRoute{path: rt.path}
		if ts := t.steer[r.path]; len(ts) > 0 {
			return nil, api.Errorf(api.RouteConflict, "%s and %s both steer at %q", ts[0].to.label(), ph.label(), r.path)
		}
		t.steer[r.path] = append(t.steer[r.path], steerTarget{to: ph, route: r})
		t.edges[rt.path+"/edges"] = ph
	}
	for _, hb := range hubs {
		s := hb.state.Load()
		if hb == h && st != nil {
			s = st
		}
		for _, r := range s.steer {
			if ts := t.steer[r.path]; len(ts) > 0 && isPool(ts[0].to) {
				return nil, api.Errorf(api.RouteConflict, "%s and %s both steer at %q", ts[0].to.label(), hb.label(), r.path)
			}
			if other := taken(r); other != nil {
				return nil, api.Errorf(api.RouteConflict, "%s and %s both steer at %q", other.to.label(), hb.label(), r.path)
			}
			if ph := t.edges[r.path]; ph != nil {
				return nil, api.Errorf(api.RouteConflict, "%s steers at %q, the path of %s's edges", hb.label(), r.path, ph.label())
			}
			t.steer[r.path] = append(t.steer[r.path], steerTarget{to: hb, route: r})
		}
		if !slices.Contains(t.decisions, s.decisions) {
			t.decisions = append(t.decisions, s.decisions)
		}
	}
	for _, hb := range hubs {
		for _, r := range hb.retired {
			if ts := t.steer[r.path]; len(ts) > 0 && isPool(ts[0].to) || t.edges[r.path] != nil {
				continue // a pool's now
			}
			if taken(r) == nil {
				t.steer[r.path] = append(t.steer[r.path], steerTarget{to: hb, route: r})
			}
		}
	}
	if !slices.Contains(t.decisions, stableDecisions) {
		t.decisions = append(t.decisions, stableDecisions)
	}
	// Longest prefix first, so that a request is matched to the most
	// specific one.
	slices.SortFunc(t.decisions, func(a, b string) int { return len(b) - len(a) })
	return t, nil
}

// steerHub finds the room or pool a steering request is for: the one at
// its path, or of several, the one whose query parts it holds most of.
func (t *routeTable) steerHub(path, rawQuery string) (steerer, bool, *api.Error) {
	ts := t.steer[path]
	switch len(ts) {
	case 0:
		return nil, false, nil
	case 1:
		return ts[0].to, true, nil
	}
	var best steerer
	bestN, tie := -1, false
	for _, c := range ts {
		n, ok := c.route.matches(rawQuery)
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
	if best == nil || tie {
		return nil, true, api.Errorf(api.RoomAmbiguous, "several rooms steer at %q, and the query names none of them", path)
	}
	return best, true, nil
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
	_, ok := s.(*poolHub)
	return ok
}
