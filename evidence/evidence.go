package evidence

import (
	"fmt"
	"math/bits"

	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// MaxNamed is the most records a decision names under one pathway: its
// evidence count is a u8 (§7.1).
const MaxNamed = 255

// Entry is a record with its digest (live-metering §3.5), the name a decision
// gives it (§7.1).
type Entry struct {
	Digest sig.Hash
	Record *Record
}

// Window is the evidence window [a, b) at the instant t on the room clock,
// for the policy's period P, window W and lag L (§5.1):
//
//	b = ⌊(t − L) / P⌋ × P (0 when t < L)
//	a = b − W (0 when b < W)
//
// A policy that reads has P > 0 (§3.3); with P = 0 the window is [0, 0),
// which no record is in, rather than a division by zero.
func Window(t, period, window, lag uint64) (a, b uint64) {
	if period != 0 && t >= lag {
		b = (t - lag) / period * period // ≤ t − L: the product cannot overflow
	}
	if b >= window {
		a = b - window
	}
	return a, b
}

// PolicyWindow is Window with the policy's P, W and L.
func PolicyWindow(p *policy.Policy, t uint64) (a, b uint64) {
	return Window(t, p.PeriodUs, p.WindowUs, p.LagUs)
}

// RecordHorizon is, for a room steered by p whose oldest decision kept is at
// the instant oldest, the end before which its records may be pruned: every
// record a decision at oldest or later can name ends at or after it, and,
// unless it is 0, a record that ends there can be named.
//
// A record in the window [a, b) starts at or after a and ends after its
// start (Check), and a never moves back as t advances (§5.1), so the
// earliest end named is a + 1 for the first window from oldest on that can
// hold a record: oldest's own, or, when that is empty (b = 0), the window
// of L + P, the first instant whose b is not 0. Where no instant on the room
// clock has such a window (P = 0, W = 0, or L + P past the clock's range)
// the horizon is 0: what cannot be named is kept rather than pruned.
func RecordHorizon(p *policy.Policy, oldest uint64) uint64 {
	first, carry := bits.Add64(p.LagUs, p.PeriodUs, 0)
	if p.PeriodUs == 0 || p.WindowUs == 0 || carry != 0 {
		return 0
	}
	a, _ := PolicyWindow(p, max(oldest, first))
	return a + 1 // a ≤ b − W < 2^64 − 1, as W > 0
}

// ForgetHorizon is, for a room steered by p at the instant t, the start
// before which the room's evidence index may forget records: a period
// before the window's start a, or 0 when a < P. The window of t − P starts
// there (or at 0), and a never moves back as t advances (§5.1), so no
// decision at t − P or later names a record that starts before it: a clock
// that steps back by up to a period still finds its window's records. For a
// policy that reads (§3.3), a record that starts there can be named.
func ForgetHorizon(p *policy.Policy, t uint64) uint64 {
	a, _ := PolicyWindow(p, t)
	if a < p.PeriodUs {
		return 0
	}
	return a - p.PeriodUs
}

// InWindow reports whether r is in the window [a, b): a ≤ its start and its
// end ≤ b (§5.1).
func (r *Record) InWindow(a, b uint64) bool { return a <= r.Start && r.End <= b }

// Recompute gives pathway i's evidence from exactly the records named for it,
// as a verifier does (§9.1 step 5): its status, class, J and D (§5.3, §5.4),
// with Records the digests of named. The records must be those §9.1 step 4
// accepts (Naming), and Recompute refuses any other list with step 4's code,
// or decision_invalid for more than MaxNamed of them. Its errors carry no
// place.
func Recompute(p *policy.Policy, i int, a, b uint64, named []Entry) (Pathway, error) {
	if i < 0 || i >= len(p.Pathways) {
		return Pathway{}, fmt.Errorf("evidence: pathway %d of a policy of %d", i, len(p.Pathways))
	}
	if len(named) > MaxNamed {
		return Pathway{}, reason.New(reason.DecisionInvalid, "%d records named under pathway %d, more than %d", len(named), i, MaxNamed)
	}
	nm := NewNaming(p, i, a, b)
	for k, e := range named {
		if e.Record == nil {
			return Pathway{}, fmt.Errorf("evidence: record %d of pathway %d is nil", k, i)
		}
		if err := nm.Next(e.Record); err != nil {
			return Pathway{}, err
		}
	}
	return figure(p, i, a, b, named), nil
}

// A Naming checks, one record at a time, the list of records a decision names
// under one pathway: §9.1 steps 4.4 to 4.6, which a verifier runs for each
// record before the next (after 4.1 to 4.3, Room.ReadRecord), and which
// Recompute runs over a whole list.
type Naming struct {
	pathway int
	hops    []policy.Hop
	a, b    uint64
	k       int    // records checked so far
	hop     int    // the hop of the last, by its index in the pathway
	start   uint64 // the last one's start
}

// NewNaming starts the checks of the records named under pathway i of p, for
// a decision whose window is [a, b) (§5.1).
func NewNaming(p *policy.Policy, i int, a, b uint64) Naming {
	return Naming{pathway: i, hops: p.Pathways[i].Hops, a: a, b: b}
}

// Next checks the next record named: its hop is a hop of the pathway (4.4,
// evidence_not_on_pathway); it is in the window (4.5,
// evidence_outside_window); and it follows the record named before it in
// §5.2's order, a later hop of the pathway or the same hop and a later start
// (4.6, decision_invalid).
func (nm *Naming) Next(r *Record) error {
	j := hopIndex(nm.hops, r.Hop)
	if j < 0 {
		return reason.New(reason.EvidenceNotOnPathway, "its hop %s is not a hop of pathway %d", r.Hop, nm.pathway)
	}
	if !r.InWindow(nm.a, nm.b) {
		return reason.New(reason.EvidenceOutsideWindow, "it spans [%d, %d), the window is [%d, %d)", r.Start, r.End, nm.a, nm.b)
	}
	if nm.k > 0 && (j < nm.hop || j == nm.hop && r.Start <= nm.start) {
		return reason.New(reason.DecisionInvalid, "it does not follow the record named before it under pathway %d in §5.2's order", nm.pathway)
	}
	nm.k++
	nm.hop, nm.start = j, r.Start
	return nil
}

// hopIndex is the index of key among hops, or -1. A policy lists each hop
// key once (§3.3).
func hopIndex(hops []policy.Hop, key sig.PublicKey) int {
	for j := range hops {
		if hops[j].Key == key {
			return j
		}
	}
	return -1
}

// figure computes §5.3 over named, which is in §5.2's order: grouped by hop
// in the pathway's hop order, each hop's by strictly ascending start, every
// record of a hop of the pathway and in the window. One pass over the hops'
// runs of records gathers what each step of §5.3 asks; the steps are then
// taken in their order.
func figure(p *policy.Policy, i int, a, b uint64, named []Entry) Pathway {
	pw := &p.Pathways[i]
	ev := Pathway{Records: make([]sig.Hash, len(named))}
	for k, e := range named {
		ev.Records[k] = e.Digest
	}

	var (
		stale, unmetered, mixed, over bool
		j, d                          num.U128
	)
	// J over every record, D over the edge hops' records only (§5.3). The
	// adds are checked, though fewer than 2^64 addends below 2^64 each
	// cannot pass 2^128, so that a wrapped sum could never be stated.
	add := func(s *num.U128, v uint64) {
		var o bool
		*s, o = s.Add64(v)
		over = over || o
	}
	k := 0
	for _, hop := range pw.Hops {
		// §5.2: the hop is covered when its records tile [a, b): at least
		// one, the first at a, each where the one before ends, the last
		// ending at b. With a = b no hop is covered: no record is in the
		// window.
		at, seen := a, false
		for ; k < len(named) && named[k].Record.Hop == hop.Key; k++ {
			r := named[k].Record
			if r.Start != at { // a gap, an overlap, or not from a
				stale = true
			}
			at, seen = r.End, true

			if r.Class == Unmetered {
				unmetered = true
			}
			if r.Class != named[0].Record.Class {
				mixed = true
			}
			add(&j, r.Joules)
			if hop.Place != policy.Edge {
				continue // an interior hop's joules count, its deliveries do not
			}
			switch p.Basis {
			case policy.PerByte: // media tracks, out
				for _, tr := range r.Tracks {
					if tr.Kind == KindMedia && tr.Direction == DirOut {
						add(&d, tr.Bytes)
					}
				}
			case policy.PerSecond: // layer classes F to 7
				for c := int(p.Floor); c < len(r.SubscriberUs); c++ {
					add(&d, r.SubscriberUs[c])
				}
			}
		}
		if !seen || at != b { // none, or not reaching b
			stale = true
		}
	}

	// §5.3: the first that holds. A record left over is of no hop of the
	// pathway or out of order, which Recompute refuses and Select never
	// names; it leaves a hop uncovered.
	switch {
	case stale || k != len(named) || over:
		ev.Status = StatusStale
	case unmetered:
		ev.Status = StatusUnmetered
	case mixed:
		ev.Status = StatusMixed
	case d.IsZero():
		ev.Status = StatusEmpty
	default:
		ev.Status, ev.Class, ev.Joules, ev.Delivery = StatusFigure, named[0].Record.Class, j, d
	}
	return ev
}

// Compute names pathway i's records for the window [a, b) from the records
// available, and gives its evidence (§5.2, §5.3): Select, then the figure
// over exactly the records named. available may hold records of any hop, in
// any order, the same record more than once; they must have been verified.
func Compute(p *policy.Policy, i int, a, b uint64, available []Entry) (Pathway, error) {
	x := NewIndex()
	for _, e := range available {
		x.Add(e)
	}
	return x.Compute(p, i, a, b)
}
