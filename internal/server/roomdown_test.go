package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/overlay"
	"github.com/waisteer/waisteer/internal/ruleref"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// downSpec is the scenario of issue 26 item 4's tests: pathways a, b and c
// of one class, in §6.2's order b, a, c. b's figure is a's by 1/1.05
// exactly, so b does not beat a by the margin (hysteresis 5 %, §6.4): a
// client on a is held there (step 5) even with b within the limits. b has
// the band [0, 300 000) and a [300 000, 500 000) (§6.3).
func downSpec(edit func(*policy.Policy)) scenario.Spec {
	pws := scenario.DefaultPathways()
	for i, j := range []uint64{21_000_000, 20_000_000, 40_000_000} {
		pws[i].Hops[0].Joules, pws[i].Hops[1].Joules = j, j/2
	}
	pws[0].MinSharePPM, pws[1].MinSharePPM = 200_000, 300_000
	return scenario.Spec{Pathways: pws, Periods: 6, Policy: edit}
}

// downReports are steering requests whose report names v as the client's
// current pathway (§4), in each way a player sends one: HLS (§4.2), DASH
// (§4.3), with CMCD's buffer and throughput in the query or the
// CMCD-Request header (§4.4). Between them they reach each step of §6.4 that
// keeps c: a short buffer (step 1), a throughput at the floor (step 2,
// F = 1: tier 1 is 1.5 Mbit/s), and neither (steps 4, 5, 6).
func downReports(v string) []struct {
	target string
	header http.Header
} {
	cmcd := func(s string) http.Header { return http.Header{"Cmcd-Request": {s}} }
	return []struct {
		target string
		header http.Header
	}{
		{"/v1/steer?_HLS_pathway=" + v, nil},
		{`/v1/steer?_HLS_pathway="` + v + `"&_HLS_throughput=20000000`, nil},
		{"/v1/steer?_HLS_pathway=" + v + "&_HLS_throughput=600000", nil},
		{"/v1/steer?_HLS_pathway=" + v + "&_HLS_throughput=2000000", nil},
		{"/v1/steer?_HLS_pathway=" + v + "&_HLS_throughput=20000000&CMCD=bl%3D500", nil},
		{"/v1/steer?_HLS_pathway=" + v, cmcd("bl=1000,mtp=30000")},
		{"/v1/steer?_HLS_pathway=" + v + "&CMCD=bl%3D9000%2Cmtp%3D900", nil},
		{"/v1/steer?_DASH_pathway=%22x," + v + "%22&_DASH_throughput=1,600000", nil},
		{"/v1/steer?_DASH_pathway=" + v + "&_DASH_throughput=20000000", nil},
		{`/v1/steer?_DASH_pathway="` + v + `"&CMCD=bl%3D200%2Cmtp%3D20000`, nil},
		{"/v1/steer?_DASH_pathway=" + v, cmcd("bl=20000,mtp=1000")},
	}
}

// capacityZero is the overlay the server made before issue 26: base with
// each pathway of down at capacity 0, signed by the steering key. The test
// keeps it by hand to show that its inputs reach the hole it had.
func capacityZero(t *testing.T, base *policy.Policy, down map[string]bool, sc *scenario.Scenario) *policy.Policy {
	t.Helper()
	p := *base
	p.Pathways = slices.Clone(base.Pathways)
	for i := range p.Pathways {
		if down[p.Pathways[i].ID] {
			p.Pathways[i].Capacity = 0
		}
	}
	raw, err := policy.Sign(&p, sc.SteerKey)
	if err != nil {
		t.Fatal(err)
	}
	q, err := policy.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestDownNeverFirstRule is issue 26 item 4 at the rule: under the overlay
// policy of the pathways down (overlay.Policy), a client that reports a
// pathway down as its current one, with that pathway's load 0, a short
// buffer (§6.4 step 1), a throughput at its floor (step 2), a draw in the
// pathway's band (step 4) or a figure w does not beat (step 5), in HLS, DASH
// or CMCD, never gets it first while a pathway up is within the limits. The
// rule's outcome is held to the reference of §6 (ruleref), as a verifier
// recomputes it (§9.1 step 6); the overlay is a valid WSP1 (§3.3) that the
// steering key signs (§3.5) and changes no other pathway's limits (§6.1).
// The same inputs under the overlay of capacity 0 put the pathway down first
// by each of steps 1, 2, 4, 5 and 6: the hole the issue found.
func TestDownNeverFirstRule(t *testing.T) {
	policies := map[string]func(*policy.Policy){
		"ceiling 500": nil,
		// The ceiling no latency passes: the overlay lowers it to
		// 2^32 − 2, and a's latency, 2^32 − 1, with it.
		"ceiling 2^32-1": func(p *policy.Policy) {
			p.LatencyCeilingMs = 1<<32 - 1
			p.Pathways[0].LatencyMs = 1<<32 - 1
			p.Pathways[2].LatencyMs = 1<<32 - 2
		},
		// c is outside the operator's own limits.
		"c too slow": func(p *policy.Policy) { p.Pathways[2].LatencyMs = 501 },
		"c below the floor, ceiling 2^32-1": func(p *policy.Policy) {
			p.LatencyCeilingMs = 1<<32 - 1
			p.Pathways[2].TopTier = 0 // below the floor, F = 1
		},
	}
	for name, edit := range policies {
		sc, err := scenario.Build(downSpec(edit))
		if err != nil {
			t.Fatal(err)
		}
		base := sc.Policy
		ids := base.IDs()
		cUp := base.Pathways[2].LatencyMs <= base.LatencyCeilingMs && base.Pathways[2].TopTier >= base.Floor
		for _, downIDs := range [][]string{{"a"}, {"b"}, {"a", "b"}, {"a", "b", "c"}} {
			down := map[string]bool{}
			for _, id := range downIDs {
				down[id] = true
			}
			t.Run(name+"/down "+strings.Join(downIDs, ","), func(t *testing.T) {
				ov, err := overlay.Policy(base, down, sc.SteerKey)
				if err != nil {
					t.Fatal(err)
				}
				checkOverlay(t, base, ov, down, sc.SteerKey.Public())
				if err := sc.Room.Room.MaySignPolicy(ov.Signer); err != nil {
					t.Fatalf("§3.5: %v", err)
				}
				// Is some pathway up within the operator's limits?
				// Then a pathway down is never first; else §6.4 step 3.
				anyUp := !down["c"] && cUp || !down["a"] || !down["b"]
				old := capacityZero(t, base, down, sc)
				held := map[decision.Reason]bool{}
				bad := 0
				fail := func(format string, args ...any) {
					if bad++; bad <= 5 {
						t.Errorf(format, args...)
					}
				}
				for _, v := range downIDs {
					for _, rq := range downReports(v) {
						_, rep := report.Read(rq.target, rq.header, ids)
						if vi, _ := base.Index(v); rep.Present&report.HasPathway == 0 || int(rep.Pathway) != vi {
							t.Fatalf("%s: the report names pathway %d, not %s", rq.target, rep.Pathway, v)
						}
						for _, loads := range downLoads(base, down) {
							for _, draw := range []uint32{0, 299_999, 300_000, 499_999, 500_000, 999_999} {
								o := decideAt(t, ov, sc, rep, draw, loads)
								first := ids[o.First]
								switch {
								case anyUp && down[first]:
									fail("%s %v loads %v draw %d: %s is down and first (reason %s)", rq.target, rq.header, loads, draw, first, o.Reason)
								case !anyUp && (o.Reason != decision.None || first != v || o.TTL != base.MinTTLs):
									// §6.4 step 3: no pathway within the limits,
									// c stays first with min_ttl_s (§6.5).
									fail("%s loads %v: with no pathway up within the limits, %s first by %s TTL %d; want %s by none, TTL %d", rq.target, loads, first, o.Reason, o.TTL, v, base.MinTTLs)
								}
								if oo := decideAt(t, old, sc, rep, draw, loads); down[ids[oo.First]] {
									held[oo.Reason] = true
								}
							}
						}
					}
				}
				if bad > 5 {
					t.Errorf("and %d more", bad-5)
				}
				// A client with no current pathway while none is up: the
				// first of §6.2's order, by none.
				if !anyUp {
					o := decideAt(t, ov, sc, report.Report{}, 999_999, make([]uint32, len(ids)))
					if o.Reason != decision.None || ids[o.First] != "b" {
						t.Errorf("no report, no pathway up within the limits: %s first by %s, want b (the order's first) by none", ids[o.First], o.Reason)
					}
				}
				// The inputs reach the hole of the overlay of capacity 0:
				// the pathway down first by each step that keeps c, and
				// by rank when it is the first of the order.
				if len(downIDs) == 1 {
					want := []decision.Reason{decision.Buffer, decision.Floor, decision.Share, decision.Hold}
					if downIDs[0] == "b" {
						want[3] = decision.Rank
					}
					for _, r := range want {
						if !held[r] {
							t.Errorf("under capacity 0, no input put %s first by %s", downIDs[0], r)
						}
					}
				}
			})
		}
	}
}

// downLoads are the loads the rule is asked with: each pathway down at 0
// (its sessions moved away, the case) and at 1, the others at 0
// and at 4.
func downLoads(p *policy.Policy, down map[string]bool) [][]uint32 {
	var out [][]uint32
	for _, d := range []uint32{0, 1} {
		for _, u := range []uint32{0, 4} {
			l := make([]uint32, len(p.Pathways))
			for i, pw := range p.Pathways {
				l[i] = u
				if down[pw.ID] {
					l[i] = d
				}
			}
			out = append(out, l)
		}
	}
	return out
}

// decideAt is the rule's outcome under p at t0 for the report, the draw and
// the loads; it must be the reference's (ruleref, §6 from the text alone).
func decideAt(t *testing.T, p *policy.Policy, sc *scenario.Scenario, rep report.Report, draw uint32, loads []uint32) decision.Outcome {
	t.Helper()
	r, err := decision.RankAt(p, p.Digest(), t0, sc.Index)
	if err != nil {
		t.Fatal(err)
	}
	o, err := r.DecideDrawn(rep, draw, loads)
	if err != nil {
		t.Fatal(err)
	}
	ev := make([]evidence.Pathway, len(loads))
	for i := range ev {
		ev[i] = r.Evidence(i)
	}
	in, err := ruleref.FromPolicy(p, ev, rep, draw, loads)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ruleref.Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	prio := make([]int, o.N)
	for i := range prio {
		prio[i] = int(o.Priority[i])
	}
	if ref.First != int(o.First) || ref.Reason != int(o.Reason) || ref.TTL != o.TTL || !slices.Equal(ref.Priority, prio) {
		t.Fatalf("the rule gives %+v, the reference %+v", o, ref)
	}
	return o
}

// checkOverlay holds the overlay to issue 26's reading: a WSP1 that reads
// (§3.3) and the steering key signs (§3.4, §3.5); the operator's policy but
// for the latencies and the ceiling; each pathway down past the ceiling
// (or already below the floor tier, §6.1's quality), and each other pathway within the latency limit exactly when it was.
func checkOverlay(t testing.TB, base, ov *policy.Policy, down map[string]bool, signer sig.PublicKey) {
	t.Helper()
	if _, err := policy.Parse(ov.Bytes()); err != nil {
		t.Fatalf("the overlay does not read: %v", err)
	}
	if err := ov.VerifySignature(); err != nil || ov.Signer != signer && ov.Digest() != base.Digest() {
		t.Fatalf("the overlay's signer %s (%v), want the steering key", ov.Signer, err)
	}
	for i, pw := range ov.Pathways {
		was := base.Pathways[i].LatencyMs <= base.LatencyCeilingMs
		is := pw.LatencyMs <= ov.LatencyCeilingMs
		if down[pw.ID] && is && pw.TopTier >= ov.Floor {
			t.Errorf("pathway %s is down and within the latency (%d, the ceiling %d) and quality limits", pw.ID, pw.LatencyMs, ov.LatencyCeilingMs)
		}
		if !down[pw.ID] && is != was {
			t.Errorf("pathway %s is up and its latency limit moved: %v under the operator's, %v under the overlay", pw.ID, was, is)
		}
	}
	b2, o2 := *base, *ov
	b2.Pathways, o2.Pathways = slices.Clone(base.Pathways), slices.Clone(ov.Pathways)
	o2.Signer, o2.LatencyCeilingMs = b2.Signer, b2.LatencyCeilingMs
	for i := range o2.Pathways {
		o2.Pathways[i].LatencyMs = b2.Pathways[i].LatencyMs
	}
	if !slices.Equal(policy.AppendBody(nil, &b2), policy.AppendBody(nil, &o2)) {
		t.Error("the overlay differs from the operator's policy beyond the latencies, the ceiling and the signer")
	}
	// The operator's policy itself when each pathway down is already
	// outside the latency or the quality limit.
	already := true
	for _, pw := range base.Pathways {
		if down[pw.ID] && pw.LatencyMs <= base.LatencyCeilingMs && pw.TopTier >= base.Floor {
			already = false
		}
	}
	if (ov.Digest() == base.Digest()) != already {
		t.Errorf("the overlay is the operator's policy: %v; each pathway down already outside: %v", ov.Digest() == base.Digest(), already)
	}
}

// auditor verifies decisions as `waisteer verify -url` does (env.audit,
// §9.1), fetching what is addressed by digest once.
