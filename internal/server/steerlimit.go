package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/report"
)

// The steering routes' budgets (internal/budget): the rooms' and the pools'
// answers over budget.

// clientAddr is the address r came from (budget.Client): its peer's, or
// through trusted proxies (Config.Limits.TrustedProxies), the one they
// name.
func (s *Server) clientAddr(r *http.Request) netip.Addr { return budget.Client(s.proxies, r) }

// limitNow is the instant budgets are spent at: the room clock's.
func (s *Server) limitNow() time.Time { return time.UnixMicro(int64(s.clock())) }

// overBudget answers a pool's steering request that is over budget (why):
// with a session the pool minted (hasSession), the manifest the pool
// orders for it, with neither its report nor its session counted; else
// 503.
func (ph *poolHub) overBudget(w http.ResponseWriter, rt *poolRoute, req *pool.Request, rep report.Report, why string, hasSession bool) {
	if !hasSession {
		ph.limited.Note(why, budget.Refused)
		budget.Refuse(w, uint32(rt.ttl))
		return
	}
	ph.limited.Note(why, budget.Replayed)
	if rt.qoe != nil {
		req.Away = ph.awayOf(rt, req, rep, time.UnixMicro(int64(ph.s.clock())))
	}
	mb := answer.Buffers.Get().(*[]byte)
	m, _, _ := ph.p.Steer((*mb)[:0], req)
	answer.Manifest(w, answer.HeaderJSON, nil, m, mb)
}

// writeLimitMetrics writes the counts of steering requests over budget,
// by room or pool, reason and answer.
func (s *Server) writeLimitMetrics(b *bytes.Buffer) {
	if s.limits == nil {
		return
	}
	b.WriteString(budget.MetricsHelp)
	for _, h := range s.sortedHubs() {
		h.Limited().Write(b, fmt.Sprintf("room=\"%s\"", h.ID()))
	}
	for _, ph := range s.poolsSorted() {
		ph.limited.Write(b, fmt.Sprintf("pool=%q", ph.name))
	}
	s.limits.WriteKeys(b)
}
