package server

import (
	"context"
	"time"

	"github.com/waisteer/waisteer/internal/qoewatch"
)

// qoeEvery is how often the server evaluates the QoE rule: each second,
// the aggregator's resolution. Tests that drive the clock themselves set
// it before New.
var qoeEvery = time.Second

// watches are every steerer's QoE watch.
func (s *Server) watches() []*qoewatch.Watch {
	var out []*qoewatch.Watch
	for _, ph := range s.poolsSorted() {
		if w := ph.Watch(); w != nil {
			out = append(out, w)
		}
	}
	for _, h := range s.sortedHubs() {
		if w := h.QoE(); w != nil {
			out = append(out, w)
		}
	}
	return out
}

// evaluateQoE is the server's tick: every watch evaluated, and the pools'
// clients kept away by the per-client rule forgotten once their time is up.
func (s *Server) evaluateQoE(context.Context) {
	now := time.UnixMicro(int64(s.clock()))
	for _, w := range s.watches() {
		w.Evaluate(s.log, now)
		w.Sweep(now)
	}
	s.pools.SweepAway(now)
}
