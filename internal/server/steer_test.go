package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// TestSteerEndToEnd is the whole path of issue 5 through real HTTP: records
// posted by hops, manifests fetched with HLS (§4.2), DASH (§4.3) and CMCD
// (§4.4, query and header) reports, each decision fetched at the URI its
// manifest names (§8.4) with everything verification needs from the /v1/
// routes, and verified with the manifest (§9.1).
func TestSteerEndToEnd(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	// The default scenario: per delivered byte, a costs 45, b 30 and c 60
	// (J of both hops over D of the edge hop), all ModelBased: b, a, c.
	cases := []struct {
		name     string
		target   string
		header   http.Header
		protocol report.Protocol
		report   report.Report
		reason   decision.Reason
		priority []string
		ttl      uint32
	}{
		{
			// §4.2: c is a; b beats it by more than h (§6.4 step 6).
			name: "HLS", target: "/v1/steer?_HLS_pathway=a&_HLS_throughput=5000000",
			protocol: report.HLS,
			report:   report.Report{Present: report.HasPathway | report.HasThroughput, Pathway: 0, Throughput: 5_000_000},
			reason:   decision.Rank, priority: []string{"b", "a", "c"}, ttl: 300,
		},
		{
			// §4.3: c is the first id of the list, at position 0, so T
			// is 700000: tier 0, at the floor (§6.4 step 2).
			name: "DASH", target: `/v1/steer?_DASH_pathway=%22c,a%22&_DASH_throughput=700000,9000000`,
			protocol: report.DASH,
			report:   report.Report{Present: report.HasPathway | report.HasThroughput, Pathway: 2, Throughput: 700_000},
			reason:   decision.Floor, priority: []string{"c", "b", "a"}, ttl: 30,
		},
		{
			// §4.4 in the query: B 1500 < min_buffer 4000 holds c (step
			// 1); T is mtp × 1000.
			name: "CMCD query", target: "/v1/steer?_HLS_pathway=c&CMCD=bl%3D1500%2Cmtp%3D20000",
			protocol: report.HLS,
			report: report.Report{Present: report.HasPathway | report.HasThroughput | report.HasBuffer,
				Pathway: 2, Throughput: 20_000_000, Buffer: 1500},
			reason: decision.Buffer, priority: []string{"c", "b", "a"}, ttl: 30,
		},
		{
			// §4.4 in the CMCD-Request header, read because the query has
			// no CMCD part.
			name: "CMCD header", target: "/v1/steer?_HLS_pathway=a",
			header:   http.Header{"Cmcd-Request": {"bl=30000,mtp=8000"}},
			protocol: report.HLS,
			report: report.Report{Present: report.HasPathway | report.HasThroughput | report.HasBuffer,
				Pathway: 0, Throughput: 8_000_000, Buffer: 30000},
			reason: decision.Rank, priority: []string{"b", "a", "c"}, ttl: 300,
		},
		{
			// A first request with no report (§8.2): the order's first.
			name: "no report", target: "/v1/steer",
			protocol: report.HLS, reason: decision.Rank, priority: []string{"b", "a", "c"}, ttl: 300,
		},
	}
	last := uint64(0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := e.steer(c.target, c.header)
			if m.Version != 1 || m.TTL != c.ttl || !slices.Equal(m.Priority, c.priority) {
				t.Errorf("manifest %s: want TTL %d and priority %v", m.raw, c.ttl, c.priority)
			}
			if !strings.HasPrefix(m.Reload, e.sc.Policy.ReloadURI+"?wai_session=") {
				t.Errorf("RELOAD-URI %q", m.Reload)
			}
			d, f := e.audit(m)
			if d.Protocol != c.protocol || d.Report != c.report {
				t.Errorf("decision states protocol %d report %+v, want %d %+v", d.Protocol, d.Report, c.protocol, c.report)
			}
			// The clock stands still: each decision of the room is one µs
			// after the one before (the table of loads orders them, issue 16).
			if d.Reason != c.reason || f.Reason != c.reason.String() || d.T < t0 || d.T <= last {
				t.Errorf("reason %s (facts %s) at t %d, want %s at %d or after, and after %d", d.Reason, f.Reason, d.T, c.reason, uint64(t0), last)
			}
			last = d.T
			if d.Session.String() != m.session(t) {
				t.Errorf("decision session %s, manifest's %s", d.Session, m.session(t))
			}
			if d.Signer != e.sc.SteerKey.Public() {
				t.Errorf("signed by %s", d.Signer)
			}
		})
	}
}

// holdSpec has a and b within the margin h of each other (§6.4 step 5): b
// (20) is cheaper than a (20.5) by less than 5 %.
func holdSpec() scenario.Spec {
	pws := scenario.DefaultPathways()
	pws[0].Hops[0].Joules = 20_500_000
	pws[0].Hops[1].Joules = 10_250_000
	return scenario.Spec{Pathways: pws, Periods: 6}
}

// TestSessionHoldsAndMoves follows one session through §6.4: a first
// request minted it and put it on b; the next, from a, is held by the
// hysteresis (step 5); from c it moves to b (step 6); with a short buffer
// it is held on c (step 1). Each decision states the loads with the session
// counted where its latest decision put it first (§6, §6.1).
func TestSessionHoldsAndMoves(t *testing.T) {
	e := newEnv(t, holdSpec(), true)
	m1 := e.steer("/v1/steer", nil)
	d1, _ := e.audit(m1)
	if d1.Reason != decision.Rank || m1.Priority[0] != "b" || !slices.Equal(loadsOf(d1), []uint32{0, 0, 0}) {
		t.Fatalf("first request: %s, loads %v", m1.raw, loadsOf(d1))
	}
	reload := path(t, m1.Reload)

	steps := []struct {
		query  string
		reason decision.Reason
		first  string
		ttl    uint32
		loads  []uint32 // as the decision states them: the session where it was
	}{
		{"&_HLS_pathway=a&_HLS_throughput=5000000", decision.Hold, "a", 300, []uint32{0, 1, 0}},
		{"&_HLS_pathway=c&_HLS_throughput=5000000", decision.Rank, "b", 300, []uint32{1, 0, 0}},
		{"&_HLS_pathway=c&CMCD=bl%3D1000", decision.Buffer, "c", 30, []uint32{0, 1, 0}},
	}
	for i, s := range steps {
		m := e.steer(reload+s.query, nil)
		d, f := e.audit(m)
		if d.Session != d1.Session || m.Reload != m1.Reload {
			t.Errorf("step %d: session %s, want %s", i, d.Session, d1.Session)
		}
		if d.Reason != s.reason || m.Priority[0] != s.first || m.TTL != s.ttl || f.Reason != s.reason.String() {
			t.Errorf("step %d: %s; want %s first for %s, TTL %d", i, m.raw, s.first, s.reason, s.ttl)
		}
		if got := loadsOf(d); !slices.Equal(got, s.loads) {
			t.Errorf("step %d: loads %v, want %v", i, got, s.loads)
		}
	}
	// One session, counted once, on c where the last decision put it.
	st := e.status()
	if got := statusLoads(st); !slices.Equal(got, []uint32{0, 0, 1}) {
		t.Errorf("status loads %v, want [0 0 1]", got)
	}
	if st.Decisions.Total != 4 || st.Decisions.ByReason["hold"] != 1 || st.Decisions.ByReason["rank"] != 2 || st.Decisions.ByReason["buffer"] != 1 {
		t.Errorf("decisions %+v", st.Decisions)
	}
	if st.Pathways[1].First != 2 || st.Pathways[0].First != 1 || st.Pathways[2].First != 1 {
		t.Errorf("firsts %d %d %d, want 1 2 1", st.Pathways[0].First, st.Pathways[1].First, st.Pathways[2].First)
	}
}

func loadsOf(d *decision.Decision) []uint32 {
	out := make([]uint32, len(d.Pathways))
	for i := range d.Pathways {
		out[i] = d.Pathways[i].Load
	}
	return out
}

func statusLoads(s Status) []uint32 {
	out := make([]uint32, len(s.Pathways))
	for i, p := range s.Pathways {
		if p.Load != nil {
			out[i] = *p.Load
		}
	}
	return out
}

// TestSessionExpires: a session counts toward its first pathway until it has
// been silent for its manifest's TTL and the grace (§6, DefaultSessionGrace),
// and no longer.
func TestSessionExpires(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	m := e.steer("/v1/steer", nil) // TTL 300, b first
	ttl := uint64(m.TTL) * 1_000_000
	grace := uint64(DefaultSessionGrace.Microseconds())
	e.clock.Store(t0 + ttl + grace)
	if got := statusLoads(e.status()); !slices.Equal(got, []uint32{0, 1, 0}) {
		t.Errorf("at TTL + grace: loads %v, want b still counted", got)
	}
	e.clock.Store(t0 + ttl + grace + 1)
	if got := statusLoads(e.status()); !slices.Equal(got, []uint32{0, 0, 0}) {
		t.Errorf("after TTL + grace: loads %v, want none", got)
	}
}

// TestConcurrentLoadsExact: 200 first requests at once each see the loads
// of the sessions decided before them, exactly once (§6: the loads are the
// server's count); with the same sessions again every decision counts all
// 200.
func TestConcurrentLoadsExact(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	const n = 200
	round := func(queries []string) []*decision.Decision {
		ds := make([]*decision.Decision, n)
		ms := make([]*manifest, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				resp, b := e.do("GET", queries[i], nil, nil)
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("request %d: %d %s", i, resp.StatusCode, b)
					return
				}
				ms[i] = &manifest{}
				if err := json.Unmarshal(b, ms[i]); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i, m := range ms {
			d, err := decision.Parse(e.fetch(path(t, m.Decision)))
			if err != nil {
				t.Fatal(err)
			}
			ds[i] = d
		}
		return ds
	}
	first := make([]string, n)
	for i := range first {
		first[i] = "/v1/steer"
	}
	ds := round(first)
	sums := make([]int, n)
	for i, d := range ds {
		for _, l := range loadsOf(d) {
			sums[i] += int(l)
		}
	}
	slices.Sort(sums)
	for i, s := range sums {
		if s != i {
			t.Fatalf("first round: the decisions' load sums, sorted, are %v: want 0 to %d once each", sums, n-1)
		}
	}
	if got := statusLoads(e.status()); int(got[0]+got[1]+got[2]) != n {
		t.Fatalf("loads %v after %d sessions", got, n)
	}

	again := make([]string, n)
	for i, d := range ds {
		again[i] = fmt.Sprintf("/v1/steer?wai_session=%s&_HLS_pathway=%s&_HLS_throughput=5000000", d.Session, e.sc.Policy.Pathways[d.Priority[0]].ID)
	}
	for i, d := range round(again) {
		if s := loadsOf(d); int(s[0]+s[1]+s[2]) != n {
			t.Fatalf("second round, request %d: loads %v, want all %d sessions counted", i, s, n)
		}
	}
	if got := statusLoads(e.status()); int(got[0]+got[1]+got[2]) != n {
		t.Fatalf("loads %v after the second round", got)
	}
}

// TestRecordUpdatesEvidenceAtOnce: a record in the current window that
// completes a hop's tiling (§5.2) changes the next decision's evidence
// without waiting for the window to move (issue 5 item 4).
func TestRecordUpdatesEvidenceAtOnce(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, false)
	// Records are signed period by period, pathway by pathway, hop by hop:
	// b's two hops' records of period 5 are 5×6+2 and 5×6+3.
	var held, late [][]byte
	for i, r := range e.sc.Records {
		if i == 32 || i == 33 {
			late = append(late, r)
		} else {
			held = append(held, r)
		}
	}
	e.postRecords(held, http.StatusOK)
	m := e.steer("/v1/steer", nil)
	d, _ := e.audit(m)
	if d.Pathways[1].Status.String() != "stale" || m.Priority[0] != "a" {
		t.Fatalf("without b's last period: %s, b %s", m.raw, d.Pathways[1].Status)
	}
	a := e.postRecords(late, http.StatusOK)
	for _, r := range a.Results {
		if r.Outcome != "accepted" {
			t.Errorf("late record: %+v", r)
		}
	}
	m = e.steer("/v1/steer", nil)
	d, _ = e.audit(m)
	if d.Pathways[1].Status.String() != "figure" || m.Priority[0] != "b" {
		t.Errorf("with b's last period: %s, b %s", m.raw, d.Pathways[1].Status)
	}
}

// TestRecordBeforeHorizonStoredNotIndexed: a record that starts before the
// room's forget horizon (a period before the window's start, §5.1) is
// accepted and stored, and served by its digest, but kept out of the
// room's evidence index, which the next ranking would drop it from
// (evidence.ForgetHorizon, issue 30); a record of the window is in it.
func TestRecordBeforeHorizonStoredNotIndexed(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, false)
	e.clock.Store(t0 + scenario.Period) // window [2P, 7P), horizon P: period 0 is before it
	var old, current [][]byte
	for _, raw := range e.sc.Records {
		r, err := evidence.ParseRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		if r.Start < scenario.Period {
			old = append(old, raw)
		} else {
			current = append(current, raw)
		}
	}
	if len(old) == 0 || len(current) == 0 {
		t.Fatalf("%d records before the horizon, %d after: the test needs both", len(old), len(current))
	}
	for _, r := range e.postRecords(e.sc.Records, http.StatusOK).Results {
		if r.Outcome != "accepted" {
			t.Fatalf("record %d: %+v", r.Index, r)
		}
	}
	indexed := map[sig.Hash]bool{}
	e.srv.hubs[e.sc.Room.ID()].EachHop(0, 1<<64-1, func(_ string, _ sig.PublicKey, es []evidence.Entry) {
		for _, x := range es {
			indexed[x.Digest] = true
		}
	})
	for i, raw := range append(slices.Clone(old), current...) {
		r, _ := evidence.ParseRecord(raw)
		d := r.Digest()
		if resp, body := e.get("/v1/records/" + d.String()); resp.StatusCode != http.StatusOK || !bytes.Equal(body, raw) {
			t.Errorf("GET record %d (%s): %d", i, d, resp.StatusCode)
		}
		if want := i >= len(old); indexed[d] != want {
			t.Errorf("record %d in the room's index: %t, want %t", i, indexed[d], want)
		}
	}
}

// TestWindowMoves: when the room clock passes into the next window (§5.1)
// the ranking is rebuilt, and records of a period that has not been
// signed make every pathway stale (§5.2).
func TestWindowMoves(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	d, _ := e.audit(e.steer("/v1/steer", nil))
	if d.Pathways[1].Status.String() != "figure" {
		t.Fatalf("b: %s", d.Pathways[1].Status)
	}
	e.clock.Store(t0 + scenario.Period) // window [2P, 7P): period 6 unsigned
	m := e.steer("/v1/steer", nil)
	d, _ = e.audit(m)
	for i, p := range d.Pathways {
		if p.Status.String() != "stale" {
			t.Errorf("pathway %d: %s, want stale", i, p.Status)
		}
	}
	// No figure: the ids alone order them (§6.2 step 3).
	if !slices.Equal(m.Priority, []string{"a", "b", "c"}) {
		t.Errorf("priority %v", m.Priority)
	}
}

// TestClonesAndQueryRoutes: a policy with a clone (§8.1 PATHWAY-CLONES) and
// steering URIs with a query of their own are served and verify.
func TestClonesAndQueryRoutes(t *testing.T) {
	pws := scenario.DefaultPathways()
	clone := pws[1]
	clone.ID, clone.CloneOf, clone.Host = "b-clone", "b", "cdn2.example"
	clone.Params = []policy.Param{{Name: "token", Value: "x1"}}
	for i := range clone.Hops {
		clone.Hops[i].Joules *= 3
	}
	spec := withPolicy(scenario.Spec{Pathways: append(pws, clone), Periods: 6}, func(p *policy.Policy) {
		p.ServerURI = "https://steer.example/steer?room=live1"
		p.ReloadURI = "https://steer.example/steer?room=live1&v=2"
		p.DecisionURI = "https://audit.example/d?id="
	})
	e := newEnv(t, spec, true)
	m := e.steer("/steer?room=live1", nil)
	if !strings.Contains(string(m.raw), `"PATHWAY-CLONES":[{"BASE-ID":"b","ID":"b-clone","URI-REPLACEMENT":{"HOST":"cdn2.example","PARAMS":{"token":"x1"}}}]`) {
		t.Errorf("manifest %s", m.raw)
	}
	if !strings.HasPrefix(m.Reload, "https://steer.example/steer?room=live1&v=2&wai_session=") {
		t.Errorf("RELOAD-URI %q", m.Reload)
	}
	if !strings.HasPrefix(m.Decision, "https://audit.example/d?id=") {
		t.Errorf("decision URI %q", m.Decision)
	}
	e.audit(m)
	m2 := e.steer(path(t, m.Reload)+"&_HLS_pathway=b", nil)
	e.audit(m2)
}

// TestGroupCommit: decisions made at once are written in groups, one
// durable write for many (issue 5 item 2), and each manifest is answered
// only after its group is written.
func TestGroupCommit(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	e.st.delay.Store(int64(5 * time.Millisecond))
	const n = 64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { e.steer("/v1/steer", nil) })
	}
	wg.Wait()
	groups, decisions := e.st.groups.Load(), e.st.decisions.Load()
	if decisions != n {
		t.Fatalf("%d decisions written, want %d", decisions, n)
	}
	if groups >= n/2 {
		t.Errorf("%d writes for %d decisions: not grouped", groups, n)
	}
	t.Logf("%d decisions in %d group commits", decisions, groups)
}

// TestRecordGroupCommit: hops posting one record each at once are written
// in groups, one durable write for many (issue 14: with one record per
// POST from many hops, a write every few records bounded the rate), and
// each POST is answered accepted only after its group is written.
func TestRecordGroupCommit(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, false)
	e.st.delay.Store(int64(5 * time.Millisecond))
	n := len(e.sc.Records)
	if n < 16 {
		t.Fatalf("the scenario has %d records; the test needs many", n)
	}
	var wg sync.WaitGroup
	for _, r := range e.sc.Records {
		wg.Go(func() {
			a := e.postRecords([][]byte{r}, http.StatusOK)
			if len(a.Results) != 1 || a.Results[0].Outcome != "accepted" {
				t.Errorf("answer %+v", a.Results)
			}
		})
	}
	wg.Wait()
	groups, records := e.st.recordGroups.Load(), e.st.records.Load()
	if records != int64(n) {
		t.Fatalf("%d records written, want %d", records, n)
	}
	if groups >= int64(n/2) {
		t.Errorf("%d writes for %d records: not grouped", groups, n)
	}
	t.Logf("%d records in %d group writes", records, groups)
}

// TestClose: Close commits what it was handed and then the steering route
// answers 503 (never a manifest whose decision is not stored).
func TestClose(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	e.audit(e.steer("/v1/steer", nil))
	if err := e.srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, b := e.get("/v1/steer")
	wantError(t, "after Close", resp, b, http.StatusServiceUnavailable, "closing")
	resp, b = e.get("/readyz")
	wantError(t, "readyz after Close", resp, b, http.StatusServiceUnavailable, "closing")
}

// TestPrune: with a retention, what is older is pruned from the store, and
// a pruned decision is no longer served.
func TestPrune(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	e.stop()
	e.start(func(c *Config) { c.Retention = time.Hour })
	m := e.steer("/v1/steer", nil)
	e.srv.prune(context.Background()) // the clock is before the retention: nothing
	e.audit(m)
	e.clock.Store(t0 + uint64(2*time.Hour/time.Microsecond))
	e.srv.prune(context.Background())
	resp, b := e.get(path(t, m.Decision))
	wantError(t, "pruned decision", resp, b, http.StatusNotFound, "not_found")
	resp, b = e.get("/v1/records/" + evidence.NamedDigest(e.sc.Records[0]).String())
	wantError(t, "pruned record", resp, b, http.StatusNotFound, "not_found")
}

// TestCancelledAfterCommit: a player that leaves while its decision's
// group is being written does not make a stored decision count as
// store_unavailable (issue 14): the request is answered 200 and counted
// so, and the decision is in the store.
func TestCancelledAfterCommit(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	e.st.delay.Store(int64(300 * time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/steer", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := e.ts.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the request was answered %d before the write ended", resp.StatusCode)
	}
	waitFor(t, 3*time.Second, "the decision stored", func() bool { return e.st.decisions.Load() == 1 })
	waitFor(t, 3*time.Second, "the request counted", func() bool {
		_, b := e.get("/metrics")
		return strings.Contains(string(b), `waisteer_http_requests_total{route="steer",code="200"} 1`)
	})
	_, b := e.get("/metrics")
	if strings.Contains(string(b), `waisteer_http_requests_total{route="steer",code="503"}`) {
		t.Errorf("a stored decision was counted as a 503:\n%s", b)
	}
}
