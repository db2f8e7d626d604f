package server

import (
	"context"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/dashboard"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/policy"
)

// The dashboard's reading of the server (internal/dashboard's Deps).

func (s *Server) newDashboard() *dashboard.Dashboard {
	d := dashboard.Deps{Name: s.name, Clock: s.clock, Operator: s.operator, Handler: s}
	d.Rooms = func() []dashboard.Room {
		var out []dashboard.Room
		for _, h := range s.sortedHubs() {
			out = append(out, dashRoom{s, h})
		}
		return out
	}
	d.Pools = func() []dashboard.Pool {
		var out []dashboard.Pool
		for _, ph := range s.poolsSorted() {
			out = append(out, dashPool{ph})
		}
		return out
	}
	if s.front != nil {
		d.Front = s.frontStatus
	}
	return dashboard.New(d)
}

// sample and dashboardState are the dashboard's, for the server's tests.
func (s *Server) sample(ctx context.Context)                        { s.dash.Sample(ctx) }
func (s *Server) dashboardState(ctx context.Context) DashboardState { return s.dash.State(ctx) }

// dashRoom is a room as the dashboard reads it.
type dashRoom struct {
	s *Server
	h *roomsteer.Room
}

func (r dashRoom) ID() sig.Hash { return r.h.ID() }

func (r dashRoom) Status(ctx context.Context, loadsAt uint64) (view.Status, *api.Error) {
	st, aerr := r.h.Status(ctx, loadsAt)
	st.Server = r.s.name
	return st, aerr
}

// Hops reads the index under the room's lock, at the policy it steers by.
func (r dashRoom) Hops(a, b uint64) []dashboard.Hop {
	var out []dashboard.Hop
	r.h.EachHop(a, b, func(pathway string, hop sig.PublicKey, es []evidence.Entry) {
		out = append(out, dashboard.Hop{Pathway: pathway, Key: hop, Records: es})
	})
	return out
}

// Basis is the basis of the room's operator policy.
func (r dashRoom) Basis() policy.Basis { return r.h.OperatorPolicy().Basis }

// dashPool is a pool as the dashboard reads it.
type dashPool struct{ ph *poolsteer.Steerer }

func (p dashPool) Name() string { return p.ph.Name() }

func (p dashPool) View(ctx context.Context, loadsAt uint64) view.PoolView {
	return p.ph.ViewAt(ctx, loadsAt)
}
