package server

import (
	"context"
	"strings"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/internal/steerroute"
	"github.com/waisteer/waisteer/internal/web"
)

// The pools are steered and operated by internal/poolsteer; what they take
// of the server is here.

// poolDeps is what the pools take of s.
func (s *Server) poolDeps() poolsteer.Deps {
	return poolsteer.Deps{
		Server:   s.name,
		Secrets:  s.st,
		Loads:    s.loads,
		Clock:    s.clock,
		Grace:    s.grace,
		Log:      s.log,
		Budgets:  s.limits,
		Reach:    s.reach,
		Operator: s.operator,
		PathFree: poolPathFree,
		Routes: func(next []*poolsteer.Steerer) (func(), error) {
			rt, err := buildRoutes(s.sortedHubs(), next, nil, nil, s.routes.Load().decisions)
			if err != nil {
				return nil, err
			}
			return func() { s.routes.Store(rt) }, nil
		},
	}
}

// ReloadPools replaces the server's pools with cfgs (SIGHUP): a pool of a
// name the server steers is reconfigured in place, so that its edges kept
// keep their health, drains and sessions' orders (pool.Reconfigure); a new
// name is opened; a name gone is no longer steered. Everything is checked
// before anything changes (poolsteer.Pools.Reload).
func (s *Server) ReloadPools(ctx context.Context, cfgs []pool.Config) error {
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	return s.pools.Reload(ctx, cfgs)
}

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

// poolsSorted lists the pools by name ("" first).
func (s *Server) poolsSorted() []*poolsteer.Steerer { return s.pools.Sorted() }
