package postgres

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	// Log 0 is sealed (schema 5, issue 31): the next decision is leaf 0
	// of the server's own log, 1.
	room := logged[0].Room
	next, ev := benchDecisions(1, 10_000)
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, next); err != nil {
		t.Fatal(err)
	}
	if n, x, err := s.LogRef(ctx, room, next[0].Digest); err != nil || n != 1 || x != 0 {
		t.Fatalf("the first decision after migrating is leaf %d of log %d, %v; want 0 of 1", x, n, err)
	}
	if n, err := s.LogSize(ctx, room, 0); err != nil || n != 600 {
		t.Fatalf("log 0 has %d leaves, %v; want its 600", n, err)
	}
	// Pruning everything keeps every leaf, and removes what is before the
	// logs outright.
	st, err := s.Prune(ctx, 0, 1<<63)
	if err != nil || st.Decisions != 600-50+3+5+1 {
		t.Fatalf("Prune: %+v, %v; want the %d decisions held", st, err, 600-50+3+5+1)
	}
	if es, err := s.LogEntries(ctx, room, 0, 0, 600); err != nil || len(es) != 600 {
		t.Fatalf("after pruning: %d leaves, %v", len(es), err)
	}
	if es, err := s.LogEntries(ctx, room, 1, 0, 1); err != nil || len(es) != 1 || es[0].Digest != next[0].Digest {
		t.Fatalf("after pruning: log 1's leaves %v, %v", es, err)
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

// v4Append appends the decisions to the room's one log as a server of
// schema 4 did (its group.go): each decision's row holds its leaf (log,
// idx), the tiles the leaves complete are written, and the log's size; the
// reference log gets them too.
func v4Append(t *testing.T, c *pgx.Conn, ds []store.Decision, ref *refLog) {
	t.Helper()
	ctx := bg(t)
	room := ds[0].Room
	var id, cx, snap int64
	var size int64
	if err := c.QueryRow(ctx, "SELECT id, size FROM waisteer.logs WHERE room = $1 AND writer IS NULL", room[:]).Scan(&id, &size); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT id FROM waisteer.contexts WHERE room = $1", room[:]).Scan(&cx); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT id FROM waisteer.snapshots").Scan(&snap); err != nil {
		t.Fatal(err)
	}
	f, err := readFrontier(ctx, c, int32(id), size)
	if err != nil {
		t.Fatal(err)
	}
	var es []store.LogEntry
	for _, d := range ds {
		es = append(es, store.LogEntry{Digest: d.Digest, T: d.T})
		ref.add(t, es[len(es)-1])
	}
	_, ts, err := appendTo(f, es)
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		for i := range ds {
			row, err := store.AppendDecisionRow(nil, &ds[i])
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO waisteer.decisions (t, snapshot, idx, context, log, digest, row) VALUES ($1, $2, $3, $4, $5, $6, $7)",
				i64(ds[i].T), snap, size+int64(i), cx, id, ds[i].Digest[:], row); err != nil {
				return err
			}
		}
		if err := writeTiles(ctx, tx, int32(id), ts); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE waisteer.logs SET size = $1 WHERE id = $2", size+int64(len(ds)), id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrateOneLogPerServer (issue 31, SPEC-NOTES "One log per server and
// room": migrating a store of schema 4): a database of schema 4 whose room
// has its one shared log of 1 300 leaves (600 from schema 3, 700 appended
// by schema 4 across three bottom tiles), another room's of 3, and two key
// log heads, migrates to schema 5: each shared log becomes log 0 of its
// room, sealed at its size, with no server, the same leaves and the same
// root (the root before migrating, of tlog's reference and of the tiles
// read at schema 4); every old decision is found in log 0 at its index;
// the heads' starts are in log 0. A server's first decision then goes to a
// new log of its own, 1, which starts under the latest head at 0; an
// append to log 0 as a server of schema 4 still running would make it is
// refused by the database.
func TestMigrateOneLogPerServer(t *testing.T) {
	ctx := bg(t)
	dsn := server.Database(t)
	logged, _, refs := v3Store(t, dsn, false)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := migrate(ctx, c, 4); err != nil {
		t.Fatal(err)
	}
	room, other := logged[0].Room, logged[600].Room
	more, _ := benchDecisions(700, 20_000)
	v4Append(t, c, more, refs[room])
	all := append(slices.Clone(logged[:600]), more...)
	if _, err := c.Exec(ctx, `INSERT INTO waisteer.key_epochs (room, seq, from_size, head, handover) VALUES
		($1, $2, 0, 'head 1', NULL), ($1, $3, 600, 'head 2', 'checkpoint at 600')`, room[:], i64(1), i64(2)); err != nil {
		t.Fatal(err)
	}
	// The root schema 4 serves, from its tiles.
	var id4 int32
	if err := c.QueryRow(ctx, "SELECT id FROM waisteer.logs WHERE room = $1", room[:]).Scan(&id4); err != nil {
		t.Fatal(err)
	}
	before, err := tlog.TreeHash(1300, tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) { return readHashes(ctx, c, id4, 1300, xs) }))
	if want, _ := tlog.TreeHash(1300, refs[room]); err != nil || before != want {
		t.Fatalf("schema 4's root %v, %v; tlog's %v", before, err, want)
	}

	s, err := Open(ctx, dsn, WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for r, want := range map[sig.Hash]int64{room: 1300, other: 3} {
		logs, err := s.Logs(ctx, r)
		if err != nil || len(logs) != 1 || logs[0] != (store.LogInfo{N: 0, Server: "", Size: want, Sealed: true}) {
			t.Fatalf("room %s's logs after migrating: %+v, %v; want log 0 of %d, sealed", r, logs, err, want)
		}
		got, err := tlog.TreeHash(want, tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) { return s.LogHashes(ctx, r, 0, xs) }))
		if ref, _ := tlog.TreeHash(want, refs[r]); err != nil || got != ref {
			t.Fatalf("room %s: log 0's root %v, %v; before migrating %v", r, got, err, ref)
		}
	}
	es, err := s.LogEntries(ctx, room, 0, 0, 1300)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range all {
		if es[i] != (store.LogEntry{Digest: d.Digest, T: d.T}) {
			t.Fatalf("leaf %d moved", i)
		}
		if i%97 == 0 || i == 1299 {
			if n, x, err := s.LogRef(ctx, room, d.Digest); err != nil || n != 0 || x != int64(i) {
				t.Fatalf("LogRef of leaf %d: %d of log %d, %v; want %d of 0", i, x, n, err, i)
			}
		}
	}
	if got, err := s.Decision(ctx, more[699].Digest); err != nil || !sameDecision(got, more[699]) {
		t.Fatalf("a decision of schema 4 after migrating: %v", err)
	}
	wantEpochs := func(want []store.KeyEpoch) {
		t.Helper()
		got, err := s.KeyEpochs(ctx, room)
		if err != nil || len(got) != len(want) {
			t.Fatalf("epochs %+v, %v; want %+v", got, err, want)
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Seq != w.Seq || g.Log != w.Log || g.From != w.From || string(g.Head) != string(w.Head) || string(g.Handover) != string(w.Handover) || (g.Handover == nil) != (w.Handover == nil) {
				t.Fatalf("epoch %d: %+v; want %+v", i, g, w)
			}
		}
	}
	wantEpochs([]store.KeyEpoch{
		{Seq: 1, Log: 0, From: 0, Head: []byte("head 1")},
		{Seq: 2, Log: 0, From: 600, Head: []byte("head 2"), Handover: []byte("checkpoint at 600")},
	})

	next, ev := benchDecisions(2, 30_000)
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, next); err != nil {
		t.Fatal(err)
	}
	for i, d := range next {
		if n, x, err := s.LogRef(ctx, room, d.Digest); err != nil || n != 1 || x != int64(i) {
			t.Fatalf("decision %d after migrating: leaf %d of log %d, %v; want %d of 1", i, x, n, err, i)
		}
	}
	logs, err := s.Logs(ctx, room)
	if err != nil || len(logs) != 2 || logs[0].Size != 1300 || !logs[0].Sealed || logs[1] != (store.LogInfo{N: 1, Server: s.server, Size: 2}) {
		t.Fatalf("logs after a decision: %+v, %v; want log 0 sealed at 1300, log 1 of 2 leaves open, by %q", logs, err, s.server)
	}
	wantEpochs([]store.KeyEpoch{
		{Seq: 1, Log: 0, From: 0, Head: []byte("head 1")},
		{Seq: 2, Log: 0, From: 600, Head: []byte("head 2"), Handover: []byte("checkpoint at 600")},
		{Seq: 2, Log: 1, From: 0, Head: []byte("head 2")},
	})
	// A server of schema 4 still running appends to the room's log 0 and
	// writes its size: the database refuses it, and its whole group.
	_, err = c.Exec(ctx, "UPDATE waisteer.logs SET size = size + 1 WHERE room = $1 AND writer IS NULL", room[:])
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.ConstraintName != "logs_sealed" {
		t.Fatalf("an append to the sealed log 0: %v; want the seal's check to refuse it", err)
	}
}
