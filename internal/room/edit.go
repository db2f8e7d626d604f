package room

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/internal/sig"
)

// The operator's edits of a key log (COMPANION §4): each signs the head that
// follows h, seq + 1, with one entry changed. h nil starts a key log, whose
// first head is seq 1 (SPEC-NOTES, COMPANION §4). origin must be the key
// that signed h.

// Grant lists key with the authorities, or replaces what its entry holds, in
// the head after h; it reports whether an entry was replaced. A revoked key
// is not granted again: revocation is for good.
func Grant(h *KeyLogHead, origin sig.PrivateKey, key sig.PublicKey, authorities []string) (head []byte, seq uint64, replaced bool, err error) {
	entries, seq, err := successor(h, origin)
	if err != nil {
		return nil, 0, false, err
	}
	e := Entry{Key: key, MaySign: authorities}
	if i := slices.IndexFunc(entries, func(e Entry) bool { return e.Key == key }); i >= 0 {
		if entries[i].Revoked {
			return nil, 0, false, fmt.Errorf("the key log marks %s revoked; a revoked key is not granted again", key)
		}
		entries[i], replaced = e, true
	} else {
		entries = append(entries, e)
	}
	head, err = NewKeyLogHead(origin, seq, entries)
	return head, seq, replaced, err
}

// Revoke marks key's entry revoked in the head after h.
func Revoke(h *KeyLogHead, origin sig.PrivateKey, key sig.PublicKey) (head []byte, seq uint64, err error) {
	if h == nil {
		return nil, 0, errors.New("a key log with no head has no entry to revoke")
	}
	entries, seq, err := successor(h, origin)
	if err != nil {
		return nil, 0, err
	}
	i := slices.IndexFunc(entries, func(e Entry) bool { return e.Key == key })
	switch {
	case i < 0:
		return nil, 0, fmt.Errorf("the head (seq %d) has no entry for %s", h.Seq, key)
	case entries[i].Revoked:
		return nil, 0, fmt.Errorf("the head (seq %d) already marks %s revoked", h.Seq, key)
	}
	entries[i].Revoked = true
	head, err = NewKeyLogHead(origin, seq, entries)
	return head, seq, err
}

// successor is the entries and seq of the head after h, which origin must
// have signed.
func successor(h *KeyLogHead, origin sig.PrivateKey) ([]Entry, uint64, error) {
	if h == nil {
		return nil, 1, nil
	}
	if h.Origin != origin.Public() {
		return nil, 0, fmt.Errorf("the head is the key log of origin %s, not of the given key's %s", h.Origin, origin.Public())
	}
	if err := h.Verify(); err != nil {
		return nil, 0, fmt.Errorf("the head's signature by its origin: %w", err)
	}
	if h.Seq == math.MaxUint64 {
		return nil, 0, fmt.Errorf("the head is seq %d, which cannot grow", h.Seq)
	}
	entries := slices.Clone(h.Entries)
	for i := range entries {
		entries[i].MaySign = slices.Clone(entries[i].MaySign)
	}
	return entries, h.Seq + 1, nil
}

// ParseAuthorities reads a comma-separated list of authorities, each of
// COMPANION §4's table, into a may_sign: the key log's format admits other
// strings, which grant nothing, so a misspelling would be a silent mistake.
func ParseAuthorities(s string) ([]string, error) {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if !slices.Contains(Authorities(), a) {
			return nil, fmt.Errorf("%q is not an authority; they are %s", a, strings.Join(Authorities(), ", "))
		}
		if slices.Contains(out, a) {
			return nil, fmt.Errorf("%q given twice", a)
		}
		out = append(out, a)
	}
	slices.Sort(out)
	return out, nil
}
