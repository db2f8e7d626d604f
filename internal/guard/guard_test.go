package guard

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestDo: a panic in the work is recovered, returned with its stack,
// logged at ERROR with the stack, and counted under its loop; work that
// returns is left as it is (issue 26).
func TestDo(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	before, beforeLoop := Total(), Counts()["test-loop"]
	if err := Do(log, "test-loop", func() {}); err != nil || Total() != before {
		t.Fatalf("no panic: %v, total %d (was %d)", err, Total(), before)
	}
	want := errors.New("the work's own")
	if err := Try(log, "test-loop", func() error { return want }); err != want || Total() != before {
		t.Fatalf("an error: %v", err)
	}
	var m map[string]int
	err := Do(log, "test-loop", func() { m["x"]++ })
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Loop != "test-loop" || !strings.Contains(pe.Error(), "nil map") || !bytes.Contains(pe.Stack, []byte("guard_test.go")) {
		t.Fatalf("a panic: %v", err)
	}
	if Total() != before+1 || Counts()["test-loop"] != beforeLoop+1 {
		t.Errorf("counted %d, %d", Total()-before, Counts()["test-loop"]-beforeLoop)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "loop=test-loop") || !strings.Contains(l, "guard_test.go") {
		t.Errorf("the log: %s", l)
	}
}
