package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions, in order: migrations[i] takes a
// database from version i to i+1. A version once released is never edited;
// a change is a new version. Every object lives in the schema waisteer, so
// that the store can share a database with others.
//
// Integers of the room clock (a decision's t, a record's start and end, µs)
// are u64 in the extension and bigint here, written with the top bit
// flipped (i64), so that every u64 fits and bigint's order is u64's order.
var migrations = []string{
	// 1: what the bbolt store keeps (store's package doc), in tables.
	`-- The order of commits that other instances follow (records, decisions,
	-- changes): each of those is numbered from it under its feed's lock.
	CREATE SEQUENCE waisteer.feed;
	-- Each opening of the store by a server: its rows name it as their
	-- writer, so that a server following the feeds skips its own.
	CREATE TABLE waisteer.instances (
		id      integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		host    text NOT NULL,
		pid     integer NOT NULL,
		started timestamptz NOT NULL DEFAULT now()
	);
	CREATE TABLE waisteer.rooms (
		id           bytea PRIMARY KEY,
		descriptor   bytea NOT NULL,
		key_log_head bytea -- NULL: the room has no origin
	);
	CREATE TABLE waisteer.policies (
		digest bytea PRIMARY KEY,
		room   bytea NOT NULL,
		raw    bytea NOT NULL
	);
	CREATE TABLE waisteer.active_policies (
		room   bytea PRIMARY KEY,
		digest bytea NOT NULL REFERENCES waisteer.policies
	);
	-- A change to a room or to its active policy, for the other instances.
	CREATE TABLE waisteer.changes (
		seq    bigint PRIMARY KEY,
		writer integer NOT NULL,
		kind   text NOT NULL, -- 'room' (its key log head) or 'policy' (its active one)
		room   bytea NOT NULL
	);
	CREATE TABLE waisteer.records (
		digest  bytea PRIMARY KEY,
		seq     bigint NOT NULL UNIQUE,
		writer  integer NOT NULL,
		room    bytea NOT NULL,
		hop     bytea NOT NULL,
		start_t bigint NOT NULL,
		end_t   bigint NOT NULL,
		raw     bytea NOT NULL
	);
	CREATE INDEX records_by_room_end ON waisteer.records (room, end_t, digest);
	CREATE INDEX records_by_end ON waisteer.records (end_t);
	-- A decision's room, policy and signer, which most decisions share.
	CREATE TABLE waisteer.contexts (
		id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		room   bytea NOT NULL,
		policy bytea NOT NULL,
		signer bytea NOT NULL,
		UNIQUE (room, policy, signer)
	);
	-- Evidence snapshots (store.Evidence): key is SHA-256 of body.
	CREATE TABLE waisteer.snapshots (
		id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		key  bytea NOT NULL UNIQUE,
		body bytea NOT NULL
	);
	-- A decision: its row is the bbolt row's layout (store.AppendDecisionRow),
	-- its context and snapshot columns of their own.
	CREATE TABLE waisteer.decisions (
		digest   bytea PRIMARY KEY,
		seq      bigint NOT NULL UNIQUE,
		writer   integer NOT NULL,
		t        bigint NOT NULL,
		context  bigint NOT NULL REFERENCES waisteer.contexts,
		snapshot bigint NOT NULL REFERENCES waisteer.snapshots,
		row      bytea NOT NULL
	);
	CREATE INDEX decisions_by_t ON waisteer.decisions (t);
	CREATE INDEX decisions_by_snapshot ON waisteer.decisions (snapshot);
	CREATE TABLE waisteer.secrets (
		name  text PRIMARY KEY,
		value bytea NOT NULL
	);`,
	// 2: the table of sessions and loads the servers share (§6, Loads):
	// each decision's session, its first pathway among n and its expiry,
	// kept until it expires.
	`CREATE TABLE waisteer.steers (
		seq     bigint PRIMARY KEY,
		writer  integer NOT NULL,
		room    bytea NOT NULL,
		session bytea NOT NULL,
		n       smallint NOT NULL,
		first   smallint NOT NULL,
		expires bigint NOT NULL
	);
	CREATE INDEX steers_by_expires ON waisteer.steers (expires);`,
	// 3: each room's log of decisions (issue 16, store's log.go): its
	// leaves, found also by digest, its stored hashes (tlog's) and its
	// size; and the key log heads each room has had.
	`CREATE TABLE waisteer.log_entries (
		room   bytea NOT NULL,
		idx    bigint NOT NULL,
		digest bytea NOT NULL,
		t      bigint NOT NULL,
		PRIMARY KEY (room, idx)
	);
	CREATE TABLE waisteer.log_hashes (
		room bytea NOT NULL,
		idx  bigint NOT NULL,
		hash bytea NOT NULL,
		PRIMARY KEY (room, idx)
	);
	CREATE INDEX log_entries_by_digest ON waisteer.log_entries (digest);
	CREATE TABLE waisteer.log_sizes (
		room bytea PRIMARY KEY,
		size bigint NOT NULL
	);
	CREATE TABLE waisteer.key_epochs (
		room      bytea NOT NULL,
		seq       bigint NOT NULL, -- u64 as i64 (i64)
		from_size bigint NOT NULL,
		head      bytea NOT NULL,
		handover  bytea, -- NULL for a room's first head
		PRIMARY KEY (room, seq)
	);
	-- A session's decision's t, so that of two the later is taken, as the
	-- audit's recount takes it; a row from before counts as the oldest.
	ALTER TABLE waisteer.steers ADD COLUMN t bigint NOT NULL DEFAULT -9223372036854775808;`,
	// 4: fewer, smaller rows (issue 31). A log is a row of its own, which
	// may have one writer (NULL: the room's one log of issue 16, which
	// every server appends to). A leaf is its decision's row (log, idx); a
	// pruned decision's row keeps its leaf without its bytes. The hashes
	// are tiles (log.go). The decisions' table is made again, its columns
	// in the order that pads least, without the feed number and writer
	// that nothing read. Version 3's leaves move into their rows, and the
	// tiles are made from them and checked against version 3's hashes
	// (upgrades[4]) before those go: a mismatch undoes the whole migration.
	`SELECT pg_advisory_xact_lock(` + strconv.FormatInt(lockDecisions, 10) + `);
	CREATE TABLE waisteer.logs (
		id     integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		room   bytea NOT NULL,
		writer integer, -- its one writer (waisteer.instances), or NULL
		size   bigint NOT NULL DEFAULT 0
	);
	CREATE UNIQUE INDEX logs_shared ON waisteer.logs (room) WHERE writer IS NULL;
	-- A log's stored hashes (tlog's, tiles of height 8): level 0 holds its
	-- complete tiles of 256 leaf hashes, n the tile's index; a level L
	-- above holds each hash of tree level 8L alone, n its index.
	CREATE TABLE waisteer.log_tiles (
		log    integer NOT NULL,
		level  smallint NOT NULL,
		n      bigint NOT NULL,
		hashes bytea NOT NULL,
		PRIMARY KEY (log, level, n)
	);
	INSERT INTO waisteer.logs (room, size) SELECT room, size FROM waisteer.log_sizes ORDER BY room;
	CREATE TABLE waisteer.decisions_4 (
		t        bigint NOT NULL,
		snapshot bigint, -- NULL once pruned, as context and row
		idx      bigint, -- the leaf's index in its log; NULL with log before the logs
		context  bigint,
		log      integer,
		digest   bytea NOT NULL,
		row      bytea
	);
	INSERT INTO waisteer.decisions_4 (t, snapshot, idx, context, log, digest, row)
		SELECT t, snapshot, idx, context, log, digest, row FROM (
			SELECT d.t, d.snapshot, e.idx, d.context, l.id AS log, d.digest, d.row FROM waisteer.decisions d
				LEFT JOIN (waisteer.log_entries e JOIN waisteer.logs l ON l.room = e.room) ON e.digest = d.digest
			UNION ALL
			SELECT e.t, NULL, e.idx, NULL, l.id, e.digest, NULL FROM waisteer.log_entries e JOIN waisteer.logs l ON l.room = e.room
				WHERE NOT EXISTS (SELECT 1 FROM waisteer.decisions d WHERE d.digest = e.digest)
		) AS u ORDER BY log NULLS FIRST, idx;
	DROP TABLE waisteer.decisions;
	ALTER TABLE waisteer.decisions_4 RENAME TO decisions;
	ALTER TABLE waisteer.decisions ADD PRIMARY KEY (digest),
		ADD FOREIGN KEY (context) REFERENCES waisteer.contexts, ADD FOREIGN KEY (snapshot) REFERENCES waisteer.snapshots;
	CREATE UNIQUE INDEX decisions_by_leaf ON waisteer.decisions (log, idx);
	CREATE INDEX decisions_by_t ON waisteer.decisions (t) WHERE row IS NOT NULL;
	CREATE INDEX decisions_by_snapshot ON waisteer.decisions (snapshot);`,
	// 5: one log per server and room (issue 31, SPEC-NOTES "One log per
	// server and room"). A log has a number in its room (n: 0 for the
	// room's log of schema 4, then 1, 2, … in the order made) and, once
	// sealed, its final size in sealed, which the check holds equal to
	// size: a sealed log's size never changes again, whoever tries (a
	// server of schema 4 still running included, whose next append to
	// its room's log fails on it). Each instance refreshes seen, so that
	// one gone is told apart. An epoch's head is kept once, its start in
	// each log in key_epoch_starts; schema 4's start in its room's one
	// log, which is now log 0.
	`ALTER TABLE waisteer.instances ADD COLUMN seen timestamptz NOT NULL DEFAULT now();
	ALTER TABLE waisteer.logs ADD COLUMN n integer, ADD COLUMN sealed bigint;
	UPDATE waisteer.logs SET n = 0, sealed = size;
	ALTER TABLE waisteer.logs ALTER COLUMN n SET NOT NULL,
		ADD CONSTRAINT logs_sealed CHECK (sealed IS NULL OR sealed = size);
	DROP INDEX waisteer.logs_shared;
	CREATE UNIQUE INDEX logs_by_number ON waisteer.logs (room, n);
	-- A writer has at most one open log of a room.
	CREATE UNIQUE INDEX logs_open ON waisteer.logs (room, writer) WHERE sealed IS NULL;
	CREATE TABLE waisteer.key_epoch_starts (
		room      bytea NOT NULL,
		seq       bigint NOT NULL, -- u64 as i64 (i64)
		log       integer NOT NULL, -- the log's number in the room
		from_size bigint NOT NULL,
		handover  bytea, -- NULL for a log's first head
		PRIMARY KEY (room, seq, log)
	);
	INSERT INTO waisteer.key_epoch_starts (room, seq, log, from_size, handover)
		SELECT room, seq, 0, from_size, handover FROM waisteer.key_epochs;
	ALTER TABLE waisteer.key_epochs DROP COLUMN from_size, DROP COLUMN handover;`,
	// 6: a decision's references to its context and snapshot are kept by
	// the store, not by foreign keys (issue 31: their checks were a third
	// of PostgreSQL's work on a decision's insert). A group holds the
	// snapshots it references locked (FOR KEY SHARE) to its commit, and a
	// prune locks a snapshot (FOR UPDATE) before it asks whether a
	// decision references it (prune.go); contexts are never removed.
	// A decision carries its session's entry in the table of loads (§6,
	// Loads): the pathway it put first and the session's expiry (NULL for
	// a decision steered by no table, and for those of schema 5), which
	// the other servers read with it; waisteer.steers is written no more,
	// and read once by a starting server for the sessions live at the
	// upgrade. Decisions are found by the end of their session (their t
	// without one): a starting server's live sessions, and a prune's
	// decisions past.
	`ALTER TABLE waisteer.decisions ADD COLUMN first smallint, ADD COLUMN ends bigint;
	DROP INDEX waisteer.decisions_by_t;
	CREATE INDEX decisions_by_end ON waisteer.decisions ((coalesce(ends, t))) WHERE row IS NOT NULL;
	DO $$
	DECLARE c text;
	BEGIN
		FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'waisteer.decisions'::regclass AND contype = 'f' LOOP
			EXECUTE format('ALTER TABLE waisteer.decisions DROP CONSTRAINT %I', c);
		END LOOP;
	END $$;`,
}

// upgrades are the steps of a migration written in Go, run after its SQL
// in its transaction.
var upgrades = map[int]func(context.Context, pgx.Tx) error{4: tileLogs}

// Version is the schema version this build writes and reads.
var Version = len(migrations)

// Advisory lock keys: one session lock for migrating, and one transaction
// lock per feed, held from numbering a commit's rows to its end, so that
// the feed's numbers become visible in order (a reader that saw n has seen
// every number below it).
const (
	lockMigrate   int64 = 0x7761697374656572 // "waisteer"
	lockRecords   int64 = lockMigrate + 1
	lockDecisions int64 = lockMigrate + 2
	lockChanges   int64 = lockMigrate + 3
)

// Migrate applies the pending migrations to the database, one instance at
// a time (under an advisory lock: instances starting together wait for the
// first), and returns the versions it applied. A database of a newer
// version than this build knows is refused: an older binary must not
// write a schema it does not know.
//
// Of opts, only the connect timeout applies (WithTimeouts).
func Migrate(ctx context.Context, dsn string, opts ...Option) ([]int, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: the DSN does not read: %w", err)
	}
	timeouts(cc, dsn, o, false)
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("postgres: connecting: %w", connectErr(err, cc))
	}
	defer c.Close(context.Background())
	return migrate(ctx, c, Version)
}

// migrate takes the database to version to (a test's older one, or
// Version).
func migrate(ctx context.Context, c *pgx.Conn, to int) (applied []int, err error) {
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock($1)", lockMigrate); err != nil {
		return nil, fmt.Errorf("postgres: waiting for the migration lock: %w", err)
	}
	defer func() {
		if _, uerr := c.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lockMigrate); uerr != nil && err == nil {
			err = fmt.Errorf("postgres: releasing the migration lock: %w", uerr)
		}
	}()
	if _, err := c.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS waisteer;
	CREATE TABLE IF NOT EXISTS waisteer.schema_versions (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return nil, fmt.Errorf("postgres: the schema's version table: %w", err)
	}
	have, err := schemaVersion(ctx, c)
	if err != nil {
		return nil, err
	}
	if have > Version {
		return nil, fmt.Errorf("postgres: the database's schema is version %d, newer than this waisteer's %d: run a waisteer of that version or newer", have, Version)
	}
	for v := have + 1; v <= to; v++ {
		err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			if up := upgrades[v]; up != nil {
				if err := up(ctx, tx); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, "INSERT INTO waisteer.schema_versions (version) VALUES ($1)", v)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("postgres: migration %d: %w", v, err)
		}
		applied = append(applied, v)
	}
	return applied, nil
}

// schemaVersion is the database's schema version; 0 before the first.
func schemaVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var v *int
	err := q.QueryRow(ctx, "SELECT max(version) FROM waisteer.schema_versions").Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined_table, invalid_schema_name
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: reading the schema's version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// checkVersion refuses a database whose schema is not this build's.
func checkVersion(ctx context.Context, p *pgxpool.Pool) error {
	v, err := schemaVersion(ctx, p)
	if err != nil {
		return err
	}
	switch {
	case v < Version:
		return fmt.Errorf("postgres: the database's schema is version %d, this waisteer's %d: run waisteer migrate (waisteer serve migrates at start-up)", v, Version)
	case v > Version:
		return fmt.Errorf("postgres: the database's schema is version %d, newer than this waisteer's %d", v, Version)
	}
	return nil
}
