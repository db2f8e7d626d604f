package decision

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// MaxPathways is the most pathways a policy has (§3.3).
const MaxPathways = 32

// rulePPM is one million parts per million: the range of the draw and of the
// bands (§6.3), and the unit of the margin h (§6.4).
const rulePPM = 1_000_000

// NoFigure is the rank of a pathway with no figure (§6.2).
const NoFigure = 4

// A Ranking is what the rule needs that depends only on the policy and the
// window's records: each pathway's evidence (§5), its rank and the order of
// §6.2. A server builds one per window, and again when a record arrives
// (With, Refresh); each request then costs only the limits, the six steps
// and the priority (Decide).
//
// A Ranking is immutable and safe for concurrent use. It shares the policy
// and the evidence it was given, which must not be modified after.
type Ranking struct {
	policy   *policy.Policy
	digest   sig.Hash // the policy's digest, for the draw (§6.3)
	a, b     uint64   // the window (§5.1)
	evidence []evidence.Pathway
	rank     []uint8 // §6.2, by pathway
	order    []uint8 // the pathways in the order of §6.2
}

// NewRanking ranks the policy's pathways by their evidence over the window
// [a, b): ev holds one entry per pathway, in the policy's order, each of the
// shape a decision can state (§7.2: a figure has a class and J and D above
// 0; any other status has class, J and D 0). digest is the policy's digest.
func NewRanking(p *policy.Policy, digest sig.Hash, a, b uint64, ev []evidence.Pathway) (*Ranking, error) {
	n := len(p.Pathways)
	if n < 1 || n > MaxPathways {
		return nil, fmt.Errorf("decision: a policy of %d pathways, not 1 to %d", n, MaxPathways)
	}
	if len(ev) != n {
		return nil, fmt.Errorf("decision: evidence for %d pathways, the policy has %d", len(ev), n)
	}
	r := &Ranking{
		policy:   p,
		digest:   digest,
		a:        a,
		b:        b,
		evidence: ev,
		rank:     make([]uint8, n),
		order:    make([]uint8, n),
	}
	for i := range ev {
		if err := checkEvidence(&ev[i]); err != nil {
			return nil, fmt.Errorf("decision: pathway %d: %w", i, err)
		}
		r.rank[i] = rankOf(&ev[i])
		r.order[i] = uint8(i)
	}
	r.sort()
	return r, nil
}

// RankAt builds the ranking for the window of the instant t (§5.1) from the
// room's verified records in x: each pathway's records named and its
// evidence computed (§5.2, §5.3), then ranked (§6.2).
func RankAt(p *policy.Policy, digest sig.Hash, t uint64, x *evidence.Index) (*Ranking, error) {
	a, b := evidence.PolicyWindow(p, t)
	ev := make([]evidence.Pathway, len(p.Pathways))
	for i := range ev {
		var err error
		if ev[i], err = x.Compute(p, i, a, b); err != nil {
			return nil, err
		}
	}
	return NewRanking(p, digest, a, b, ev)
}

// With returns a ranking with pathway i's evidence replaced by ev and the
// order recomputed; r is unchanged.
func (r *Ranking) With(i int, ev evidence.Pathway) (*Ranking, error) {
	if i < 0 || i >= len(r.evidence) {
		return nil, fmt.Errorf("decision: pathway %d of a policy of %d", i, len(r.evidence))
	}
	if err := checkEvidence(&ev); err != nil {
		return nil, fmt.Errorf("decision: pathway %d: %w", i, err)
	}
	s := &Ranking{
		policy:   r.policy,
		digest:   r.digest,
		a:        r.a,
		b:        r.b,
		evidence: slices.Clone(r.evidence),
		rank:     slices.Clone(r.rank),
		order:    slices.Clone(r.order),
	}
	s.evidence[i] = ev
	s.rank[i] = rankOf(&ev)
	s.sort()
	return s, nil
}

// Refresh returns the ranking after rec has been added to x: when rec is in
// the window and of a hop of a pathway, that pathway's evidence is computed
// again from x; otherwise nothing the ranking holds can change and r itself
// is returned.
func (r *Ranking) Refresh(x *evidence.Index, rec *evidence.Record) (*Ranking, error) {
	if rec == nil || !rec.InWindow(r.a, r.b) {
		return r, nil
	}
	i, ok := r.PathwayOf(rec.Hop)
	if !ok {
		return r, nil
	}
	ev, err := x.Compute(r.policy, i, r.a, r.b)
	if err != nil {
		return nil, err
	}
	return r.With(i, ev)
}

// PathwayOf is the index of the pathway whose hops include hop (§3.3: a hop
// belongs to one pathway).
func (r *Ranking) PathwayOf(hop sig.PublicKey) (int, bool) {
	for i := range r.policy.Pathways {
		for _, h := range r.policy.Pathways[i].Hops {
			if h.Key == hop {
				return i, true
			}
		}
	}
	return 0, false
}

// Policy is the policy the ranking is for.
func (r *Ranking) Policy() *policy.Policy { return r.policy }

// PolicyDigest is the policy's digest.
func (r *Ranking) PolicyDigest() sig.Hash { return r.digest }

// Window is the window [a, b) the evidence is read over (§5.1).
func (r *Ranking) Window() (a, b uint64) { return r.a, r.b }

// Covers reports whether the instant t has the ranking's window (§5.1), so
// that a decision at t may be made from it.
func (r *Ranking) Covers(t uint64) bool {
	a, b := evidence.PolicyWindow(r.policy, t)
	return a == r.a && b == r.b
}

// Evidence is pathway i's evidence. Its Records are shared: do not modify.
func (r *Ranking) Evidence(i int) evidence.Pathway { return r.evidence[i] }

// Rank is pathway i's rank (§6.2): its class's rank, NoFigure for none.
func (r *Ranking) Rank(i int) uint8 { return r.rank[i] }

// Order is the pathways' indices in the order of §6.2, in a new slice.
func (r *Ranking) Order() []uint8 { return slices.Clone(r.order) }

// checkEvidence holds ev to what a decision can state (§7.2), which the
// order needs: a figure's D above 0 makes its cross-products a total order.
func checkEvidence(ev *evidence.Pathway) error {
	switch {
	case ev.Status > evidence.StatusEmpty:
		return fmt.Errorf("status %d, not 0 to 4", ev.Status)
	case ev.Status == evidence.StatusFigure:
		if !ev.Class.IsClass() || ev.Joules.IsZero() || ev.Delivery.IsZero() {
			return fmt.Errorf("a figure of class %d, J %s and D %s: want a class and both above 0", ev.Class, ev.Joules, ev.Delivery)
		}
	case ev.Class != 0 || !ev.Joules.IsZero() || !ev.Delivery.IsZero():
		return fmt.Errorf("status %d with class %d, J %s and D %s: want all 0", ev.Status, ev.Class, ev.Joules, ev.Delivery)
	}
	return nil
}

// rankOf is the pathway's rank (§6.2): 0 for a figure of class 5, 1 of class
// 4, 2 of class 2, 3 of class 3; NoFigure for no figure.
func rankOf(ev *evidence.Pathway) uint8 {
	if ev.Status != evidence.StatusFigure {
		return NoFigure
	}
	return ev.Class.Rank()
}

// sort puts r.order in the order of §6.2.
func (r *Ranking) sort() {
	slices.SortFunc(r.order, func(p, q uint8) int { return r.compare(int(p), int(q)) })
}

// compare is §6.2: p comes before q (−1) when, of these, the first that tells
// them apart says so.
func (r *Ranking) compare(p, q int) int {
	// 1. p's rank is below q's.
	if c := cmp.Compare(r.rank[p], r.rank[q]); c != 0 {
		return c
	}
	// 2. Both have a figure, of one class (one rank is one class), and
	// J_p × D_q < J_q × D_p, each product formed in full (256 bits).
	if r.rank[p] != NoFigure {
		ep, eq := &r.evidence[p], &r.evidence[q]
		if c := ep.Joules.Mul(eq.Delivery).Cmp(eq.Joules.Mul(ep.Delivery)); c != 0 {
			return c
		}
	}
	// 3. p's id is below q's, bytewise.
	return strings.Compare(r.policy.Pathways[p].ID, r.policy.Pathways[q].ID)
}

// Beats reports whether w beats x (§6.4): both have a figure and
// J_w × D_x × (1 000 000 + h) < J_x × D_w × 1 000 000, each side formed in
// full (up to 320 bits). The rule asks it only of two pathways of one rank.
func Beats(w, x *evidence.Pathway, h uint32) bool {
	if w.Status != evidence.StatusFigure || x.Status != evidence.StatusFigure {
		return false
	}
	lhs := w.Joules.Mul(x.Delivery).Mul64(rulePPM + uint64(h))
	rhs := x.Joules.Mul(w.Delivery).Mul64(rulePPM)
	return lhs.Cmp(rhs) < 0
}

// Draw is the client's draw (§6.3): the first four bytes of
// SHA-256("wai:steering-draw" ‖ 0x01 ‖ policy digest ‖ session), read as a
// u32 (little-endian, §2), mod 1 000 000.
func Draw(policyDigest sig.Hash, session report.Session) uint32 {
	var m [len(sig.DomainDraw) + 1 + sig.HashSize + len(report.Session{})]byte
	n := copy(m[:], sig.DomainDraw)
	m[n] = 1
	n++
	n += copy(m[n:], policyDigest[:])
	copy(m[n:], session[:])
	h := sha256.Sum256(m[:])
	return binary.LittleEndian.Uint32(h[:4]) % rulePPM
}

// Band is the pathway whose band holds the draw d (§6.3): pathway i's band is
// [S_i, S_i + min_share_ppm_i), S_i the sum of the shares before it in the
// policy's order. Bands are disjoint, so at most one holds d.
func Band(p *policy.Policy, d uint32) (int, bool) {
	var s uint64 // S_i; a sum of u32s that cannot pass 64 bits
	for i := range p.Pathways {
		share := uint64(p.Pathways[i].MinSharePPM)
		if s <= uint64(d) && uint64(d) < s+share {
			return i, true
		}
		s += share
	}
	return 0, false
}

// Sustainable is the client's sustainable tier for the throughput T (§6.4):
// the highest tier whose bitrate is at most T; false when none is (tier 0's
// is above T).
func Sustainable(tiers []uint64, throughput uint64) (int, bool) {
	for i := len(tiers) - 1; i >= 0; i-- {
		if tiers[i] <= throughput {
			return i, true
		}
	}
	return 0, false
}

// AtFloor reports whether the client is at its floor (§6.4): T is known and
// its sustainable tier is none or at most F.
func AtFloor(p *policy.Policy, rep report.Report) bool {
	if rep.Present&report.HasThroughput == 0 {
		return false
	}
	s, ok := Sustainable(p.Tiers, rep.Throughput)
	return !ok || s <= int(p.Floor)
}

// PathwayLimits gives the bits of §6.1 for pathway i with the given load;
// current says whether i is the client's current pathway c.
func PathwayLimits(p *policy.Policy, i int, current bool, load uint32) Limits {
	pw := &p.Pathways[i]
	var l Limits
	// latency: its latency_ms ≤ latency_ceiling_ms.
	if pw.LatencyMs <= p.LatencyCeilingMs {
		l |= LimitLatency
	}
	// quality: its top_tier ≥ F, it carries the floor tier.
	if pw.TopTier >= p.Floor {
		l |= LimitQuality
	}
	// capacity: no limit; or load < capacity; or it is c and load ≤
	// capacity, since c's load already counts the client.
	if pw.Capacity == policy.Unlimited || load < pw.Capacity || current && load <= pw.Capacity {
		l |= LimitCapacity
	}
	return l
}

// Outcome is what the rule gives for one request (§6): the draw, each
// pathway's limits, the first pathway and its reason, the TTL and the
// priority. Only the first N entries of Limits and Priority are used, and
// the rest are 0, so two outcomes compare with ==.
type Outcome struct {
	Draw     uint32
	N        int // the policy's count of pathways
	Limits   [MaxPathways]Limits
	First    uint8
	Reason   Reason
	TTL      uint32
	Priority [MaxPathways]uint8
}

// Decide applies the rule (§6.1 to §6.5) to one request: the client's
// report, its session and each pathway's load, in the policy's order.
func (r *Ranking) Decide(rep report.Report, session report.Session, loads []uint32) (Outcome, error) {
	return r.DecideDrawn(rep, Draw(r.digest, session), loads) // §6.3
}

// DecideDrawn is Decide with the client's draw already taken from its
// session (Draw, §6.3), which does not depend on the loads: a server draws
// before it takes the room's loads, so that it holds them only for the
// steps that read them.
func (r *Ranking) DecideDrawn(rep report.Report, draw uint32, loads []uint32) (Outcome, error) {
	p := r.policy
	n := len(r.order)
	if len(loads) != n {
		return Outcome{}, fmt.Errorf("decision: %d loads for %d pathways", len(loads), n)
	}
	if rep.Present&^(report.HasPathway|report.HasThroughput|report.HasBuffer) != 0 {
		return Outcome{}, fmt.Errorf("decision: report present %#02x has a bit above 2", rep.Present)
	}
	c := -1 // the current pathway, when known (§4)
	if rep.Present&report.HasPathway != 0 {
		if int(rep.Pathway) >= n {
			return Outcome{}, fmt.Errorf("decision: current pathway %d of a policy of %d", rep.Pathway, n)
		}
		c = int(rep.Pathway)
	}

	o := Outcome{N: n, Draw: draw} // §6.3
	for i := range n {
		o.Limits[i] = PathwayLimits(p, i, i == c, loads[i]) // §6.1
	}
	within := func(i int) bool { return o.Limits[i] == Within }

	// w: the first pathway of the order within the limits (§6.4).
	w := -1
	for _, i := range r.order {
		if within(int(i)) {
			w = int(i)
			break
		}
	}
	cWithin := c >= 0 && within(c)

	// §6.4: the first of these steps that applies.
	first, why := -1, Rank
	switch {
	case cWithin && rep.Present&report.HasBuffer != 0 && rep.Buffer < uint64(p.MinBufferMs):
		first, why = c, Buffer // 1
	case cWithin && AtFloor(p, rep):
		first, why = c, Floor // 2
	case w < 0:
		first, why = int(r.order[0]), None // 3
		if c >= 0 {
			first = c
		}
	default:
		if e, ok := Band(p, o.Draw); ok && within(e) {
			first, why = e, Share // 4
		} else if cWithin && c != w && r.rank[c] == r.rank[w] &&
			(r.rank[w] == NoFigure || !Beats(&r.evidence[w], &r.evidence[c], p.HysteresisPPM)) {
			first, why = c, Hold // 5
		} else {
			first, why = w, Rank // 6
		}
	}
	o.First, o.Reason = uint8(first), why

	// §6.5: the first pathway, then those within the limits in the order,
	// then the others in the order, each once.
	o.Priority[0] = o.First
	k := 1
	for pass := range 2 {
		for _, i := range r.order {
			if int(i) != first && within(int(i)) == (pass == 0) {
				o.Priority[k] = i
				k++
			}
		}
	}

	// §6.5: min_ttl_s when the client is held or left without a pathway
	// within the limits; ttl_s otherwise.
	switch why {
	case Buffer, Floor, None:
		o.TTL = p.MinTTLs
	default:
		o.TTL = p.TTLs
	}
	return o, nil
}

// Decision builds the decision (§7.1) the rule gives at the instant t for a
// request, all but its signature: the server's signer, the report as read
// (§4) with the protocol it was read from, the session and the loads. The
// pathways' evidence is shared with the ranking (its Records slices), and
// must not be modified. t must have the ranking's window.
func (r *Ranking) Decision(signer sig.PublicKey, t uint64, protocol report.Protocol, rep report.Report, session report.Session, loads []uint32) (*Decision, error) {
	if !r.Covers(t) {
		return nil, r.notCovered(t)
	}
	o, err := r.Decide(rep, session, loads)
	if err != nil {
		return nil, err
	}
	d := new(Decision)
	if err := r.Fill(d, &o, signer, t, protocol, rep, session, loads); err != nil {
		return nil, err
	}
	return d, nil
}

// Fill makes d the decision (§7.1) of the outcome o that the rule gave
// (Decide) for a request at the instant t with the report, session and
// loads given, all but its signature, as Decision builds it. d's Pathways
// and Priority are reused when they have the room: a server fills one
// Decision per request it serves at a time. The pathways' evidence is
// shared with the ranking, and must not be modified. t must have the
// ranking's window.
func (r *Ranking) Fill(d *Decision, o *Outcome, signer sig.PublicKey, t uint64, protocol report.Protocol, rep report.Report, session report.Session, loads []uint32) error {
	if !r.Covers(t) {
		return r.notCovered(t)
	}
	if o.N != len(r.order) || len(loads) != o.N {
		return fmt.Errorf("decision: an outcome of %d pathways and %d loads for a policy of %d", o.N, len(loads), len(r.order))
	}
	pathways := slices.Grow(d.Pathways[:0], o.N)[:o.N]
	priority := append(d.Priority[:0], o.Priority[:o.N]...)
	*d = Decision{
		Room:     r.policy.Room,
		Signer:   signer,
		Policy:   r.digest,
		T:        t,
		Session:  session,
		Draw:     o.Draw,
		Protocol: protocol,
		Report:   rep,
		Pathways: pathways,
		TTL:      o.TTL,
		Reason:   o.Reason,
		Priority: priority,
	}
	for i := range d.Pathways {
		d.Pathways[i] = PathwayState{Load: loads[i], Limits: o.Limits[i], Pathway: r.evidence[i]}
	}
	return nil
}

func (r *Ranking) notCovered(t uint64) error {
	a, b := evidence.PolicyWindow(r.policy, t)
	return fmt.Errorf("decision: t %d has the window [%d, %d), the ranking is for [%d, %d)", t, a, b, r.a, r.b)
}

// Recompute gives the rule's outcome for a decision as a verifier recomputes
// it (§9.1 step 6, §9.2): from the policy, whose digest is policyDigest; the
// evidence the decision states (which step 5 has recomputed from the
// records); and the report, session and loads it states. A decision whose
// count of pathways is not the policy's, or whose stated evidence or report
// the rule cannot take, is decision_invalid (§7.2, §9.1 step 3).
func Recompute(p *policy.Policy, policyDigest sig.Hash, d *Decision) (Outcome, error) {
	if len(d.Pathways) != len(p.Pathways) {
		return Outcome{}, reason.New(reason.DecisionInvalid, "%d pathways, the policy has %d", len(d.Pathways), len(p.Pathways))
	}
	a, b := evidence.PolicyWindow(p, d.T)
	ev := make([]evidence.Pathway, len(d.Pathways))
	loads := make([]uint32, len(d.Pathways))
	for i := range d.Pathways {
		ev[i] = d.Pathways[i].Pathway
		loads[i] = d.Pathways[i].Load
	}
	r, err := NewRanking(p, policyDigest, a, b, ev)
	if err != nil {
		return Outcome{}, reason.New(reason.DecisionInvalid, "%v", err)
	}
	o, err := r.Decide(d.Report, d.Session, loads)
	if err != nil {
		return Outcome{}, reason.New(reason.DecisionInvalid, "%v", err)
	}
	return o, nil
}

// CheckOutput is §9.1 step 6: the draw, each pathway's limits, the priority,
// the TTL and the reason recompute (Recompute). When they do not, it refuses
// unknown_preferred if the decision's first pathway has no figure while the
// first of the recomputed priority has one, and decision_mismatch otherwise.
// Its errors carry no place; the verifier's is `output`.
func CheckOutput(p *policy.Policy, policyDigest sig.Hash, d *Decision) error {
	o, err := Recompute(p, policyDigest, d)
	if err != nil {
		return err
	}
	diff := ""
	switch {
	case d.Draw != o.Draw:
		diff = fmt.Sprintf("draw %d, the rule gives %d", d.Draw, o.Draw)
	case !slices.Equal(d.Priority, o.Priority[:o.N]):
		diff = fmt.Sprintf("priority %v, the rule gives %v", d.Priority, o.Priority[:o.N])
	case d.TTL != o.TTL:
		diff = fmt.Sprintf("ttl %d, the rule gives %d", d.TTL, o.TTL)
	case d.Reason != o.Reason:
		diff = fmt.Sprintf("reason %d, the rule gives %d", d.Reason, o.Reason)
	default:
		for i := range d.Pathways {
			if d.Pathways[i].Limits != o.Limits[i] {
				diff = fmt.Sprintf("pathway %d's limits %#02x, the rule gives %#02x", i, uint8(d.Pathways[i].Limits), uint8(o.Limits[i]))
				break
			}
		}
	}
	if diff == "" {
		return nil
	}
	if len(d.Priority) > 0 && int(d.Priority[0]) < len(d.Pathways) &&
		d.Pathways[d.Priority[0]].Status != evidence.StatusFigure &&
		d.Pathways[o.First].Status == evidence.StatusFigure {
		return reason.New(reason.UnknownPreferred, "%s; its first pathway %d has no figure, the rule's first %d has one", diff, d.Priority[0], o.First)
	}
	return reason.New(reason.DecisionMismatch, "%s", diff)
}
