package conformance

import (
	"slices"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// smallOrderKey is the identity point's encoding: it decodes, and is of
// small order (COMPANION §2 step 2).
var smallOrderKey = sig.PublicKey{0: 1}

// outsider is a key no room lists.
func outsider() sig.PrivateKey { return room.TestKey("outsider") }

// fixture is a base scenario and an accepted decision made from it, from
// which a refused case changes one thing.
type fixture struct {
	sc *scenario.Scenario
	m  *scenario.Made
}

func newFixture(spec scenario.Spec) fixture {
	sc := build(spec)
	return fixture{sc: sc, m: decide(sc, scenario.Request{Session: session(0x40)})}
}

func (f fixture) accept(name string) Case { return accepted(name, f.sc, f.m) }

// refuse is the fixture's accepted case with its want set.
func (f fixture) refuse(name string, want reason.Code, where string, edit func(c *Case)) Case {
	c := f.accept(name)
	c.Want, c.Where = want, where
	if edit != nil {
		edit(&c)
	}
	return c
}

// decision returns a copy of the fixture's decision, changed by edit and
// signed by k, and its manifest.
func (f fixture) decision(k sig.PrivateKey, edit func(d *decision.Decision)) *scenario.Made {
	d := must(decision.Parse(f.m.Bytes))
	edit(d)
	return f.sc.Sign(d, k)
}

// redecide sets c's decision (and manifest) to the fixture's, changed by edit
// and signed by the steering key.
func (f fixture) redecide(c *Case, edit func(d *decision.Decision)) {
	m := f.decision(f.sc.SteerKey, edit)
	c.Decision, c.Manifest = m.Bytes, m.Manifest
}

// name makes the fixture's decision name raw as record i of pathway p, and
// adds raw to the records given.
func (f fixture) name(c *Case, p, i int, raw []byte) {
	f.redecide(c, func(d *decision.Decision) {
		d.Pathways[p].Records = slices.Clone(d.Pathways[p].Records)
		d.Pathways[p].Records[i] = evidence.NamedDigest(raw)
	})
	c.Records = append(slices.Clone(c.Records), raw)
}

// record is the bytes of record i named under pathway p in the fixture's
// decision.
func (f fixture) record(p, i int) []byte {
	h := f.m.Decision.Pathways[p].Records[i]
	for _, raw := range f.sc.Records {
		if evidence.NamedDigest(raw) == h {
			return raw
		}
	}
	panic("conformance: named record not found")
}

// signPolicy signs a policy value as it is, rules or no rules.
func signPolicy(p *policy.Policy, k sig.PrivateKey) []byte {
	p.Signer = k.Public()
	body := policy.AppendBody(nil, p)
	s := k.Sign(sig.DomainPolicy, body)
	return append(body, s[:]...)
}

func flipLast(b []byte) []byte {
	c := slices.Clone(b)
	c[len(c)-1] ^= 1
	return c
}

func setByte(b []byte, i int, v byte) []byte {
	c := slices.Clone(b)
	c[i] = v
	return c
}

// Refused returns a refused vector for every reason of §10 and every code it
// reuses, each a control of one defect of an accepted vector.
func Refused() []Case {
	f := newFixture(scenario.Spec{Name: "refusals"})
	sc := f.sc
	var cs []Case
	add := func(c Case) { cs = append(cs, c) }

	// §9.1 step 1: the room (COMPANION §4.1).
	add(f.refuse("room: descriptor does not read", reason.RoomInvalid, "room", func(c *Case) { c.Descriptor = []byte{0x82, 0x40} }))
	add(f.refuse("room: descriptor signature", reason.BadSignature, "room", func(c *Case) { c.Descriptor = flipLast(c.Descriptor) }))
	add(f.refuse("room: authority of small order", reason.BadKey, "room", func(c *Case) {
		d := *sc.Room.Descriptor()
		d.Authority = smallOrderKey
		c.Descriptor = must(d.Bytes())
	}))
	add(f.refuse("room: no key log head", reason.KeyLogMissing, "room", func(c *Case) { c.KeyLogHead = nil }))
	add(f.refuse("room: key log head does not read", reason.KeyLogInvalid, "room", func(c *Case) { c.KeyLogHead = []byte{0x82} }))
	add(f.refuse("room: key log head of another origin", reason.KeyLogInvalid, "room", func(c *Case) {
		c.KeyLogHead = must(room.NewKeyLogHead(outsider(), 1, sc.Room.Head().Entries))
	}))
	add(f.refuse("room: key log head signature", reason.BadSignature, "room", func(c *Case) { c.KeyLogHead = flipLast(c.KeyLogHead) }))
	add(f.refuse("room: authority not listed", reason.AuthorityNotListed, "room", func(c *Case) {
		es := slices.DeleteFunc(slices.Clone(sc.Room.Head().Entries), func(e room.Entry) bool { return e.Key == sc.Room.Authority() })
		c.KeyLogHead = must(room.NewKeyLogHead(sc.Room.OriginKey, 2, es))
	}))
	add(f.refuse("room: authority revoked", reason.AuthorityRevoked, "room", func(c *Case) {
		es := slices.Clone(sc.Room.Head().Entries)
		for i := range es {
			if es[i].Key == sc.Room.Authority() {
				es[i].Revoked = true
			}
		}
		c.KeyLogHead = must(room.NewKeyLogHead(sc.Room.OriginKey, 2, es))
	}))

	// §9.1 step 2: the policy (§3).
	pol := func() *policy.Policy { return must(policy.Parse(sc.PolicyBytes)) }
	add(f.refuse("policy: truncated", reason.Truncated, "policy", func(c *Case) { c.Policy = c.Policy[:len(c.Policy)-1] }))
	add(f.refuse("policy: trailing byte", reason.Malformed, "policy", func(c *Case) { c.Policy = append(slices.Clone(c.Policy), 0) }))
	add(f.refuse("policy: version 2", reason.UnknownVersion, "policy", func(c *Case) { c.Policy = setByte(c.Policy, 4, 2) }))
	add(f.refuse("policy: clone of a later pathway", reason.CloneUnknown, "policy", func(c *Case) {
		p := pol()
		p.Pathways[1].Base = 2
		p.Pathways[1].Host = "edge.example"
		c.Policy = signPolicy(p, sc.SteerKey)
	}))
	add(f.refuse("policy: hysteresis above 10^6", reason.PolicyInvalid, "policy", func(c *Case) {
		p := pol()
		p.HysteresisPPM = 1_000_001
		c.Policy = signPolicy(p, sc.SteerKey)
	}))
	add(f.refuse("policy: another room", reason.WrongRoom, "policy", func(c *Case) {
		p := pol()
		p.Room[0] ^= 1
		c.Policy = signPolicy(p, sc.SteerKey)
	}))
	add(f.refuse("policy: signer of small order", reason.BadKey, "policy", func(c *Case) {
		p := pol()
		p.Signer = smallOrderKey
		c.Policy = policy.Append(nil, p)
	}))
	add(f.refuse("policy: signature", reason.BadSignature, "policy", func(c *Case) { c.Policy = flipLast(c.Policy) }))
	add(f.refuse("policy: signer not in the key log", reason.SignerNotAuthorised, "policy", func(c *Case) {
		c.Policy = signPolicy(pol(), outsider())
	}))

	// §9.1 step 3: the decision (§7).
	add(f.refuse("decision: truncated", reason.Truncated, "decision", func(c *Case) { c.Decision = c.Decision[:20] }))
	add(f.refuse("decision: trailing byte", reason.Malformed, "decision", func(c *Case) { c.Decision = append(slices.Clone(c.Decision), 0) }))
	add(f.refuse("decision: version 0", reason.UnknownVersion, "decision", func(c *Case) { c.Decision = setByte(c.Decision, 4, 0) }))
	add(f.refuse("decision: draw of 10^6", reason.DecisionInvalid, "decision", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Draw = 1_000_000 })
	}))
	add(f.refuse("decision: another room", reason.WrongRoom, "decision", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Room[31] ^= 1 })
	}))
	add(f.refuse("decision: another policy", reason.RecordMissing, "decision", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Policy[0] ^= 1 })
	}))
	add(f.refuse("decision: fewer pathways than the policy", reason.DecisionInvalid, "decision", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) {
			d.Pathways = d.Pathways[:2]
			d.Priority = slices.DeleteFunc(slices.Clone(d.Priority), func(i uint8) bool { return i == 2 })
		})
	}))
	add(f.refuse("decision: signer of small order", reason.BadKey, "decision", func(c *Case) {
		d := must(decision.Parse(c.Decision))
		d.Signer = smallOrderKey
		c.Decision = decision.Append(nil, d)
	}))
	add(f.refuse("decision: signature", reason.BadSignature, "decision", func(c *Case) { c.Decision = flipLast(c.Decision) }))
	add(f.refuse("decision: signer not in the key log", reason.SignerNotAuthorised, "decision", func(c *Case) {
		m := f.decision(outsider(), func(*decision.Decision) {})
		c.Decision, c.Manifest = m.Bytes, m.Manifest
	}))

	// Revoked signers and hops, and a steering key lacking a class.
	steer := scenario.SteerKey().Public()
	lacking := room.TestKey("steering key without energy")
	rv := newFixture(scenario.Spec{Name: "revocations", Entries: func(es []room.Entry) []room.Entry {
		for i := range es {
			if es[i].Key == steer || es[i].Key == scenario.HopKey("c", 0).Public() {
				es[i].Revoked = true
			}
		}
		return append(es, room.SteerEntry(lacking.Public()))
	}})
	add(rv.refuse("policy: signer revoked", reason.SignerRevoked, "policy", nil))
	add(rv.refuse("decision: signer revoked", reason.SignerRevoked, "decision", func(c *Case) {
		p := must(policy.Parse(rv.sc.PolicyBytes))
		c.Policy = signPolicy(p, rv.sc.Room.AuthorityKey)
		m := rv.decision(rv.sc.SteerKey, func(d *decision.Decision) { d.Policy = sig.Digest(c.Policy[:len(c.Policy)-64]) })
		c.Decision, c.Manifest = m.Bytes, m.Manifest
	}))
	add(rv.refuse("decision: signer lacks energy/ModelBased", reason.SignerNotAuthorised, "decision", func(c *Case) {
		p := must(policy.Parse(rv.sc.PolicyBytes))
		c.Policy = signPolicy(p, rv.sc.Room.AuthorityKey)
		m := rv.decision(lacking, func(d *decision.Decision) { d.Policy = sig.Digest(c.Policy[:len(c.Policy)-64]) })
		c.Decision, c.Manifest = m.Bytes, m.Manifest
	}))
	add(rv.refuse("evidence: hop revoked", reason.HopRevoked, "evidence/2/0", func(c *Case) {
		p := must(policy.Parse(rv.sc.PolicyBytes))
		c.Policy = signPolicy(p, rv.sc.Room.AuthorityKey)
		m := rv.decision(rv.sc.Room.AuthorityKey, func(d *decision.Decision) { d.Policy = sig.Digest(c.Policy[:len(c.Policy)-64]) })
		c.Decision, c.Manifest = m.Bytes, m.Manifest
	}))

	// §9.1 step 4: each record named (live-metering §3.6, §5.2).
	rec := f.record(0, 0)
	add(f.refuse("evidence: record missing", reason.RecordMissing, "evidence/1/2", func(c *Case) {
		drop := f.record(1, 2)
		c.Records = slices.DeleteFunc(slices.Clone(c.Records), func(r []byte) bool { return string(r) == string(drop) })
	}))
	add(f.refuse("evidence: record truncated", reason.Truncated, "evidence/0/0", func(c *Case) { f.name(c, 0, 0, rec[:len(rec)-1]) }))
	add(f.refuse("evidence: record with a trailing byte", reason.Malformed, "evidence/0/0", func(c *Case) { f.name(c, 0, 0, append(slices.Clone(rec), 0)) }))
	add(f.refuse("evidence: record version 2", reason.UnknownVersion, "evidence/0/0", func(c *Case) { f.name(c, 0, 0, setByte(rec, 4, 2)) }))
	hopRecord := func(edit func(r *evidence.Record), k sig.PrivateKey) []byte {
		r := must(evidence.ParseRecord(rec))
		edit(r)
		if k.IsZero() {
			return evidence.AppendRecord(nil, r)
		}
		return evidence.SignRecord(r, k)
	}
	hop00 := sc.HopKeys[0][0]
	add(f.refuse("evidence: record of class 1", reason.EnergyInvalid, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, hopRecord(func(r *evidence.Record) { r.Class = 1 }, hop00))
	}))
	add(f.refuse("evidence: record ending where it starts", reason.RecordInvalid, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, hopRecord(func(r *evidence.Record) { r.End = r.Start }, hop00))
	}))
	add(f.refuse("evidence: record of another room", reason.WrongRoom, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, hopRecord(func(r *evidence.Record) { r.Room[0] ^= 1 }, hop00))
	}))
	add(f.refuse("evidence: record by a hop of small order", reason.BadKey, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, hopRecord(func(r *evidence.Record) { r.Hop = smallOrderKey }, sig.PrivateKey{}))
	}))
	add(f.refuse("evidence: record signature", reason.BadSignature, "evidence/0/0", func(c *Case) {
		c.Records = slices.DeleteFunc(slices.Clone(c.Records), func(r []byte) bool { return string(r) == string(rec) })
		c.Records = append(c.Records, flipLast(rec))
	}))
	add(f.refuse("evidence: hop not authorised for its class", reason.HopNotAuthorised, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, hopRecord(func(r *evidence.Record) { r.Class = evidence.CalibratedInstrument }, hop00))
	}))
	add(f.refuse("evidence: record of another pathway's hop", reason.EvidenceNotOnPathway, "evidence/0/0", func(c *Case) {
		r := sc.Record(1, 0, 3*scenario.Period, 3*scenario.Period+scenario.Period/2)
		f.name(c, 0, 0, evidence.SignRecord(r, sc.HopKeys[1][0]))
	}))
	add(f.refuse("evidence: record outside the window", reason.EvidenceOutsideWindow, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, hopRecord(func(r *evidence.Record) { r.Start, r.End = 0, scenario.Period }, hop00))
	}))
	add(f.refuse("evidence: records out of order", reason.DecisionInvalid, "evidence/0/1", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) {
			rs := slices.Clone(d.Pathways[0].Records)
			rs[0], rs[1] = rs[1], rs[0]
			d.Pathways[0].Records = rs
		})
	}))

	// §9.1 step 5: the evidence (§5.3, §5.4).
	add(f.refuse("pathway: joules changed", reason.EvidenceMismatch, "pathway/0", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Pathways[0].Joules, _ = d.Pathways[0].Joules.Add64(1) })
	}))
	add(f.refuse("pathway: stated stale as a figure's", reason.EvidenceMismatch, "pathway/1", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) {
			d.Pathways[1].Records = d.Pathways[1].Records[1:]
		})
	}))
	pws := scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.Unmetered
	um := newFixture(scenario.Spec{Name: "unmetered as zero", Pathways: pws})
	add(um.refuse("pathway: unmetered hop summed as zero", reason.UnmeteredAsZero, "pathway/1", func(c *Case) {
		um.redecide(c, func(d *decision.Decision) { stateFigure(um.sc, d, 1) })
	}))
	add(um.refuse("output: unknown pathway preferred", reason.UnknownPreferred, "output", func(c *Case) {
		um.redecide(c, func(d *decision.Decision) {
			d.Priority = []uint8{1, 0, 2}
		})
	}))
	pws = scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.OnChipCounter
	mx := newFixture(scenario.Spec{Name: "classes summed", Pathways: pws})
	add(mx.refuse("pathway: two classes summed", reason.ClassesSummed, "pathway/1", func(c *Case) {
		mx.redecide(c, func(d *decision.Decision) { stateFigure(mx.sc, d, 1) })
	}))

	// §9.1 step 6: the output (§6).
	add(f.refuse("output: ttl changed", reason.DecisionMismatch, "output", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.TTL-- })
	}))
	add(f.refuse("output: limits changed", reason.DecisionMismatch, "output", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Pathways[2].Limits &^= decision.LimitCapacity })
	}))

	// §9.1 step 7: the manifest (§8.1).
	add(f.refuse("manifest: a byte changed", reason.ManifestMismatch, "manifest", func(c *Case) {
		c.Manifest = setByte(c.Manifest, len(c.Manifest)-3, '0')
		if string(c.Manifest) == string(f.m.Manifest) {
			c.Manifest = setByte(c.Manifest, len(c.Manifest)-3, '1')
		}
	}))
	return cs
}

// stateFigure states pathway i with the figure its records would give if
// every record were metered and of the first record's class: J the sum of
// all joules, D the edge hops' delivery.
func stateFigure(sc *scenario.Scenario, d *decision.Decision, i int) {
	s := &d.Pathways[i]
	var class evidence.Class
	for _, h := range s.Records {
		for _, raw := range sc.Records {
			if evidence.NamedDigest(raw) != h {
				continue
			}
			r := must(evidence.ParseRecord(raw))
			if class == 0 {
				class = r.Class
			}
			s.Joules, _ = s.Joules.Add64(r.Joules)
			if sc.Policy.Pathways[i].Hops[slices.IndexFunc(sc.Policy.Pathways[i].Hops, func(h policy.Hop) bool { return h.Key == r.Hop })].Place == policy.Edge {
				s.Delivery, _ = s.Delivery.Add64(r.Tracks[0].Bytes)
			}
		}
	}
	s.Status, s.Class = evidence.StatusFigure, class
}
