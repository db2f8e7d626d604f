package server

import (
	"bytes"

	"github.com/waisteer/waisteer/internal/qoewatch"
)

// writeReportMetrics writes every steerer's counts, rooms then pools.
func (s *Server) writeReportMetrics(b *bytes.Buffer) {
	b.WriteString(qoewatch.UnreadHelp)
	for _, h := range s.sortedHubs() {
		h.Unread().Write(b, h.Label())
	}
	for _, ph := range s.poolsSorted() {
		ph.Unread().Write(b, ph.Label())
	}
}
