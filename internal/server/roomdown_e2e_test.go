package server

// A room with pathways down, end to end: players steered, each decision fetched and verified.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/health"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/overlay"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
	"github.com/waisteer/waisteer/verify"
)

type auditor struct {
	e     *env
	cache map[string][]byte
}

func newAuditor(e *env) *auditor { return &auditor{e: e, cache: map[string][]byte{}} }

func (a *auditor) fetch(target string) []byte {
	if b, ok := a.cache[target]; ok {
		return b
	}
	b := a.e.fetch(target)
	a.cache[target] = b
	return b
}

// audit verifies the decision a manifest names, with the manifest, by the
// verify package (§9.1); it returns the decision.
func (a *auditor) audit(m *manifest) *decision.Decision {
	t := a.e.t
	t.Helper()
	resp, raw := a.e.get(path(t, m.Decision))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET decision: %d: %s", resp.StatusCode, raw)
	}
	d, err := decision.Parse(raw)
	if err != nil {
		t.Fatalf("decision: %v", err)
	}
	in := verify.Input{
		Descriptor: a.fetch("/v1/rooms/" + d.Room.String() + "/descriptor"),
		KeyLogHead: a.fetch("/v1/rooms/" + d.Room.String() + "/keylog"),
		Policy:     a.fetch("/v1/policies/" + d.Policy.String()),
		Decision:   raw,
		Manifest:   m.raw,
	}
	for _, pw := range d.Pathways {
		for _, h := range pw.Records {
			in.Records = append(in.Records, a.fetch("/v1/records/"+h.String()))
		}
	}
	if _, err := verify.Verify(in); err != nil {
		t.Fatalf("verify %s: %v", m.raw, err)
	}
	return d
}

// player is a player that keeps reporting one pathway as its current one,
// in one of the ways of downReports, on its session's RELOAD-URI.
type player struct {
	reload string // the path and query of its last manifest's RELOAD-URI
	query  string // its report's query parameters
	header http.Header
}

func (p *player) target() string { return p.reload + "&" + p.query }

// reportsOf are the players' reports of v: downReports' parameters.
func reportsOf(v string, n int) []player {
	rs := downReports(v)
	out := make([]player, n)
	for i := range out {
		r := rs[i%len(rs)]
		_, q, _ := strings.Cut(r.target, "?")
		out[i] = player{query: q, header: r.header}
	}
	return out
}

// keepReporting has each player ask rounds times, reporting its pathway v,
// while the room steers by the overlay policy digest over: v is never
// first, every decision verifies (§9.1) and is made under over, and its
// report names v. It returns how many decisions were made with v's load 0,
// the case.
func keepReporting(t *testing.T, e *env, a *auditor, players []player, rounds int, v, over string) (decisions, zero int) {
	t.Helper()
	vi, _ := e.sc.Policy.Index(v)
	for range rounds {
		for i := range players {
			p := &players[i]
			m := e.steer(p.target(), p.header)
			if m.Priority[0] == v {
				t.Fatalf("%s is first while it is down (%s %v): %s", v, p.target(), p.header, m.raw)
			}
			d := a.audit(m)
			if d.Policy.String() != over {
				t.Fatalf("a decision under %s while the room steers by %s", d.Policy, over)
			}
			if d.Report.Present&report.HasPathway == 0 || int(d.Report.Pathway) != vi {
				t.Fatalf("%s %v: the decision's report %+v does not name %s", p.target(), p.header, d.Report, v)
			}
			decisions++
			if d.Pathways[vi].Load == 0 {
				zero++
			}
			p.reload = path(t, m.Reload)
		}
	}
	return decisions, zero
}

// backOn has each player ask once more: each decision is under the
// operator's policy and verifies, and v is first again for some.
func backOn(t *testing.T, e *env, a *auditor, players []player, v, operator string) {
	t.Helper()
	first := 0
	for i := range players {
		p := &players[i]
		m := e.steer(p.target(), p.header)
		if d := a.audit(m); d.Policy.String() != operator {
			t.Fatalf("back: a decision under %s, want the operator's %s", d.Policy, operator)
		}
		if m.Priority[0] == v {
			first++
		}
	}
	if first == 0 {
		t.Errorf("back: %s is first for none of %d players", v, len(players))
	}
}

// TestRoomDownNeverFirst is issue 26's "Must show": an energy room with
// check_urls, a pathway killed (its health endpoint fails) while players
// keep reporting it as their current pathway, in HLS, DASH and CMCD, on
// their sessions' RELOAD-URIs. Once its sessions have moved away its load is
// 0, and still it is never first; every decision verifies (§9.1) under the
// health policy; after it is back, the room steers by the operator's digest
// again.
func TestRoomDownNeverFirst(t *testing.T) {
	e := newEnv(t, downSpec(nil), false)
	e.stop()
	edges := map[string]*healthEdge{}
	checks := roomsteer.Checks{Settings: health.Settings{Every: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, DownAfter: 1}, URLs: map[string]string{}}
	for _, id := range e.sc.Policy.IDs() {
		edges[id] = newHealthEdge(t)
		checks.URLs[id] = edges[id].url()
	}
	e.start(func(c *Config) { c.Rooms[0].Checks = checks })
	e.postRecords(e.sc.Records, http.StatusOK)
	operator := e.sc.Policy.Digest().String()
	const victim = "b" // the first of §6.2's order (downSpec)

	players := reportsOf(victim, 33) // three of each report
	on := 0
	for i := range players {
		m := e.steer("/v1/steer", nil)
		players[i].reload = path(t, m.Reload)
		if m.Priority[0] == victim {
			on++
		}
	}
	if on == 0 {
		t.Fatalf("no player starts on %s", victim)
	}
	edges[victim].up.Store(false)
	waitFor(t, 5*time.Second, "the room steering by the health policy", func() bool { return e.status().Policy.Digest != operator })
	over := e.status().Policy.Digest
	a := newAuditor(e)
	n, zero := keepReporting(t, e, a, players, 4, victim, over)
	// The first round moves the players on the victim away; from then on
	// its load is 0, the case the issue found.
	if zero < n-len(players) {
		t.Errorf("%d of %d decisions with %s's load 0, want at least %d", zero, n, victim, n-len(players))
	}
	t.Logf("%d decisions while %s was down, %d with its load 0: none put it first", n, victim, zero)

	edges[victim].up.Store(true)
	waitFor(t, 5*time.Second, "the operator's policy again", func() bool { return e.status().Policy.Digest == operator })
	backOn(t, e, a, players, victim, operator)
}

// TestRoomQoEDownNeverFirst is TestRoomDownNeverFirst for the QoE overlay
// (issue 26: "for health and QoE overlays alike"): the players on the
// victim report it slow (2 Mbit/s against 10 on the others) and keep
// reporting it as their current pathway, slow or with no throughput, with a
// short buffer or none, in HLS, DASH and CMCD; it is never first, every
// decision verifies, and once too few report it for the hold the room is on
// the operator's digest again.
func TestRoomQoEDownNeverFirst(t *testing.T) {
	e := newEnv(t, downSpec(nil), false)
	e.stop()
	e.start(func(c *Config) {
		c.Rooms[0].QoE = &qoe.Config{Window: 2 * time.Second, MinSessions: 5, Fraction: 0.5, Margin: 0.2, Hold: time.Second}
	})
	e.postRecords(e.sc.Records, http.StatusOK)
	operator := e.sc.Policy.Digest().String()
	const victim = "b" // the first of §6.2's order (downSpec)
	slow := []struct {
		query  string
		header http.Header
	}{
		{"_HLS_pathway=b&_HLS_throughput=2000000", nil},
		{"_HLS_pathway=b", nil},
		{`_DASH_pathway="b"&_DASH_throughput=2000000`, nil},
		{"_HLS_pathway=b&CMCD=bl%3D500%2Cmtp%3D2000", nil},
		{"_HLS_pathway=b&_HLS_throughput=1900000", http.Header{"Cmcd-Request": {"bl=800"}}},
		{"_DASH_pathway=b", http.Header{"Cmcd-Request": {"bl=30000,mtp=1500"}}},
	}
	// Each player from an address of its own: a QoE cell counts at most
	// qoe.PerClient sessions of one address (issue 26 item 2).
	src := newLoopbackSources(t, e.ts)
	var players []player
	for i := range 18 {
		s := slow[i%len(slow)]
		m := e.steerFrom(src, fmt.Sprintf("127.0.5.%d", i+1), "/v1/steer?"+s.query, s.header)
		players = append(players, player{reload: path(t, m.Reload), query: s.query, header: s.header})
	}
	var others []string // the reload paths of players on a and c
	for j, id := range []string{"a", "c"} {
		for i := range 5 {
			m := e.steerFrom(src, fmt.Sprintf("127.0.%d.%d", 6+j, i+1), "/v1/steer?_HLS_pathway="+id+"&_HLS_throughput=10000000", nil)
			others = append(others, path(t, m.Reload)+"&_HLS_pathway="+id+"&_HLS_throughput=10000000")
		}
	}
	waitFor(t, 5*time.Second, "the room steering by the QoE policy", func() bool { return e.status().Policy.Digest != operator })
	over := e.status().Policy.Digest
	a := newAuditor(e)
	// The players on a and c ask again too: those the operator's policy
	// put on b move away, so that b's load is 0 once its own have moved.
	for _, target := range others {
		if m := e.steer(target, nil); m.Priority[0] == victim {
			t.Fatalf("%s is first while it is degraded: %s", victim, m.raw)
		} else if d := a.audit(m); d.Policy.String() != over {
			t.Fatalf("a decision under %s while the room steers by %s", d.Policy, over)
		}
	}
	n, zero := keepReporting(t, e, a, players, 4, victim, over)
	if zero < n-len(players) {
		t.Errorf("%d of %d decisions with %s's load 0, want at least %d", zero, n, victim, n-len(players))
	}
	if st := e.status(); st.Policy.Digest != over || st.QoE == nil || len(st.QoE.Moves) != 1 {
		t.Fatalf("the QoE overlay did not hold while its players kept reporting %s slow: %+v", victim, st.QoE)
	}
	t.Logf("%d decisions while %s was degraded, %d with its load 0: none put it first", n, victim, zero)

	// No more reports: thin after the window, then given back (the probe
	// of a room is everyone), as in TestRoomQoE.
	e.clock.Add(3_000_000)
	e.srv.evaluateQoE(context.Background())
	e.clock.Add(1_000_000)
	e.srv.evaluateQoE(context.Background())
	waitFor(t, 5*time.Second, "the operator's policy again", func() bool { return e.status().Policy.Digest == operator })
	backOn(t, e, a, players[:1], victim, operator)
}

// TestQoEKeepsALeader: the QoE adds its degraded pathways to those kept out
// of the limits only while a pathway outside both could still be first for
// a new client under the operator's policy (§6.1: latency at most the
// ceiling, the floor tier carried, a capacity above 0). Otherwise every
// client would get §6.4 step 3's none, and a room whose every usable
// pathway degrades steers by its other limits instead (SPEC-NOTES, issue
// 17). Expected sets by hand.
func TestQoEKeepsALeader(t *testing.T) {
	sc, err := scenario.Build(downSpec(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		edit   func(*policy.Pathway)
		health []string // pathways down by their checks
		want   []string
	}{
		{"c leads", nil, nil, []string{"a", "b"}},
		{"c down", nil, []string{"c"}, []string{"c"}},
		{"c past the ceiling", func(pw *policy.Pathway) { pw.LatencyMs = 501 }, nil, nil},
		{"c below the floor", func(pw *policy.Pathway) { pw.TopTier = 0 }, nil, nil},
		{"c at capacity 0", func(pw *policy.Pathway) { pw.Capacity = 0 }, nil, nil},
		{"c at capacity 1", func(pw *policy.Pathway) { pw.Capacity = 1 }, nil, []string{"a", "b"}},
	} {
		base := *sc.Policy
		base.Pathways = slices.Clone(sc.Policy.Pathways)
		if tc.edit != nil {
			tc.edit(&base.Pathways[2])
		}
		down := map[string]bool{}
		for _, id := range tc.health {
			down[id] = true
		}
		got := slices.Sorted(maps.Keys(overlay.WithDegraded(&base, down, []string{"a", "b"})))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: down %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRoomAllDown is issue 26's corner: with every pathway down, no pathway
// is within the limits of the health policy for any client, so every
// decision is §6.4 step 3's none, with min_ttl_s (§6.5): a client that
// reports a current pathway stays on it, one that reports none gets the
// first of §6.2's order. Nothing better is open to the rule: every pathway
// is in the priority (§6.5). Each decision verifies (§9.1), and the health
// policy is the one overlay.Policy signs for all three down: the same bytes
// on any server.
func TestRoomAllDown(t *testing.T) {
	e := newEnv(t, downSpec(nil), false)
	e.stop()
	edges := map[string]*healthEdge{}
	checks := roomsteer.Checks{Settings: health.Settings{Every: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, DownAfter: 1}, URLs: map[string]string{}}
	ids := e.sc.Policy.IDs()
	for _, id := range ids {
		edges[id] = newHealthEdge(t)
		checks.URLs[id] = edges[id].url()
	}
	e.start(func(c *Config) { c.Rooms[0].Checks = checks })
	e.postRecords(e.sc.Records, http.StatusOK)
	operator := e.sc.Policy.Digest().String()
	all, err := overlay.Policy(e.sc.Policy, map[string]bool{"a": true, "b": true, "c": true}, e.sc.SteerKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		edges[id].up.Store(false)
	}
	waitFor(t, 5*time.Second, "the room steering with every pathway down", func() bool { return e.status().Policy.Digest == all.Digest().String() })
	a := newAuditor(e)
	for _, v := range ids {
		for _, rq := range downReports(v) {
			m := e.steer(rq.target, rq.header)
			d := a.audit(m)
			if d.Reason != decision.None || m.Priority[0] != v || m.TTL != e.sc.Policy.MinTTLs {
				t.Errorf("%s %v: %s first by %s, TTL %d; want %s by none, TTL %d", rq.target, rq.header, m.Priority[0], d.Reason, m.TTL, v, e.sc.Policy.MinTTLs)
			}
		}
	}
	m := e.steer("/v1/steer", nil)
	if d := a.audit(m); d.Reason != decision.None || m.Priority[0] != "b" {
		t.Errorf("no report: %s first by %s; want b, the order's first, by none", m.Priority[0], d.Reason)
	}
	for _, id := range ids {
		edges[id].up.Store(true)
	}
	waitFor(t, 5*time.Second, "the operator's policy again", func() bool { return e.status().Policy.Digest == operator })
}

// FuzzOverlayPolicy holds overlay.Policy to issue 26's reading over any
// policy that reads (§3.3) and any set of pathways down: the overlay is a
// WSP1 the steering key signs, as checkOverlay requires; and under it, for a
// client reporting any pathway as current, with any load, buffer,
// throughput and draw, a pathway down is never first while a pathway up is
// within the operator's limits (§6.1), and the decision is none (§6.4 step
// 3) when none is. Pathways with a figure or not by a bit each (§6.2), so
// that steps 5 and 6 both run.
func FuzzOverlayPolicy(f *testing.F) {
	for _, edit := range []func(*policy.Policy){
		nil,
		func(p *policy.Policy) {
			p.LatencyCeilingMs = 1<<32 - 1
			p.Pathways[0].LatencyMs = 1<<32 - 1
		},
		func(p *policy.Policy) { p.Pathways[2].LatencyMs = 501 },
		func(p *policy.Policy) { p.Pathways[1].Capacity = 2 },
	} {
		sc, err := scenario.Build(downSpec(edit))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(sc.PolicyBytes, uint32(1), uint8(0), uint8(7), uint64(500), uint64(600_000), uint32(0), uint8(0), uint8(7))
		f.Add(sc.PolicyBytes, uint32(2), uint8(1), uint8(1), uint64(0), uint64(0), uint32(400_000), uint8(1), uint8(3))
		f.Add(sc.PolicyBytes, uint32(7), uint8(2), uint8(0), uint64(0), uint64(0), uint32(999_999), uint8(3), uint8(0))
	}
	key, operatorKey := scenario.SteerKey(), room.TestKey("fuzz operator")
	f.Fuzz(func(t *testing.T, raw []byte, downMask uint32, c, present uint8, buffer, throughput uint64, draw uint32, load, figures uint8) {
		base, err := policy.Parse(raw)
		if err != nil {
			return
		}
		// Signed again by the operator, as a policy the server steers by
		// is signed: a mutated input's signature does not verify.
		if raw, err = policy.Sign(base, operatorKey); err != nil {
			t.Fatal(err)
		}
		if base, err = policy.Parse(raw); err != nil {
			t.Fatal(err)
		}
		n := len(base.Pathways)
		down := map[string]bool{}
		for i, pw := range base.Pathways {
			if downMask&(1<<i) != 0 {
				down[pw.ID] = true
			}
		}
		ov, err := overlay.Policy(base, down, key)
		if err != nil {
			t.Fatalf("overlay: %v", err)
		}
		checkOverlay(t, base, ov, down, key.Public())

		ev := make([]evidence.Pathway, n)
		for i := range ev {
			ev[i].Status = evidence.StatusStale
			if figures&(1<<(i%8)) != 0 {
				ev[i] = evidence.Pathway{Status: evidence.StatusFigure, Class: evidence.ModelBased,
					Joules: num.From64(uint64(100 + i%3)), Delivery: num.From64(1)}
			}
		}
		r, err := decision.NewRanking(ov, ov.Digest(), 0, 0, ev)
		if err != nil {
			t.Fatal(err)
		}
		rep := report.Report{Present: report.HasPathway | present&(report.HasThroughput|report.HasBuffer), Pathway: c % uint8(n)}
		if rep.Present&report.HasBuffer != 0 {
			rep.Buffer = buffer
		}
		if rep.Present&report.HasThroughput != 0 {
			rep.Throughput = throughput
		}
		loads := make([]uint32, n)
		for i := range loads {
			loads[i] = uint32(load % 4)
		}
		loads[rep.Pathway] = 0
		o, err := r.DecideDrawn(rep, draw%1_000_000, loads)
		if err != nil {
			t.Fatal(err)
		}
		anyUp := false
		for i, pw := range base.Pathways {
			if !down[pw.ID] && decision.PathwayLimits(base, i, i == int(rep.Pathway), loads[i]) == decision.Within {
				anyUp = true
			}
		}
		first := base.Pathways[o.First].ID
		if anyUp && down[first] {
			t.Fatalf("%s is down and first by %s (report %+v, loads %v)", first, o.Reason, rep, loads)
		}
		if !anyUp && o.Reason != decision.None {
			t.Fatalf("no pathway up within the limits, and %s first by %s", first, o.Reason)
		}
	})
}
