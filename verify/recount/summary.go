package recount

import (
	"fmt"
	"strings"
)

// String is the report in one paragraph, for a command to print: what was
// recounted, then each check's figures and its first failure.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Recounted %d decisions in %d room(s), grace %d µs", r.Decisions, r.Rooms, r.Options.Grace)
	if r.Options.Staleness > 0 {
		fmt.Fprintf(&b, ", staleness %d µs", r.Options.Staleness)
	}
	fmt.Fprintf(&b, "; %d reset(s) for a policy of other pathways, %d decision(s) sharing their room's previous t.", r.Resets, r.EqualT)

	fmt.Fprintf(&b, " Loads: %d exact", r.LoadsMatch)
	if r.Options.Staleness > 0 {
		fmt.Fprintf(&b, ", %d within the changes of δ", r.LoadsStale)
	}
	fmt.Fprintf(&b, ", %d not", r.LoadsMismatch)
	if r.LoadsUnknown > 0 {
		fmt.Fprintf(&b, ", %d not compared (a decision not held may count for them)", r.LoadsUnknown)
	}
	if len(r.Loads) > 0 {
		m := r.Loads[0]
		fmt.Fprintf(&b, " (the first: %s, decision %s, t %d, pathway %d %q states %d, the recount is %d",
			m.Leaf(), m.Digest, m.T, m.Pathway, m.ID, m.Stated, m.Recount)
		if r.Options.Staleness > 0 {
			fmt.Fprintf(&b, " with %d change(s) within δ", m.Changes)
		}
		b.WriteString(")")
	}
	b.WriteString(".")

	fmt.Fprintf(&b, " Draws: %d not §6.3's", r.DrawsMismatch)
	if len(r.Draws) > 0 {
		m := r.Draws[0]
		fmt.Fprintf(&b, " (the first: %s, decision %s, t %d, states %d, the draw is %d)", m.Leaf(), m.Digest, m.T, m.Stated, m.Draw)
	}
	b.WriteString(".")

	fmt.Fprintf(&b, " Share placements: %d outside their first pathway's band", r.SharesMismatch)
	if len(r.Shares) > 0 {
		m := r.Shares[0]
		where := "in no band"
		if m.InBand {
			where = fmt.Sprintf("in pathway %d's band", m.Band)
		}
		fmt.Fprintf(&b, " (the first: %s, decision %s, t %d, pathway %d first, its draw %s)", m.Leaf(), m.Digest, m.T, m.First, where)
	}
	b.WriteString(".")

	fmt.Fprintf(&b, " Bands: %d of %d within %g standard deviations", len(r.Bands)-r.BandsOutside, len(r.Bands), r.Options.Z)
	for _, s := range r.Bands {
		if !s.Within {
			fmt.Fprintf(&b, " (the first outside: policy %s, pathway %d %q of %d ppm, %d of %d sessions in its band, %.1f ± %.1f expected)",
				s.Policy, s.Pathway, s.ID, s.SharePPM, s.InBand, s.Sessions, s.Expected, s.Bound)
			break
		}
	}
	b.WriteString(".")
	if r.OK() {
		b.WriteString(" The server's claims hold.")
	} else {
		b.WriteString(" The server's claims do not hold.")
	}
	return b.String()
}
