// Package audit is an auditor's view of a room's logs of decisions (issue
// 16): it fetches a server's checkpoint of each log, the key log heads the
// room has had and the tiles, checks that each log is one append-only tree
// that the room's keys signed, and gives each decision's place and the
// head it is checked against. A room steered by several servers on one
// database has a log per server (issue 31); the audit merges them by
// (t, log, index), the room's order. Loads and shares are recounted by
// verify/recount.
package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/verify"
)

// Epoch is a key log head the room has had, read and verified.
type Epoch struct {
	Seq      uint64
	From     int64
	Head     []byte
	Room     *room.Room // the room under this head
	Handover []byte
}

// Log is what an auditor holds of one of a room's logs: a checkpoint that
// verifies and the epochs it rests on.
type Log struct {
	Base       string // the server's scheme and host
	RoomID     sig.Hash
	Descriptor []byte
	// N is the log's number in its room: 0 for issue 16's one log.
	N int64
	// Server is the server that appends to it, "<host> <pid>", as its
	// checkpoint names it; "" for log 0.
	Server string
	// Sealed is true for a log the server lists as sealed: its size is
	// final.
	Sealed     bool
	Checkpoint declog.Checkpoint
	Raw        []byte        // the signed checkpoint
	Signer     sig.PublicKey // who signed it
	Epochs     []Epoch       // the heads with a start in this log, by seq; none for a room with no origin
	origin     bool          // the descriptor names an origin
	room       *room.Room    // with no head, for a room with no origin
	heads      headCache     // the heads fetched, shared by a room's logs
}

// Name names the log in messages: "log 3 (server host pid)", or "log 0".
func (l *Log) Name() string { return logName(l.N, l.Server) }

func logName(n int64, server string) string {
	if server == "" {
		return fmt.Sprintf("log %d", n)
	}
	return fmt.Sprintf("log %d (server %s)", n, server)
}

// headCache keeps each head fetched by seq, so that a room's logs fetch
// and verify each once.
type headCache map[uint64]fetchedHead

type fetchedHead struct {
	head []byte
	rm   *room.Room
}

// Failure is a check the log fails: what and why. Its Log names the log
// (Log.Name), Where the place (a route, a leaf's index).
type Failure struct {
	Log   string
	Where string
	Err   error
}

func (f *Failure) Error() string {
	if f.Log != "" {
		return f.Log + ": " + f.Where + ": " + f.Err.Error()
	}
	return f.Where + ": " + f.Err.Error()
}

func (f *Failure) Unwrap() error { return f.Err }

// of names the log a failure is of.
func (l *Log) of(err error) error {
	var f *Failure
	if errors.As(err, &f) {
		if f.Log == "" {
			f.Log = l.Name()
		}
		return f
	}
	return &Failure{Log: l.Name(), Where: "log", Err: err}
}

func fail(where, format string, args ...any) *Failure {
	return &Failure{Where: where, Err: fmt.Errorf(format, args...)}
}

// FetchLog fetches and checks room's log 0 at base (issue 16's routes,
// /v1/rooms/{room}/log/): the checkpoint, which the room's authority or a
// steering key of the head it names must sign; the epochs, each head the
// room's origin's and each handover signed under the head before it and
// consistent with the checkpoint. descriptor is the room's, fetched by the
// caller (and pinned by it, if it pins one).
func FetchLog(ctx context.Context, c *client.Client, base string, roomID sig.Hash, descriptor []byte) (*Log, error) {
	return FetchLogN(ctx, c, base, roomID, descriptor, 0)
}

// FetchLogN is FetchLog for log n of the room, at /v1/rooms/{room}/logs/{n}/
// (issue 31), or /log/ for log 0.
func FetchLogN(ctx context.Context, c *client.Client, base string, roomID sig.Hash, descriptor []byte, n int64) (*Log, error) {
	l, err := fetchLog(ctx, c, base, roomID, descriptor, n, headCache{})
	if err != nil {
		return nil, l.of(err)
	}
	return l, nil
}

func fetchLog(ctx context.Context, c *client.Client, base string, roomID sig.Hash, descriptor []byte, n int64, heads headCache) (*Log, error) {
	l := &Log{Base: base, RoomID: roomID, Descriptor: descriptor, N: n, heads: heads}
	d, err := room.ParseDescriptor(descriptor)
	if err != nil {
		return l, fail("room", "the room does not read: %v", err)
	}
	if l.origin = d.Origin != nil; !l.origin {
		// No origin: no key log, and the room reads on its own.
		if l.room, err = room.Open(descriptor, nil); err != nil {
			return l, fail("room", "the room does not read: %v", err)
		}
	}
	if l.Raw, err = c.Get(ctx, l.url("checkpoint"), declog.MaxCheckpointBytes); err != nil {
		return l, &Failure{Where: "checkpoint", Err: err}
	}
	named, err := declog.PeekLog(l.Raw, roomID, n)
	if err != nil {
		return l, &Failure{Where: "checkpoint", Err: err}
	}
	l.Server = named.Server
	if err := l.fetchEpochs(ctx, c); err != nil {
		return l, err
	}
	under, err := l.roomOf(named.Keys, "checkpoint")
	if err != nil {
		return l, err
	}
	if named.Keys != nil {
		// The head in force at the log's size: the last to start at or
		// before it (issue 31: in this log), or one that starts at the
		// size exactly, which no leaf of the tree is under.
		for _, e := range l.Epochs {
			if e.Seq > named.Keys.Seq && e.From < named.Size {
				return l, fail("checkpoint", "it names the head of seq %d from leaf %d, and the log's head of seq %d starts at leaf %d, within its %d leaves", named.Keys.Seq, named.Keys.From, e.Seq, e.From, named.Size)
			}
		}
	}
	if l.Checkpoint, l.Signer, err = openUnder(l.Raw, under, n); err != nil {
		return l, &Failure{Where: "checkpoint", Err: err}
	}
	// Each handover: signed under the head before it in this log, of the
	// log's first From leaves, which the checkpoint's tree extends.
	for k := 1; k < len(l.Epochs); k++ {
		e, prev := l.Epochs[k], l.Epochs[k-1]
		where := fmt.Sprintf("epochs/%d", e.Seq)
		if e.From > l.Checkpoint.Size {
			// A head installed since the checkpoint was signed: its
			// handover is of a tree the checkpoint does not hold yet.
			continue
		}
		h, _, err := openUnder(e.Handover, prev.Room, n)
		if err != nil {
			return l, fail(where, "its handover: %v", err)
		}
		if h.Size != e.From || h.Keys == nil || h.Keys.Seq != prev.Seq || h.Keys.From != prev.From {
			return l, fail(where, "its handover is of %d leaves under head %+v, not of %d under seq %d from %d", h.Size, h.Keys, e.From, prev.Seq, prev.From)
		}
		if err := l.CheckConsistent(ctx, c, h); err != nil {
			return l, fail(where, "its handover: %v", err)
		}
	}
	return l, nil
}

// url is the address of one of the log's routes: under /log/ for log 0,
// as issue 16 serves it, and /logs/{n}/ for the others.
func (l *Log) url(rest string) string {
	if l.N == 0 {
		return l.Base + "/v1/rooms/" + l.RoomID.String() + "/log/" + rest
	}
	return l.Base + "/v1/rooms/" + l.RoomID.String() + "/logs/" + strconv.FormatInt(l.N, 10) + "/" + rest
}

// fetchEpochs fetches the heads with a start in the log, each read under
// the room's origin with its seq the epoch's, at increasing seqs and sizes.
func (l *Log) fetchEpochs(ctx context.Context, c *client.Client) error {
	var es []serverEpoch
	if err := c.GetJSON(ctx, l.url("epochs"), &es); err != nil {
		return &Failure{Where: "epochs", Err: err}
	}
	for i, se := range es {
		where := fmt.Sprintf("epochs/%d", se.Seq)
		if i > 0 && (se.Seq <= es[i-1].Seq || se.From < es[i-1].From) {
			return fail(where, "after seq %d from leaf %d, seq %d from leaf %d", es[i-1].Seq, es[i-1].From, se.Seq, se.From)
		}
		if se.From < 0 {
			return fail(where, "it starts at leaf %d", se.From)
		}
		if (i == 0) != (se.Handover == "") {
			return fail(where, "the log's first head has no handover, and every other one has one")
		}
		h, ok := l.heads[se.Seq]
		if !ok {
			head, err := c.Get(ctx, l.Base+"/v1/rooms/"+l.RoomID.String()+fmt.Sprintf("/keylog/%d", se.Seq), api.MaxKeyLogBytes)
			if err != nil {
				return &Failure{Where: where, Err: err}
			}
			rm, err := room.Open(l.Descriptor, head)
			if err != nil {
				return fail(where, "the head does not verify: %v", err)
			}
			if rm.Head().Seq != se.Seq {
				return fail(where, "the head served is of seq %d", rm.Head().Seq)
			}
			h = fetchedHead{head: head, rm: rm}
			l.heads[se.Seq] = h
		}
		l.Epochs = append(l.Epochs, Epoch{Seq: se.Seq, From: se.From, Head: h.head, Room: h.rm, Handover: []byte(se.Handover)})
	}
	if (len(l.Epochs) > 0) != l.origin {
		return fail("epochs", "%d heads for a room %s", len(l.Epochs), map[bool]string{false: "with no origin", true: "with an origin"}[l.origin])
	}
	return nil
}

// serverEpoch is /log/epochs' entry (server.Epoch).
type serverEpoch struct {
	Seq      uint64 `json:"seq"`
	From     int64  `json:"from"`
	Handover string `json:"handover"`
}

// roomOf is the room under the epoch a checkpoint names.
func (l *Log) roomOf(e *declog.Epoch, where string) (*room.Room, error) {
	if e == nil {
		if len(l.Epochs) > 0 {
			return nil, fail(where, "it names no head, and the room has a key log")
		}
		return l.room, nil
	}
	for _, ep := range l.Epochs {
		if ep.Seq == e.Seq {
			if ep.From != e.From {
				return nil, fail(where, "it names head %d from leaf %d, which the epochs start at %d", e.Seq, e.From, ep.From)
			}
			return ep.Room, nil
		}
	}
	return nil, fail(where, "it names head %d, which is none of the room's", e.Seq)
}

// openUnder opens a signed checkpoint of log n whose signer the room under
// a head lets sign for it (§3.5: the authority or a steering key,
// live/steer).
func openUnder(b []byte, rm *room.Room, n int64) (declog.Checkpoint, sig.PublicKey, error) {
	keys := []sig.PublicKey{rm.Authority()}
	if h := rm.Head(); h != nil {
		for _, e := range h.Entries {
			keys = append(keys, e.Key)
		}
	}
	c, by, err := declog.OpenLog(b, rm.ID(), n, keys)
	if err != nil {
		return c, by, err
	}
	if err := rm.MaySignPolicy(by); err != nil {
		return c, by, fmt.Errorf("its signer may not sign for the room: %v", err)
	}
	return c, by, nil
}

// HeadAt is the epoch a decision at leaf index is checked against: the
// last to start at or before it (nil for a room with no origin).
func (l *Log) HeadAt(index int64) *Epoch {
	var e *Epoch
	for i := range l.Epochs {
		if l.Epochs[i].From <= index {
			e = &l.Epochs[i]
		}
	}
	if e == nil && len(l.Epochs) > 0 {
		e = &l.Epochs[0]
	}
	return e
}

// CheckConsistent checks, with the server's proof, that the checkpoint's
// tree extends the tree of an earlier checkpoint.
func (l *Log) CheckConsistent(ctx context.Context, c *client.Client, earlier declog.Checkpoint) error {
	n := l.Checkpoint.Size
	if earlier.Size > n {
		return fmt.Errorf("a tree of %d leaves, and the checkpoint's has %d: the log has shrunk (a fork)", earlier.Size, n)
	}
	switch {
	case earlier.Size == 0:
		return nil
	case earlier.Size == n && earlier.Root != l.Checkpoint.Root:
		return fmt.Errorf("two trees of %d leaves with other roots (a fork)", n)
	case earlier.Size == n:
		return nil
	}
	b, err := c.Get(ctx, l.url(fmt.Sprintf("consistency?from=%d&size=%d", earlier.Size, n)), declog.MaxProofBytes)
	if err != nil {
		return err
	}
	p, err := declog.ParseConsistency(b)
	if err != nil {
		return err
	}
	if p.From != earlier.Size || p.Size != n {
		return fmt.Errorf("a proof from %d to %d, asked from %d to %d", p.From, p.Size, earlier.Size, n)
	}
	if err := tlog.CheckTree(p.Proof, n, l.Checkpoint.Root, earlier.Size, earlier.Root); err != nil {
		return fmt.Errorf("the tree of %d leaves does not extend the tree of %d (a fork): %v", n, earlier.Size, err)
	}
	return nil
}

// Inclusion fetches and checks the decision's place in the checkpoint's
// tree: the leaf is its digest and t.
func (l *Log) Inclusion(ctx context.Context, c *client.Client, digest sig.Hash, t uint64) (int64, error) {
	n := l.Checkpoint.Size
	b, err := c.Get(ctx, l.url(fmt.Sprintf("inclusion/%s?size=%d", digest, n)), declog.MaxProofBytes)
	if err != nil {
		return 0, err
	}
	p, err := declog.ParseInclusion(b)
	if err != nil {
		return 0, err
	}
	if p.Size != n || p.Log != l.N {
		return 0, fmt.Errorf("a proof in a tree of %d leaves of log %d, asked in %d of log %d", p.Size, p.Log, n, l.N)
	}
	leaf := store.LogEntry{Digest: digest, T: t}.Leaf()
	if err := tlog.CheckRecord(p.Proof, n, l.Checkpoint.Root, p.Index, tlog.RecordHash(leaf)); err != nil {
		return 0, fmt.Errorf("leaf %d is not the decision in the checkpoint's tree: %v", p.Index, err)
	}
	return p.Index, nil
}

// Placement is a decision's place in its room's logs.
type Placement struct {
	Index int64
	Log   *Log   // the log that holds it (Log.N)
	Epoch *Epoch // the head in force at Index in that log; nil for a room with no origin
}

// Place finds the decision of in (fetched from base, with its descriptor)
// in its room's logs: the log that holds it (the server's answer to
// /log/inclusion/{digest}, redirected to its log's route when it is not
// log 0, issue 31), its leaf there proved included in a checkpoint of that
// log that verifies, and the head in force there in that log, which it
// sets as in's key log head, so that the decision is checked against the
// head the log took it under, not the room's current one (SPEC-NOTES,
// "Issue 16").
func Place(ctx context.Context, c *client.Client, base string, in *verify.Input) (*Placement, error) {
	d, err := decision.Parse(in.Decision)
	if err != nil {
		return nil, &Failure{Where: verify.PlaceDecision, Err: err}
	}
	// Which log: the proof in the log as it stands names it.
	b, err := c.Get(ctx, base+"/v1/rooms/"+d.Room.String()+"/log/inclusion/"+d.Digest().String(), declog.MaxProofBytes)
	if err != nil {
		return nil, &Failure{Where: "log", Err: err}
	}
	found, err := declog.ParseInclusion(b)
	if err != nil {
		return nil, &Failure{Where: "log", Err: err}
	}
	l, err := FetchLogN(ctx, c, base, d.Room, in.Descriptor, found.Log)
	if err != nil {
		return nil, err
	}
	x, err := l.Inclusion(ctx, c, d.Digest(), d.T)
	if err != nil {
		return nil, &Failure{Log: l.Name(), Where: "log", Err: err}
	}
	p := &Placement{Index: x, Log: l, Epoch: l.HeadAt(x)}
	in.KeyLogHead = nil
	if p.Epoch != nil {
		in.KeyLogHead = p.Epoch.Head
	}
	return p, nil
}
