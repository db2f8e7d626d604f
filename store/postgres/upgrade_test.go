package postgres

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// v3Store writes, in a database at schema version 3 (issue 16's), what a
// server of that version stored: one room's log of 600 leaves, whose first
// 50 decisions were pruned (their leaves stay, their rows went), 5
// decisions from before the logs (rows, no leaves), and another room's log
// of 3. The hashes are tlog's (refLog); tamper flips one of them. It
// returns the decisions with leaves, and the reference logs.
func v3Store(t *testing.T, dsn string, tamper bool) ([]store.Decision, []store.Decision, map[sig.Hash]*refLog) {
	t.Helper()
	ctx := bg(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := migrate(ctx, c, 3); err != nil {
		t.Fatal(err)
	}
	ds, ev := benchDecisions(608, 0)
	other := sig.Digest([]byte("other room"))
	for i := 605; i < 608; i++ {
		ds[i].Room = other
	}
	old, logged := ds[600:605], append(slices.Clone(ds[:600]), ds[605:]...)
	var snap int64
	if err := c.QueryRow(ctx, "INSERT INTO waisteer.snapshots (key, body) VALUES ($1, $2) RETURNING id", ev.Key[:], ev.Body).Scan(&snap); err != nil {
		t.Fatal(err)
	}
	ctxs := map[sig.Hash]int64{}
	for _, room := range []sig.Hash{ds[0].Room, other} {
		var id int64
		if err := c.QueryRow(ctx, "INSERT INTO waisteer.contexts (room, policy, signer) VALUES ($1, $2, $3) RETURNING id",
			room[:], ds[0].Policy[:], ds[0].Signer[:]).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ctxs[room] = id
	}
	refs := map[sig.Hash]*refLog{ds[0].Room: {}, other: {}}
	for i := range ds {
		d := &ds[i]
		if i >= 50 {
			row, err := store.AppendDecisionRow(nil, d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(ctx, "INSERT INTO waisteer.decisions (digest, seq, writer, t, context, snapshot, row) VALUES ($1, $2, 1, $3, $4, $5, $6)",
				d.Digest[:], i, i64(d.T), ctxs[d.Room], snap, row); err != nil {
				t.Fatal(err)
			}
		}
		if i >= 600 && i < 605 {
			continue
		}
		r := refs[d.Room]
		if _, err := c.Exec(ctx, "INSERT INTO waisteer.log_entries (room, idx, digest, t) VALUES ($1, $2, $3, $4)", d.Room[:], r.n, d.Digest[:], i64(d.T)); err != nil {
			t.Fatal(err)
		}
		base := int64(len(r.hashes))
		r.add(t, store.LogEntry{Digest: d.Digest, T: d.T})
		for x := base; x < int64(len(r.hashes)); x++ {
			h := r.hashes[x]
			if tamper && d.Room == other && x == 2 { // the hash of its first two leaves
				h[0] ^= 1
			}
			if _, err := c.Exec(ctx, "INSERT INTO waisteer.log_hashes (room, idx, hash) VALUES ($1, $2, $3)", d.Room[:], x, h[:]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for room, r := range refs {
		if _, err := c.Exec(ctx, "INSERT INTO waisteer.log_sizes (room, size) VALUES ($1, $2)", room[:], r.n); err != nil {
			t.Fatal(err)
		}
	}
	return logged, old, refs
}

// TestMigrateLogs (issue 31, migrating "without losing anything already
// accepted"): a store of schema 3 migrates to this build's with each
// room's log whole (every leaf in order, a pruned decision's too, and the
// same root, so every checkpoint signed before still verifies), its
// decisions' bytes as they were, those from before the logs readable and
// in no log, and the logs growing on from where they were.
func TestMigrateLogs(t *testing.T) {
	ctx := bg(t)
	dsn := server.Database(t)
	logged, old, refs := v3Store(t, dsn, false)
	s, err := Open(ctx, dsn, WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	byRoom := map[sig.Hash][]store.Decision{}
	for _, d := range logged {
		byRoom[d.Room] = append(byRoom[d.Room], d)
	}
	for room, ds := range byRoom {
		n, err := s.LogSize(ctx, room, 0)
		if err != nil || n != int64(len(ds)) {
			t.Fatalf("room %s: size %d, %v; want %d", room, n, err, len(ds))
		}
		es, err := s.LogEntries(ctx, room, 0, 0, n)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range ds {
			if es[i] != (store.LogEntry{Digest: d.Digest, T: d.T}) {
				t.Fatalf("room %s: leaf %d moved", room, i)
			}
			if n, x, err := s.LogRef(ctx, room, d.Digest); err != nil || n != 0 || x != int64(i) {
				t.Fatalf("room %s: LogRef of leaf %d: %d of log %d, %v", room, i, x, n, err)
			}
		}
		got, err := tlog.TreeHash(n, tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) { return s.LogHashes(ctx, room, 0, xs) }))
		want, _ := tlog.TreeHash(n, refs[room])
		if err != nil || got != want {
			t.Fatalf("room %s: root %v, %v; schema 3's %v", room, got, err, want)
		}
	}
	// The bytes: a pruned one is gone, a kept one and one from before the
	// logs are as stored.
	if _, err := s.Decision(ctx, logged[0].Digest); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a decision pruned under schema 3: %v", err)
	}
	for _, d := range []store.Decision{logged[50], logged[599], logged[600], old[0]} {
		got, err := s.Decision(ctx, d.Digest)
		if err != nil || !sameDecision(got, d) {
			t.Errorf("decision %s after migrating: %v", d.Digest, err)
		}
	}
	if _, _, err := s.LogRef(ctx, old[0].Room, old[0].Digest); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a decision from before the logs is in one: %v", err)
	}
	// The log grows on: the next decision is leaf 600, and the root is
	// tlog's of the 601.
	room := logged[0].Room
	next, ev := benchDecisions(1, 10_000)
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, next); err != nil {
		t.Fatal(err)
	}
	refs[room].add(t, store.LogEntry{Digest: next[0].Digest, T: next[0].T})
	if _, x, err := s.LogRef(ctx, room, next[0].Digest); err != nil || x != 600 {
		t.Fatalf("the first decision after migrating is leaf %d, %v; want 600", x, err)
	}
	got, err := tlog.TreeHash(601, tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) { return s.LogHashes(ctx, room, 0, xs) }))
	if want, _ := tlog.TreeHash(601, refs[room]); err != nil || got != want {
		t.Fatalf("root of 601: %v, %v; want %v", got, err, want)
	}
	// Pruning everything keeps every leaf, and removes what is before the
	// logs outright.
	st, err := s.Prune(ctx, 0, 1<<63)
	if err != nil || st.Decisions != 600-50+3+5+1 {
		t.Fatalf("Prune: %+v, %v; want the %d decisions held", st, err, 600-50+3+5+1)
	}
	if es, err := s.LogEntries(ctx, room, 0, 0, 601); err != nil || len(es) != 601 {
		t.Fatalf("after pruning: %d leaves, %v", len(es), err)
	}
	var rows int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM waisteer.decisions").Scan(&rows); err != nil || rows != 604 {
		t.Fatalf("%d rows after pruning, %v; want the 604 leaves", rows, err)
	}
}

// TestMigrateLogsRefusesAMismatch: a schema 3 store one of whose stored
// hashes does not hash from its leaves is not migrated at all: the error
// says so, and the database is still schema 3, its logs' tables there.
func TestMigrateLogsRefusesAMismatch(t *testing.T) {
	ctx := bg(t)
	dsn := server.Database(t)
	v3Store(t, dsn, true)
	_, err := Migrate(ctx, dsn)
	if err == nil || !strings.Contains(err.Error(), "nothing migrated") {
		t.Fatalf("migrating a log whose hashes do not match its leaves: %v", err)
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if v, err := schemaVersion(ctx, c); err != nil || v != 3 {
		t.Fatalf("schema version %d, %v; want 3", v, err)
	}
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM waisteer.log_entries").Scan(&n); err != nil || n != 603 {
		t.Fatalf("schema 3's leaves: %d, %v; want 603", n, err)
	}
}

// sameDecision compares what a store gives back of a decision.
func sameDecision(a, b store.Decision) bool {
	ra, err1 := store.AppendDecisionRow(nil, &a)
	rb, err2 := store.AppendDecisionRow(nil, &b)
	return err1 == nil && err2 == nil && string(ra) == string(rb) && a.Digest == b.Digest && a.T == b.T &&
		a.Room == b.Room && a.Policy == b.Policy && a.Signer == b.Signer && a.Evidence == b.Evidence
}
