// Package conformance builds and checks the steering corpus of extension §11
// in the file format of COMPANION §8: the requests with the reports §4 reads
// from them, and the vectors, each a room, a policy, a decision, records and
// a manifest with the outcome §9 gives them.
package conformance

import (
	"fmt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// Case is one vector before its outcome is written: the verifier's input and,
// for a refusal, the code and place the text gives it.
type Case struct {
	Name       string
	Descriptor []byte
	KeyLogHead []byte
	Policy     []byte
	Decision   []byte
	Records    [][]byte
	Manifest   []byte
	// Want is the refusal's code and Where its place; "" for an accepted
	// vector.
	Want  reason.Code
	Where string
}

// t is the instant of the cases' decisions: the window is [3P, 8P).
const t0 = 8*scenario.Period + 10_000_000

func session(b byte) report.Session { return report.Session{0: b, 15: 0x5a} }

func build(spec scenario.Spec) *scenario.Scenario {
	if spec.Periods == 0 {
		spec.Periods = 10
	}
	sc, err := scenario.Build(spec)
	if err != nil {
		panic(fmt.Sprintf("conformance: %v", err)) // the cases are fixed: a failure is a bug here
	}
	return sc
}

func decide(sc *scenario.Scenario, req scenario.Request) *scenario.Made {
	if req.T == 0 {
		req.T = t0
	}
	m, err := sc.Decide(req)
	if err != nil {
		panic(fmt.Sprintf("conformance: %v", err))
	}
	return m
}

func accepted(name string, sc *scenario.Scenario, m *scenario.Made) Case {
	return Case{
		Name: name, Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes,
		Policy: sc.PolicyBytes, Decision: m.Bytes, Records: sc.Records, Manifest: m.Manifest,
	}
}

// reportOf is a report with c, T and B where given (negative: absent).
func reportOf(c int, T, B int64) report.Report {
	var r report.Report
	if c >= 0 {
		r.Present |= report.HasPathway
		r.Pathway = uint8(c)
	}
	if T >= 0 {
		r.Present |= report.HasThroughput
		r.Throughput = uint64(T)
	}
	if B >= 0 {
		r.Present |= report.HasBuffer
		r.Buffer = uint64(B)
	}
	return r
}

// sessionInBand finds a session whose draw falls in pathway i's band, or
// outside every band when i < 0.
func sessionInBand(p *policy.Policy, i int) report.Session {
	for k := 0; k < 1<<16; k++ {
		s := report.Session{0: byte(k), 1: byte(k >> 8), 15: 0xb0}
		j, ok := decision.Band(p, decision.Draw(p.Digest(), s))
		if (i < 0 && !ok) || (ok && j == i) {
			return s
		}
	}
	panic("conformance: no session found for the band")
}

// Accepted returns the accepted vectors §11 lists.
func Accepted() []Case {
	var cs []Case
	add := func(name string, sc *scenario.Scenario, m *scenario.Made) { cs = append(cs, accepted(name, sc, m)) }

	sc := build(scenario.Spec{Name: "one class"})
	add("three pathways, one class", sc, decide(sc, scenario.Request{Session: session(1)}))

	// Mixed classes: the calibrated pathway is dearer but ranks first (§6.2).
	pws := scenario.DefaultPathways()
	pws[0].Hops[0].Class, pws[0].Hops[1].Class = evidence.CalibratedInstrument, evidence.CalibratedInstrument
	pws[2].Hops[0].Class, pws[2].Hops[1].Class = evidence.OnChipCounter, evidence.OnChipCounter
	sc = build(scenario.Spec{Name: "mixed classes", Pathways: pws})
	add("mixed classes, ordered by class", sc, decide(sc, scenario.Request{Session: session(2)}))

	// An unmetered hop: the cheapest metered hops, ranked last (§5.4, §6.2).
	pws = scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.Unmetered
	pws[1].Hops[0].Joules = 1_000
	sc = build(scenario.Spec{Name: "unmetered", Pathways: pws})
	add("unmetered hop ranked after figures", sc, decide(sc, scenario.Request{Session: session(3)}))

	// Stale: the cheapest pathway's edge hop lacks a period of the window.
	sc = build(scenario.Spec{Name: "stale", Periods: 5})
	for k := uint64(5); k < 10; k++ {
		for i := range 3 {
			for j := range 2 {
				if i == 1 && j == 0 && k == 6 {
					continue
				}
				must(sc.AddRecord(i, j, k*scenario.Period, (k+1)*scenario.Period, nil))
			}
		}
	}
	add("stale evidence", sc, decide(sc, scenario.Request{Session: session(4)}))

	sc = build(scenario.Spec{Name: "held"})
	// At its floor: T sustains tier 1 = F (§6.4 step 2).
	add("client at its floor held", sc, decide(sc, scenario.Request{Session: session(5), Report: reportOf(2, 1_600_000, -1)}))
	// A short buffer (§6.4 step 1).
	add("client with a short buffer held", sc, decide(sc, scenario.Request{Session: session(6), Report: reportOf(2, 9_000_000, 1_000)}))

	// Hysteresis: b is within the margin of a, then a period later beyond it.
	pws = scenario.DefaultPathways()[:2]
	sc = build(scenario.Spec{Name: "hysteresis", Pathways: pws, Periods: -1})
	for k := uint64(0); k < 10; k++ {
		for i := range 2 {
			for j := range 2 {
				edit := func(r *evidence.Record) {
					a := scenario.DefaultPathways()[0].Hops[j].Joules
					if i == 1 {
						r.Joules = a * 99 / 100
						if k >= 8 {
							r.Joules = a / 2
						}
					}
				}
				must(sc.AddRecord(i, j, k*scenario.Period, (k+1)*scenario.Period, edit))
			}
		}
	}
	add("hysteresis holds", sc, decide(sc, scenario.Request{Session: session(7), Report: reportOf(0, 9_000_000, 20_000)}))
	add("hysteresis moves a period later", sc, decide(sc, scenario.Request{T: t0 + scenario.Period, Session: session(7), Report: reportOf(0, 9_000_000, 20_000)}))

	// Clones: with HOST and PARAMS, HOST only, PARAMS only.
	pws = scenario.DefaultPathways()
	pws = append(pws,
		cloneOf(pws[0], "a-clone", "edge2.example", []policy.Param{{Name: "cdn", Value: "two"}, {Name: "tok", Value: "x%20y"}}, 10_000_000),
		cloneOf(pws[1], "b-host", "edge3.example", nil, 50_000_000),
		cloneOf(pws[2], "c-params", "", []policy.Param{{Name: "via", Value: "c"}}, 60_000_000),
	)
	sc = build(scenario.Spec{Name: "clones", Pathways: pws})
	add("pathway clones", sc, decide(sc, scenario.Request{Session: session(8)}))

	// A session placed by its band, and one outside every band (§6.3).
	pws = scenario.DefaultPathways()
	pws[2].MinSharePPM = 300_000
	pws[0].Hops[1].Class = evidence.Unmetered
	pws[0].MinSharePPM = 100_000
	sc = build(scenario.Spec{Name: "bands", Pathways: pws})
	add("session placed by its band", sc, decide(sc, scenario.Request{Session: sessionInBand(sc.Policy, 2)}))
	add("session outside the bands, unmetered last", sc, decide(sc, scenario.Request{Session: sessionInBand(sc.Policy, -1)}))

	// Capacity and latency (§6.1).
	pws = scenario.DefaultPathways()
	pws[1].Capacity = 40
	pws[2].LatencyMs = 800
	sc = build(scenario.Spec{Name: "limits", Pathways: pws})
	add("pathway at its capacity and one past the latency ceiling", sc,
		decide(sc, scenario.Request{Session: session(9), Loads: []uint32{12, 40, 3}}))
	add("client on the pathway at its capacity", sc,
		decide(sc, scenario.Request{Session: session(10), Report: reportOf(1, 9_000_000, 20_000), Loads: []uint32{12, 40, 3}}))

	// The per-second basis (§5.3).
	pws = scenario.DefaultPathways()
	pws[0].Hops[0].SubscriberUs = [8]uint64{30_000_000, 50_000_000, 90_000_000}
	pws[1].Hops[0].SubscriberUs = [8]uint64{0, 10_000_000, 20_000_000}
	sc = build(scenario.Spec{Name: "per second", Pathways: pws, Policy: func(p *policy.Policy) { p.Basis = policy.PerSecond }})
	add("per-second basis", sc, decide(sc, scenario.Request{Session: session(11)}))

	// DASH, with queryBeforeStart and an & in the server URI.
	sc = build(scenario.Spec{Name: "dash", Policy: func(p *policy.Policy) {
		p.Flags = policy.FlagQueryBeforeStart
		p.ServerURI = "https://steer.example/v1/steer?room=1&x=2"
		p.ReloadURI = "https://steer.example/v1/steer?room=1"
	}})
	add("DASH", sc, decide(sc, scenario.Request{Session: session(12), Protocol: report.DASH, Report: reportOf(1, 5_000_000, -1)}))

	// No pathway within the limits.
	pws = scenario.DefaultPathways()
	for i := range pws {
		pws[i].LatencyMs = 900
	}
	sc = build(scenario.Spec{Name: "none", Pathways: pws})
	add("no pathway within the limits", sc, decide(sc, scenario.Request{Session: session(13), Report: reportOf(2, -1, -1)}))

	// Hops of two classes in one pathway: mixed, no figure.
	pws = scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.OnChipCounter
	sc = build(scenario.Spec{Name: "two classes", Pathways: pws})
	add("hops of two classes in one pathway", sc, decide(sc, scenario.Request{Session: session(14)}))

	// Empty: a pathway whose edge hops delivered nothing.
	pws = scenario.DefaultPathways()
	pws[1].Hops[0].Bytes = 0
	sc = build(scenario.Spec{Name: "empty", Pathways: pws})
	add("empty pathway", sc, decide(sc, scenario.Request{Session: session(15)}))
	return cs
}

func cloneOf(base scenario.Pathway, id, host string, params []policy.Param, joules uint64) scenario.Pathway {
	c := base
	c.ID, c.CloneOf, c.Host, c.Params = id, base.ID, host, params
	c.Hops = []scenario.Hop{base.Hops[0]}
	c.Hops[0].Joules = joules
	return c
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("conformance: %v", err))
	}
	return v
}

var _ = room.TestKey
var _ sig.Hash
