package qoewatch

import (
	"bytes"
	"fmt"
	"sync/atomic"

	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
)

// Values of steering requests' reports that do not count (issue 26 item
// 3): what §4 does not read (report.Unread: answered as if absent, the
// decision made as before) and what reads but is absurd (a throughput
// over 1 Tbit/s, a buffer over a day: still §4's values, which a room's
// decision reads as they are, but no player measures them). Each is
// counted by reason per steerer, room or pool, whether or not it steers
// by QoE, as CMCD v2 event reports' lines are: in the operator's view
// (`reports_ignored`) and in Prometheus (waisteer_reports_ignored_total).

// reportReasons are the reasons, in the order of Unread: Unread's
// bits from the lowest, then the absurd values.
var reportReasons = append(report.UnreadReasons()[:len(report.UnreadReasons()):len(report.UnreadReasons())], "throughput_absurd", "buffer_absurd")

// Unread count a steerer's reports by reason: one of each reason a
// report has at most.
type Unread struct {
	unread           [8]atomic.Uint64 // by bit of report.Unread
	absurdT, absurdB atomic.Uint64
}

// Note counts what of a request's report did not count. The common report,
// every value read and in range, costs three comparisons.
func (c *Unread) Note(u report.Unread, rep report.Report) {
	for i := 0; u != 0; i, u = i+1, u>>1 {
		if u&1 != 0 {
			c.unread[i].Add(1)
		}
	}
	if rep.Present&report.HasThroughput != 0 && rep.Throughput > qoe.MaxThroughput {
		c.absurdT.Add(1)
	}
	if rep.Present&report.HasBuffer != 0 && rep.Buffer > qoe.MaxBuffer {
		c.absurdB.Add(1)
	}
}

// counts are the counts in the order of reportReasons.
func (c *Unread) counts() []uint64 {
	n := len(report.UnreadReasons())
	out := make([]uint64, 0, n+2)
	for i := range n {
		out = append(out, c.unread[i].Load())
	}
	return append(out, c.absurdT.Load(), c.absurdB.Load())
}

// View is every reason with its count, zeros too: the operator's view
// names every reason there is.
func (c *Unread) View() map[string]uint64 {
	out := make(map[string]uint64, len(reportReasons))
	for i, v := range c.counts() {
		out[reportReasons[i]] = v
	}
	return out
}

// UnreadHelp is the header of the unread counts' family.
const UnreadHelp = "# HELP waisteer_reports_ignored_total Steering requests whose report carried a value that does not count: one §4 does not read, or one past what a player measures; by steerer and reason.\n# TYPE waisteer_reports_ignored_total counter\n"

// Write writes the counts' series for the steerer named label.
func (c *Unread) Write(b *bytes.Buffer, label string) {
	for i, v := range c.counts() {
		fmt.Fprintf(b, "waisteer_reports_ignored_total{steerer=%q,reason=%q} %d\n", label, reportReasons[i], v)
	}
}
