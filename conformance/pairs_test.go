package conformance

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/verify"
)

// outcomeOf is the refusal the verifier gives c, or the zero Refusal for an
// acceptance.
func outcomeOf(t *testing.T, c Case) Refusal {
	t.Helper()
	_, err := verify.Verify(c.Input())
	if err == nil {
		return Refusal{}
	}
	var re *reason.Error
	if !errors.As(err, &re) {
		t.Fatalf("%s: %v is not a refusal with a place", c.Name, err)
	}
	return Refusal{re.Code, re.Place}
}

// TestPairsAreControls: each vector of two defects is refused for the check
// the text runs first (§9.1's steps and their order, COMPANION §1, §4.1, §5
// and §6), and is a control of both: built without its first defect it is
// refused for the second, without its second for the first, and with
// neither it is accepted. So the two refusals differ, and a verifier that
// runs the two checks the other way round fails the corpus's vector.
func TestPairsAreControls(t *testing.T) {
	f := committed(t)
	byName := map[string]*Vector{}
	for i := range f.Vectors {
		byName[f.Vectors[i].Name] = &f.Vectors[i]
	}
	pairs := Pairs()
	if len(pairs) < 30 {
		t.Errorf("only %d vectors of two defects", len(pairs))
	}
	for _, p := range pairs {
		if p.First == p.Second {
			t.Errorf("%s: both defects give %v: the order is not observable", p.Name, p.First)
		}
		// The name states both defects by their codes, the first first.
		i, j := strings.Index(p.Name, string(p.First.Code)), strings.LastIndex(p.Name, string(p.Second.Code))
		if i < 0 || j < 0 || (p.First.Code != p.Second.Code && i > j) {
			t.Errorf("%q does not name %s before %s", p.Name, p.First.Code, p.Second.Code)
		}
		for _, v := range []struct {
			first, second bool
			want          Refusal
		}{
			{true, true, p.First},
			{false, true, p.Second},
			{true, false, p.First},
			{false, false, Refusal{}},
		} {
			if got := outcomeOf(t, p.Make(v.first, v.second)); got != v.want {
				t.Errorf("%s, first defect %v, second %v: %v, want %v", p.Name, v.first, v.second, got, v.want)
			}
		}
		// The corpus holds the vector with both defects, refused for the
		// first.
		c := p.Make(true, true)
		v := byName[p.Name]
		switch {
		case v == nil:
			t.Errorf("%s: not in the corpus", p.Name)
		case v.Outcome != Refuse || v.Reason != string(p.First.Code) || v.Where != p.First.Where:
			t.Errorf("%s: the corpus states %s %s at %s", p.Name, v.Outcome, v.Reason, v.Where)
		case !bytes.Equal(v.Policy, c.Policy) || !bytes.Equal(v.Decision, c.Decision) || !bytes.Equal(v.Manifest, c.Manifest):
			t.Errorf("%s: the corpus's vector is not the one with both defects", p.Name)
		}
	}
}

// TestSmallOrderSignature: the signature the pairs give the small-order key
// satisfies RFC 8032's equation (crypto/ed25519 checks S < L and the
// cofactorless equation, not the key's order), so the vectors signed with
// it fail only COMPANION §2 step 2, the key's small order: bad_key.
func TestSmallOrderSignature(t *testing.T) {
	s := smallOrderSignature()
	for _, msg := range [][]byte{nil, []byte("wai:steering-policy\x01"), bytes.Repeat([]byte{0xa5}, 300)} {
		if !ed25519.Verify(ed25519.PublicKey(smallOrderKey[:]), msg, s[:]) {
			t.Errorf("RFC 8032's equation does not hold over %d bytes", len(msg))
		}
		if err := sig.VerifyRaw(smallOrderKey, msg, s); reason.Of(err) != reason.BadKey {
			t.Errorf("the strict rule gives %v, want bad_key", err)
		}
	}
}
