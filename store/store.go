package store

import (
	"context"
	"errors"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

// ErrNotFound is returned for a digest or room the store does not hold.
var ErrNotFound = errors.New("store: not found")

// ErrSnapshotMissing is returned by PutDecisions for a decision whose
// evidence snapshot is neither held nor given.
var ErrSnapshotMissing = errors.New("store: evidence snapshot missing")

// ErrMismatch is returned by Rebuild when the bytes it writes are not the
// decision whose digest is stored (§7.3): such bytes are never served.
var ErrMismatch = errors.New("store: rebuilt decision does not match its digest")

// Room is a room's descriptor and the current head of its key log (nil when
// the room has no origin; an empty head, which is a head given that does
// not read, is kept apart from nil).
type Room struct {
	ID         sig.Hash
	Descriptor []byte
	KeyLogHead []byte
}

// Record is an accepted per-hop record with the fields the store indexes.
type Record struct {
	Digest sig.Hash
	Room   sig.Hash
	Hop    sig.PublicKey
	Start  uint64
	End    uint64
	Raw    []byte // the exact WMH1 bytes
}

// Evidence is one snapshot of a room's evidence: the per-pathway part of a
// decision (§7.1: status, class, J, D and the digests named), as
// EncodeEvidence writes it. Its key is SHA-256 of Body; decisions made while
// the evidence did not change share one snapshot.
type Evidence struct {
	Key  sig.Hash
	Body []byte
}

// Decision is a decision as stored: what cannot be recomputed.
type Decision struct {
	Digest   sig.Hash // of the WSD1 bytes before sig
	Room     sig.Hash
	Policy   sig.Hash
	T        uint64 // µs on the room clock
	Session  report.Session
	Protocol report.Protocol
	Report   report.Report
	Loads    []uint32 // in the policy's order
	Evidence sig.Hash // the key of its Evidence snapshot
	Signer   sig.PublicKey
	Sig      sig.Signature
}

// Store is the durable state of a server. Every method is safe for
// concurrent use. A write method returns only once what it wrote is durable.
type Store interface {
	// PutRoom stores a room, replacing its key log head.
	PutRoom(ctx context.Context, r Room) error
	Rooms(ctx context.Context) ([]Room, error)

	// PutPolicy stores a policy by its digest; with active it becomes the
	// room's active policy. Earlier policies stay available by digest.
	PutPolicy(ctx context.Context, room sig.Hash, digest sig.Hash, raw []byte, active bool) error
	Policy(ctx context.Context, digest sig.Hash) ([]byte, error)
	ActivePolicy(ctx context.Context, room sig.Hash) (digest sig.Hash, raw []byte, err error)

	// PutRecords stores records idempotently by digest, in one durable
	// write, and reports for each whether it was new.
	PutRecords(ctx context.Context, rs []Record) (added []bool, err error)
	Record(ctx context.Context, digest sig.Hash) ([]byte, error)
	// Records calls fn for each record of the room whose end is after
	// since, in no particular order: a starting server rebuilds its
	// evidence index from them.
	Records(ctx context.Context, room sig.Hash, since uint64, fn func(Record) error) error

	// PutDecisions stores decisions and the evidence snapshots they
	// reference (a snapshot already held is not written again) in one
	// durable write: a server commits decisions in groups. A decision
	// already held (by digest) is not stored again. Each decision's
	// snapshot must be held or given in ev, whose keys must be SHA-256 of
	// their bodies; otherwise nothing of the group is written. A snapshot
	// given that no new decision references is not stored. Nothing of ev
	// or ds is retained: a caller may reuse them once it returns.
	PutDecisions(ctx context.Context, ev []Evidence, ds []Decision) error
	Decision(ctx context.Context, digest sig.Hash) (Decision, error)
	EvidenceSnapshot(ctx context.Context, key sig.Hash) ([]byte, error)

	// Prune removes records whose end is before recordsBefore and
	// decisions whose t is before decisionsBefore (µs on the room clock,
	// which COMPANION §4 makes one scale for every room), and snapshots no
	// decision left references. A server keeps records a window longer
	// than decisions, so that every decision it keeps still verifies.
	// It runs beside the service without stopping it: it removes in
	// bounded groups, each its own durable write.
	Prune(ctx context.Context, recordsBefore, decisionsBefore uint64) (PruneStats, error)

	// Secret returns the server's secret of that name, n random bytes
	// made at its first call and the same ever after, for every server on
	// the store: a pool's sessions are made with one (internal/pool), so
	// that a session one server minted is known to the others and after a
	// restart. A secret held with another length is an error.
	Secret(ctx context.Context, name string, n int) ([]byte, error)

	// Every decision PutDecisions stores is appended to its room's log
	// (log.go), in the same durable write.
	Log

	Close() error
}

// PruneStats counts what Prune removed.
type PruneStats struct {
	Records, Decisions, Snapshots int
}

// Loads is the table of sessions and loads (§6, §9.2): which pathway each
// live session's latest decision put first, and so how many sessions each
// pathway is steered first to. A shared backend implements Steer as one
// atomic round trip.
type Loads interface {
	// Steer reads the room's loads as they stand at now, with this
	// session counted on the pathway its latest decision put first while
	// it is still live, and calls decide with them (in the policy's order,
	// n pathways) and the instant they were read at: now, or one µs after
	// the room's previous Steer (or the instant after one Unsteer took
	// back) if now is not later, so that one table orders a room's
	// decisions by their instants (the audit's recount, issue 16).
	// decide returns the pathway the new decision puts first
	// and until when (µs on the room clock) the session counts toward it:
	// it counts while now ≤ expires, and nowhere once expires < now.
	// Steer records that before it returns. decide runs once, with the
	// room's loads held, and must be quick; loads is valid only during the
	// call and must not be kept. An error from decide, or a first that is
	// not below n, leaves the table as it was. A room whose table was for
	// another count of pathways is reset to n first.
	Steer(ctx context.Context, room sig.Hash, n int, session report.Session, now uint64,
		decide func(loads []uint32, at uint64) (first int, expires uint64, err error)) error
	// Unsteer takes back the Steer of the session whose decide was
	// given the instant t, once that decision is known not to be stored
	// (its group commit failed): §6 counts a session from its latest
	// stored decision, and a request answered 503 stored none. The
	// session's entry before that Steer is restored (its first pathway,
	// instant and expiry), or the session dropped if it had none; an entry
	// that is no longer that Steer's (a later Steer or another server's
	// decision of the session, an expiry, a Reset) is left alone. It
	// reports what it did. It is quick and needs no round trip: a shared
	// table shares the undo as it shares a Steer.
	Unsteer(room sig.Hash, session report.Session, t uint64) Undone
	// Snapshot returns the room's loads at now (for status and metrics),
	// in a new slice.
	Snapshot(ctx context.Context, room sig.Hash, n int, now uint64) ([]uint32, error)
	// Reset forgets a room's sessions (a new policy may change the count
	// of pathways).
	Reset(ctx context.Context, room sig.Hash) error
}

// LoadEntry is a session's entry in a table of loads: the pathway its
// latest decision put first, the decision's instant, and until when it
// counts.
type LoadEntry struct {
	First      int
	T, Expires uint64
}

// Undone is what an Unsteer did: nothing (Done false), or it took back
// the entry Taken of a room's table of N pathways and restored Prev (Had)
// or dropped the session (Had false).
type Undone struct {
	Done, Had   bool
	N           int
	Taken, Prev LoadEntry
}

// Feed is what a store shared by several servers (issue 15) tells each of
// them about what the others wrote, in commit order, so that a record
// posted to any server is in the evidence of every one, and a policy or
// key log head put to one is active on all. A store that one server holds
// alone (Bolt, Memory) has no feed.
type Feed interface {
	// FeedHead is the feeds' position now. A server reads it before it
	// reads the store's state at start-up, then follows from it: what is
	// written in between comes again, and is known already (records are
	// idempotent by digest; a change is read from the store as it stands).
	FeedHead(ctx context.Context) (FeedPosition, error)
	// Follow calls fn, in commit order, with what the other servers wrote
	// after from, as soon as it is committed, until ctx ends or the store
	// cannot be reached; it then returns the error, and the caller follows
	// again from the last position fn was given, missing nothing. fn's
	// batch is valid only during the call.
	Follow(ctx context.Context, from FeedPosition, fn func(FeedBatch) error) error
}

// Health is what a store reached over a network (the PostgreSQL store)
// says of its own state (issue 26 item 6): whether it answers now, how
// many outages it has had, and when it is back. Such a store logs each
// change of its state itself, once, with the reason, so that the server's
// loops and requests need not (a store one server holds alone has no
// Health).
type Health interface {
	// Up is false from a failure to reach the store to the next success.
	Up() bool
	// Outages counts the changes from up to down.
	Outages() uint64
	// Back is closed once the store is up: at once while it is up, at the
	// end of the outage while it is down.
	Back() <-chan struct{}
}

// FeedPosition is how far a server has followed each feed: the number of
// the last record and change it was given.
type FeedPosition struct{ Records, Changes int64 }

// FeedBatch is what Follow gives at once: records in commit order, the
// rooms whose descriptor and key log head, or active policy, changed, and
// the position after them.
type FeedBatch struct {
	Records  []Record
	Rooms    []sig.Hash // PutRoom: read the room again
	Policies []sig.Hash // PutPolicy with active: read the room's active policy again
	At       FeedPosition
}
