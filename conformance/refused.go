package conformance

import (
	"bytes"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// smallOrderKey is the identity point's encoding: it decodes, and is of
// small order (COMPANION §2 step 2).
var smallOrderKey = sig.PublicKey{0: 1}

// outsider is a key no room lists.
func outsider() sig.PrivateKey { return room.TestKey("outsider") }

// refusalSpec is the scenario the refused vectors change one thing of: three
// pathways of one class over a window of two periods, [6P, 8P), so that each
// pathway names four records.
func refusalSpec() scenario.Spec {
	return scenario.Spec{Policy: func(p *policy.Policy) { p.WindowUs = 2 * scenario.Period }}
}

// heldSpec is refusalSpec with no figure on a (its interior hop unmetered)
// or b (its interior hop OnChipCounter beside ModelBased): c alone has one.
func heldSpec() scenario.Spec {
	pws := scenario.DefaultPathways()
	pws[0].Hops[1].Class = evidence.Unmetered
	pws[1].Hops[1].Class = evidence.OnChipCounter
	spec := refusalSpec()
	spec.Pathways = pws
	return spec
}

// newHeld is heldSpec's fixture: a client on b with a short buffer, held on
// b (§6.4 step 1), a pathway with no figure.
func newHeld() fixture {
	sc := build(heldSpec())
	return fixture{sc: sc, m: decide(sc, scenario.Request{Session: session(0x41), Report: reportOf(1, 9_000_000, 1_000)})}
}

// repeatHopKey gives the policy's lowest (or highest) hop key, bytewise, to
// one more hop: the other hop of its own pathway, or (other) the interior
// hop of the next pathway. Places stay, so every pathway keeps its edge hop;
// the key stays the lowest (highest), a key other than it being replaced.
func repeatHopKey(p *policy.Policy, lowest, other bool) {
	bi, bk := 0, 0
	for i := range p.Pathways {
		for k := range p.Pathways[i].Hops {
			c := bytes.Compare(p.Pathways[i].Hops[k].Key[:], p.Pathways[bi].Hops[bk].Key[:])
			if lowest && c < 0 || !lowest && c > 0 {
				bi, bk = i, k
			}
		}
	}
	ti, tk := bi, 1-bk // each pathway of refusalSpec has two hops
	if other {
		ti, tk = (bi+1)%len(p.Pathways), 1
	}
	p.Pathways[ti].Hops[tk].Key = p.Pathways[bi].Hops[bk].Key
}

// fixture is a base scenario and an accepted decision made from it, from
// which a refused case changes one thing.
type fixture struct {
	sc   *scenario.Scenario
	m    *scenario.Made
	head []byte // the key log head the cases give; the scenario's when nil
}

func newFixture(spec scenario.Spec) fixture {
	sc := build(spec)
	return fixture{sc: sc, m: decide(sc, scenario.Request{Session: session(0x40)})}
}

func (f fixture) accept(name string) Case {
	c := accepted(name, f.sc, f.m)
	if f.head != nil {
		c.KeyLogHead = f.head
	}
	return c
}

// refuse is the fixture's accepted case with its want set.
func (f fixture) refuse(name string, want reason.Code, where string, edit func(c *Case)) Case {
	c := f.accept(name)
	c.Want, c.Where = want, where
	if edit != nil {
		edit(&c)
	}
	return trim(c)
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

// hopRecord is record i named under pathway p, changed by edit and signed by
// the hop that signed it (unsigned when sign is false, its sig zero).
func (f fixture) hopRecord(p, i int, sign bool, edit func(r *evidence.Record)) []byte {
	r := must(evidence.ParseRecord(f.record(p, i)))
	k := f.hopKey(r.Hop)
	edit(r)
	if !sign {
		r.Sig = sig.Signature{}
		return evidence.AppendRecord(nil, r)
	}
	return evidence.SignRecord(r, k)
}

func (f fixture) hopKey(hop sig.PublicKey) sig.PrivateKey {
	for _, ks := range f.sc.HopKeys {
		for _, k := range ks {
			if k.Public() == hop {
				return k
			}
		}
	}
	panic("conformance: no such hop")
}

// drop removes raw from c's records.
func drop(c *Case, raw []byte) {
	c.Records = slices.DeleteFunc(slices.Clone(c.Records), func(r []byte) bool { return bytes.Equal(r, raw) })
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
// reuses, at each place §9.1 raises it, each a control of one defect of an
// accepted vector (mostly "base of the refused vectors" of Extra).
func Refused() []Case {
	f := newFixture(refusalSpec())
	sc := f.sc
	var cs []Case
	add := func(c Case) { cs = append(cs, trim(c)) }

	// §9.1 step 1: the room (COMPANION §4.1).
	add(f.refuse("room: descriptor does not read", reason.RoomInvalid, "room", func(c *Case) { c.Descriptor = []byte{0x82, 0x40} }))
	add(f.refuse("room: descriptor truncated", reason.RoomInvalid, "room", func(c *Case) { c.Descriptor = c.Descriptor[:len(c.Descriptor)-1] }))
	add(f.refuse("room: descriptor signature", reason.BadSignature, "room", func(c *Case) { c.Descriptor = flipLast(c.Descriptor) }))
	add(f.refuse("room: authority of small order", reason.BadKey, "room", func(c *Case) {
		d := *sc.Room.Descriptor()
		d.Authority = smallOrderKey
		c.Descriptor = must(d.Bytes())
	}))
	add(f.refuse("room: no key log head", reason.KeyLogMissing, "room", func(c *Case) { c.KeyLogHead = nil }))
	add(f.refuse("room: key log head does not read", reason.KeyLogInvalid, "room", func(c *Case) { c.KeyLogHead = []byte{0x82} }))
	add(f.refuse("room: key log head of no bytes", reason.KeyLogInvalid, "room", func(c *Case) { c.KeyLogHead = []byte{} }))
	add(f.refuse("room: key log head of another origin", reason.KeyLogInvalid, "room", func(c *Case) {
		c.KeyLogHead = must(room.NewKeyLogHead(outsider(), 1, sc.Room.Head().Entries))
	}))
	add(f.refuse("room: key log head signature", reason.BadSignature, "room", func(c *Case) { c.KeyLogHead = flipLast(c.KeyLogHead) }))
	add(f.refuse("room: origin of small order", reason.BadKey, "room", func(c *Case) {
		small := smallOrderKey
		c.Descriptor = must(room.NewDescriptor(sc.Room.AuthorityKey, &small, roomName))
		h := room.KeyLogHead{Origin: smallOrderKey, Seq: 1, Entries: sc.Room.Head().Entries}
		c.KeyLogHead = must(h.Bytes())
	}))
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
	resign := func(name string, edit func(p *policy.Policy)) Case {
		return f.refuse(name, reason.PolicyInvalid, "policy", func(c *Case) {
			p := pol()
			edit(p)
			c.Policy = signPolicy(p, sc.SteerKey)
		})
	}
	add(f.refuse("policy: three bytes", reason.Truncated, "policy", func(c *Case) { c.Policy = c.Policy[:3] }))
	add(f.refuse("policy: no version byte", reason.Truncated, "policy", func(c *Case) { c.Policy = c.Policy[:4] }))
	add(f.refuse("policy: truncated", reason.Truncated, "policy", func(c *Case) { c.Policy = c.Policy[:len(c.Policy)-1] }))
	add(f.refuse("policy: magic WSP2", reason.Malformed, "policy", func(c *Case) { c.Policy = setByte(c.Policy, 3, '2') }))
	add(f.refuse("policy: trailing byte", reason.Malformed, "policy", func(c *Case) { c.Policy = append(slices.Clone(c.Policy), 0) }))
	add(f.refuse("policy: version 2", reason.UnknownVersion, "policy", func(c *Case) { c.Policy = setByte(c.Policy, 4, 2) }))
	add(f.refuse("policy: clone of a later pathway", reason.CloneUnknown, "policy", func(c *Case) {
		p := pol()
		p.Pathways[1].Base = 2
		p.Pathways[1].Host = "edge.example"
		c.Policy = signPolicy(p, sc.SteerKey)
	}))
	add(resign("policy: hysteresis above 10^6", func(p *policy.Policy) { p.HysteresisPPM = 1_000_001 }))
	add(resign("policy: window not a multiple of the period", func(p *policy.Policy) { p.WindowUs = 2*p.PeriodUs + 1 }))
	add(resign("policy: min_ttl_s above ttl_s", func(p *policy.Policy) { p.MinTTLs = p.TTLs + 1 }))
	add(resign("policy: bitrates not strictly ascending", func(p *policy.Policy) { p.Tiers = []uint64{500_000, 1_500_000, 1_500_000} }))
	add(resign("policy: a URI with a fragment", func(p *policy.Policy) { p.DecisionURI = "https://steer.example/v1/decisions/#" }))
	add(resign("policy: two pathways with one id", func(p *policy.Policy) { p.Pathways[2].ID = "a" }))
	add(resign("policy: initial is not a pathway", func(p *policy.Policy) { p.Initial = 3 }))
	add(resign("policy: a pathway with no edge hop", func(p *policy.Policy) { p.Pathways[1].Hops[0].Place = policy.Interior }))
	add(resign("policy: a hop in two pathways", func(p *policy.Policy) { p.Pathways[2].Hops[1].Key = p.Pathways[0].Hops[1].Key }))
	// A hop key repeated where a reader that compares sorted neighbours but
	// skips the first pair (or index 0), or stops before the last, would not
	// look: the lowest key of the policy, bytewise, given to the other hop of
	// its own pathway, and the highest to a hop of another pathway.
	add(resign("policy: the lowest hop key twice, in one pathway", func(p *policy.Policy) { repeatHopKey(p, true, false) }))
	add(resign("policy: the highest hop key twice, in two pathways", func(p *policy.Policy) { repeatHopKey(p, false, true) }))
	add(resign("policy: minimum shares above 10^6", func(p *policy.Policy) {
		p.Pathways[0].MinSharePPM, p.Pathways[2].MinSharePPM = 600_000, 400_001
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
	add(f.refuse("policy: signed by a hop, whose entry lacks live/steer", reason.SignerNotAuthorised, "policy", func(c *Case) {
		c.Policy = signPolicy(pol(), sc.HopKeys[0][0])
	}))

	// §9.1 step 3: the decision (§7).
	add(f.refuse("decision: three bytes", reason.Truncated, "decision", func(c *Case) { c.Decision = c.Decision[:3] }))
	add(f.refuse("decision: truncated", reason.Truncated, "decision", func(c *Case) { c.Decision = c.Decision[:20] }))
	add(f.refuse("decision: magic WSP1", reason.Malformed, "decision", func(c *Case) { c.Decision = setByte(c.Decision, 2, 'P') }))
	add(f.refuse("decision: trailing byte", reason.Malformed, "decision", func(c *Case) { c.Decision = append(slices.Clone(c.Decision), 0) }))
	add(f.refuse("decision: version 0", reason.UnknownVersion, "decision", func(c *Case) { c.Decision = setByte(c.Decision, 4, 0) }))
	invalid := func(name string, edit func(d *decision.Decision)) Case {
		return f.refuse(name, reason.DecisionInvalid, "decision", func(c *Case) { f.redecide(c, edit) })
	}
	add(invalid("decision: draw of 10^6", func(d *decision.Decision) { d.Draw = 1_000_000 }))
	add(invalid("decision: protocol 3", func(d *decision.Decision) { d.Protocol = 3 }))
	add(invalid("decision: ttl 0", func(d *decision.Decision) { d.TTL = 0 }))
	add(invalid("decision: reason 7", func(d *decision.Decision) { d.Reason = 7 }))
	add(invalid("decision: present bit 3", func(d *decision.Decision) { d.Report.Present = 1 << 3 }))
	add(invalid("decision: an absent throughput not 0", func(d *decision.Decision) { d.Report.Throughput = 5_000_000 }))
	add(invalid("decision: present pathway not a pathway of it", func(d *decision.Decision) {
		d.Report.Present, d.Report.Pathway = report.HasPathway, 3
	}))
	add(invalid("decision: limits bit 3", func(d *decision.Decision) { d.Pathways[0].Limits |= 1 << 3 }))
	add(invalid("decision: a figure of class 0", func(d *decision.Decision) { d.Pathways[0].Class = 0 }))
	add(invalid("decision: stale with joules", func(d *decision.Decision) { d.Pathways[2].Status = evidence.StatusStale }))
	add(invalid("decision: a digest named twice", func(d *decision.Decision) {
		rs := slices.Clone(d.Pathways[1].Records)
		rs[1] = rs[0]
		d.Pathways[1].Records = rs
	}))
	add(invalid("decision: priority names a pathway twice", func(d *decision.Decision) { d.Priority = []uint8{1, 1, 2} }))
	add(invalid("decision: priority leaves a pathway out", func(d *decision.Decision) { d.Priority = d.Priority[:2] }))
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
	add(f.refuse("decision: signed by a hop, whose entry lacks live/steer", reason.SignerNotAuthorised, "decision", func(c *Case) {
		m := f.decision(sc.HopKeys[2][1], func(*decision.Decision) {})
		c.Decision, c.Manifest = m.Bytes, m.Manifest
	}))

	// Revoked signers and hops, and a steering key lacking a class: the
	// same room, its key log moved on to seq 2.
	steer := scenario.SteerKey().Public()
	lacking := room.TestKey("steering key without energy")
	spec := refusalSpec()
	spec.Entries = func(es []room.Entry) []room.Entry {
		for i := range es {
			if es[i].Key == steer || es[i].Key == scenario.HopKey("c", 0).Public() {
				es[i].Revoked = true
			}
		}
		return append(es, room.SteerEntry(lacking.Public()))
	}
	rv := newFixture(spec)
	rv.head = must(room.NewKeyLogHead(rv.sc.Room.OriginKey, 2, rv.sc.Room.Head().Entries))
	// byAuthority sets c's policy to the fixture's signed by the authority,
	// and its decision to the fixture's over that policy, signed by k.
	byAuthority := func(c *Case, k sig.PrivateKey) {
		p := must(policy.Parse(rv.sc.PolicyBytes))
		c.Policy = signPolicy(p, rv.sc.Room.AuthorityKey)
		m := rv.decision(k, func(d *decision.Decision) { d.Policy = sig.Digest(c.Policy[:len(c.Policy)-64]) })
		c.Decision, c.Manifest = m.Bytes, m.Manifest
	}
	add(rv.refuse("policy: signer revoked", reason.SignerRevoked, "policy", nil))
	add(rv.refuse("decision: signer revoked", reason.SignerRevoked, "decision", func(c *Case) { byAuthority(c, rv.sc.SteerKey) }))
	add(rv.refuse("decision: signer lacks energy/ModelBased", reason.SignerNotAuthorised, "decision", func(c *Case) { byAuthority(c, lacking) }))
	add(rv.refuse("evidence: hop revoked", reason.HopRevoked, "evidence/2/0", func(c *Case) { byAuthority(c, rv.sc.Room.AuthorityKey) }))

	// A room with no origin: only its authority signs, and no hop.
	no := newNoOrigin()
	noRefuse := func(name string, want reason.Code, where string, edit func(c *Case)) Case {
		c := no.accept(name)
		c.Want, c.Where = want, where
		edit(&c)
		return c
	}
	add(noRefuse("room with no origin: the steering key signs the policy", reason.SignerNotAuthorised, "policy", func(c *Case) {
		c.Policy = no.sc.PolicyBytes
	}))
	add(noRefuse("room with no origin: the authority states a figure", reason.SignerNotAuthorised, "decision", func(c *Case) {
		m := decideWith(no.sc, no.p, no.sc.Index, no.sc.Room.AuthorityKey, scenario.Request{Session: session(0x50)})
		c.Decision, c.Manifest, c.Records = m.Bytes, m.Manifest, no.sc.Records
	}))
	add(noRefuse("room with no origin: a record named", reason.HopNotAuthorised, "evidence/0/0", func(c *Case) {
		m := decideWith(no.sc, no.p, no.sc.Index, no.sc.Room.AuthorityKey, scenario.Request{Session: session(0x50)})
		d := m.Decision
		for i := range d.Pathways {
			s := &d.Pathways[i]
			s.Status, s.Class, s.Joules, s.Delivery = evidence.StatusStale, 0, num.U128{}, num.U128{}
		}
		raw, digest := decision.AppendSigned(nil, d, no.sc.Room.AuthorityKey)
		c.Decision, c.Manifest = raw, decision.Manifest(no.p, d, digest)
		c.Records = no.sc.Records
	}))

	// §9.1 step 4: each record named (live-metering §3.6, §5.2).
	rec := f.record(0, 0)
	add(f.refuse("evidence: record missing", reason.RecordMissing, "evidence/1/2", func(c *Case) { drop(c, f.record(1, 2)) }))
	add(f.refuse("evidence: last record of a pathway missing", reason.RecordMissing, "evidence/2/3", func(c *Case) { drop(c, f.record(2, 3)) }))
	add(f.refuse("evidence: a record of three bytes", reason.Truncated, "evidence/0/0", func(c *Case) { f.name(c, 0, 0, rec[:3]) }))
	add(f.refuse("evidence: record truncated", reason.Truncated, "evidence/0/0", func(c *Case) { f.name(c, 0, 0, rec[:len(rec)-1]) }))
	add(f.refuse("evidence: record with a trailing byte", reason.Malformed, "evidence/0/0", func(c *Case) { f.name(c, 0, 0, append(slices.Clone(rec), 0)) }))
	add(f.refuse("evidence: record with magic WMH2", reason.Malformed, "evidence/1/1", func(c *Case) { f.name(c, 1, 1, setByte(f.record(1, 1), 3, '2')) }))
	add(f.refuse("evidence: record version 2", reason.UnknownVersion, "evidence/0/0", func(c *Case) { f.name(c, 0, 0, setByte(rec, 4, 2)) }))
	add(f.refuse("evidence: record of class 1", reason.EnergyInvalid, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, f.hopRecord(0, 0, true, func(r *evidence.Record) { r.Class = 1 }))
	}))
	add(f.refuse("evidence: unmetered record with joules", reason.EnergyInvalid, "evidence/2/1", func(c *Case) {
		f.name(c, 2, 1, f.hopRecord(2, 1, true, func(r *evidence.Record) { r.Class = evidence.Unmetered }))
	}))
	add(f.refuse("evidence: metered record of no joules", reason.EnergyInvalid, "evidence/1/3", func(c *Case) {
		f.name(c, 1, 3, f.hopRecord(1, 3, true, func(r *evidence.Record) { r.Joules = 0 }))
	}))
	add(f.refuse("evidence: record ending where it starts", reason.RecordInvalid, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, f.hopRecord(0, 0, true, func(r *evidence.Record) { r.End = r.Start }))
	}))
	add(f.refuse("evidence: record of 33 tracks", reason.RecordInvalid, "evidence/2/0", func(c *Case) {
		f.name(c, 2, 0, f.hopRecord(2, 0, true, func(r *evidence.Record) {
			for len(r.Tracks) < 33 {
				r.Tracks = append(r.Tracks, evidence.Track{Kind: evidence.KindOther, Direction: evidence.DirIn, Bytes: 1})
			}
		}))
	}))
	add(f.refuse("evidence: track of kind 3", reason.RecordInvalid, "evidence/0/2", func(c *Case) {
		f.name(c, 0, 2, f.hopRecord(0, 2, true, func(r *evidence.Record) { r.Tracks[0].Kind = 3 }))
	}))
	add(f.refuse("evidence: record of another room", reason.WrongRoom, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, f.hopRecord(0, 0, true, func(r *evidence.Record) { r.Room[0] ^= 1 }))
	}))
	add(f.refuse("evidence: record by a hop of small order", reason.BadKey, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, f.hopRecord(0, 0, false, func(r *evidence.Record) { r.Hop = smallOrderKey }))
	}))
	add(f.refuse("evidence: record signature", reason.BadSignature, "evidence/0/0", func(c *Case) {
		drop(c, rec)
		c.Records = append(c.Records, flipLast(rec))
	}))
	add(f.refuse("evidence: a record given twice, the first with a broken signature", reason.BadSignature, "evidence/1/0", func(c *Case) {
		c.Records = append([][]byte{flipLast(f.record(1, 0))}, c.Records...)
	}))
	add(f.refuse("evidence: hop not authorised for its class", reason.HopNotAuthorised, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, f.hopRecord(0, 0, true, func(r *evidence.Record) { r.Class = evidence.Estimator }))
	}))
	add(f.refuse("evidence: record by a key the key log does not list", reason.HopNotAuthorised, "evidence/1/0", func(c *Case) {
		r := must(evidence.ParseRecord(f.record(1, 0)))
		f.name(c, 1, 0, evidence.SignRecord(r, outsider()))
	}))
	add(f.refuse("evidence: record of another pathway's hop", reason.EvidenceNotOnPathway, "evidence/0/0", func(c *Case) {
		r := sc.Record(1, 0, 6*scenario.Period, 6*scenario.Period+scenario.Period/2)
		f.name(c, 0, 0, evidence.SignRecord(r, sc.HopKeys[1][0]))
	}))
	add(f.refuse("evidence: record outside the window", reason.EvidenceOutsideWindow, "evidence/0/0", func(c *Case) {
		f.name(c, 0, 0, f.hopRecord(0, 0, true, func(r *evidence.Record) { r.Start, r.End = 0, scenario.Period }))
	}))
	add(f.refuse("evidence: record ending after the window", reason.EvidenceOutsideWindow, "evidence/0/1", func(c *Case) {
		f.name(c, 0, 1, f.hopRecord(0, 1, true, func(r *evidence.Record) { r.End++ }))
	}))
	add(f.refuse("evidence: records out of order", reason.DecisionInvalid, "evidence/0/1", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) {
			rs := slices.Clone(d.Pathways[0].Records)
			rs[0], rs[1] = rs[1], rs[0]
			d.Pathways[0].Records = rs
		})
	}))
	add(f.refuse("evidence: two records of one hop with one start", reason.DecisionInvalid, "evidence/2/1", func(c *Case) {
		f.name(c, 2, 1, f.hopRecord(2, 0, true, func(r *evidence.Record) { r.End += scenario.Period; r.Joules *= 2 }))
	}))

	// §9.1 step 5: the evidence (§5.3, §5.4).
	add(f.refuse("pathway: joules changed", reason.EvidenceMismatch, "pathway/0", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Pathways[0].Joules, _ = d.Pathways[0].Joules.Add64(1) })
	}))
	add(f.refuse("pathway: delivery changed", reason.EvidenceMismatch, "pathway/2", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Pathways[2].Delivery, _ = d.Pathways[2].Delivery.Add64(1) })
	}))
	add(f.refuse("pathway: figure stated in another class", reason.EvidenceMismatch, "pathway/0", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Pathways[0].Class = evidence.OnChipCounter })
	}))
	add(f.refuse("pathway: a figure stated as stale", reason.EvidenceMismatch, "pathway/1", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) {
			s := &d.Pathways[1]
			s.Status, s.Class, s.Joules, s.Delivery = evidence.StatusStale, 0, num.U128{}, num.U128{}
		})
	}))
	add(f.refuse("pathway: stated stale as a figure's", reason.EvidenceMismatch, "pathway/1", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) {
			d.Pathways[1].Records = d.Pathways[1].Records[1:]
		})
	}))
	pws := scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.Unmetered
	spec = refusalSpec()
	spec.Pathways = pws
	um := newFixture(spec)
	add(um.refuse("pathway: unmetered hop summed as zero", reason.UnmeteredAsZero, "pathway/1", func(c *Case) {
		um.redecide(c, func(d *decision.Decision) { stateFigure(c.Records, um.sc.Policy, d, 1) })
	}))
	add(um.refuse("output: unknown pathway preferred", reason.UnknownPreferred, "output", func(c *Case) {
		um.redecide(c, func(d *decision.Decision) {
			d.Priority = []uint8{1, 0, 2}
		})
	}))
	pws = scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.OnChipCounter
	spec = refusalSpec()
	spec.Pathways = pws
	mx := newFixture(spec)
	add(mx.refuse("pathway: two classes summed", reason.ClassesSummed, "pathway/1", func(c *Case) {
		mx.redecide(c, func(d *decision.Decision) { stateFigure(c.Records, mx.sc.Policy, d, 1) })
	}))
	add(mx.refuse("output: mixed pathway preferred", reason.UnknownPreferred, "output", func(c *Case) {
		mx.redecide(c, func(d *decision.Decision) { d.Priority = []uint8{1, 0, 2} })
	}))

	// §9.1 step 6 gives unknown_preferred only when the stated first has no
	// figure and the rule's first has one. A client with a short buffer held
	// on b, which has no figure: both other combinations are
	// decision_mismatch.
	ho := newHeld()
	add(ho.refuse("output: stated first and the rule's first both without a figure", reason.DecisionMismatch, "output", func(c *Case) {
		ho.redecide(c, func(d *decision.Decision) { d.Priority = []uint8{0, 1, 2} })
	}))
	add(ho.refuse("output: a figure stated first, the rule's first without one", reason.DecisionMismatch, "output", func(c *Case) {
		ho.redecide(c, func(d *decision.Decision) { d.Priority = []uint8{2, 1, 0} })
	}))

	// §9.1 step 6: the output (§6).
	add(f.refuse("output: ttl changed", reason.DecisionMismatch, "output", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.TTL-- })
	}))
	add(f.refuse("output: limits changed", reason.DecisionMismatch, "output", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Pathways[2].Limits &^= decision.LimitCapacity })
	}))
	add(f.refuse("output: draw changed", reason.DecisionMismatch, "output", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Draw = (d.Draw + 1) % decision.DrawRange })
	}))
	add(f.refuse("output: reason changed", reason.DecisionMismatch, "output", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) { d.Reason = decision.Hold })
	}))
	add(f.refuse("output: two figures out of order", reason.DecisionMismatch, "output", func(c *Case) {
		f.redecide(c, func(d *decision.Decision) {
			d.Priority = slices.Clone(d.Priority)
			d.Priority[0], d.Priority[1] = d.Priority[1], d.Priority[0]
		})
	}))

	// §9.1 step 7: the manifest (§8.1).
	add(f.refuse("manifest: a byte changed", reason.ManifestMismatch, "manifest", func(c *Case) {
		c.Manifest = setByte(c.Manifest, len(c.Manifest)-3, '0')
		if string(c.Manifest) == string(f.m.Manifest) {
			c.Manifest = setByte(c.Manifest, len(c.Manifest)-3, '1')
		}
	}))
	add(f.refuse("manifest: empty", reason.ManifestMismatch, "manifest", func(c *Case) { c.Manifest = []byte{} }))
	add(f.refuse("manifest: the digest in uppercase", reason.ManifestMismatch, "manifest", func(c *Case) {
		d := f.m.Digest.String()
		c.Manifest = []byte(strings.Replace(string(c.Manifest), d, strings.ToUpper(d), 1))
	}))
	add(f.refuse("manifest: white space between members", reason.ManifestMismatch, "manifest", func(c *Case) {
		c.Manifest = []byte(strings.Replace(string(c.Manifest), `,"TTL"`, `, "TTL"`, 1))
	}))
	add(f.refuse("manifest: the TTL of another decision", reason.ManifestMismatch, "manifest", func(c *Case) {
		d := *f.m.Decision
		d.TTL = 30
		c.Manifest = decision.Manifest(sc.Policy, &d, f.m.Digest)
	}))
	return cs
}

// stateFigure states pathway i of d with the figure its records would give
// if every record were metered and of the first metered record's class: J
// the sum of every record's joules, D the edge hops' media bytes out.
// Records are found among given by digest.
func stateFigure(given [][]byte, p *policy.Policy, d *decision.Decision, i int) {
	s := &d.Pathways[i]
	s.Joules, s.Delivery = num.U128{}, num.U128{}
	var class evidence.Class
	for _, h := range s.Records {
		for _, raw := range given {
			if evidence.NamedDigest(raw) != h {
				continue
			}
			r := must(evidence.ParseRecord(raw))
			if class == 0 {
				class = r.Class
			}
			s.Joules, _ = s.Joules.Add64(r.Joules)
			if p.Pathways[i].Hops[slices.IndexFunc(p.Pathways[i].Hops, func(h policy.Hop) bool { return h.Key == r.Hop })].Place == policy.Edge {
				s.Delivery, _ = s.Delivery.Add64(r.Tracks[0].Bytes)
			}
			break
		}
	}
	s.Status, s.Class = evidence.StatusFigure, class
}
