package server

import (
	"context"
	"net/http"

	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
)

// roomDeps is what the server gives each energy room (roomsteer.Deps).
func (s *Server) roomDeps() roomsteer.Deps {
	return roomsteer.Deps{
		Store: s.st, Loads: s.loads, Log: s.log, Clock: s.clock, Grace: s.grace, Fails: s.fails,
		Commits: s.commits, Records: s.records, Budgets: s.limits, Reach: s.reach, Closing: &s.closing,
		Routes:     (*roomRoutes)(s),
		KnowPolicy: func(p *policy.Policy) { s.policies.Store(p.Digest(), p) },
		PolicyOf:   func(ctx context.Context, d sig.Hash) (*policy.Policy, error) { return s.audit.PolicyOf(ctx, d) },
		KeepEpoch: func(ctx context.Context, h *roomsteer.Room, st *roomsteer.State) error {
			return s.audit.KeepEpoch(ctx, h.ID(), auditRoom(h, st))
		},
	}
}

// roomRoutes is the server's table of steering routes as a room sees it
// (roomsteer.Routes).
type roomRoutes Server

func (t *roomRoutes) Lock()   { t.routesMu.Lock() }
func (t *roomRoutes) Unlock() { t.routesMu.Unlock() }

func (t *roomRoutes) Build(h *roomsteer.Room, st *roomsteer.State) (func(), error) {
	s := (*Server)(t)
	rt, err := buildRoutes(s.sortedHubs(), s.poolsSorted(), h, st, s.routes.Load().decisions)
	if err != nil {
		return nil, err
	}
	return func() { s.routes.Store(rt) }, nil
}

// serveRecords takes a hop's records (POST /v1/rooms/{room}/records):
// roomsteer.Room.ServeRecords.
func (s *Server) serveRecords(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) {
		return
	}
	h, aerr := s.hubOf(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	h.ServeRecords(w, r)
}
