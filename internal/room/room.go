package room

import (
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// The authorities a may_sign can hold (COMPANION §4).
const (
	LiveSteer = "live/steer" // steering policies and decisions (extension §3.5)
	LiveHop   = "live/hop"   // per-hop session records
)

// EnergyAuthority is `energy/<label>`, the authority to state a figure of
// class c (COMPANION §4); "" for a tag that is not a class.
func EnergyAuthority(c evidence.Class) string {
	if !c.IsClass() {
		return ""
	}
	return "energy/" + c.Label()
}

// Authorities lists every authority of COMPANION §4's table, in the
// bytewise order a may_sign keeps.
func Authorities() []string {
	return []string{
		EnergyAuthority(evidence.CalibratedInstrument),
		EnergyAuthority(evidence.Estimator),
		EnergyAuthority(evidence.ModelBased),
		EnergyAuthority(evidence.OnChipCounter),
		LiveHop,
		LiveSteer,
	}
}

// grants is a set of the authorities of COMPANION §4's table, one bit each:
// what an entry's may_sign gives, computed once at Open so that a check is
// a map lookup and a mask.
type grants uint8

const (
	grantSteer grants = 1 << iota
	grantHop
	grantEnergy // grantEnergy << tag, for the class tags 2 to 5
)

// energyGrant is the bit of energy/<label of c>, 0 for a tag that is not a
// class (which no entry can hold).
func energyGrant(c evidence.Class) grants {
	if !c.IsClass() {
		return 0
	}
	return grantEnergy << (c - evidence.ModelBased)
}

func grantOf(authority string) grants {
	switch authority {
	case LiveSteer:
		return grantSteer
	case LiveHop:
		return grantHop
	}
	for _, c := range []evidence.Class{evidence.ModelBased, evidence.Estimator, evidence.OnChipCounter, evidence.CalibratedInstrument} {
		if authority == EnergyAuthority(c) {
			return energyGrant(c)
		}
	}
	return 0 // a string outside the table reads and grants nothing
}

// standing is what the room knows of a key with an entry.
type standing struct {
	revoked bool
	grants  grants
}

// Room is a room that passed the room step (COMPANION §4.1).
type Room struct {
	desc    *Descriptor
	id      sig.Hash
	head    *KeyLogHead                // nil for a room with no origin
	entries map[sig.PublicKey]standing // the head's entries; empty with no head
}

// Open runs the room step (COMPANION §4.1, extension §9.1 step 1) on a
// descriptor and the head of its origin's key log, head nil when none is
// given (an empty, non-nil head is given, and does not read). It returns the
// first refusal that applies, in the step's order: room_invalid; bad_key,
// bad_signature (the descriptor's); key_log_missing; key_log_invalid;
// bad_key, bad_signature (the head's); authority_not_listed;
// authority_revoked. A verifier places them at `room` (COMPANION §7).
func Open(descriptor, head []byte) (*Room, error) {
	d, err := ParseDescriptor(descriptor) // step 1
	if err != nil {
		return nil, err
	}
	if err := d.Verify(); err != nil { // step 2
		return nil, err
	}
	r := &Room{desc: d, id: d.ID(), entries: map[sig.PublicKey]standing{}}
	if d.Origin == nil {
		// A room with no origin has no key log; a head given for it is not
		// read (§4.1).
		return r, nil
	}
	if head == nil { // step 3
		return nil, reason.New(reason.KeyLogMissing, "the room names origin %s and no key log head is given", d.Origin)
	}
	h, err := ParseKeyLogHead(head) // step 4
	if err != nil {
		return nil, err
	}
	if h.Origin != *d.Origin {
		return nil, reason.New(reason.KeyLogInvalid, "the key log head is %s's, not the room's origin %s", h.Origin, d.Origin)
	}
	if err := h.Verify(); err != nil { // step 5
		return nil, err
	}
	a := h.Entry(d.Authority) // step 6
	if a == nil {
		return nil, reason.New(reason.AuthorityNotListed, "the key log head (seq %d) has no entry for the authority %s", h.Seq, d.Authority)
	}
	if a.Revoked {
		return nil, reason.New(reason.AuthorityRevoked, "the key log head (seq %d) marks the authority %s revoked", h.Seq, d.Authority)
	}
	r.head, r.entries = h, standings(h)
	return r, nil
}

// standings is what a head's entries let each key do.
func standings(h *KeyLogHead) map[sig.PublicKey]standing {
	m := make(map[sig.PublicKey]standing, len(h.Entries))
	for _, e := range h.Entries {
		s := standing{revoked: e.Revoked}
		for _, a := range e.MaySign {
			s.grants |= grantOf(a)
		}
		m[e.Key] = s
	}
	return m
}

// ID is the room id (COMPANION §4).
func (r *Room) ID() sig.Hash { return r.id }

// Authority is the room authority's key.
func (r *Room) Authority() sig.PublicKey { return r.desc.Authority }

// Origin is the room's origin key, and false for a room with no origin.
func (r *Room) Origin() (sig.PublicKey, bool) {
	if r.desc.Origin == nil {
		return sig.PublicKey{}, false
	}
	return *r.desc.Origin, true
}

// Name is the room's name.
func (r *Room) Name() string { return r.desc.Name }

// Descriptor is the room's descriptor.
func (r *Room) Descriptor() *Descriptor { return r.desc }

// Head is the head of the origin's key log, nil for a room with no origin.
func (r *Room) Head() *KeyLogHead { return r.head }

// MaySignPolicy says whether key may sign a steering policy (COMPANION §4.2,
// extension §3.5): the room authority, or a key whose entry holds
// live/steer. An entry marked revoked is signer_revoked, whatever it holds;
// anything else signer_not_authorised.
//
// The authority's own entry is never revoked here: Open refused such a room
// (authority_revoked), so the authority is accepted before its entry is
// looked at.
func (r *Room) MaySignPolicy(key sig.PublicKey) error {
	return r.maySign(key, 0, "a steering policy")
}

// MaySignDecision says whether key may sign a steering decision whose
// figures are of the given classes (COMPANION §4.2, extension §3.5): as a
// policy, and the signer's entry, the authority's included, also holds
// energy/<label> of each class. A room with no key log has no entries, so
// its authority signs only decisions with no figure. Class 0 (no figure) in
// classes asks nothing; a tag that is not a class is signer_not_authorised,
// as no entry can hold an authority for it.
func (r *Room) MaySignDecision(key sig.PublicKey, classes []evidence.Class) error {
	var need grants
	for _, c := range classes {
		if c == evidence.Unmetered {
			continue
		}
		if !c.IsClass() {
			return reason.New(reason.SignerNotAuthorised, "class tag %d is not a class: no key may state it", uint8(c))
		}
		need |= energyGrant(c)
	}
	return r.maySign(key, need, "a steering decision")
}

// maySign is COMPANION §4.2's rule for a policy and a decision: need is the
// energy authorities the signer's entry must hold beyond its standing.
func (r *Room) maySign(key sig.PublicKey, need grants, what string) error {
	s, listed := r.entries[key]
	if key == r.desc.Authority {
		if need&^s.grants == 0 { // with no entry, only need 0 passes
			return nil
		}
		if !listed {
			return reason.New(reason.SignerNotAuthorised, "the room has no key log, so its authority %s holds no %s and may not sign %s stating it", key, missing(need), what)
		}
		return reason.New(reason.SignerNotAuthorised, "the authority %s's entry does not hold %s", key, missing(need&^s.grants))
	}
	switch {
	case !listed:
		return reason.New(reason.SignerNotAuthorised, "%s is neither the room authority nor a key the key log lists", key)
	case s.revoked:
		return reason.New(reason.SignerRevoked, "the key log marks %s revoked", key)
	case s.grants&grantSteer == 0:
		return reason.New(reason.SignerNotAuthorised, "%s's entry does not hold %s", key, LiveSteer)
	case need&^s.grants != 0:
		return reason.New(reason.SignerNotAuthorised, "%s's entry does not hold %s", key, missing(need&^s.grants))
	}
	return nil
}

// MaySignRecord says whether hop may sign a per-hop record of class class
// (COMPANION §4.2, live-metering §5.2): its entry holds live/hop and, when
// class is not 0, energy/<label>. An entry marked revoked is hop_revoked,
// whatever it holds (the text puts that case first); no entry, or one
// lacking an authority, hop_not_authorised. A room with no key log
// authorises no hop; the authority is a hop like any other key.
func (r *Room) MaySignRecord(hop sig.PublicKey, class evidence.Class) error {
	return maySignRecord(r.head != nil, r.entries, hop, class)
}

// maySignRecord is MaySignRecord over a key log's standings; hasHead is
// false for a room with no key log.
func maySignRecord(hasHead bool, entries map[sig.PublicKey]standing, hop sig.PublicKey, class evidence.Class) error {
	s, listed := entries[hop]
	need := grantHop
	if class != evidence.Unmetered {
		if !class.IsClass() {
			return reason.New(reason.HopNotAuthorised, "class tag %d is not a class: no hop may state it", uint8(class))
		}
		need |= energyGrant(class)
	}
	switch {
	case !hasHead:
		return reason.New(reason.HopNotAuthorised, "the room has no key log, which authorises no hop (%s)", hop)
	case !listed:
		return reason.New(reason.HopNotAuthorised, "the key log lists no hop %s", hop)
	case s.revoked:
		return reason.New(reason.HopRevoked, "the key log marks hop %s revoked", hop)
	case need&^s.grants != 0:
		return reason.New(reason.HopNotAuthorised, "hop %s's entry does not hold %s", hop, missing(need&^s.grants))
	}
	return nil
}

// missing names the authorities of a set, for an error's detail.
func missing(g grants) string {
	s := ""
	for _, a := range Authorities() {
		if g&grantOf(a) != 0 {
			if s != "" {
				s += ", "
			}
			s += a
		}
	}
	return s
}

// ReadRecord reads a per-hop record of the room and checks its hop may sign
// it: §9.1 steps 4.2 and 4.3, which a hop's POST, a server rebuilding its
// evidence from its store and a verifier all run, in this order. The record
// reads (COMPANION §5: §1's codes, energy_invalid, record_invalid), is of
// this room (wrong_room), its signature verifies (bad_key, bad_signature),
// and the room's key log lets its hop sign a record of its class
// (MaySignRecord: hop_not_authorised, hop_revoked).
func (r *Room) ReadRecord(raw []byte) (*evidence.Record, error) {
	rec, err := evidence.ParseRecord(raw)
	if err != nil {
		return nil, err
	}
	if err := rec.Check(r.ID()); err != nil {
		return nil, err
	}
	if err := r.MaySignRecord(rec.Hop, rec.Class); err != nil {
		return nil, err
	}
	return rec, nil
}
