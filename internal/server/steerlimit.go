package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/waisteer/waisteer/internal/budget"
)

// The steering routes' budgets (internal/budget): the rooms' and the pools'
// answers over budget.

// clientAddr is the address r came from (reach.Reader.Of): its peer's,
// or through trusted proxies (Config.Limits.TrustedProxies), the one they
// name in Forwarded or X-Forwarded-For.
func (s *Server) clientAddr(r *http.Request) netip.Addr { return s.reach.Of(r).Client }

// limitNow is the instant budgets are spent at: the room clock's.
func (s *Server) limitNow() time.Time { return time.UnixMicro(int64(s.clock())) }

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
		ph.Limited().Write(b, fmt.Sprintf("pool=%q", ph.Name()))
	}
	s.limits.WriteKeys(b)
}
