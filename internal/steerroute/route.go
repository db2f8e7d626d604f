// Package steerroute reads the routes of a policy: the paths of its URIs
// (§3.1). A steering request is a GET of server_uri or of the last
// manifest's RELOAD-URI (§4), and a decision is served at decision_uri
// followed by its digest (§8.4). The host part is ignored: the server
// answers whatever name it is reached by. It holds values only; the table
// of every room's and pool's routes is the server's. It imports no
// steerer nor the server.
package steerroute

import (
	"net/url"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
)

// Route is one steering URI of a room: its path, and the parts of its
// query, which tell apart rooms whose steering URIs share a path.
type Route struct {
	Path  string   // escaped, as r.URL.EscapedPath() gives it
	query []string // the URI's query parts, as sent
}

// PathOnly is the route of a path with no query part (a pool's).
func PathOnly(path string) Route { return Route{Path: path} }

// The paths of the server's own routes, which no policy may take.
var reserved = []string{"/v1/policies/", "/v1/records/", "/v1/rooms/", "/v1/front/", "/v1/dashboard", "/v1/dashboard/", "/dashboard", "/dashboard/", "/healthz", "/readyz", "/metrics"}

// StableDecisions is the server's own prefix for decisions, served beside
// each policy's decision_uri so that a decision stays reachable after its
// policy is replaced by one with another decision_uri.
const StableDecisions = "/v1/decisions/"

// OfPolicy returns the steering routes and the decision prefix of p.
func OfPolicy(p *policy.Policy) ([]Route, string, error) {
	var rs []Route
	for _, uri := range []string{p.ServerURI, p.ReloadURI} {
		u, err := routeURL(uri, "a steering URI")
		if err != nil {
			return nil, "", err
		}
		r := Route{Path: u.EscapedPath(), query: queryParts(u.RawQuery)}
		if IsReserved(r.Path) || strings.HasPrefix(r.Path, StableDecisions) {
			return nil, "", api.Errorf(api.RouteConflict, "the steering URI %q's path is the server's own route", uri)
		}
		if !slices.ContainsFunc(rs, r.Equal) {
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
	if IsReserved(prefix) {
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
	if why := web.PathDefect(u.EscapedPath()); why != "" {
		// No request could reach it: the server refuses such paths (cleanPath).
		return nil, api.Errorf(api.RouteUnusable, "%s %q: its path %s", what, uri, why)
	}
	return u, nil
}

// IsReserved reports whether path is, or is under, one of the server's own routes.
func IsReserved(path string) bool {
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

// Equal reports whether two routes are the same path and query parts.
func (r Route) Equal(o Route) bool {
	return r.Path == o.Path && slices.Equal(r.query, o.query)
}

// Matches reports how many of the route's query parts the request's raw
// query holds, and whether it holds all of them.
func (r Route) Matches(rawQuery string) (int, bool) {
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

// Contradicts reports whether the request's raw query names another value
// for a key of the route's query parts: it holds a part with the key of one
// of them ("room" of "room=live1") and not that part ("room=livee1"), so
// that it names something other than the route's room (issue 29). A query
// that holds none of the keys contradicts nothing.
func (r Route) Contradicts(rawQuery string) bool {
	for _, part := range r.query {
		key, _, _ := strings.Cut(part, "=")
		has, other := false, false
		for q := range strings.SplitSeq(rawQuery, "&") {
			k, _, _ := strings.Cut(q, "=")
			switch {
			case q == part:
				has = true
			case k == key:
				other = true
			}
		}
		if other && !has {
			return true
		}
	}
	return false
}
