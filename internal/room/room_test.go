package room

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The identity point (small order: COMPANION §2 step 2) and an encoding with
// y = p (not a point: step 1). Both are bad_key.
const (
	identityKey = "0100000000000000000000000000000000000000000000000000000000000000"
	yIsP        = "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
)

func openCode(t *testing.T, name string, descriptor, head []byte, want reason.Code) {
	t.Helper()
	r, err := Open(descriptor, head)
	if got := reason.Of(err); got != want {
		t.Errorf("%s: got %v, want %s", name, err, orAccept(want))
	}
	if (r == nil) == (want == "") {
		t.Errorf("%s: room %v with error %v", name, r, err)
	}
}

func orAccept(c reason.Code) string {
	if c == "" {
		return "acceptance"
	}
	return string(c)
}

// COMPANION §4.1: every code of the room step, each from an input with that
// one defect, and the step's order where two defects meet.
func TestOpenRoomStep(t *testing.T) {
	A, O := authPub[:], originPub[:]
	other := TestKey("room step other key")
	otherPub := other.Public()
	desc := signed(authKey, sig.DomainRoom, descBody(A, O, "room"))
	descNoOrigin := signed(authKey, sig.DomainRoom, descBody(A, nil, "room"))
	authEntry := entry(A, false, "live/steer")
	head := signed(originKey, sig.DomainKeyLog, headBodyBytes(O, 1, authEntry))
	badDescSig := signed(other, sig.DomainRoom, descBody(A, O, "room"))

	openCode(t, "control", desc, head, "")
	openCode(t, "control, no origin, no head", descNoOrigin, nil, "")

	// Step 1.
	openCode(t, "step 1: descriptor does not read", desc[:len(desc)-1], head, reason.RoomInvalid)
	openCode(t, "step 1: before step 2", ar(bs(descBody(mustHex(t, identityKey), O, "")), bs(zeroSig)), head, reason.RoomInvalid)
	// Step 2.
	openCode(t, "step 2: authority is of small order", ar(bs(descBody(mustHex(t, identityKey), nil, "r")), bs(zeroSig)), nil, reason.BadKey)
	openCode(t, "step 2: authority does not decode", ar(bs(descBody(mustHex(t, yIsP), nil, "r")), bs(zeroSig)), nil, reason.BadKey)
	openCode(t, "step 2: signed by another key", badDescSig, head, reason.BadSignature)
	openCode(t, "step 2: signed in the key log's domain", signed(authKey, sig.DomainKeyLog, descBody(A, O, "room")), head, reason.BadSignature)
	flipped := bytes.Clone(desc)
	flipped[len(flipped)-1] ^= 1
	openCode(t, "step 2: signature altered", flipped, head, reason.BadSignature)
	openCode(t, "step 2: before step 3", badDescSig, nil, reason.BadSignature)
	// Step 3.
	openCode(t, "step 3: no head", desc, nil, reason.KeyLogMissing)
	// Step 4.
	openCode(t, "step 4: empty head given", desc, []byte{}, reason.KeyLogInvalid)
	openCode(t, "step 4: head does not read", desc, head[:len(head)-1], reason.KeyLogInvalid)
	openCode(t, "step 4: a descriptor given as the head", desc, desc, reason.KeyLogInvalid)
	openCode(t, "step 4: head of another origin", desc, signed(other, sig.DomainKeyLog, headBodyBytes(otherPub[:], 1, authEntry)), reason.KeyLogInvalid)
	openCode(t, "step 4: before step 5", desc, signed(originKey, sig.DomainKeyLog, headBodyBytes(otherPub[:], 1, authEntry)), reason.KeyLogInvalid)
	// Step 5.
	badKeyDesc := signed(authKey, sig.DomainRoom, descBody(A, mustHex(t, identityKey), "room"))
	openCode(t, "step 5: origin is of small order", badKeyDesc, ar(bs(headBodyBytes(mustHex(t, identityKey), 1, authEntry)), bs(zeroSig)), reason.BadKey)
	openCode(t, "step 5: signed by another key", desc, signed(other, sig.DomainKeyLog, headBodyBytes(O, 1, authEntry)), reason.BadSignature)
	openCode(t, "step 5: signed in the room's domain", desc, signed(originKey, sig.DomainRoom, headBodyBytes(O, 1, authEntry)), reason.BadSignature)
	openCode(t, "step 5: before step 6", desc, signed(other, sig.DomainKeyLog, headBodyBytes(O, 1)), reason.BadSignature)
	// Step 6.
	openCode(t, "step 6: no entries", desc, signed(originKey, sig.DomainKeyLog, headBodyBytes(O, 1)), reason.AuthorityNotListed)
	openCode(t, "step 6: others' entries only", desc, signed(originKey, sig.DomainKeyLog, headBodyBytes(O, 1, entry(O, false, "live/steer"))), reason.AuthorityNotListed)
	openCode(t, "step 6: authority revoked", desc, signed(originKey, sig.DomainKeyLog, headBodyBytes(O, 1, entry(A, true, "live/steer"))), reason.AuthorityRevoked)

	// §4.1: a room with no origin has no key log; a head given is not read.
	for _, h := range [][]byte{head, {}, []byte("not cbor"), signed(other, sig.DomainKeyLog, headBodyBytes(O, 1))} {
		r, err := Open(descNoOrigin, h)
		if err != nil || r.Head() != nil {
			t.Errorf("no origin, head %x: %v, head %v", h, err, r)
		}
	}
}

// Open exposes what the room step read.
func TestRoomAccessors(t *testing.T) {
	desc := signed(authKey, sig.DomainRoom, descBody(authPub[:], originPub[:], "room"))
	head := signed(originKey, sig.DomainKeyLog, headBodyBytes(originPub[:], 9, entry(authPub[:], false, "live/steer")))
	r, err := Open(desc, head)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := r.Origin()
	if r.ID() != sig.Digest(descBody(authPub[:], originPub[:], "room")) || r.Authority() != authPub ||
		!ok || o != originPub || r.Name() != "room" || r.Head() == nil || r.Head().Seq != 9 || r.Descriptor() == nil {
		t.Errorf("room %+v", r)
	}
	r, err = Open(signed(authKey, sig.DomainRoom, descBody(authPub[:], nil, "room")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Origin(); ok || r.Head() != nil {
		t.Errorf("room with no origin: %+v", r)
	}
}

// Keys of the who-may-sign tests.
var (
	steerM       = TestKey("steer ModelBased").Public()
	steerPlain   = TestKey("steer plain").Public()
	steerRevoked = TestKey("steer revoked").Public()
	hopM         = TestKey("hop ModelBased").Public()
	hopRevoked   = TestKey("hop revoked").Public()
	revokedBare  = TestKey("revoked, no known authority").Public()
	oddKey       = TestKey("odd authorities").Public()
	stranger     = TestKey("stranger").Public()
)

func whoRoom(t *testing.T) *TestRoom {
	t.Helper()
	r, err := NewTestRoom("who may sign",
		SteerEntry(steerM, evidence.ModelBased),
		SteerEntry(steerPlain),
		Entry{Key: steerRevoked, MaySign: []string{"energy/ModelBased", LiveSteer}, Revoked: true},
		HopEntry(hopM, evidence.ModelBased),
		Entry{Key: hopRevoked, MaySign: []string{LiveHop}, Revoked: true},
		Entry{Key: revokedBare, MaySign: []string{"other/thing"}, Revoked: true},
		// Near misses of the table's strings hold nothing (COMPANION §4).
		Entry{Key: oddKey, MaySign: []string{"Live/steer", "energy/modelbased", "live/hop ", "live/steer/"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantCode(t *testing.T, name string, err error, want reason.Code) {
	t.Helper()
	if got := reason.Of(err); got != want || (want == "") != (err == nil) {
		t.Errorf("%s: got %v, want %s", name, err, orAccept(want))
	}
}

// COMPANION §4.2 (extension §3.5): who may sign a policy. A revoked entry is
// signer_revoked whatever it holds: the text names "an entry marked revoked"
// before "otherwise".
func TestMaySignPolicy(t *testing.T) {
	r := whoRoom(t)
	for _, tc := range []struct {
		name string
		key  sig.PublicKey
		want reason.Code
	}{
		{"the authority", r.Authority(), ""},
		{"live/steer with energy", steerM, ""},
		{"live/steer alone", steerPlain, ""},
		{"live/steer revoked", steerRevoked, reason.SignerRevoked},
		{"revoked, never a steering key", revokedBare, reason.SignerRevoked},
		{"revoked hop", hopRevoked, reason.SignerRevoked},
		{"live/hop only", hopM, reason.SignerNotAuthorised},
		{"near misses of live/steer", oddKey, reason.SignerNotAuthorised},
		{"not listed", stranger, reason.SignerNotAuthorised},
		{"the origin, not listed", r.OriginKey.Public(), reason.SignerNotAuthorised},
	} {
		wantCode(t, tc.name, r.MaySignPolicy(tc.key), tc.want)
	}
	// §4.2: a room that names no origin: only its authority signs.
	n, err := NewTestRoomNoOrigin("no origin")
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "no key log: the authority", n.MaySignPolicy(n.Authority()), "")
	wantCode(t, "no key log: another key", n.MaySignPolicy(steerM), reason.SignerNotAuthorised)
}

// COMPANION §4.2 (extension §3.5): who may sign a decision: as a policy, and
// the entry, the authority's too, holds energy/<label> of each class among
// its figures.
func TestMaySignDecision(t *testing.T) {
	r := whoRoom(t)
	all := []evidence.Class{evidence.CalibratedInstrument, evidence.OnChipCounter, evidence.ModelBased, evidence.Estimator}
	M, E := evidence.ModelBased, evidence.Estimator
	for _, tc := range []struct {
		name    string
		key     sig.PublicKey
		classes []evidence.Class
		want    reason.Code
	}{
		{"authority, every class", r.Authority(), all, ""},
		{"authority, no figure", r.Authority(), nil, ""},
		{"steering key, its class", steerM, []evidence.Class{M, M, 0}, ""},
		{"steering key, another class", steerM, []evidence.Class{E}, reason.SignerNotAuthorised},
		{"steering key, one class of two", steerM, []evidence.Class{M, E}, reason.SignerNotAuthorised},
		{"steering key without energy, no figure", steerPlain, []evidence.Class{0, 0}, ""},
		{"steering key without energy, a figure", steerPlain, []evidence.Class{M}, reason.SignerNotAuthorised},
		{"revoked steering key, no figure", steerRevoked, nil, reason.SignerRevoked},
		{"revoked steering key, a class it lacks", steerRevoked, []evidence.Class{E}, reason.SignerRevoked},
		{"live/hop with the class, no live/steer", hopM, []evidence.Class{M}, reason.SignerNotAuthorised},
		{"not listed", stranger, nil, reason.SignerNotAuthorised},
		{"tag 1 is no class", r.Authority(), []evidence.Class{1}, reason.SignerNotAuthorised},
		{"tag 6 is no class", steerM, []evidence.Class{6}, reason.SignerNotAuthorised},
	} {
		wantCode(t, tc.name, r.MaySignDecision(tc.key, tc.classes), tc.want)
	}

	// The authority's own entry must hold the class too.
	r2, err := NewTestRoom("authority without energy", SteerEntry(TestKey("room authority").Public()))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "authority's entry lacks the class", r2.MaySignDecision(r2.Authority(), []evidence.Class{M}), reason.SignerNotAuthorised)
	wantCode(t, "authority's entry, no figure", r2.MaySignDecision(r2.Authority(), nil), "")

	// A room with no key log has no entries: its authority signs only
	// decisions with no figure.
	n, err := NewTestRoomNoOrigin("no origin")
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "no key log: authority, no figure", n.MaySignDecision(n.Authority(), []evidence.Class{0}), "")
	wantCode(t, "no key log: authority, a figure", n.MaySignDecision(n.Authority(), []evidence.Class{evidence.CalibratedInstrument}), reason.SignerNotAuthorised)
	wantCode(t, "no key log: another key", n.MaySignDecision(steerM, nil), reason.SignerNotAuthorised)
}

// COMPANION §4.2 (live-metering §5.2): who may sign a per-hop record. A
// revoked entry is hop_revoked whatever it holds: the text names "an entry
// marked revoked" first.
func TestMaySignRecord(t *testing.T) {
	r := whoRoom(t)
	for _, tc := range []struct {
		name  string
		key   sig.PublicKey
		class evidence.Class
		want  reason.Code
	}{
		{"hop, unmetered", hopM, evidence.Unmetered, ""},
		{"hop, its class", hopM, evidence.ModelBased, ""},
		{"hop, another class", hopM, evidence.Estimator, reason.HopNotAuthorised},
		{"hop, tag 1", hopM, 1, reason.HopNotAuthorised},
		{"revoked hop", hopRevoked, evidence.Unmetered, reason.HopRevoked},
		{"revoked hop, a class it lacks", hopRevoked, evidence.CalibratedInstrument, reason.HopRevoked},
		{"revoked, never a hop", revokedBare, evidence.Unmetered, reason.HopRevoked},
		{"steering key with the class, no live/hop", steerM, evidence.ModelBased, reason.HopNotAuthorised},
		{"the authority without live/hop", r.Authority(), evidence.Unmetered, reason.HopNotAuthorised},
		{"near misses of live/hop", oddKey, evidence.Unmetered, reason.HopNotAuthorised},
		{"not listed", stranger, evidence.Unmetered, reason.HopNotAuthorised},
	} {
		wantCode(t, tc.name, r.MaySignRecord(tc.key, tc.class), tc.want)
	}
	n, err := NewTestRoomNoOrigin("no origin")
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "no key log: the authority", n.MaySignRecord(n.Authority(), evidence.Unmetered), reason.HopNotAuthorised)
	wantCode(t, "no key log: any key", n.MaySignRecord(hopM, evidence.ModelBased), reason.HopNotAuthorised)
}

// The test room helpers give the same bytes from the same arguments, and a
// room that passes the step.
func TestTestRoomDeterministic(t *testing.T) {
	a, err := NewTestRoom("demo", HopEntry(hopM, evidence.ModelBased))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewTestRoom("demo", HopEntry(hopM, evidence.ModelBased))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.DescriptorBytes, b.DescriptorBytes) || !bytes.Equal(a.HeadBytes, b.HeadBytes) || a.ID() != b.ID() {
		t.Error("two test rooms from the same arguments differ")
	}
	if e := a.Head().Entry(a.Authority()); e == nil || !e.Holds(LiveSteer) || e.Holds(LiveHop) {
		t.Errorf("authority's entry %+v", e)
	}
	if _, err := NewTestRoom("", HopEntry(hopM)); err == nil {
		t.Error("an empty name: no error")
	}
}

// COMPANION §4: the table's authorities, in a may_sign's order.
func TestAuthorities(t *testing.T) {
	want := []string{"energy/CalibratedInstrument", "energy/Estimator", "energy/ModelBased", "energy/OnChipCounter", "live/hop", "live/steer"}
	got := Authorities()
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if got[i] != want[i] || grantOf(got[i]) == 0 {
			t.Errorf("%d: %q", i, got[i])
		}
	}
	if EnergyAuthority(0) != "" || EnergyAuthority(1) != "" {
		t.Error("a tag that is not a class has an energy authority")
	}
}

func BenchmarkMaySignRecord(b *testing.B) {
	entries := make([]Entry, 0, 1000)
	for i := range 1000 {
		entries = append(entries, HopEntry(TestKey(string(rune(i))).Public(), evidence.ModelBased))
	}
	r, err := NewTestRoom("bench", entries...)
	if err != nil {
		b.Fatal(err)
	}
	hop := entries[500].Key
	b.ReportAllocs()
	for b.Loop() {
		if err := r.MaySignRecord(hop, evidence.ModelBased); err != nil {
			b.Fatal(err)
		}
	}
}

// The room step as a verifier runs it on each verification: two readings
// and two signatures.
func BenchmarkOpen(b *testing.B) {
	r, err := NewTestRoom("bench", HopEntry(hopM, evidence.ModelBased), SteerEntry(steerM, evidence.ModelBased))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(r.DescriptorBytes, r.HeadBytes); err != nil {
			b.Fatal(err)
		}
	}
}
