package store

import (
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/wire"
	"github.com/waisteer/waisteer/policy"
)

// formatVersion is the first byte of every layout the store writes.
const formatVersion = 1

// snapshotEntryFixed is one snapshot entry before its digests: status,
// class, joules, delivery and the count of evidence.
const snapshotEntryFixed = 1 + 1 + 16 + 16 + 1

// EvidenceSize is the length of the body EncodeEvidence writes for ev.
func EvidenceSize(ev []evidence.Pathway) int {
	n := 2 + len(ev)*snapshotEntryFixed
	for i := range ev {
		n += len(ev[i].Records) * sig.HashSize
	}
	return n
}

// AppendEvidence appends the snapshot body of ev (the package doc's layout):
// the pathway entries of §7.1 without load and limits. Its counts are u8, as
// §7.1's are: ev should satisfy decision.Validate's counts.
func AppendEvidence(dst []byte, ev []evidence.Pathway) []byte {
	dst = slices.Grow(dst, EvidenceSize(ev))
	dst = append(dst, formatVersion, uint8(len(ev)))
	for i := range ev {
		dst = evidence.AppendPathway(dst, &ev[i])
	}
	return dst
}

// EncodeEvidence is the snapshot of ev: its body, and its key SHA-256 of the
// body. The body is a function of ev alone, so equal evidence has one key.
func EncodeEvidence(ev []evidence.Pathway) Evidence {
	body := AppendEvidence(nil, ev)
	return Evidence{Key: sha256.Sum256(body), Body: body}
}

// DecodeEvidence reads a snapshot body written by AppendEvidence, exactly:
// truncated when it ends before a field, malformed when bytes remain,
// unknown_version for a version other than 1 (COMPANION §1's codes, for the
// store's own layout), and decision_invalid for an entry §7.2 forbids (a
// status above 4; a figure without a class or with J or D 0; another status
// with a class, J or D). The digests share one array; nothing retains body.
func DecodeEvidence(body []byte) ([]evidence.Pathway, error) {
	if len(body) < 1 {
		return nil, reason.New(reason.Truncated, "an evidence snapshot of 0 bytes has no version")
	}
	if body[0] != formatVersion {
		return nil, reason.New(reason.UnknownVersion, "evidence snapshot version %d, not %d", body[0], formatVersion)
	}
	r := wire.NewReader(body[1:])
	n := int(r.U8())
	var ev []evidence.Pathway
	var all []sig.Hash
	if n > 0 && !r.Short() {
		ev = make([]evidence.Pathway, n)
		all = make([]sig.Hash, 0, r.Len()/sig.HashSize)
	}
	for i := 0; i < n && !r.Short(); i++ {
		var ok bool
		if all, ok = evidence.ReadPathway(r, &ev[i], all); !ok {
			break // the count announces more than remains
		}
	}
	if err := r.Finish("evidence snapshot"); err != nil {
		return nil, err
	}
	for i := range ev {
		if err := checkEvidence(i, &ev[i]); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// checkEvidence holds one entry to what §7.2 lets a decision state.
func checkEvidence(i int, p *evidence.Pathway) error {
	switch {
	case p.Status > evidence.StatusEmpty:
		// §7.2: its status is 0 to 4.
		return reason.New(reason.DecisionInvalid, "§7.2: snapshot pathway %d: status %d, not 0 to 4", i, p.Status)
	case p.Status == evidence.StatusFigure:
		// §7.2: with status 0 its class is 2 to 5 and J and D are above 0.
		if !p.Class.IsClass() || p.Joules.IsZero() || p.Delivery.IsZero() {
			return reason.New(reason.DecisionInvalid, "§7.2: snapshot pathway %d: a figure of class %d, J %s, D %s", i, p.Class, p.Joules, p.Delivery)
		}
	case p.Class != 0 || !p.Joules.IsZero() || !p.Delivery.IsZero():
		// §7.2: with any other status its class, J and D are 0.
		return reason.New(reason.DecisionInvalid, "§7.2: snapshot pathway %d: status %d with class %d, J %s, D %s", i, p.Status, p.Class, p.Joules, p.Delivery)
	}
	return nil
}

// Compact is the store's row for the signed decision d whose digest (§7.3)
// is digest and whose evidence is the snapshot evidenceKey (EncodeEvidence
// of its pathways' evidence): what the rule cannot recompute. The loads are
// copied; d is not retained.
func Compact(d *decision.Decision, digest sig.Hash, evidenceKey sig.Hash) Decision {
	var row Decision
	CompactInto(&row, d, digest, evidenceKey)
	return row
}

// CompactInto is Compact into row, whose Loads it reuses when it has the
// room: a server compacts one decision per request it serves at a time.
func CompactInto(row *Decision, d *decision.Decision, digest sig.Hash, evidenceKey sig.Hash) {
	loads := slices.Grow(row.Loads[:0], len(d.Pathways))[:len(d.Pathways)]
	for i := range d.Pathways {
		loads[i] = d.Pathways[i].Load
	}
	*row = Decision{
		Digest:   digest,
		Room:     d.Room,
		Policy:   d.Policy,
		T:        d.T,
		Session:  d.Session,
		Protocol: d.Protocol,
		Report:   d.Report,
		Loads:    loads,
		Evidence: evidenceKey,
		Signer:   d.Signer,
		Sig:      d.Sig,
	}
}

// Rebuild writes the WSD1 bytes (§7.1) of the stored decision row, whose
// policy is p with digest policyDigest and whose evidence snapshot body is
// evidenceBody. What the row does not hold, the rule gives again as a
// verifier recomputes it (§9.1 step 6, §9.2): the draw, each pathway's
// limits, the priority, the TTL and the reason, from the policy, the
// evidence, the report, the session and the loads. The bytes are returned
// only when SHA-256 of those before sig is row.Digest (§7.3); otherwise the
// error is ErrMismatch, and nothing is to be served.
func Rebuild(p *policy.Policy, policyDigest sig.Hash, row Decision, evidenceBody []byte) ([]byte, error) {
	if row.Policy != policyDigest {
		return nil, fmt.Errorf("store: decision %s names policy %s, not %s", row.Digest, row.Policy, policyDigest)
	}
	ev, err := DecodeEvidence(evidenceBody)
	if err != nil {
		return nil, fmt.Errorf("store: decision %s: evidence %s: %w", row.Digest, row.Evidence, err)
	}
	if len(ev) != len(p.Pathways) || len(row.Loads) != len(p.Pathways) {
		return nil, fmt.Errorf("store: decision %s: %d pathways of evidence and %d loads for a policy of %d", row.Digest, len(ev), len(row.Loads), len(p.Pathways))
	}
	d := &decision.Decision{
		Room:     row.Room,
		Signer:   row.Signer,
		Policy:   row.Policy,
		T:        row.T,
		Session:  row.Session,
		Protocol: row.Protocol,
		Report:   row.Report,
		Pathways: make([]decision.PathwayState, len(ev)),
		Sig:      row.Sig,
	}
	for i := range ev {
		d.Pathways[i] = decision.PathwayState{Load: row.Loads[i], Pathway: ev[i]}
	}
	o, err := decision.Recompute(p, policyDigest, d)
	if err != nil {
		return nil, fmt.Errorf("store: decision %s: %w", row.Digest, err)
	}
	d.Draw, d.TTL, d.Reason = o.Draw, o.TTL, o.Reason
	d.Priority = o.Priority[:o.N:o.N]
	for i := range d.Pathways {
		d.Pathways[i].Limits = o.Limits[i]
	}
	b := decision.AppendBody(make([]byte, 0, d.Size()), d)
	if sha256.Sum256(b) != row.Digest {
		return nil, fmt.Errorf("%w: %s", ErrMismatch, row.Digest)
	}
	return append(b, d.Sig[:]...), nil
}
