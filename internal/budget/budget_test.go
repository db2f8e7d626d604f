package budget

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/report"
)

// TestLatestTable (issue 26 item 5): a session's latest manifest is answered again only
// while it is less than a period old, whichever generation holds it; a
// later decision is not overwritten by an earlier one committed after it.
func TestLatestTable(t *testing.T) {
	var l Latest[uint32] // a manifest's TTL stands for the manifest
	const period = 10_000_000
	s := report.Session{7}
	l.Put(s, 100, 30, 100, period)
	for _, c := range []struct {
		now  uint64
		want bool
	}{{90, true}, {100, true}, {100 + period - 1, true}, {100 + period, false}} {
		if _, ok := l.Get(s, c.now, period); ok != c.want {
			t.Errorf("at %d: %v, want %v", c.now, ok, c.want)
		}
	}
	// Kept at 100 + period/2 (t 150): the generation turns at 100 +
	// period, and the manifest is read from the previous one until 150 +
	// period.
	l.Put(s, 150+period/2, 31, 150+period/2, period)
	l.Put(s, 140+period/2, 32, 150+period/2, period)
	if m, ok := l.Get(s, 120+period, period); !ok || m != 31 {
		t.Errorf("after the turn: %+v %v, want the later decision (ttl 31)", m, ok)
	}
	if _, ok := l.Get(s, 150+period/2+period, period); ok {
		t.Error("a period after its decision, a manifest is not answered again")
	}
}

// TestOverBudgetAnswer (issue 26 item 5): the 503 written from bytes encoded once is the one
// api.WriteError writes, with Retry-After.
func TestOverBudgetAnswer(t *testing.T) {
	got := httptest.NewRecorder()
	Refuse(got, 30)
	want := httptest.NewRecorder()
	want.Header().Set("Retry-After", "30")
	api.WriteError(want, api.Errorf(api.OverBudget, "the server steers this client's address or network at its budget; ask again after Retry-After"))
	if got.Code != http.StatusServiceUnavailable || got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
		t.Fatalf("%d %s, want %d %s", got.Code, got.Body, want.Code, want.Body)
	}
	for k := range want.Header() {
		if got.Header().Get(k) != want.Header().Get(k) {
			t.Errorf("%s: %q, want %q", k, got.Header().Get(k), want.Header().Get(k))
		}
	}
	if len(got.Header()) != len(want.Header()) {
		t.Errorf("headers %v, want %v", got.Header(), want.Header())
	}
}

// TestLatestLen: both generations count, and a table turned twice past
// its answers is empty.
func TestLatestLen(t *testing.T) {
	var l Latest[int]
	const period = 10
	l.Put(report.Session{1}, 0, 1, 0, period)
	l.Put(report.Session{2}, 5, 2, 5, period)
	if n := l.Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
	l.Get(report.Session{1}, 10, period) // shard 1 turns: its answer in prev
	if n := l.Len(); n != 2 {
		t.Fatalf("after a turn, Len = %d, want 2", n)
	}
	l.Get(report.Session{1}, 20, period) // turns again: dropped
	if n := l.Len(); n != 1 {
		t.Fatalf("after two turns, Len = %d, want 1", n)
	}
}
