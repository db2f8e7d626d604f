package ruleref

import (
	"errors"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// FromPolicy gathers the rule's inputs from a policy, each pathway's evidence
// and load (policy order), the client's report and its draw. It copies the
// values, so the Input is the reference's own.
func FromPolicy(p *policy.Policy, ev []evidence.Pathway, rep report.Report, draw uint32, loads []uint32) (*Input, error) {
	n := len(p.Pathways)
	if len(ev) != n || len(loads) != n {
		return nil, errors.New("ruleref: evidence or loads not one per pathway")
	}
	if rep.Present&^7 != 0 {
		return nil, errors.New("ruleref: a report with a bit of present above 2 (§7.2)")
	}
	in := &Input{
		Floor:            p.Floor,
		Tiers:            append([]uint64(nil), p.Tiers...),
		LatencyCeilingMs: p.LatencyCeilingMs,
		MinBufferMs:      p.MinBufferMs,
		HysteresisPPM:    p.HysteresisPPM,
		TTLs:             p.TTLs,
		MinTTLs:          p.MinTTLs,
		HasC:             rep.Present&report.HasPathway != 0,
		C:                int(rep.Pathway),
		HasT:             rep.Present&report.HasThroughput != 0,
		T:                rep.Throughput,
		HasB:             rep.Present&report.HasBuffer != 0,
		B:                rep.Buffer,
		Draw:             draw,
	}
	for i := range p.Pathways {
		pp := &p.Pathways[i]
		rp := Pathway{
			ID:          pp.ID,
			TopTier:     pp.TopTier,
			LatencyMs:   pp.LatencyMs,
			Capacity:    pp.Capacity,
			MinSharePPM: pp.MinSharePPM,
			Figure:      ev[i].Status == evidence.StatusFigure,
			Load:        loads[i],
		}
		if rp.Figure {
			rp.Class = uint8(ev[i].Class)
			rp.J = ev[i].Joules.Big()
			rp.D = ev[i].Delivery.Big()
		}
		in.Pathways = append(in.Pathways, rp)
	}
	return in, nil
}
