package room

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// Bounds of a may_sign (COMPANION §4: "1 to 32 distinct text strings of 1 to
// 64 printable ASCII bytes").
const (
	MinMaySign        = 1
	MaxMaySign        = 32
	MinAuthorityBytes = 1
	MaxAuthorityBytes = 64
)

// Entry is one entry of a key log head: a key, the authorities it may sign
// under and whether it is revoked (COMPANION §4).
type Entry struct {
	Key     sig.PublicKey
	MaySign []string // ascending bytewise, distinct
	Revoked bool
}

// Holds reports whether the entry's may_sign holds authority.
func (e *Entry) Holds(authority string) bool {
	_, ok := slices.BinarySearch(e.MaySign, authority)
	return ok
}

// KeyLogHead is a key log head that reads (COMPANION §4).
type KeyLogHead struct {
	Origin  sig.PublicKey
	Seq     uint64
	Entries []Entry // ascending bytewise by key, no key twice
	Sig     sig.Signature

	// Body is the signed body.
	Body []byte
}

// Entry returns the head's entry for key, or nil when it has none.
func (h *KeyLogHead) Entry(key sig.PublicKey) *Entry {
	i, ok := slices.BinarySearchFunc(h.Entries, key, func(e Entry, k sig.PublicKey) int {
		return bytes.Compare(e.Key[:], k[:])
	})
	if !ok {
		return nil
	}
	return &h.Entries[i]
}

// Verify checks the head's signature by its origin in the domain
// wai:key-log-head (COMPANION §2, §4.1 step 5): bad_key or bad_signature.
func (h *KeyLogHead) Verify() error {
	return sig.Verify(h.Origin, sig.DomainKeyLog, h.Body, h.Sig)
}

// Bytes encodes the head from its fields, [body, sig]. For a head that
// ParseKeyLogHead returned these are the bytes it read.
func (h *KeyLogHead) Bytes() ([]byte, error) {
	body, err := headBody(h.Origin, h.Seq, h.Entries)
	if err != nil {
		return nil, err
	}
	return marshal(&signedShape{Body: body, Sig: h.Sig[:]})
}

// NewKeyLogHead builds a head of the origin's key log with the given
// sequence number and entries, signed by the origin. It puts the entries and
// each may_sign in the order COMPANION §4 requires (the caller's slices are
// not changed) and refuses, with an error naming the entry, what no order
// repairs: a key twice, a may_sign with an authority twice, with none or more
// than 32, or an authority that is not 1 to 64 printable ASCII bytes. No
// entries at all is a head that reads (COMPANION §4 sets no lower bound);
// the room step refuses it for a room, authority_not_listed.
func NewKeyLogHead(origin sig.PrivateKey, seq uint64, entries []Entry) ([]byte, error) {
	if origin.IsZero() {
		return nil, errors.New("key log: no origin key")
	}
	sorted := make([]Entry, len(entries))
	for i, e := range entries {
		e.MaySign = slices.Clone(e.MaySign)
		slices.Sort(e.MaySign) // Go compares strings bytewise
		sorted[i] = e
	}
	slices.SortFunc(sorted, func(a, b Entry) int { return bytes.Compare(a.Key[:], b.Key[:]) })
	if err := checkEntries(sorted); err != nil {
		return nil, fmt.Errorf("key log: %w", err)
	}
	body, err := headBody(origin.Public(), seq, sorted)
	if err != nil {
		return nil, err
	}
	s := origin.Sign(sig.DomainKeyLog, body)
	return marshal(&signedShape{Body: body, Sig: s[:]})
}

func headBody(origin sig.PublicKey, seq uint64, entries []Entry) ([]byte, error) {
	b := headShape{Version: Version, Origin: origin[:], Seq: seq, Entries: make([]entryShape, len(entries))}
	for i := range entries {
		b.Entries[i] = entryShape{Key: entries[i].Key[:], MaySign: entries[i].MaySign, Revoked: entries[i].Revoked}
	}
	return marshal(&b)
}

// checkEntries is COMPANION §4's rule for entries: ascending bytewise order
// of key, no key twice; each may_sign 1 to 32 distinct authorities in
// ascending bytewise order, each 1 to 64 printable ASCII bytes.
func checkEntries(entries []Entry) error {
	for i := range entries {
		e := &entries[i]
		if i > 0 && bytes.Compare(entries[i-1].Key[:], e.Key[:]) >= 0 {
			if entries[i-1].Key == e.Key {
				return fmt.Errorf("entry %d: key %s listed twice", i, e.Key)
			}
			return fmt.Errorf("entry %d: key %s is not after the key before it", i, e.Key)
		}
		if n := len(e.MaySign); n < MinMaySign || n > MaxMaySign {
			return fmt.Errorf("entry %d (key %s): may_sign holds %d authorities, not 1 to 32", i, e.Key, n)
		}
		for j, a := range e.MaySign {
			if err := CheckAuthority(a); err != nil {
				return fmt.Errorf("entry %d (key %s): may_sign[%d]: %w", i, e.Key, j, err)
			}
			if j > 0 && e.MaySign[j-1] >= a {
				if e.MaySign[j-1] == a {
					return fmt.Errorf("entry %d (key %s): may_sign holds %q twice", i, e.Key, a)
				}
				return fmt.Errorf("entry %d (key %s): may_sign[%d] %q is not after %q", i, e.Key, j, a, e.MaySign[j-1])
			}
		}
	}
	return nil
}

// CheckAuthority checks that a is a string a may_sign can hold: 1 to 64
// printable ASCII bytes, 0x20 to 0x7E (COMPANION §4). It says nothing of
// what a grants: strings outside the table of §4 read, and grant nothing.
func CheckAuthority(a string) error {
	if len(a) < MinAuthorityBytes || len(a) > MaxAuthorityBytes {
		return fmt.Errorf("authority %q is %d bytes, not 1 to 64", a, len(a))
	}
	if i := strings.IndexFunc(a, func(r rune) bool { return r < 0x20 || r > 0x7e }); i >= 0 {
		return fmt.Errorf("authority %q has a byte that is not printable ASCII at %d", a, i)
	}
	return nil
}

// ParseKeyLogHead reads a key log head: exactly the deterministic encoding
// of COMPANION §4's shape, or key_log_invalid (§4.1 step 4). It does not
// check the signature (Verify does) or whose head it is (Open does).
func ParseKeyLogHead(b []byte) (*KeyLogHead, error) {
	invalid := func(format string, args ...any) error {
		return reason.New(reason.KeyLogInvalid, "key log head: "+format, args...)
	}
	var outer signedShape
	if err := decodeExact(b, &outer); err != nil {
		return nil, invalid("[body, sig] does not read: %v", err)
	}
	var body headShape
	if err := decodeExact(outer.Body, &body); err != nil {
		return nil, invalid("body does not read: %v", err)
	}
	switch {
	case body.Version != Version:
		return nil, invalid("version %d, not 1", body.Version)
	case len(body.Origin) != sig.PublicKeySize:
		// COMPANION §2: a key of the wrong length is a shape that does not read.
		return nil, invalid("origin is %d bytes, not 32", len(body.Origin))
	case len(outer.Sig) != sig.SignatureSize:
		return nil, invalid("sig is %d bytes, not 64", len(outer.Sig))
	}
	h := &KeyLogHead{Seq: body.Seq, Entries: make([]Entry, len(body.Entries)), Body: append([]byte(nil), outer.Body...)}
	copy(h.Origin[:], body.Origin)
	copy(h.Sig[:], outer.Sig)
	for i, e := range body.Entries {
		if len(e.Key) != sig.PublicKeySize {
			return nil, invalid("entry %d: key is %d bytes, not 32", i, len(e.Key))
		}
		copy(h.Entries[i].Key[:], e.Key)
		h.Entries[i].MaySign = e.MaySign
		h.Entries[i].Revoked = e.Revoked
	}
	if err := checkEntries(h.Entries); err != nil {
		return nil, invalid("%v", err)
	}
	return h, nil
}
