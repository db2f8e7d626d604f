package room

import (
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/sig"
)

// TestKey returns the private key whose seed is SHA-256("waisteer test key:"
// ‖ label). Tests, corpora and demos use it for keys they must rebuild byte
// for byte: it is no secret, and nothing real is signed with it.
func TestKey(label string) sig.PrivateKey {
	return sig.NewPrivateKey(sig.Digest([]byte("waisteer test key:" + label)))
}

// HopEntry is an entry for a hop that may sign records of the given classes
// (and the unmetered marker): live/hop and energy/<label> of each.
func HopEntry(key sig.PublicKey, classes ...evidence.Class) Entry {
	return Entry{Key: key, MaySign: withEnergy([]string{LiveHop}, classes)}
}

// SteerEntry is an entry for a steering key that may sign policies and
// decisions stating figures of the given classes: live/steer and
// energy/<label> of each.
func SteerEntry(key sig.PublicKey, classes ...evidence.Class) Entry {
	return Entry{Key: key, MaySign: withEnergy([]string{LiveSteer}, classes)}
}

func withEnergy(m []string, classes []evidence.Class) []string {
	for _, c := range classes {
		if a := EnergyAuthority(c); a != "" {
			m = append(m, a)
		}
	}
	return m
}

// TestRoom is a complete room built from fixed keys: its keys, its
// descriptor and key log head as bytes, and the Room Open made of them.
type TestRoom struct {
	AuthorityKey    sig.PrivateKey // TestKey("room authority")
	OriginKey       sig.PrivateKey // TestKey("room origin"); zero with no origin
	DescriptorBytes []byte
	HeadBytes       []byte // nil for a room with no origin
	*Room
}

// NewTestRoom builds a room named name with an origin, whose key log head
// (seq 1) lists the given entries and the authority. Unless entries hold
// one for it, the authority's entry holds live/steer and every energy
// authority, so that it signs any policy and decision (and, not holding
// live/hop, no record). The same arguments
// give the same bytes.
func NewTestRoom(name string, entries ...Entry) (*TestRoom, error) {
	t := &TestRoom{AuthorityKey: TestKey("room authority"), OriginKey: TestKey("room origin")}
	origin := t.OriginKey.Public()
	d, err := NewDescriptor(t.AuthorityKey, &origin, name)
	if err != nil {
		return nil, err
	}
	listed := false
	for _, e := range entries {
		listed = listed || e.Key == t.AuthorityKey.Public()
	}
	if !listed {
		entries = append(entries[:len(entries):len(entries)], SteerEntry(t.AuthorityKey.Public(),
			evidence.ModelBased, evidence.Estimator, evidence.OnChipCounter, evidence.CalibratedInstrument))
	}
	h, err := NewKeyLogHead(t.OriginKey, 1, entries)
	if err != nil {
		return nil, err
	}
	r, err := Open(d, h)
	if err != nil {
		return nil, err
	}
	t.DescriptorBytes, t.HeadBytes, t.Room = d, h, r
	return t, nil
}

// NewTestRoomNoOrigin builds a room named name with no origin and so no key
// log: its authority signs policies and decisions with no figure, and no hop
// signs anything.
func NewTestRoomNoOrigin(name string) (*TestRoom, error) {
	t := &TestRoom{AuthorityKey: TestKey("room authority")}
	d, err := NewDescriptor(t.AuthorityKey, nil, name)
	if err != nil {
		return nil, err
	}
	r, err := Open(d, nil)
	if err != nil {
		return nil, err
	}
	t.DescriptorBytes, t.Room = d, r
	return t, nil
}
