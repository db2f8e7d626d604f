package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// TestBuildDecisions: the start-up's store (issue 30: "a store of 3.75 M
// decisions", here 3 000) holds each decision once, logged, each of a
// session of its own, at instants strictly increasing over the policy's
// TTL (300 s) before now, so that every one is live at a restart and the
// recount reads each (internal/restore); each rebuilds from its row and
// snapshot to bytes whose signature verifies by the room's steering key
// (§7.3), as an auditor's fetch would.
func TestBuildDecisions(t *testing.T) {
	const count = 3000
	r, err := newBenchRoom(3, 100)
	if err != nil {
		t.Fatal(err)
	}
	p := r.sc.Policy
	end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
	file := filepath.Join(t.TempDir(), "store.db")
	before := uint64(time.Now().UnixMicro())
	if err := buildDecisions(context.Background(), file, r, end-2*p.WindowUs-2*p.PeriodUs, end, count); err != nil {
		t.Fatal(err)
	}
	after := uint64(time.Now().UnixMicro())
	stored, _, leaves, err := benchStoredLogged(file)
	if err != nil || stored != count || leaves != count {
		t.Fatalf("stored %d, leaves %d, want %d each: %v", stored, leaves, count, err)
	}
	st, err := store.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	room := r.sc.Room.ID()
	es, err := st.LogEntries(ctx, room, 0, 0, count)
	if err != nil || len(es) != count {
		t.Fatalf("%d leaves read: %v", len(es), err)
	}
	sessions := map[report.Session]bool{}
	var last uint64
	for i, e := range es {
		if e.T <= last || e.T+300_000_000 < before || e.T > after {
			t.Fatalf("leaf %d: t %d after %d, within [%d - 300 s, %d]", i, e.T, last, before, after)
		}
		last = e.T
		row, err := st.Decision(ctx, e.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if sessions[row.Session] {
			t.Fatalf("leaf %d: a session seen before", i)
		}
		sessions[row.Session] = true
		if i%500 != 0 {
			continue
		}
		body, err := st.EvidenceSnapshot(ctx, row.Evidence)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := store.Rebuild(p, p.Digest(), row, body)
		if err != nil {
			t.Fatal(err)
		}
		d, err := decision.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.VerifySignature(); err != nil || d.Signer != r.sc.SteerKey.Public() {
			t.Errorf("leaf %d: signature %v, signer %s", i, err, d.Signer)
		}
	}
}
