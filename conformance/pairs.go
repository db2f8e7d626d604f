package conformance

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"math/big"
	"slices"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// Refusal is a code and the place where it is raised (COMPANION §7).
type Refusal struct {
	Code  reason.Code
	Where string
}

// Pair is a refused vector with two defects that the text finds in a fixed
// order: within one step of §9.1, or in two steps. The vector is refused for
// First. It is also a control of both defects: without the first it is
// refused for Second, without the second it is refused for First, and with
// neither it is accepted. So a verifier that runs the two checks in the other
// order gives Second, and the corpus catches it.
type Pair struct {
	Name          string // names both defects and both codes, the first first
	First, Second Refusal
	build         func(first, second bool) Case
}

// Make builds the vector with its first defect, its second, both (the
// corpus's vector) or neither, its refusal set to what the text gives it.
func (p Pair) Make(first, second bool) Case {
	c := p.build(first, second)
	c.Name, c.Want, c.Where = p.Name, "", ""
	switch {
	case first:
		c.Want, c.Where = p.First.Code, p.First.Where
	case second:
		c.Want, c.Where = p.Second.Code, p.Second.Where
	}
	return trim(c)
}

// smallOrderSignature is a signature that the identity point (smallOrderKey)
// satisfies over every message: R = [r]B and S = r, so that [S]B − [k]A is
// R for any k, A being the identity (COMPANION §2 step 6 holds, and steps 3
// to 5). Only step 2, the key's small order, refuses it: a vector signed so
// has a bad key and no other defect.
func smallOrderSignature() sig.Signature {
	seed := sha256.Sum256([]byte("wai steering conformance: small-order signature"))
	// RFC 8032 §5.1.5: the public key of a seed is [s]B, s the clamped
	// first half of SHA-512(seed).
	pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
	h := sha512.Sum512(seed[:])
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	le := h[:32]
	be := slices.Clone(le)
	slices.Reverse(be)
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10) // 2^252 + 27742317777372353535851937790883648493
	s := new(big.Int).Mod(new(big.Int).SetBytes(be), l).FillBytes(make([]byte, 32))
	slices.Reverse(s)
	var out sig.Signature
	copy(out[:32], pub)
	copy(out[32:], s)
	return out
}

// signer is how a draft signs a policy or a decision it changed: by key (the
// steering key when zero), or as the small-order key.
type signer struct {
	key   sig.PrivateKey
	small bool
}

// draft is a fixture's accepted case being changed by a pair's defects:
// edits change the policy's and the decision's values, which are signed
// when the draft is done, and queue changes to bytes, made after signing in
// the order queued.
type draft struct {
	f     fixture
	c     Case
	pol   *policy.Policy // re-signed when set
	polBy signer
	dec   *decision.Decision // re-signed when set
	decBy signer
	after []func(c *Case)
}

func (f fixture) draft() *draft { return &draft{f: f, c: f.accept("")} }

// policy is the policy's value, to change.
func (d *draft) policy() *policy.Policy {
	if d.pol == nil {
		d.pol = must(policy.Parse(d.f.sc.PolicyBytes))
	}
	return d.pol
}

// decision is the decision's value, to change.
func (d *draft) decision() *decision.Decision {
	if d.dec == nil {
		d.dec = must(decision.Parse(d.f.m.Bytes))
	}
	return d.dec
}

// then queues a change to the case's bytes, made after signing.
func (d *draft) then(edit func(c *Case)) { d.after = append(d.after, edit) }

// name makes the decision name raw as record i of pathway p, and gives raw.
func (d *draft) name(p, i int, raw []byte) {
	s := &d.decision().Pathways[p]
	s.Records = slices.Clone(s.Records)
	s.Records[i] = evidence.NamedDigest(raw)
	d.c.Records = append(slices.Clone(d.c.Records), raw)
}

func (d *draft) done() Case {
	if d.pol != nil {
		if d.polBy.small {
			d.pol.Signer, d.pol.Sig = smallOrderKey, smallOrderSignature()
			d.c.Policy = policy.Append(nil, d.pol)
		} else {
			d.c.Policy = signPolicy(d.pol, d.orSteer(d.polBy.key))
		}
	}
	if d.dec != nil {
		var digest sig.Hash
		if d.decBy.small {
			d.dec.Signer, d.dec.Sig = smallOrderKey, smallOrderSignature()
			d.c.Decision, digest = decision.Append(nil, d.dec), d.dec.Digest()
		} else {
			d.c.Decision, digest = decision.AppendSigned(nil, d.dec, d.orSteer(d.decBy.key))
		}
		d.c.Manifest = decision.Manifest(d.f.sc.Policy, d.dec, digest)
	}
	for _, edit := range d.after {
		edit(&d.c)
	}
	return d.c
}

func (d *draft) orSteer(k sig.PrivateKey) sig.PrivateKey {
	if k.IsZero() {
		return d.f.sc.SteerKey
	}
	return k
}

// pair is a Pair whose defects are edits of the fixture's accepted case,
// made first then second.
func (f fixture) pair(name string, first, second Refusal, e1, e2 func(d *draft)) Pair {
	return Pair{Name: name, First: first, Second: second, build: func(a, b bool) Case {
		d := f.draft()
		if a {
			e1(d)
		}
		if b {
			e2(d)
		}
		return d.done()
	}}
}

// recordDraft is a record being changed: re-signed by key when done, or
// given the small-order key and smallOrderSignature, then its last byte
// flipped when flip is set.
type recordDraft struct {
	r     *evidence.Record
	key   sig.PrivateKey
	small bool
	flip  bool
}

func (rd *recordDraft) bytes() []byte {
	var raw []byte
	if rd.small {
		rd.r.Hop, rd.r.Sig = smallOrderKey, smallOrderSignature()
		raw = evidence.AppendRecord(nil, rd.r)
	} else {
		raw = evidence.SignRecord(rd.r, rd.key)
	}
	if rd.flip {
		raw = flipLast(raw)
	}
	return raw
}

// recordPair is a Pair whose defects are both in record i named under
// pathway p: the record is changed by e1 then e2 and named in its place.
func (f fixture) recordPair(name string, first, second Refusal, p, i int, e1, e2 func(rd *recordDraft)) Pair {
	return Pair{Name: name, First: first, Second: second, build: func(a, b bool) Case {
		d := f.draft()
		if a || b {
			r := must(evidence.ParseRecord(f.record(p, i)))
			rd := &recordDraft{r: r, key: f.hopKey(r.Hop)}
			if a {
				e1(rd)
			}
			if b {
				e2(rd)
			}
			// The record it replaces is not given: with only its signature
			// broken the two would share a digest, and the first given is
			// used (COMPANION §6).
			drop(&d.c, f.record(p, i))
			d.name(p, i, rd.bytes())
		}
		return d.done()
	}}
}

// revokedSteerHead is the corpus room's key log head moved on to seq 2 with
// the steering key's entry revoked.
func revokedSteerHead(f fixture) []byte {
	es := slices.Clone(f.sc.Room.Head().Entries)
	for i := range es {
		if es[i].Key == f.sc.SteerKey.Public() {
			es[i].Revoked = true
		}
	}
	return must(room.NewKeyLogHead(f.sc.Room.OriginKey, 2, es))
}

// Pairs returns the refused vectors with two defects: for each pair of
// checks whose order the text fixes (COMPANION §1's reading, §9.1's steps
// and the order within each, COMPANION §4.1 and §6), a vector that fails
// both and must be refused for the one the text runs first.
func Pairs() []Pair {
	f := newFixture(refusalSpec())
	sc := f.sc
	P := uint64(scenario.Period)
	var ps []Pair
	add := func(p Pair) { ps = append(ps, p) }
	at := func(code reason.Code, where string) Refusal { return Refusal{code, where} }
	head := func(c *Case) *[]byte { return &c.KeyLogHead }
	descriptor := func(c *Case) *[]byte { return &c.Descriptor }
	pol := func(c *Case) *[]byte { return &c.Policy }
	dec := func(c *Case) *[]byte { return &c.Decision }
	bytesOf := func(field func(c *Case) *[]byte, edit func(b []byte) []byte) func(d *draft) {
		return func(d *draft) {
			d.then(func(c *Case) { b := field(c); *b = edit(*b) })
		}
	}
	flip := func(field func(c *Case) *[]byte) func(d *draft) { return bytesOf(field, flipLast) }
	cut := func(n int) func(b []byte) []byte { return func(b []byte) []byte { return b[:n] } }
	cutLast := func(b []byte) []byte { return b[:len(b)-1] }
	trailing := func(b []byte) []byte { return append(slices.Clone(b), 0) }
	set := func(i int, v byte) func(b []byte) []byte { return func(b []byte) []byte { return setByte(b, i, v) } }
	policyEdit := func(edit func(p *policy.Policy)) func(d *draft) { return func(d *draft) { edit(d.policy()) } }
	decisionEdit := func(edit func(x *decision.Decision)) func(d *draft) { return func(d *draft) { edit(d.decision()) } }
	hysteresis := policyEdit(func(p *policy.Policy) { p.HysteresisPPM = 1_000_001 })
	laterClone := policyEdit(func(p *policy.Policy) { p.Pathways[1].Base, p.Pathways[1].Host = 2, "edge.example" })
	otherPolicyRoom := policyEdit(func(p *policy.Policy) { p.Room[0] ^= 1 })
	policySmall := func(d *draft) { d.policy(); d.polBy.small = true }
	ttl0 := decisionEdit(func(x *decision.Decision) { x.TTL = 0 })
	ttlChanged := decisionEdit(func(x *decision.Decision) { x.TTL-- })
	fewerPathways := decisionEdit(func(x *decision.Decision) {
		x.Pathways = x.Pathways[:2]
		x.Priority = slices.DeleteFunc(slices.Clone(x.Priority), func(i uint8) bool { return i == 2 })
	})
	otherDecisionRoom := decisionEdit(func(x *decision.Decision) { x.Room[31] ^= 1 })
	otherPolicy := decisionEdit(func(x *decision.Decision) { x.Policy[0] ^= 1 })
	decisionSmall := func(d *draft) { d.decision(); d.decBy.small = true }
	joulesUp := func(p int) func(d *draft) {
		return decisionEdit(func(x *decision.Decision) { x.Pathways[p].Joules, _ = x.Pathways[p].Joules.Add64(1) })
	}
	missing := func(p, i int) func(d *draft) { return func(d *draft) { drop(&d.c, f.record(p, i)) } }

	// §9.1 step 1, in COMPANION §4.1's order.
	add(f.pair("two defects, room: descriptor signature broken and no key log head (bad_signature before key_log_missing)",
		at(reason.BadSignature, "room"), at(reason.KeyLogMissing, "room"),
		flip(descriptor), func(d *draft) { d.c.KeyLogHead = nil }))
	add(f.pair("two defects, room: key log head of another origin, its signature broken (key_log_invalid before bad_signature)",
		at(reason.KeyLogInvalid, "room"), at(reason.BadSignature, "room"),
		func(d *draft) { d.c.KeyLogHead = must(room.NewKeyLogHead(outsider(), 1, sc.Room.Head().Entries)) }, flip(head)))
	add(f.pair("two defects, room: key log head signature broken, the authority not listed in it (bad_signature before authority_not_listed)",
		at(reason.BadSignature, "room"), at(reason.AuthorityNotListed, "room"),
		flip(head), func(d *draft) {
			es := slices.DeleteFunc(slices.Clone(sc.Room.Head().Entries), func(e room.Entry) bool { return e.Key == sc.Room.Authority() })
			d.c.KeyLogHead = must(room.NewKeyLogHead(sc.Room.OriginKey, 2, es))
		}))
	// Steps 1 and 2.
	add(f.pair("two defects, room and policy: key log head signature broken, hysteresis above 10^6 (bad_signature at room before policy_invalid)",
		at(reason.BadSignature, "room"), at(reason.PolicyInvalid, "policy"), flip(head), hysteresis))

	// §9.1 step 2: the policy read as COMPANION §1 reads a record, its checks
	// 1 to 5 in order, then §3.3's rules, the room, the signature, the signer.
	add(f.pair("two defects, policy: three bytes, not the magic's first three (truncated before malformed)",
		at(reason.Truncated, "policy"), at(reason.Malformed, "policy"),
		bytesOf(pol, cut(3)), bytesOf(pol, set(0, 'X'))))
	add(f.pair("two defects, policy: magic WSP2 and no version byte (malformed before truncated)",
		at(reason.Malformed, "policy"), at(reason.Truncated, "policy"),
		bytesOf(pol, set(3, '2')), bytesOf(pol, cut(4))))
	add(f.pair("two defects, policy: magic WSP2 and version 2 (malformed before unknown_version)",
		at(reason.Malformed, "policy"), at(reason.UnknownVersion, "policy"),
		bytesOf(pol, set(3, '2')), bytesOf(pol, set(4, 2))))
	add(f.pair("two defects, policy: version 2 and its last byte cut (unknown_version before truncated)",
		at(reason.UnknownVersion, "policy"), at(reason.Truncated, "policy"),
		bytesOf(pol, set(4, 2)), bytesOf(pol, cutLast)))
	add(f.pair("two defects, policy: version 2 and a trailing byte (unknown_version before malformed)",
		at(reason.UnknownVersion, "policy"), at(reason.Malformed, "policy"),
		bytesOf(pol, set(4, 2)), bytesOf(pol, trailing)))
	add(f.pair("two defects, policy: its last byte cut, a clone of a later pathway (truncated before clone_unknown)",
		at(reason.Truncated, "policy"), at(reason.CloneUnknown, "policy"),
		bytesOf(pol, cutLast), laterClone))
	add(f.pair("two defects, policy: a trailing byte, hysteresis above 10^6 (malformed before policy_invalid)",
		at(reason.Malformed, "policy"), at(reason.PolicyInvalid, "policy"),
		bytesOf(pol, trailing), hysteresis))
	// hysteresis_ppm comes before the pathways in the layout: a reader that
	// checks the rules field by field finds it first.
	add(f.pair("two defects, policy: a clone of a later pathway, hysteresis above 10^6 (clone_unknown before policy_invalid)",
		at(reason.CloneUnknown, "policy"), at(reason.PolicyInvalid, "policy"), laterClone, hysteresis))
	add(f.pair("two defects, policy: min_ttl_s above ttl_s, another room (policy_invalid before wrong_room)",
		at(reason.PolicyInvalid, "policy"), at(reason.WrongRoom, "policy"),
		policyEdit(func(p *policy.Policy) { p.MinTTLs = p.TTLs + 1 }), otherPolicyRoom))
	add(f.pair("two defects, policy: another room, a signer of small order (wrong_room before bad_key)",
		at(reason.WrongRoom, "policy"), at(reason.BadKey, "policy"), otherPolicyRoom, policySmall))
	add(f.pair("two defects, policy: a signer of small order, its signature broken (bad_key before bad_signature)",
		at(reason.BadKey, "policy"), at(reason.BadSignature, "policy"), policySmall, flip(pol)))
	add(f.pair("two defects, policy: signature broken, by a key the key log does not list (bad_signature before signer_not_authorised)",
		at(reason.BadSignature, "policy"), at(reason.SignerNotAuthorised, "policy"),
		flip(pol), func(d *draft) { d.policy(); d.polBy.key = outsider() }))
	add(f.pair("two defects, policy: signature broken, its signer revoked (bad_signature before signer_revoked)",
		at(reason.BadSignature, "policy"), at(reason.SignerRevoked, "policy"),
		flip(pol), func(d *draft) { d.c.KeyLogHead = revokedSteerHead(f) }))
	// Steps 2 and 3.
	add(f.pair("two defects, policy and decision: the policy's signature broken, the decision's ttl 0 (bad_signature at policy before decision_invalid)",
		at(reason.BadSignature, "policy"), at(reason.DecisionInvalid, "decision"), flip(pol), ttl0))

	// §9.1 step 3: the decision read, then §7.2's rules, its room, its
	// policy, its count of pathways, its signature, its signer.
	add(f.pair("two defects, decision: magic WSP1, its last byte cut (malformed before truncated)",
		at(reason.Malformed, "decision"), at(reason.Truncated, "decision"),
		bytesOf(dec, set(2, 'P')), bytesOf(dec, cutLast)))
	add(f.pair("two defects, decision: version 0, ttl 0 (unknown_version before decision_invalid)",
		at(reason.UnknownVersion, "decision"), at(reason.DecisionInvalid, "decision"), bytesOf(dec, set(4, 0)), ttl0))
	add(f.pair("two defects, decision: reason 7, another room (decision_invalid before wrong_room)",
		at(reason.DecisionInvalid, "decision"), at(reason.WrongRoom, "decision"),
		decisionEdit(func(x *decision.Decision) { x.Reason = 7 }), otherDecisionRoom))
	add(f.pair("two defects, decision: another room, another policy (wrong_room before record_missing)",
		at(reason.WrongRoom, "decision"), at(reason.RecordMissing, "decision"), otherDecisionRoom, otherPolicy))
	add(f.pair("two defects, decision: another policy, fewer pathways than the policy (record_missing before decision_invalid)",
		at(reason.RecordMissing, "decision"), at(reason.DecisionInvalid, "decision"), otherPolicy, fewerPathways))
	add(f.pair("two defects, decision: fewer pathways than the policy, signature broken (decision_invalid before bad_signature)",
		at(reason.DecisionInvalid, "decision"), at(reason.BadSignature, "decision"), fewerPathways, flip(dec)))
	add(f.pair("two defects, decision: a signer of small order, its signature broken (bad_key before bad_signature)",
		at(reason.BadKey, "decision"), at(reason.BadSignature, "decision"), decisionSmall, flip(dec)))
	add(f.pair("two defects, decision: signature broken, by a key the key log does not list (bad_signature before signer_not_authorised)",
		at(reason.BadSignature, "decision"), at(reason.SignerNotAuthorised, "decision"),
		flip(dec), func(d *draft) { d.decision(); d.decBy.key = outsider() }))
	// Steps 3 and 4.
	add(f.pair("two defects, decision and evidence: the decision's signature broken, a record it names missing (bad_signature at decision before record_missing)",
		at(reason.BadSignature, "decision"), at(reason.RecordMissing, "evidence/1/2"), flip(dec), missing(1, 2)))

	// §9.1 step 4, within one record: live-metering §3.6's reading
	// (COMPANION §5's order), then sub-steps 3, 4, 5 and 6.
	rec := func(edit func(r *evidence.Record)) func(rd *recordDraft) {
		return func(rd *recordDraft) { edit(rd.r) }
	}
	byHop := func(k sig.PrivateKey) func(rd *recordDraft) { return func(rd *recordDraft) { rd.key = k } }
	add(f.recordPair("two defects, evidence: a record of class 1 ending where it starts (energy_invalid before record_invalid)",
		at(reason.EnergyInvalid, "evidence/0/0"), at(reason.RecordInvalid, "evidence/0/0"), 0, 0,
		rec(func(r *evidence.Record) { r.Class = 1 }), rec(func(r *evidence.Record) { r.End = r.Start })))
	add(f.recordPair("two defects, evidence: a record with a track of kind 3, of another room (record_invalid before wrong_room)",
		at(reason.RecordInvalid, "evidence/0/2"), at(reason.WrongRoom, "evidence/0/2"), 0, 2,
		rec(func(r *evidence.Record) { r.Tracks[0].Kind = 3 }), rec(func(r *evidence.Record) { r.Room[0] ^= 1 })))
	add(f.recordPair("two defects, evidence: a record of another room, by a hop of small order (wrong_room before bad_key)",
		at(reason.WrongRoom, "evidence/1/0"), at(reason.BadKey, "evidence/1/0"), 1, 0,
		rec(func(r *evidence.Record) { r.Room[0] ^= 1 }), func(rd *recordDraft) { rd.small = true }))
	add(f.recordPair("two defects, evidence: a record's signature broken, its class one its hop may not state (bad_signature before hop_not_authorised)",
		at(reason.BadSignature, "evidence/0/0"), at(reason.HopNotAuthorised, "evidence/0/0"), 0, 0,
		func(rd *recordDraft) { rd.flip = true }, rec(func(r *evidence.Record) { r.Class = evidence.Estimator })))
	add(f.recordPair("two defects, evidence: a record stating a class its hop may not, by another pathway's hop (hop_not_authorised before evidence_not_on_pathway)",
		at(reason.HopNotAuthorised, "evidence/0/0"), at(reason.EvidenceNotOnPathway, "evidence/0/0"), 0, 0,
		rec(func(r *evidence.Record) { r.Class = evidence.Estimator }), byHop(sc.HopKeys[1][0])))
	add(f.recordPair("two defects, evidence: a record by another pathway's hop, outside the window (evidence_not_on_pathway before evidence_outside_window)",
		at(reason.EvidenceNotOnPathway, "evidence/0/0"), at(reason.EvidenceOutsideWindow, "evidence/0/0"), 0, 0,
		byHop(sc.HopKeys[1][0]), rec(func(r *evidence.Record) { r.Start, r.End = 0, P })))
	// Record 1 of pathway 0 is hop 0's [7P, 8P) after its [6P, 7P), in the
	// window [6P, 8P). Outside the window and following: [8P, 9P); inside and
	// not following (one start twice): [6P, 8P); both: [0, P).
	add(Pair{Name: "two defects, evidence: a record outside the window that does not follow the one before it (evidence_outside_window before decision_invalid)",
		First: at(reason.EvidenceOutsideWindow, "evidence/0/1"), Second: at(reason.DecisionInvalid, "evidence/0/1"),
		build: func(a, b bool) Case {
			d := f.draft()
			span := map[[2]bool][2]uint64{{true, true}: {0, P}, {true, false}: {8 * P, 9 * P}, {false, true}: {6 * P, 8 * P}}
			if s, ok := span[[2]bool{a, b}]; ok {
				r := must(evidence.ParseRecord(f.record(0, 1)))
				r.Start, r.End = s[0], s[1]
				d.name(0, 1, evidence.SignRecord(r, sc.HopKeys[0][0]))
			}
			return d.done()
		}})
	// Two records: sub-steps 1 to 6 run for one record before the next
	// (SPEC-NOTES, §9.1), so an earlier record's late sub-step comes before a
	// later record's first.
	add(f.pair("two defects, evidence: a record ending after the window, a later record missing (evidence_outside_window at evidence/0/1 before record_missing at evidence/1/0)",
		at(reason.EvidenceOutsideWindow, "evidence/0/1"), at(reason.RecordMissing, "evidence/1/0"),
		func(d *draft) {
			r := must(evidence.ParseRecord(f.record(0, 1)))
			r.End++
			d.name(0, 1, evidence.SignRecord(r, sc.HopKeys[0][0]))
		}, missing(1, 0)))
	// Steps 4 and 5: every record of every pathway before any pathway's
	// evidence.
	add(f.pair("two defects, evidence and pathway: pathway 2's last record missing, pathway 0's joules changed (record_missing at evidence before evidence_mismatch at pathway)",
		at(reason.RecordMissing, "evidence/2/3"), at(reason.EvidenceMismatch, "pathway/0"), missing(2, 3), joulesUp(0)))
	// Steps 4 and 6.
	add(f.pair("two defects, evidence and output: a record's signature broken, the ttl changed (bad_signature at evidence before decision_mismatch)",
		at(reason.BadSignature, "evidence/0/0"), at(reason.DecisionMismatch, "output"),
		func(d *draft) {
			drop(&d.c, f.record(0, 0))
			d.c.Records = append(d.c.Records, flipLast(f.record(0, 0)))
		}, ttlChanged))

	// §9.1 step 5, in COMPANION §6's order: for a pathway stated with a
	// figure, an unmetered record, then two classes, then any other
	// difference; pathways in the policy's order.
	unmetered := func(r *evidence.Record) { r.Class, r.Joules = evidence.Unmetered, 0 }
	onChip := func(r *evidence.Record) { r.Class = evidence.OnChipCounter }
	add(evidencePair("two defects, pathway: an unmetered record and records of two classes, stated as a figure (unmetered_as_zero before classes_summed)",
		at(reason.UnmeteredAsZero, "pathway/1"), at(reason.ClassesSummed, "pathway/1"), f,
		bDefect{record: unmetered}, bDefect{record: onChip}))
	add(evidencePair("two defects, pathway: unmetered and stale, stated as a figure (unmetered_as_zero before evidence_mismatch)",
		at(reason.UnmeteredAsZero, "pathway/1"), at(reason.EvidenceMismatch, "pathway/1"), f,
		bDefect{record: unmetered},
		bDefect{names: func(rs []sig.Hash) []sig.Hash { return rs[1:] }})) // hop 0's period 6 left out
	add(evidencePair("two defects, pathway: two classes and stale, stated as a figure (classes_summed before evidence_mismatch)",
		at(reason.ClassesSummed, "pathway/1"), at(reason.EvidenceMismatch, "pathway/1"), f,
		bDefect{record: onChip},
		bDefect{names: func(rs []sig.Hash) []sig.Hash { return rs[:3] }})) // hop 1's period 7 left out
	add(evidencePair("two defects, pathway: two classes stated as a figure, its joules one more (classes_summed before evidence_mismatch)",
		at(reason.ClassesSummed, "pathway/1"), at(reason.EvidenceMismatch, "pathway/1"), f,
		bDefect{record: onChip},
		bDefect{stated: func(s *decision.PathwayState) { s.Joules, _ = s.Joules.Add64(1) }}))
	pws := scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.Unmetered
	spec := refusalSpec()
	spec.Pathways = pws
	um := newFixture(spec)
	add(um.pair("two defects, pathway: pathway 0's joules changed, pathway 1 unmetered and stated as a figure (evidence_mismatch at pathway/0 before unmetered_as_zero at pathway/1)",
		at(reason.EvidenceMismatch, "pathway/0"), at(reason.UnmeteredAsZero, "pathway/1"),
		joulesUp(0), func(d *draft) { stateFigure(d.c.Records, um.sc.Policy, d.decision(), 1) }))
	// Steps 5 and 6.
	add(f.pair("two defects, pathway and output: pathway 2's delivery changed, the ttl changed (evidence_mismatch before decision_mismatch)",
		at(reason.EvidenceMismatch, "pathway/2"), at(reason.DecisionMismatch, "output"),
		decisionEdit(func(x *decision.Decision) { x.Pathways[2].Delivery, _ = x.Pathways[2].Delivery.Add64(1) }), ttlChanged))
	// Steps 6 and 7.
	add(f.pair("two defects, output and manifest: the ttl changed, a byte of the manifest changed (decision_mismatch before manifest_mismatch)",
		at(reason.DecisionMismatch, "output"), at(reason.ManifestMismatch, "manifest"),
		ttlChanged, func(d *draft) {
			d.then(func(c *Case) {
				k := len(c.Manifest) - 3
				c.Manifest = setByte(c.Manifest, k, "01"[boolIndex(c.Manifest[k] == '0')])
			})
		}))
	return ps
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bDefect is a defect of pathway 1 (b) of fixture f for step 5: the record
// of b's interior hop for its period (record, signed again by the hop), b's
// list of records named (names), or what the decision states after its
// figure is written (stated); each when given.
type bDefect struct {
	record func(r *evidence.Record)
	names  func([]sig.Hash) []sig.Hash
	stated func(s *decision.PathwayState)
}

// evidencePair is a Pair at §9.1 step 5 on pathway 1 (b) of fixture f: the
// first defect changes the interior hop's record of period 6, the second its
// record of period 7, and the decision states b with a figure (stateFigure)
// whenever either is made.
func evidencePair(name string, first, second Refusal, f fixture, d1, d2 bDefect) Pair {
	return Pair{Name: name, First: first, Second: second, build: func(a, b bool) Case {
		d := f.draft()
		if !a && !b {
			return d.done()
		}
		// Records 2 and 3 named for b are its interior hop's periods 6
		// and 7; records are changed before the list is cut.
		var on []bDefect
		for i, x := range []struct {
			on bool
			bDefect
		}{{a, d1}, {b, d2}} {
			if x.on {
				on = append(on, x.bDefect)
				if x.record != nil {
					r := must(evidence.ParseRecord(f.record(1, 2+i)))
					x.record(r)
					d.name(1, 2+i, evidence.SignRecord(r, f.sc.HopKeys[1][1]))
				}
			}
		}
		s := &d.decision().Pathways[1]
		for _, x := range on {
			if x.names != nil {
				s.Records = x.names(slices.Clone(s.Records))
			}
		}
		stateFigure(d.c.Records, f.sc.Policy, d.decision(), 1)
		for _, x := range on {
			if x.stated != nil {
				x.stated(s)
			}
		}
		return d.done()
	}}
}
