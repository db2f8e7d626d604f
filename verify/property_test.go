package verify_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/ruleref"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
)

var classes = []evidence.Class{evidence.Unmetered, evidence.ModelBased, evidence.Estimator, evidence.OnChipCounter, evidence.CalibratedInstrument}

// randomSpec is a policy of 1 to 6 pathways (some clones) whose hops are of
// random classes and energies, with random limits and shares.
func randomSpec(rng *rand.Rand, n int) scenario.Spec {
	var pws []scenario.Pathway
	share := uint32(0)
	for i := range 1 + rng.IntN(6) {
		pw := scenario.Pathway{
			ID: string(rune('a' + i)), TopTier: uint8(rng.IntN(3)), LatencyMs: uint32(50 + rng.IntN(600)),
			Capacity: policy.Unlimited,
		}
		if rng.IntN(3) == 0 {
			pw.Capacity = uint32(rng.IntN(5))
		}
		if rng.IntN(3) == 0 {
			pw.MinSharePPM = uint32(rng.IntN(300_000))
			if share+pw.MinSharePPM > 1_000_000 {
				pw.MinSharePPM = 0
			}
			share += pw.MinSharePPM
		}
		if i > 0 && rng.IntN(4) == 0 {
			pw.CloneOf = pws[rng.IntN(i)].ID
			pw.Host = "clone" + pw.ID + ".example"
		}
		cls := classes[1+rng.IntN(4)]
		for j := range 1 + rng.IntN(3) {
			h := scenario.Hop{Place: policy.Interior, Class: cls, Joules: 1 + rng.Uint64N(1<<40),
				Bytes: rng.Uint64N(1 << 40), SubscriberUs: [8]uint64{rng.Uint64N(1 << 30), rng.Uint64N(1 << 30), rng.Uint64N(1 << 30)}}
			if j == 0 {
				h.Place = policy.Edge
			}
			if rng.IntN(8) == 0 {
				h.Class = classes[rng.IntN(5)]
			}
			if rng.IntN(10) == 0 {
				h.Bytes = 0
			}
			pw.Hops = append(pw.Hops, h)
		}
		pws = append(pws, pw)
	}
	hyst := uint32(rng.IntN(200_000))
	basis := policy.Basis(1 + rng.IntN(2))
	return scenario.Spec{Name: "property", Pathways: pws, Periods: 0, Policy: func(p *policy.Policy) {
		p.HysteresisPPM = hyst
		p.Basis = basis
		p.WindowUs = uint64(1+rng.IntN(4)) * p.PeriodUs
	}}
}

// TestServerDecisionsVerify is the property of §9.1's last paragraph: every
// decision the server-side code makes, for random policies, evidence (with
// gaps), reports, sessions and loads, is accepted, and its facts restate it.
func TestServerDecisionsVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	scenarios, requests := 60, 25
	if testing.Short() {
		scenarios = 10
	}
	total := 0
	for s := range scenarios {
		spec := randomSpec(rng, s)
		sc, err := scenario.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		for k := uint64(0); k < 8; k++ {
			for i, pw := range spec.Pathways {
				for j := range pw.Hops {
					if rng.IntN(12) == 0 {
						continue // a gap: the pathway goes stale in some windows
					}
					if _, err := sc.AddRecord(i, j, k*scenario.Period, (k+1)*scenario.Period, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		n := len(spec.Pathways)
		for range requests {
			var rep report.Report
			if rng.IntN(2) == 0 {
				rep.Present |= report.HasPathway
				rep.Pathway = uint8(rng.IntN(n))
			}
			if rng.IntN(2) == 0 {
				rep.Present |= report.HasThroughput
				rep.Throughput = rng.Uint64N(6_000_000)
			}
			if rng.IntN(2) == 0 {
				rep.Present |= report.HasBuffer
				rep.Buffer = rng.Uint64N(10_000)
			}
			loads := make([]uint32, n)
			for i := range loads {
				loads[i] = uint32(rng.IntN(6))
			}
			var sess report.Session
			for i := range sess {
				sess[i] = byte(rng.Uint32())
			}
			req := scenario.Request{T: rng.Uint64N(9 * scenario.Period),
				Protocol: report.Protocol(1 + rng.IntN(2)), Report: rep, Session: sess, Loads: loads}
			m, err := sc.Decide(req)
			if err != nil {
				t.Fatal(err)
			}
			f, err := verify.Verify(verify.Input{Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes,
				Policy: sc.PolicyBytes, Decision: m.Bytes, Records: sc.Records, Manifest: m.Manifest})
			if err != nil {
				t.Fatalf("scenario %d: a server decision is refused: %v", s, err)
			}
			if f.Digest != m.Digest.String() || f.TTL != m.Decision.TTL || f.Reason != m.Decision.Reason.String() ||
				f.Priority[0] != sc.Policy.Pathways[m.Decision.Priority[0]].ID {
				t.Fatalf("scenario %d: facts %+v do not restate the decision", s, f)
			}
			// The verifier recomputes with the server's own rule, so an
			// accepted decision is only as right as that rule: hold it to the
			// reference written from §6 alone.
			checkAgainstReference(t, sc.Policy, m.Bytes, f)
			total++
		}
	}
	t.Logf("%d decisions verified", total)
}

// checkAgainstReference requires the decision raw, as it reads, to state the
// output internal/ruleref gives for the evidence, report, draw and loads it
// states (§9.2), the draw to be §6.3's for its session, and the facts to
// restate that output (§9.3).
func checkAgainstReference(t *testing.T, p *policy.Policy, raw []byte, f *verify.Facts) {
	t.Helper()
	d, err := decision.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := ruleref.Draw(p.Digest(), d.Session); d.Draw != want {
		t.Fatalf("draw %d, §6.3 gives %d for session %x", d.Draw, want, d.Session)
	}
	ev := make([]evidence.Pathway, len(d.Pathways))
	loads := make([]uint32, len(d.Pathways))
	for i := range d.Pathways {
		ev[i], loads[i] = d.Pathways[i].Pathway, d.Pathways[i].Load
	}
	in, err := ruleref.FromPolicy(p, ev, d.Report, d.Draw, loads)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ruleref.Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	var priority []uint8
	var ids []string
	for _, i := range out.Priority {
		priority = append(priority, uint8(i))
		ids = append(ids, p.Pathways[i].ID)
	}
	if !slices.Equal(d.Priority, priority) || d.TTL != out.TTL || d.Reason != decision.Reason(out.Reason) {
		t.Fatalf("the decision states priority %v, TTL %d, reason %v; the reference gives %v, %d, %v",
			d.Priority, d.TTL, d.Reason, priority, out.TTL, decision.Reason(out.Reason))
	}
	if !slices.Equal(f.Priority, ids) || f.TTL != out.TTL || f.Reason != decision.Reason(out.Reason).String() {
		t.Fatalf("facts %v %d %s, the reference %v %d %v", f.Priority, f.TTL, f.Reason, ids, out.TTL, decision.Reason(out.Reason))
	}
	for i, l := range out.Limits {
		if d.Pathways[i].Limits != decision.Limits(l) {
			t.Fatalf("pathway %d states limits %03b, the reference %03b", i, d.Pathways[i].Limits, l)
		}
		fl := f.Pathways[i].Limits
		if fl.Latency != (l&ruleref.LimitLatency != 0) || fl.Quality != (l&ruleref.LimitQuality != 0) || fl.Capacity != (l&ruleref.LimitCapacity != 0) {
			t.Fatalf("pathway %d: facts limits %+v, the reference %03b", i, fl, l)
		}
	}
}
