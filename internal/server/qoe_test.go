package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/qoewatch"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report/qoe"
	"github.com/waisteer/waisteer/store"
)

// qoePool is a pool of two declared pathways of equal weight with QoE: the
// per-client rule at a lowest variant of 1 Mbit/s, and the cohort rule at
// half the best median, over at least 5 sessions.
func qoePool() pool.Config {
	c := seedPool(nil, nil)
	c.TTL = 60
	c.Edges = []pool.Edge{{Pathway: "cdn-a", Weight: 1}, {Pathway: "cdn-b", Weight: 1}}
	c.CohortHeader = "X-Region"
	c.QoE = &pool.QoE{Config: qoe.Config{Window: time.Minute, MinSessions: 5, Fraction: 0.5, Margin: 0.2, Hold: time.Minute}, ShortTTL: 10, Lowest: 1_000_000}
	return c
}

// firstOn is a session whose order puts id first, and its RELOAD-URI.
func (e *poolEnv) firstOn(id string) *poolManifest {
	e.t.Helper()
	for range 200 {
		if m := e.steer(pool.DefaultPath); m.Priority[0] == id {
			return m
		}
	}
	e.t.Fatalf("no session put %s first in 200", id)
	return nil
}

// TestPerClientRule: apex-steering's rule (issue 17 item 2). A client
// reporting less than 1.2 times the lowest variant's bitrate (1 Mbit/s) on
// its pathway gets the next pathway first and the short TTL; at exactly
// 1.2 times it keeps its order. HLS, DASH and CMCD reports alike. Once
// moved, the client is kept off the slow pathway while it reports the
// good one's throughput.
func TestPerClientRule(t *testing.T) {
	e := newPoolEnv(t, testToken, qoePool())
	for _, tc := range []struct {
		name   string
		report func(pathway string, bps uint64) string
	}{
		{"hls", func(p string, bps uint64) string { return fmt.Sprintf("&_HLS_pathway=%s&_HLS_throughput=%d", p, bps) }},
		{"dash", func(p string, bps uint64) string {
			return fmt.Sprintf(`&_DASH_pathway="%s"&_DASH_throughput=%d`, p, bps)
		}},
		// CMCD mtp is kbit/s (§4.4): 1199 is 1 199 000 bit/s.
		{"cmcd", func(p string, bps uint64) string {
			return fmt.Sprintf("&_HLS_pathway=%s&CMCD=mtp%%3D%d", p, bps/1000)
		}},
	} {
		m := e.firstOn("cdn-a")
		// A throughput of 0 is no measurement: the order holds.
		if next := e.steer(m.Reload + tc.report("cdn-a", 0)); !slices.Equal(next.Priority, m.Priority) || next.TTL != 60 {
			t.Errorf("%s: reporting 0: %s", tc.name, next.raw)
		}
		// At exactly 1.2 × lowest the order holds.
		if next := e.steer(m.Reload + tc.report("cdn-a", 1_200_000)); !slices.Equal(next.Priority, m.Priority) || next.TTL != 60 {
			t.Errorf("%s: at 1.2 × lowest: %s", tc.name, next.raw)
		}
		next := e.steer(m.Reload + tc.report("cdn-a", 1_199_000))
		if !slices.Equal(next.Priority, []string{"cdn-b", "cdn-a"}) || next.TTL != 10 || next.session(t) != m.session(t) {
			t.Fatalf("%s: below 1.2 × lowest: %s, want cdn-b first with TTL 10", tc.name, next.raw)
		}
		// On cdn-b now, reporting it well, or slow too (its own link):
		// kept off cdn-a for the hold either way, never swapped back.
		for _, bps := range []uint64{9_000_000, 500_000} {
			again := e.steer(next.Reload + tc.report("cdn-b", bps))
			if !slices.Equal(again.Priority, []string{"cdn-b", "cdn-a"}) || again.TTL != 10 {
				t.Errorf("%s: on cdn-b after the move, reporting %d: %s, want it kept off cdn-a", tc.name, bps, again.raw)
			}
		}
	}
	if v := e.view(); v.QoE == nil || v.QoE.KeptAway == nil || *v.QoE.KeptAway != 3 {
		t.Errorf("the view's QoE: %+v, want 3 clients kept away", v.QoE)
	}
}

// TestPoolCohortMove: the cohort rule through the handler (issue 17 item
// 2). Five sessions of fra on cdn-a report 4 Mbit/s and five on cdn-b 10:
// cdn-a's median is below half the best, so cdn-a moves behind for fra's
// sessions, with the short TTL, and not for par's; the move is in the
// view, the log and the metrics.
func TestPoolCohortMove(t *testing.T) {
	e := newPoolEnv(t, testToken, qoePool())
	region := func(r string) http.Header { return http.Header{"X-Region": {r}} }
	src := newLoopbackSources(t, e.ts) // each session reports from its own address
	var fra []*poolManifest
	for i := 0; len(fra) < 10; i++ {
		_, b := e.do("GET", pool.DefaultPath, "", region("fra"))
		var m poolManifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		on := m.Priority[0]
		bps := 10_000_000
		if on == "cdn-a" {
			bps = 4_000_000 // above the per-client rule's 1.2 Mbit/s
		}
		if n := countFirst(fra, on); n >= 5 {
			continue
		}
		_, b = src.do(t, fmt.Sprintf("127.0.1.%d", len(fra)+1), "GET", m.Reload+fmt.Sprintf("&_HLS_pathway=%s&_HLS_throughput=%d", on, bps), "", region("fra"))
		if err := json.Unmarshal(b, &m); err != nil || m.Priority[0] != on {
			t.Fatalf("a report before any move changed the order: %s", b)
		}
		fra = append(fra, &m)
	}
	w := e.srv.poolNamed("").Watch()
	moves := w.Evaluate(e.srv.log, time.Now())
	if len(moves) != 1 || moves[0].Key != (qoe.Key{Pathway: "cdn-a", Cohort: "fra"}) || !moves[0].Degraded || moves[0].Median != 4_000_000 || moves[0].Best != 10_000_000 {
		t.Fatalf("moves %v", moves)
	}
	for _, m := range fra {
		_, b := e.do("GET", strings.TrimPrefix(m.Reload, e.ts.URL), "", region("fra"))
		var next poolManifest
		if json.Unmarshal(b, &next) != nil || next.Priority[0] != "cdn-b" || next.TTL != 10 {
			t.Errorf("fra after the move: %s, want cdn-b first, TTL 10", b)
		}
	}
	for range 20 {
		_, b := e.do("GET", pool.DefaultPath, "", region("par"))
		var m poolManifest
		if json.Unmarshal(b, &m) != nil || m.TTL != 60 {
			t.Fatalf("par after fra's move: %s", b)
		}
	}
	v := e.view()
	if v.QoE == nil || len(v.QoE.Moves) != 1 || v.QoE.Moves[0].To != "behind" || v.QoE.Moves[0].Cohort != "fra" {
		t.Fatalf("view %+v", v.QoE)
	}
	var cell *QoECell
	for i := range v.QoE.Cells {
		if c := &v.QoE.Cells[i]; c.Pathway == "cdn-a" && c.Cohort == "fra" {
			cell = c
		}
	}
	if cell == nil || cell.State != "degraded" || cell.Sessions != 5 || cell.Throughput[1] != 4_000_000 {
		t.Errorf("cdn-a in fra: %+v", cell)
	}
	if !strings.Contains(e.logs.String(), "QoE: a pathway moved behind the others") || !strings.Contains(e.logs.String(), "cohort=fra") {
		t.Errorf("the move is not logged:\n%s", e.logs.String())
	}
	_, mb := e.do("GET", "/metrics", "", nil)
	for _, want := range []string{
		`waisteer_qoe_degraded{steerer="pool [steering]",pathway="cdn-a",cohort="fra"} 1`,
		`waisteer_qoe_sessions{steerer="pool [steering]",pathway="cdn-b",cohort="fra"} 5`,
		`waisteer_qoe_throughput_bps{steerer="pool [steering]",pathway="cdn-a",cohort="fra",quantile="0.5"} 4000000`,
		`waisteer_qoe_moves_total{steerer="pool [steering]",pathway="cdn-a",cohort="fra",to="behind"} 1`,
	} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
}

func countFirst(ms []*poolManifest, id string) int {
	n := 0
	for _, m := range ms {
		if m.Priority[0] == id {
			n++
		}
	}
	return n
}

// TestReportsRoute: CMCD v2 event reports posted to the steering route
// (issue 17 item 3). Lines that read feed the aggregator; every other line,
// body and request is refused or ignored with a counted reason, and none
// of them moves a cohort.
func TestReportsRoute(t *testing.T) {
	// The room clock stands still: an address's budget of reports refills
	// with it, and the flood below must not depend on how fast the
	// machine posts.
	t0 := uint64(time.Now().UnixMicro())
	e := newPoolEnvWith(t, store.NewMemory(), store.NewLoads(), func() uint64 { return t0 }, testToken, qoePool())
	post := func(body, ct string) (int, string) {
		t.Helper()
		h := http.Header{"X-Region": {"fra"}}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		resp, b := e.do("POST", pool.DefaultPath, body, h)
		return resp.StatusCode, string(b)
	}
	const cmcd = "application/cmcd"
	if code, b := post("sid=\"p1\",cdn=\"cdn-a\",e=ps,mtp=9000,bl=12000\nsid=\"p2\",cdn=cdn-b,mtp=9000\n", cmcd); code != http.StatusNoContent {
		t.Fatalf("two good lines: %d %s", code, b)
	}
	for _, tc := range []struct {
		name, body, ct string
		code           int
		want           string // in the answer
	}{
		{"not cmcd", "sid=\"p1\",cdn=\"cdn-a\",mtp=1", "text/plain", 415, "unsupported_media_type"},
		{"no type", "sid=\"p1\",cdn=\"cdn-a\",mtp=1", "", 415, "unsupported_media_type"},
		{"empty", "", cmcd, 400, "empty_body"},
		{"no line reads", "sid=\"p1\",cdn=\"cdn-a\",mtp=-5\nmtp=abc\n\x00\n", cmcd, 400, "report_unreadable"},
		{"2^64", "sid=\"p1\",cdn=\"cdn-a\",mtp=18446744073709551616", cmcd, 400, "report_unreadable"},
		{"too large a mtp", "sid=\"p1\",cdn=\"cdn-a\",mtp=999999999999999", cmcd, 200, "throughput_absurd"},
		{"unknown pathway", "sid=\"p1\",cdn=\"cdn-z\",mtp=100", cmcd, 200, "unknown_pathway"},
		{"no sid", "cdn=\"cdn-a\",mtp=100", cmcd, 400, "no sid"},
		{"no figure", "sid=\"p1\",cdn=\"cdn-a\",e=ps", cmcd, 200, "no_figure"},
		{"some lines bad", "sid=\"p3\",cdn=\"cdn-a\",mtp=8000\nsid=p3,mtp=?\n", cmcd, 200, "line_unreadable"},
		{"too large", strings.Repeat("sid=\"p9\",cdn=\"cdn-a\",mtp=1\n", qoewatch.MaxReportBody/26+1), cmcd, 413, "body_too_large"},
	} {
		code, b := post(tc.body, tc.ct)
		if code != tc.code || !strings.Contains(b, tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, code, b, tc.code, tc.want)
		}
	}
	// A flood from one session: past its burst, its lines are ignored.
	var flood strings.Builder
	for range qoewatch.SessionBurst + 5 {
		flood.WriteString("sid=\"loud\",cdn=\"cdn-a\",mtp=1\n")
	}
	if code, b := post(flood.String(), cmcd); code != 200 || !strings.Contains(b, `"flood_session":5`) || !strings.Contains(b, fmt.Sprintf(`"accepted":%d`, qoewatch.SessionBurst)) {
		t.Errorf("a session's flood: %d %s", code, b)
	}
	// A flood from one address: past its burst, 429.
	limited := 0
	for range qoewatch.ReportBurst + 10 {
		if code, _ := post("sid=\"p1\",cdn=\"cdn-a\",mtp=9000", cmcd); code == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < 10 {
		t.Errorf("%d of the address's posts past its burst were refused, want at least 10", limited)
	}
	w := e.srv.poolNamed("").Watch()
	if moves := w.Evaluate(e.srv.log, time.Now()); len(moves) != 0 {
		t.Errorf("bad reports moved a cohort: %v", moves)
	}
	ig := w.Agg.Ignored()
	for _, why := range []string{"not_cmcd", "line_unreadable", "throughput_absurd", "unknown_pathway", "no_figure", "body_too_large", "flood_session", "flood_address"} {
		if ig[why] == 0 {
			t.Errorf("no report counted as %s: %v", why, ig)
		}
	}
	_, mb := e.do("GET", "/metrics", "", nil)
	if !strings.Contains(string(mb), `waisteer_qoe_reports_ignored_total{steerer="pool [steering]",reason="flood_address"}`) {
		t.Error("the metrics do not count the ignored reports")
	}
	// A pool without QoE takes no reports.
	plain := newPoolEnv(t, testToken, seedPool(nil, nil))
	if resp, b := plain.do("POST", pool.DefaultPath, "sid=\"p1\",cdn=\"edge-1\",mtp=1", http.Header{"Content-Type": {cmcd}}); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a pool without QoE: %d %s", resp.StatusCode, b)
	}
}

// TestRoomQoE: an energy room steering by QoE (issue 17 item 4). When its
// players report a pathway degrading, the room steers by a policy its
// steering key signs, the operator's but for that pathway's latency_ms,
// past the ceiling (issue 26 item 4); the pathway is never first and every decision verifies (§9). Once too
// few report it for the hold, the operator's policy is back.
func TestRoomQoE(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, false)
	e.stop()
	e.start(func(c *Config) {
		c.Rooms[0].QoE = &qoe.Config{Window: 2 * time.Second, MinSessions: 5, Fraction: 0.5, Margin: 0.2, Hold: time.Second}
	})
	e.postRecords(e.sc.Records, http.StatusOK)
	operator := e.sc.Policy.Digest().String()
	ids := e.sc.Policy.IDs()
	victim := e.steer("/v1/steer", nil).Priority[0]
	src := newLoopbackSources(t, e.ts) // each player from its own address
	for _, id := range ids {
		bps := 10_000_000
		if id == victim {
			bps = 2_000_000
		}
		for i := range 5 {
			if resp, b := src.do(t, fmt.Sprintf("127.0.1.%d", i+1), "GET", fmt.Sprintf("/v1/steer?_HLS_pathway=%s&_HLS_throughput=%d", id, bps), "", nil); resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
		}
	}
	waitFor(t, 5*time.Second, "the room steering by the QoE policy", func() bool { return e.status().Policy.Digest != operator })
	st := e.status()
	if st.QoE == nil || len(st.QoE.Moves) == 0 || st.QoE.Moves[0].Pathway != victim || st.QoE.Moves[0].To != "behind" {
		t.Fatalf("status QoE %+v", st.QoE)
	}
	hp, err := policy.Parse(e.fetch("/v1/policies/" + st.Policy.Digest))
	if err != nil {
		t.Fatal(err)
	}
	for _, pw := range hp.Pathways {
		if (pw.LatencyMs > hp.LatencyCeilingMs) != (pw.ID == victim) {
			t.Errorf("pathway %s: latency_ms %d, the ceiling %d (the victim is %s)", pw.ID, pw.LatencyMs, hp.LatencyCeilingMs, victim)
		}
	}
	for range 10 {
		m := e.steer("/v1/steer", nil)
		if m.Priority[0] == victim {
			t.Fatalf("%s is first while its players report it degraded: %s", victim, m.raw)
		}
		if d, _ := e.audit(m); d.Policy.String() != st.Policy.Digest {
			t.Fatalf("a decision under %s, the room steers by %s", d.Policy, st.Policy.Digest)
		}
	}
	// No more reports: thin after the window (the room clock moved on
	// 3 s), and after the hold given back to be measured again: to every
	// session, since a room's policy holds for all of them.
	e.clock.Add(3_000_000)
	e.srv.evaluateQoE(context.Background())
	e.clock.Add(1_000_000)
	e.srv.evaluateQoE(context.Background())
	waitFor(t, 5*time.Second, "the operator's policy again", func() bool { return e.status().Policy.Digest == operator })
	if st := e.status(); len(st.QoE.Moves) != 2 || st.QoE.Moves[1].To != "probe" || st.QoE.Moves[1].Pathway != victim {
		t.Errorf("moves %+v", st.QoE.Moves)
	}
	m := e.steer("/v1/steer", nil)
	if d, _ := e.audit(m); d.Policy.String() != operator || m.Priority[0] != victim {
		t.Errorf("back: a decision under %s with %s first; want the operator's %s, with %s first as before", d.Policy, m.Priority[0], operator, victim)
	}
}
