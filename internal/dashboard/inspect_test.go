package dashboard

import (
	"bytes"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
)

// FuzzInspectInput: whatever the inspector is given (issue 18 item 3), it
// reads a digest, a decision's bytes, or refuses with a reason; never
// both, never neither, never a panic.
func FuzzInspectInput(f *testing.F) {
	for _, s := range []string{strings.Repeat("ab", 32), "http://s.example/v1/decisions/" + strings.Repeat("0", 64), "V1NEMQ==", "575344310000", "ftp://x/", "", " \n", "http://[::1", strings.Repeat("A", 5000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		d, raw, aerr := readInspectInput(input)
		switch {
		case aerr != nil:
			if d != (sig.Hash{}) || raw != nil || aerr.Code != api.BadInspect || aerr.Detail == "" {
				t.Fatalf("%q: a refusal %v with %v %x", input, aerr, d, raw)
			}
		case raw != nil:
			if d != (sig.Hash{}) || !bytes.HasPrefix(raw, []byte(decision.Magic)) {
				t.Fatalf("%q: bytes %x and a digest %v", input, raw, d)
			}
		case d == (sig.Hash{}) && !strings.Contains(strings.ToLower(input), strings.Repeat("0", 64)):
			t.Fatalf("%q: neither a digest nor bytes", input)
		}
	})
}
