package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// A prune that meets a writer referencing the snapshot it would remove
// waits for the writer's commit and keeps the snapshot (schema 6: no
// foreign key holds a decision's snapshot; prune.go's lock does). The
// writer here is a group's first batch as group.go sends it (the snapshot
// locked FOR KEY SHARE), then its decision's insert, committed only after
// the prune has started: the prune must not return before, and the
// snapshot must stay, with the new decision readable whole.
func TestPruneWaitsForAWriterOfItsSnapshot(t *testing.T) {
	ctx := bg(t)
	s, _ := open(t)
	ds, ev := benchDecisions(1, 0)
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
		t.Fatal(err)
	}
	old := ds[0]
	fresh := sig.Digest([]byte("a decision of the same snapshot, long after"))

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT id FROM waisteer.snapshots WHERE key = $1 FOR KEY SHARE", ev.Key[:]); err != nil {
		t.Fatal(err)
	}
	// The new decision: the old one's row under another digest, an hour
	// later (t is stored as i64, whose order and differences are u64's
	// here).
	later := uint64(3600 * 1_000_000)
	if _, err := tx.Exec(ctx, `INSERT INTO waisteer.decisions (t, snapshot, context, digest, row)
		SELECT t + $3, snapshot, context, $2, row FROM waisteer.decisions WHERE digest = $1`, old.Digest[:], fresh[:], int64(later)); err != nil {
		t.Fatal(err)
	}

	type result struct {
		st  store.PruneStats
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		st, err := s.Prune(ctx, 0, old.T+1)
		done <- result{st, err, time.Now()}
	}()
	select {
	case r := <-done:
		t.Fatalf("the prune returned (%+v, %v) while a writer held its snapshot", r.st, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	committed := time.Now()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.at.Before(committed) {
		t.Fatal("the prune ended before the writer committed")
	}
	// The old decision's bytes are pruned, its snapshot kept for the new.
	if r.st.Decisions != 1 || r.st.Snapshots != 0 {
		t.Fatalf("pruned %+v, want 1 decision and no snapshot", r.st)
	}
	if _, err := s.EvidenceSnapshot(ctx, ev.Key); err != nil {
		t.Fatalf("the snapshot a decision references was removed: %v", err)
	}
	got, err := s.Decision(ctx, fresh)
	if err != nil {
		t.Fatalf("the new decision does not read: %v", err)
	}
	if got.Evidence != ev.Key || got.T != old.T+later {
		t.Fatalf("the new decision reads evidence %s at %d, want %s at %d", got.Evidence, got.T, ev.Key, old.T+later)
	}
	// Once nothing references it, the next prune removes it.
	st, err := s.Prune(ctx, 0, got.T+1)
	if err != nil || st.Decisions != 1 || st.Snapshots != 1 {
		t.Fatalf("the last prune: %+v, %v; want 1 decision and its snapshot", st, err)
	}
}
