package reason

import (
	"errors"
	"fmt"
	"testing"
)

// TestAt places a refusal without changing its code or the original, and
// leaves other errors alone (COMPANION §7).
func TestAt(t *testing.T) {
	e := New(BadSignature, "flip")
	placed := At("evidence/0/1", fmt.Errorf("wrapped: %w", e))
	var got *Error
	if !errors.As(placed, &got) || got.Code != BadSignature || got.Place != "evidence/0/1" || e.Place != "" {
		t.Fatalf("At gave %v; original now %+v", placed, e)
	}
	if Of(placed) != BadSignature || placed.Error() != "bad_signature at evidence/0/1: flip" {
		t.Errorf("text %q", placed.Error())
	}
	plain := errors.New("io")
	if At("room", plain) != plain || Of(plain) != "" {
		t.Error("a plain error was changed or given a code")
	}
}

// TestCodesDistinct: §10's codes and the reused ones are each spelled once.
func TestCodesDistinct(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range append(append([]Code{}, Extension...), Reused...) {
		if seen[c] || c == "" {
			t.Errorf("code %q twice or empty", c)
		}
		seen[c] = true
	}
	if len(Extension) != 10 {
		t.Errorf("%d codes of §10's table, want 10", len(Extension))
	}
}
