// Package verify is the verifier of extension §9: given a room, a policy, a
// decision, per-hop records and optionally the manifest served with the
// decision, it runs the seven steps of §9.1 in order and stops at the first
// refusal, which it reports with its code (§10) and its place (COMPANION §7);
// a decision that passes gives the facts of §9.3.
package verify

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// Places of COMPANION §7.
const (
	PlaceRoom     = "room"
	PlacePolicy   = "policy"
	PlaceDecision = "decision"
	PlaceOutput   = "output"
	PlaceManifest = "manifest"
)

// PlaceEvidence is the place of the i-th record named under pathway p.
func PlaceEvidence(p, i int) string { return "evidence/" + strconv.Itoa(p) + "/" + strconv.Itoa(i) }

// PlacePathway is the place of pathway p's evidence.
func PlacePathway(p int) string { return "pathway/" + strconv.Itoa(p) }

// Input is what a verifier is given (§9.1).
type Input struct {
	Descriptor []byte
	KeyLogHead []byte // nil when none is given
	Policy     []byte
	Decision   []byte
	Records    [][]byte // in any order; found by digest
	Manifest   []byte   // nil when none is given
}

// Limits are a pathway's limits as the corpus writes them (COMPANION §8).
type Limits struct {
	Latency  bool `json:"latency"`
	Quality  bool `json:"quality"`
	Capacity bool `json:"capacity"`
}

// PathwayFacts is one pathway's facts (§9.3).
type PathwayFacts struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Class    int    `json:"class"`
	Joules   string `json:"joules"`
	Delivery string `json:"delivery"`
	Limits   Limits `json:"limits"`
}

// Facts are what an accepted decision establishes (§9.3), shaped as a corpus
// vector's facts (COMPANION §8).
type Facts struct {
	Digest      string         `json:"digest"`
	Priority    []string       `json:"priority"`
	TTL         uint32         `json:"ttl"`
	Reason      string         `json:"reason"`
	Pathways    []PathwayFacts `json:"pathways"`
	Manifest    string         `json:"manifest"`
	RecordURI   string         `json:"record_uri"`
	HLSTag      string         `json:"hls_tag"`
	DASHElement string         `json:"dash_element"`
}

// Verify runs §9.1's steps. It returns the facts of an accepted decision, or
// the first refusal as a *reason.Error carrying its place.
func Verify(in Input) (*Facts, error) {
	// Step 1: the room.
	rm, err := room.Open(in.Descriptor, in.KeyLogHead)
	if err != nil {
		return nil, reason.At(PlaceRoom, err)
	}

	// Step 2: the policy.
	p, err := checkPolicy(rm, in.Policy)
	if err != nil {
		return nil, reason.At(PlacePolicy, err)
	}
	pd := p.Digest()

	// Step 3: the decision.
	d, err := checkDecision(rm, p, pd, in.Decision)
	if err != nil {
		return nil, reason.At(PlaceDecision, err)
	}

	// Step 4: each record named, in order.
	named, err := checkRecords(rm, p, d, in.Records)
	if err != nil {
		return nil, err
	}

	// Step 5: the evidence.
	a, b := evidence.PolicyWindow(p, d.T)
	for i := range p.Pathways {
		if err := checkEvidence(p, i, a, b, &d.Pathways[i].Pathway, named[i]); err != nil {
			return nil, reason.At(PlacePathway(i), err)
		}
	}

	// Step 6: the output.
	if err := decision.CheckOutput(p, pd, d); err != nil {
		return nil, reason.At(PlaceOutput, err)
	}

	// Step 7: the manifest.
	digest := d.Digest()
	manifest := decision.Manifest(p, d, digest)
	if in.Manifest != nil && !bytes.Equal(in.Manifest, manifest) {
		return nil, reason.At(PlaceManifest, reason.New(reason.ManifestMismatch,
			"the manifest given is not the %d bytes §8.1 writes from the decision and the policy", len(manifest)))
	}
	return facts(p, d, digest, manifest), nil
}

// RoomAndPolicy runs §9.1's steps 1 and 2 of in: the room under its head,
// and the policy, once for the many decisions an audit checks with them.
func RoomAndPolicy(in Input) (*room.Room, *policy.Policy, error) {
	rm, err := room.Open(in.Descriptor, in.KeyLogHead)
	if err != nil {
		return nil, nil, reason.At(PlaceRoom, err)
	}
	p, err := checkPolicy(rm, in.Policy)
	if err != nil {
		return nil, nil, reason.At(PlacePolicy, err)
	}
	return rm, p, nil
}

// Stated runs §9.1's steps 3 and 6 for a decision of a room and policy
// RoomAndPolicy gave: what checks without the records, the evidence taken
// as stated (§9.2: the rule is recomputed from what the decision states).
func Stated(rm *room.Room, p *policy.Policy, b []byte) (*decision.Decision, error) {
	pd := p.Digest()
	d, err := checkDecision(rm, p, pd, b)
	if err != nil {
		return nil, reason.At(PlaceDecision, err)
	}
	if err := decision.CheckOutput(p, pd, d); err != nil {
		return nil, reason.At(PlaceOutput, err)
	}
	return d, nil
}

// checkPolicy is step 2 (§3, §3.5).
func checkPolicy(rm *room.Room, b []byte) (*policy.Policy, error) {
	p, err := policy.Parse(b)
	if err != nil {
		return nil, err
	}
	if err := PolicyOfRoom(rm, p); err != nil {
		return nil, err
	}
	return p, nil
}

// PolicyOfRoom is step 2 for a policy that reads: it is the room's
// (wrong_room), its signature verifies, and its signer may sign it (§3.5).
// A server runs it on every policy before steering by it.
func PolicyOfRoom(rm *room.Room, p *policy.Policy) error {
	if p.Room != rm.ID() {
		return reason.New(reason.WrongRoom, "the policy is for room %s, not %s", p.Room, rm.ID())
	}
	if err := p.VerifySignature(); err != nil {
		return err
	}
	return rm.MaySignPolicy(p.Signer)
}

// checkDecision is step 3 (§7, §3.5).
func checkDecision(rm *room.Room, p *policy.Policy, pd sig.Hash, b []byte) (*decision.Decision, error) {
	d, err := decision.Parse(b)
	if err != nil {
		return nil, err
	}
	if d.Room != rm.ID() {
		return nil, reason.New(reason.WrongRoom, "the decision is for room %s, not %s", d.Room, rm.ID())
	}
	if d.Policy != pd {
		return nil, reason.New(reason.RecordMissing, "the decision names policy %s, the policy given is %s", d.Policy, pd)
	}
	if len(d.Pathways) != len(p.Pathways) {
		return nil, reason.New(reason.DecisionInvalid, "the decision states %d pathways, the policy has %d", len(d.Pathways), len(p.Pathways))
	}
	// A present pathway is below the count (§7.2, checked by Parse), which
	// is now the policy's: it is a pathway of the policy.
	if err := d.VerifySignature(); err != nil {
		return nil, err
	}
	if err := rm.MaySignDecision(d.Signer, figureClasses(d)); err != nil {
		return nil, err
	}
	return d, nil
}

// figureClasses lists the classes among a decision's figures (§3.5).
func figureClasses(d *decision.Decision) []evidence.Class {
	var cs []evidence.Class
	for i := range d.Pathways {
		if s := &d.Pathways[i]; s.Status == evidence.StatusFigure && !slices.Contains(cs, s.Class) {
			cs = append(cs, s.Class)
		}
	}
	return cs
}

// checkRecords is step 4: each record the decision names, pathway by pathway
// and in its list's order, through sub-steps 1 to 6. It returns the named
// records by pathway for step 5.
func checkRecords(rm *room.Room, p *policy.Policy, d *decision.Decision, given [][]byte) ([][]evidence.Entry, error) {
	// COMPANION §6: a given record is found by SHA-256 over all its bytes
	// but the last 64; of two with one digest, the first is used.
	byDigest := make(map[sig.Hash][]byte, len(given))
	for _, raw := range given {
		h := evidence.NamedDigest(raw)
		if _, dup := byDigest[h]; !dup {
			byDigest[h] = raw
		}
	}
	a, b := evidence.PolicyWindow(p, d.T)
	named := make([][]evidence.Entry, len(d.Pathways))
	for pi := range d.Pathways {
		nm := evidence.NewNaming(p, pi, a, b)
		for i, h := range d.Pathways[pi].Records {
			place := PlaceEvidence(pi, i)
			raw, ok := byDigest[h]
			if !ok { // 4.1
				return nil, reason.At(place, reason.New(reason.RecordMissing, "no record given has the digest %s", h))
			}
			r, err := rm.ReadRecord(raw) // 4.2 and 4.3
			if err == nil {
				err = nm.Next(r) // 4.4 to 4.6
			}
			if err != nil {
				return nil, reason.At(place, err)
			}
			named[pi] = append(named[pi], evidence.Entry{Digest: h, Record: r})
		}
	}
	return named, nil
}

// checkEvidence is step 5 for pathway i, with the order of refusals COMPANION
// §6 gives: a figure over an unmetered record, then over two classes, then
// any other difference.
func checkEvidence(p *policy.Policy, i int, a, b uint64, stated *evidence.Pathway, named []evidence.Entry) error {
	got, err := evidence.Recompute(p, i, a, b, named)
	if err != nil {
		return err
	}
	if got.Status == stated.Status && got.Class == stated.Class &&
		got.Joules == stated.Joules && got.Delivery == stated.Delivery {
		return nil
	}
	if stated.Status == evidence.StatusFigure {
		classes := map[evidence.Class]bool{}
		for _, e := range named {
			if e.Record.Class == evidence.Unmetered {
				return reason.New(reason.UnmeteredAsZero, "pathway %d is stated with a figure, and a record named for it carries the unmetered marker", i)
			}
			classes[e.Record.Class] = true
		}
		if len(classes) > 1 {
			return reason.New(reason.ClassesSummed, "pathway %d is stated with a figure over records of %d classes", i, len(classes))
		}
	}
	return reason.New(reason.EvidenceMismatch, "pathway %d is stated %s, class %d, J %s, D %s; its records give %s, class %d, J %s, D %s",
		i, stated.Status, stated.Class, stated.Joules, stated.Delivery, got.Status, got.Class, got.Joules, got.Delivery)
}

func facts(p *policy.Policy, d *decision.Decision, digest sig.Hash, manifest []byte) *Facts {
	f := &Facts{
		Digest:      digest.String(),
		TTL:         d.TTL,
		Reason:      d.Reason.String(),
		Manifest:    string(manifest),
		RecordURI:   decision.RecordURI(p, digest),
		HLSTag:      decision.HLSTag(p),
		DASHElement: decision.DASHElement(p),
	}
	for _, i := range d.Priority {
		f.Priority = append(f.Priority, p.Pathways[i].ID)
	}
	for i, s := range d.Pathways {
		f.Pathways = append(f.Pathways, PathwayFacts{
			ID:       p.Pathways[i].ID,
			Status:   s.Status.String(),
			Class:    int(s.Class),
			Joules:   s.Joules.String(),
			Delivery: s.Delivery.String(),
			Limits: Limits{
				Latency:  s.Limits&decision.LimitLatency != 0,
				Quality:  s.Limits&decision.LimitQuality != 0,
				Capacity: s.Limits&decision.LimitCapacity != 0,
			},
		})
	}
	return f
}
