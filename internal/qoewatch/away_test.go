package qoewatch

import (
	"testing"
	"time"

	"github.com/waisteer/waisteer/report"
)

// TestAwayTable: a client is kept away until its time is up, and swept
// after.
func TestAwayTable(t *testing.T) {
	var a Away
	now := time.Unix(1_700_000_000, 0)
	s := report.Session{1}
	if !a.Empty() || a.Of(s, now) != "" {
		t.Fatal("a new table keeps someone")
	}
	a.Keep(s, "edge-1", now.Add(time.Minute))
	if a.Empty() || a.Of(s, now) != "edge-1" || a.Len() != 1 {
		t.Fatal("not kept")
	}
	if a.Of(s, now.Add(time.Minute)) != "" {
		t.Fatal("kept past its time")
	}
	a.Sweep(now.Add(time.Minute))
	if !a.Empty() || a.Len() != 0 {
		t.Fatal("not swept")
	}
}
