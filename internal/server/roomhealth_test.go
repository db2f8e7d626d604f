package server

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/health"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
)

// TestRoomPathwayDown: an energy room whose pathways have check URLs
// (issue 12 item 8). While a pathway's checks fail, the room steers by a
// policy its steering key signs, the operator's but for that pathway's
// latency_ms, past the ceiling (issue 26 item 4): §6.1 keeps it outside
// the limits, so it is never first, and every decision still verifies
// (§9). Both policies are served by digest. Back up, the room steers by
// the operator's own policy again, the same digest. A policy the operator
// PUTs meanwhile gets the same overlay.
func TestRoomPathwayDown(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, false)
	e.stop()
	ids := e.sc.Policy.IDs()
	edges := map[string]*healthEdge{}
	checks := roomsteer.Checks{Settings: health.Settings{Every: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, DownAfter: 1}, URLs: map[string]string{}}
	for _, id := range ids {
		edges[id] = newHealthEdge(t)
		checks.URLs[id] = edges[id].url()
	}
	e.start(func(c *Config) { c.Rooms[0].Checks = checks })
	e.postRecords(e.sc.Records, http.StatusOK)
	operator := e.sc.Policy.Digest().String()

	first := e.steer("/v1/steer", nil)
	victim := first.Priority[0]
	edges[victim].up.Store(false)
	waitFor(t, 5*time.Second, "the room steering by the health policy", func() bool { return e.status().Policy.Digest != operator })
	st := e.status()
	if st.OperatorPolicy != operator {
		t.Errorf("operator_policy %s, want the operator's %s", st.OperatorPolicy, operator)
	}
	for _, ps := range st.Pathways {
		if ps.Health == nil || ps.Health.Up != (ps.ID != victim) {
			t.Errorf("pathway %s's health %+v (the victim is %s)", ps.ID, ps.Health, victim)
		}
	}
	_, metrics := e.get("/metrics")
	if !strings.Contains(string(metrics), `waisteer_pathway_up{room="`+e.room()+`",pathway="`+victim+`"} 0`) {
		t.Errorf("the metrics do not say %s is down", victim)
	}
	reloads := []string{path(t, first.Reload)}
	for range 20 {
		reloads = append(reloads, "/v1/steer")
	}
	for _, target := range reloads {
		m := e.steer(target, nil)
		if m.Priority[0] == victim {
			t.Fatalf("%s is first while it is down: %s", victim, m.raw)
		}
		d, _ := e.audit(m) // §9: every decision verifies
		if d.Policy.String() != st.Policy.Digest {
			t.Fatalf("a decision under policy %s while the room steers by %s", d.Policy, st.Policy.Digest)
		}
	}

	// The health policy is the operator's but for the victim's capacity,
	// and its signer: the steering key.
	hp, err := policy.Parse(e.fetch("/v1/policies/" + st.Policy.Digest))
	if err != nil {
		t.Fatal(err)
	}
	op, err := policy.Parse(e.fetch("/v1/policies/" + operator))
	if err != nil {
		t.Fatal(err)
	}
	if hp.Signer != e.sc.SteerKey.Public() {
		t.Errorf("the health policy's signer %s, want the steering key", hp.Signer)
	}
	for i, pw := range hp.Pathways {
		want := op.Pathways[i]
		if pw.ID == victim {
			// Issue 26 item 4: past the ceiling (500 ms), 2^32 − 1.
			if pw.LatencyMs != 1<<32-1 {
				t.Errorf("the victim's latency_ms %d, want 2^32 − 1", pw.LatencyMs)
			}
			want.LatencyMs = 1<<32 - 1
		}
		if !reflect.DeepEqual(pw, want) {
			t.Errorf("pathway %d: %+v, want %+v", i, pw, want)
		}
	}
	hp2, op2 := *hp, *op
	hp2.Pathways, op2.Pathways, hp2.Signer, op2.Signer, hp2.Sig, op2.Sig = nil, nil, op.Signer, op.Signer, op.Sig, op.Sig
	if !slices.Equal(policy.AppendBody(nil, &hp2), policy.AppendBody(nil, &op2)) {
		t.Error("the health policy differs from the operator's beyond the victim's latency and the signer")
	}

	// A new operator policy while the victim is down gets the overlay.
	next := resign(t, e.sc, e.sc.SteerKey, func(p *policy.Policy) { p.TTLs = 120 })
	resp, b := e.put("policy", next)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT policy: %d %s", resp.StatusCode, b)
	}
	nextP, _ := policy.Parse(next)
	st = e.status()
	if st.OperatorPolicy != nextP.Digest().String() || st.Policy.Digest == nextP.Digest().String() {
		t.Errorf("after a PUT while %s is down: steering by %s, operator's %s; want the new policy's overlay", victim, st.Policy.Digest, st.OperatorPolicy)
	}
	if m := e.steer("/v1/steer", nil); m.Priority[0] == victim || m.TTL != 120 {
		t.Errorf("under the new policy's overlay: %s", m.raw)
	}

	edges[victim].up.Store(true)
	waitFor(t, 5*time.Second, "the operator's policy again", func() bool { return e.status().Policy.Digest == nextP.Digest().String() })
	m := e.steer("/v1/steer", nil)
	if d, _ := e.audit(m); d.Policy != nextP.Digest() {
		t.Errorf("back up: a decision under %s, want the operator's %s", d.Policy, nextP.Digest())
	}
}
