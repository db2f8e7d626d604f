package room

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// Version is the only version of the descriptor and of the key log head
// (COMPANION §4).
const Version = 1

// Bounds of a room's name (COMPANION §4: "a text string of 1 to 64 bytes").
const (
	MinNameBytes = 1
	MaxNameBytes = 64
)

// Descriptor is a room descriptor that reads (COMPANION §4).
type Descriptor struct {
	Authority sig.PublicKey
	Origin    *sig.PublicKey // nil: a room with no origin, and so no key log
	Name      string
	Sig       sig.Signature

	// Body is the signed body, the bytes the signature and the room id cover.
	Body []byte
}

// ID is the room id, SHA-256 of the body (COMPANION §4).
func (d *Descriptor) ID() sig.Hash { return sig.Digest(d.Body) }

// Verify checks the descriptor's signature by its authority in the domain
// wai:room-descriptor (COMPANION §2, §4.1 step 2): bad_key or bad_signature.
func (d *Descriptor) Verify() error {
	return sig.Verify(d.Authority, sig.DomainRoom, d.Body, d.Sig)
}

// Bytes encodes the descriptor from its fields, [body, sig]. For a
// descriptor that ParseDescriptor returned these are the bytes it read.
func (d *Descriptor) Bytes() ([]byte, error) {
	body, err := descriptorBody(d.Authority, d.Origin, d.Name)
	if err != nil {
		return nil, err
	}
	return marshal(&signedShape{Body: body, Sig: d.Sig[:]})
}

// NewDescriptor builds the descriptor of a room with the given authority,
// origin (nil for none) and name, signed by the authority.
func NewDescriptor(authority sig.PrivateKey, origin *sig.PublicKey, name string) ([]byte, error) {
	if authority.IsZero() {
		return nil, errors.New("room: no authority key")
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	body, err := descriptorBody(authority.Public(), origin, name)
	if err != nil {
		return nil, err
	}
	s := authority.Sign(sig.DomainRoom, body)
	return marshal(&signedShape{Body: body, Sig: s[:]})
}

func descriptorBody(authority sig.PublicKey, origin *sig.PublicKey, name string) ([]byte, error) {
	b := descriptorShape{Version: Version, Authority: authority[:], Name: name}
	if origin != nil {
		b.Origin = origin[:]
	}
	return marshal(&b)
}

// checkName is COMPANION §4's rule for a name: a text string (so UTF-8, as
// RFC 8949 §3.1 requires of major type 3) of 1 to 64 bytes.
func checkName(name string) error {
	if len(name) < MinNameBytes || len(name) > MaxNameBytes {
		return fmt.Errorf("room name is %d bytes, not 1 to 64", len(name))
	}
	if !utf8.ValidString(name) {
		return errors.New("room name is not UTF-8 text")
	}
	return nil
}

// ParseDescriptor reads a room descriptor: exactly the deterministic
// encoding of COMPANION §4's shape, or room_invalid (§4.1 step 1). It does
// not check the signature (Verify does).
func ParseDescriptor(b []byte) (*Descriptor, error) {
	invalid := func(format string, args ...any) error {
		return reason.New(reason.RoomInvalid, "descriptor: "+format, args...)
	}
	var outer signedShape
	if err := decodeExact(b, &outer); err != nil {
		return nil, invalid("[body, sig] does not read: %v", err)
	}
	var body descriptorShape
	if err := decodeExact(outer.Body, &body); err != nil {
		return nil, invalid("body does not read: %v", err)
	}
	switch {
	case body.Version != Version:
		return nil, invalid("version %d, not 1", body.Version)
	case len(body.Authority) != sig.PublicKeySize:
		// COMPANION §2: a key of the wrong length is a shape that does not read.
		return nil, invalid("authority is %d bytes, not 32", len(body.Authority))
	case body.Origin != nil && len(body.Origin) != sig.PublicKeySize:
		return nil, invalid("origin is %d bytes, not 32", len(body.Origin))
	case len(outer.Sig) != sig.SignatureSize:
		return nil, invalid("sig is %d bytes, not 64", len(outer.Sig))
	}
	if err := checkName(body.Name); err != nil {
		return nil, invalid("%v", err)
	}
	d := &Descriptor{Name: body.Name, Body: append([]byte(nil), outer.Body...)}
	copy(d.Authority[:], body.Authority)
	if body.Origin != nil {
		d.Origin = new(sig.PublicKey)
		copy(d.Origin[:], body.Origin)
	}
	copy(d.Sig[:], outer.Sig)
	return d, nil
}
