package decision

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
)

// FuzzParse: Parse never panics, refuses only with COMPANION §1's codes or
// §7.2's decision_invalid, and whatever it reads Append writes back to
// exactly the bytes read, with the digest of §7.3.
func FuzzParse(f *testing.F) {
	f.Add(Append(nil, validDecision()))
	f.Add(Sign(validDecision(), testKey(1)))
	rng := rand.New(rand.NewPCG(11, 12))
	for _, nk := range [][2]int{{0, 0}, {1, 0}, {1, 1}, {2, 3}, {4, 2}, {3, 36}} {
		f.Add(Append(nil, randomDecision(rng, nk[0], nk[1])))
	}
	broken := validDecision()
	broken.Priority[0] = 1
	f.Add(Append(nil, broken))
	f.Add([]byte("WSD1\x01"))
	f.Add([]byte("WSD1\x02"))
	f.Add([]byte("WSP1"))

	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err != nil {
			switch reason.Of(err) {
			case reason.Truncated, reason.Malformed, reason.UnknownVersion, reason.DecisionInvalid:
			default:
				t.Fatalf("refused with %v", err)
			}
			if d != nil {
				t.Fatal("a decision with an error")
			}
			return
		}
		if got := Append(nil, d); !bytes.Equal(got, b) {
			t.Fatalf("Append(Parse(b)) = %x, want %x", got, b)
		}
		if d.Size() != len(b) {
			t.Fatalf("Size %d, %d bytes read", d.Size(), len(b))
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("read but does not validate: %v", err)
		}
		if d.Digest() != sha256.Sum256(b[:len(b)-64]) {
			t.Fatal("digest is not SHA-256 of the bytes before sig")
		}
	})
}
