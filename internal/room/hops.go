package room

import (
	"fmt"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// A HopGap is a hop of a policy whose records a key log refuses, or accepts
// only with the unmetered marker, so that the hop's pathway has no figure
// for as long as the key log stands (§5.2, §5.4; COMPANION §4.2). Nothing in
// the text refuses such a policy; it is an operator's mistake to say out
// loud, since a server that accepts the policy otherwise steers as if the
// pathway were never metered.
type HopGap struct {
	Pathway, Hop int // the hop's place in the policy
	ID           string
	Key          sig.PublicKey
	// Refused is the code its records are refused with (hop_not_authorised,
	// hop_revoked); "" when only its metered records are, and an unmetered
	// one would be accepted.
	Refused reason.Code
	Detail  string
}

func (g HopGap) String() string {
	if g.Refused == "" {
		return fmt.Sprintf("pathway %q, hop %d (%s): %s, so it may sign only unmetered records and its pathway never has a figure (§5.4)",
			g.ID, g.Hop, g.Key, g.Detail)
	}
	return fmt.Sprintf("pathway %q, hop %d (%s): %s, so its records are refused %s and its pathway stays stale (§5.2)",
		g.ID, g.Hop, g.Key, g.Detail, g.Refused)
}

// HopGaps lists the hops of p that the key log head h does not let sign
// evidence with a figure: no entry, an entry revoked or without live/hop,
// or one with live/hop and no energy/<label> of any class. h nil is a room
// with no key log, which authorises no hop.
func HopGaps(h *KeyLogHead, p *policy.Policy) []HopGap {
	var entries map[sig.PublicKey]standing
	if h != nil {
		entries = standings(h)
	}
	return hopGaps(h != nil, entries, p)
}

// HopGaps is HopGaps of the room's key log.
func (r *Room) HopGaps(p *policy.Policy) []HopGap { return hopGaps(r.head != nil, r.entries, p) }

func hopGaps(hasHead bool, entries map[sig.PublicKey]standing, p *policy.Policy) []HopGap {
	classes := []evidence.Class{evidence.CalibratedInstrument, evidence.OnChipCounter, evidence.ModelBased, evidence.Estimator}
	var gaps []HopGap
	for i := range p.Pathways {
		for j, hp := range p.Pathways[i].Hops {
			g := HopGap{Pathway: i, Hop: j, ID: p.Pathways[i].ID, Key: hp.Key}
			if err := maySignRecord(hasHead, entries, hp.Key, evidence.Unmetered); err != nil {
				g.Refused, g.Detail = reason.Of(err), detailOf(err)
				gaps = append(gaps, g)
				continue
			}
			metered := false
			for _, c := range classes {
				metered = metered || maySignRecord(hasHead, entries, hp.Key, c) == nil
			}
			if !metered {
				g.Detail = "its entry holds live/hop and no energy/<class>"
				gaps = append(gaps, g)
			}
		}
	}
	return gaps
}

func detailOf(err error) string {
	if re, ok := err.(*reason.Error); ok {
		return re.Detail
	}
	return err.Error()
}
