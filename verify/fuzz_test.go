package verify_test

import (
	"errors"
	"testing"

	"github.com/waisteer/waisteer/conformance"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/verify"
)

// FuzzVerify: whatever bytes stand for the policy, the decision, a record or
// the manifest, the verifier never panics, and refuses only with a code of
// §10 (or one it reuses) at a place of COMPANION §7.
func FuzzVerify(f *testing.F) {
	base := conformance.Accepted()[0]
	f.Add(base.Policy, base.Decision, base.Records[0], base.Manifest)
	for _, c := range conformance.Refused()[:12] {
		f.Add(c.Policy, c.Decision, c.Records[0], c.Manifest)
	}
	codes := map[reason.Code]bool{}
	for _, c := range append(append([]reason.Code{}, reason.Extension...), reason.Reused...) {
		codes[c] = true
	}
	f.Fuzz(func(t *testing.T, pol, dec, rec, manifest []byte) {
		in := input(base)
		in.Policy, in.Decision, in.Manifest = pol, dec, manifest
		in.Records = append([][]byte{rec}, base.Records...)
		_, err := verify.Verify(in)
		if err == nil {
			return
		}
		var re *reason.Error
		if !errors.As(err, &re) || !codes[re.Code] || re.Place == "" {
			t.Fatalf("not a refusal of §10 with a place: %v", err)
		}
	})
}
