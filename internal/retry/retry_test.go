package retry

import (
	"testing"
	"time"
)

// Issue 26 item 6: the waits double from First to Max, each drawn in the
// upper half of its step, and start again after Reset.
func TestBackoff(t *testing.T) {
	b := Backoff{First: 50 * time.Millisecond, Max: 5 * time.Second}
	// By hand: 50, 100, 200, 400, 800, 1600, 3200, then 5000 ms for good.
	steps := []time.Duration{50, 100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}
	for round := range 2 {
		for i := range steps {
			d := steps[i] * time.Millisecond
			got := b.Next()
			if got < d/2 || got > d {
				t.Fatalf("round %d, wait %d: %v, want within [%v, %v]", round, i, got, d/2, d)
			}
		}
		b.Reset()
	}
	// The draws are spread: 200 draws at the cap are not all one value.
	seen := map[time.Duration]bool{}
	for range 200 {
		seen[b.Next()] = true
	}
	if len(seen) < 100 {
		t.Errorf("200 waits took only %d values: no jitter", len(seen))
	}
}
