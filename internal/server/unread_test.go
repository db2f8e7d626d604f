package server

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/report"
)

// unreadCase is a steering request whose report carries a value that does
// not count (issue 26 item 3), the report §4 reads of it (the value
// absent, or for an absurd one, as it is), and the reason it is counted by.
type unreadCase struct {
	query, cmcd string // the query after the path's "?", a CMCD-Request line
	rep         report.Report
	protocol    report.Protocol
	reason      string
}

// unreadCases are the values and one of each other reason, for a
// steerer whose first pathway is id (index 0).
func unreadCases(id string) []unreadCase {
	c0 := report.Report{Present: report.HasPathway}
	withT := func(t uint64) report.Report {
		return report.Report{Present: report.HasPathway | report.HasThroughput, Throughput: t}
	}
	hls, dash := report.HLS, report.DASH
	return []unreadCase{
		{"_HLS_pathway=" + id + "&_HLS_throughput=18446744073709551616", "", c0, hls, "throughput_unreadable"}, // 2^64
		{"_HLS_pathway=" + id + "&_HLS_throughput=-5", "", c0, hls, "throughput_unreadable"},
		{"_HLS_pathway=" + id + "&_HLS_throughput=fast", "", c0, hls, "throughput_unreadable"},
		{"_DASH_pathway=%22" + id + "%22&_DASH_throughput=-5", "", c0, dash, "throughput_unreadable"},
		{"_HLS_pathway=" + id + "&CMCD=mtp%3D-5", "", c0, hls, "throughput_unreadable"},
		{"_HLS_pathway=" + id, "mtp=-5", c0, hls, "throughput_unreadable"},
		{"_HLS_pathway=" + id + "&_HLS_throughput=18446744073709551615", "", withT(1<<64 - 1), hls, "throughput_absurd"},
		{"_HLS_pathway=" + id + "&CMCD=bl%3D999999999999999", "", report.Report{Present: report.HasPathway | report.HasBuffer, Buffer: 999999999999999}, hls, "buffer_absurd"},
		{"_HLS_pathway=nowhere&_HLS_throughput=5000000", "", report.Report{Present: report.HasThroughput, Throughput: 5000000}, hls, "unknown_pathway"},
		{"_HLS_pathway=" + id + "&CMCD=bl%3D-1", "", c0, hls, "buffer_unreadable"},
		{"_HLS_pathway=" + id, "bl=1;,", c0, hls, "cmcd_unreadable"},
		// Honest reports count nowhere.
		{"_HLS_pathway=" + id + "&_HLS_throughput=5000000&CMCD=bl%3D20000", "", report.Report{Present: 7, Throughput: 5000000, Buffer: 20000}, hls, ""},
		{"_HLS_pathway=.&_HLS_throughput=500000", "", report.Report{Present: report.HasThroughput, Throughput: 500000}, hls, ""},
	}
}

// wantUnread is the count of each reason the cases give, every reason
// named (zeros too), counted by hand from unreadCases.
var wantUnread = map[string]uint64{
	"throughput_unreadable": 6, "throughput_absurd": 1, "buffer_absurd": 1,
	"unknown_pathway": 1, "buffer_unreadable": 1, "cmcd_unreadable": 1,
}

// TestUnreadRoom (issue 26 item 3): an energy room without QoE answers
// every request 200 with the decision §4 gives (the value that does not
// read absent, the absurd one as it is: the decision is made as before)
// and counts each by its reason in its status and in Prometheus.
func TestUnreadRoom(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	id := e.sc.Policy.IDs()[0]
	for _, tc := range unreadCases(id) {
		var h http.Header
		if tc.cmcd != "" {
			h = http.Header{"Cmcd-Request": {tc.cmcd}}
		}
		m := e.steer("/v1/steer?"+tc.query, h)
		d, _ := e.audit(m)
		if d.Report != tc.rep || d.Protocol != tc.protocol {
			t.Errorf("%s %q: the decision states %d %+v, want %d %+v", tc.query, tc.cmcd, d.Protocol, d.Report, tc.protocol, tc.rep)
		}
	}
	if got := e.status().ReportsIgnored; !maps.Equal(got, wantUnread) {
		t.Errorf("status reports_ignored %v, want %v", got, wantUnread)
	}
	_, b := e.get("/metrics")
	for why, n := range wantUnread {
		want := fmt.Sprintf("waisteer_reports_ignored_total{steerer=\"room %s\",reason=%q} %d\n", e.room(), why, n)
		if !strings.Contains(string(b), want) {
			t.Errorf("the metrics lack %q", want)
		}
	}
}

// TestUnreadPool (issue 26 item 3): a pool, with and without QoE, answers
// each request 200 and counts each by its reason in its edges view and in
// Prometheus; with QoE, the absurd values are also not aggregated.
func TestUnreadPool(t *testing.T) {
	for _, c := range []pool.Config{seedPool(nil, nil), qoePool()} {
		t.Run(fmt.Sprintf("qoe %v", c.QoE != nil), func(t *testing.T) {
			e := newPoolEnv(t, testToken, c)
			id := c.Edges[0].Pathway
			for _, tc := range unreadCases(id) {
				h := http.Header{}
				if tc.cmcd != "" {
					h.Set("CMCD-Request", tc.cmcd)
				}
				if resp, b := e.do("GET", pool.DefaultPath+"?"+tc.query, "", h); resp.StatusCode != 200 {
					t.Errorf("%s: %d %s", tc.query, resp.StatusCode, b)
				}
			}
			if got := e.view().ReportsIgnored; !maps.Equal(got, wantUnread) {
				t.Errorf("edges reports_ignored %v, want %v", got, wantUnread)
			}
			_, b := e.do("GET", "/metrics", "", nil)
			for why, n := range wantUnread {
				want := fmt.Sprintf("waisteer_reports_ignored_total{steerer=\"pool [steering]\",reason=%q} %d\n", why, n)
				if !strings.Contains(string(b), want) {
					t.Errorf("the metrics lack %q", want)
				}
			}
			if c.QoE != nil {
				if ig := e.srv.poolNamed("").Watch().Agg.Ignored(); ig["throughput_absurd"] != 1 || ig["buffer_absurd"] != 1 {
					t.Errorf("the aggregator took an absurd value: ignored %v", ig)
				}
			}
		})
	}
}
