package follow

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/retry"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// A record is read and checked again here, as at start-up: a server signs
// decisions only from records it checked itself, under its own state's key
// log.

// Room is one room this server steers, as the follower acts on it.
type Room interface {
	// ReadRecord reads and checks a record's bytes under the room's
	// current state.
	ReadRecord(raw []byte) (*evidence.Record, error)
	// AddFromPeers adds records other servers accepted to the room's
	// evidence, and counts them as the peers'.
	AddFromPeers(es []evidence.Entry)
	// Hold takes the lock that serialises the room's operator changes (a
	// policy, a key log head); release lets it go. Head, Policy,
	// InstallHead and InstallPolicy are called with it held.
	Hold() (release func())
	// Head is the room's key log head's bytes, nil for none.
	Head() []byte
	// Policy is the digest of the room's operator policy.
	Policy() sig.Hash
	// InstallHead installs a key log head the store holds already (it is
	// not stored again), and returns its seq.
	InstallHead(ctx context.Context, head []byte) (seq uint64, aerr *api.Error)
	// InstallPolicy makes p, which the store holds already, the room's
	// operator policy, and returns the digest of the policy the room now
	// steers by.
	InstallPolicy(ctx context.Context, p *policy.Policy) (steeringBy sig.Hash, aerr *api.Error)
}

// Rooms finds the rooms this server steers.
type Rooms interface {
	// Room is the room with the id, and false for a room the store holds
	// and this server does not steer.
	Room(id sig.Hash) (Room, bool)
}

// Store is what the follower reads of the store beyond its feed.
type Store interface {
	Rooms(ctx context.Context) ([]store.Room, error)
	ActivePolicy(ctx context.Context, room sig.Hash) (digest sig.Hash, raw []byte, err error)
}

// The follower's retries while the store cannot be reached: 50 ms doubling
// to 5 s, with jitter (retry.Backoff); a store that says when it is back
// (store.Health) wakes the follower at once, so that the others' writes
// are followed again within a second of the database's return (issue 26
// item 6), however long the outage.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

// Follower follows a shared store's feed onto the rooms.
type Follower struct {
	rooms    Rooms
	st       Store
	log      *slog.Logger
	failures atomic.Uint64 // lost connections to the store
}

// New returns a follower onto rooms, which reads st and logs to log.
func New(rooms Rooms, st Store, log *slog.Logger) *Follower {
	return &Follower{rooms: rooms, st: st, log: log}
}

// Follow applies the feed from at until ctx ends, following again from the
// last position applied whenever the store cannot be reached.
func (f *Follower) Follow(ctx context.Context, feed store.Feed, at store.FeedPosition) {
	health, _ := feed.(store.Health)
	// A store with a health logs its outages itself, once each.
	level := slog.LevelWarn
	if health != nil {
		level = slog.LevelDebug
	}
	b := retry.Backoff{First: retryFirst, Max: retryMax}
	down := false
	for ctx.Err() == nil {
		err := feed.Follow(ctx, at, func(fb store.FeedBatch) error {
			if err := guard.Try(f.log, "follow", func() error { return f.Apply(ctx, fb) }); err != nil {
				return err
			}
			at = fb.At
			b.Reset()
			if down {
				f.log.Log(ctx, level-4, "following the other servers' writes again", "records", at.Records, "changes", at.Changes)
				down = false
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		wait := b.Next()
		if !down {
			f.log.Log(ctx, level, "following the other servers' writes: retrying", "err", err)
			down = true
		}
		f.failures.Add(1)
		var back <-chan struct{}
		if health != nil && !health.Up() {
			back = health.Back()
		}
		select {
		case <-ctx.Done():
		case <-back:
			b.Reset() // the store is back: follow at once
		case <-time.After(wait):
		}
	}
}

// Apply applies one batch. An error is the store's, and the batch is then
// followed again; what this server refuses to install is logged.
func (f *Follower) Apply(ctx context.Context, b store.FeedBatch) error {
	type peers struct {
		room Room
		es   []evidence.Entry
	}
	byRoom := map[sig.Hash]*peers{}
	for _, r := range b.Records {
		rm, ok := f.rooms.Room(r.Room)
		if !ok {
			continue // a room the store holds and this server does not steer
		}
		rec, err := rm.ReadRecord(r.Raw)
		if err != nil {
			f.log.Warn("a record another server stored is left out of the evidence", "room", r.Room.String(), "record", r.Digest.String(), "err", err)
			continue
		}
		p := byRoom[r.Room]
		if p == nil {
			p = &peers{room: rm}
			byRoom[r.Room] = p
		}
		p.es = append(p.es, evidence.Entry{Digest: rec.Digest(), Record: rec})
	}
	for _, p := range byRoom {
		p.room.AddFromPeers(p.es)
	}
	for _, id := range b.Rooms {
		if rm, ok := f.rooms.Room(id); ok {
			if err := f.followHead(ctx, id, rm); err != nil {
				return err
			}
		}
	}
	for _, id := range b.Policies {
		if rm, ok := f.rooms.Room(id); ok {
			if err := f.followPolicy(ctx, id, rm); err != nil {
				return err
			}
		}
	}
	return nil
}

// followHead installs the room's key log head as the store holds it, when
// it is newer than this server's.
func (f *Follower) followHead(ctx context.Context, id sig.Hash, rm Room) error {
	rooms, err := f.st.Rooms(ctx)
	if err != nil {
		return err
	}
	var head []byte
	for _, r := range rooms {
		if r.ID == id {
			head = r.KeyLogHead
		}
	}
	release := rm.Hold()
	defer release()
	if head == nil || bytes.Equal(head, rm.Head()) {
		return nil
	}
	seq, aerr := rm.InstallHead(ctx, head)
	switch {
	case aerr != nil && aerr.Code == api.StoreUnavailable:
		return aerr
	case aerr != nil:
		// An older head (this server installed a newer one meanwhile),
		// or one this server refuses: it keeps its own.
		f.log.Warn("a key log head another server stored is not installed", "room", id.String(), "err", aerr)
		return nil
	}
	f.log.Info("key log head replaced by another server", "room", id.String(), "seq", seq)
	return nil
}

// followPolicy installs the room's active policy as the store holds it,
// when it is not this server's operator policy already.
func (f *Follower) followPolicy(ctx context.Context, id sig.Hash, rm Room) error {
	digest, raw, err := f.st.ActivePolicy(ctx, id)
	if err != nil {
		return err
	}
	release := rm.Hold()
	defer release()
	if digest == rm.Policy() {
		return nil
	}
	p, err := policy.Parse(raw)
	if err != nil {
		f.log.Warn("a policy another server stored does not read", "room", id.String(), "policy", digest.String(), "err", err)
		return nil
	}
	prev := rm.Policy()
	by, aerr := rm.InstallPolicy(ctx, p)
	switch {
	case aerr != nil && aerr.Code == api.StoreUnavailable:
		return aerr
	case aerr != nil:
		f.log.Warn("a policy another server stored is not installed", "room", id.String(), "policy", digest.String(), "err", aerr)
		return nil
	}
	f.log.Info("policy replaced by another server", "room", id.String(), "policy", digest.String(), "previous", prev.String(), "steering_by", by.String())
	return nil
}

// WriteMetrics writes the follower's metric family.
func (f *Follower) WriteMetrics(b *bytes.Buffer) {
	b.WriteString("# HELP waisteer_feed_failures_total Times following the other servers' writes on a shared store failed and was retried.\n# TYPE waisteer_feed_failures_total counter\n")
	fmt.Fprintf(b, "waisteer_feed_failures_total %d\n", f.failures.Load())
}
