package server

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/retry"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// Following the other servers of a shared store (store.Feed, issue 15): a
// record another server accepted joins this one's evidence, and a policy
// or key log head another server installed is installed here, each as
// soon as it is committed. A record is read and checked again here, as at
// start-up (loadIndex): a server signs decisions only from records it
// checked itself, under its own state's key log.

// The follower's retries while the store cannot be reached: 50 ms doubling
// to 5 s, with jitter (retry.Backoff); a store that says when it is back
// (store.Health) wakes the follower at once, so that the others' writes
// are followed again within a second of the database's return (issue 26
// item 6), however long the outage.
const (
	followRetryFirst = 50 * time.Millisecond
	followRetryMax   = 5 * time.Second
)

// follow applies the feed from at until ctx ends, following again from the
// last position applied whenever the store cannot be reached.
func (s *Server) follow(ctx context.Context, feed store.Feed, at store.FeedPosition) {
	health, _ := feed.(store.Health)
	// A store with a health logs its outages itself, once each.
	level := slog.LevelWarn
	if health != nil {
		level = slog.LevelDebug
	}
	b := retry.Backoff{First: followRetryFirst, Max: followRetryMax}
	down := false
	for ctx.Err() == nil {
		err := feed.Follow(ctx, at, func(fb store.FeedBatch) error {
			if err := guard.Try(s.log, "follow", func() error { return s.applyFeed(ctx, fb) }); err != nil {
				return err
			}
			at = fb.At
			b.Reset()
			if down {
				s.log.Log(ctx, level-4, "following the other servers' writes again", "records", at.Records, "changes", at.Changes)
				down = false
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		wait := b.Next()
		if !down {
			s.log.Log(ctx, level, "following the other servers' writes: retrying", "err", err)
			down = true
		}
		s.metrics.feedFailures.Add(1)
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

// applyFeed applies one batch. An error is the store's, and the batch is
// then followed again; what this server refuses to install is logged.
func (s *Server) applyFeed(ctx context.Context, b store.FeedBatch) error {
	byRoom := map[*hub][]evidence.Entry{}
	for _, r := range b.Records {
		h := s.hubs[r.Room]
		if h == nil {
			continue // a room the store holds and this server does not steer
		}
		rec, err := h.state.Load().room.ReadRecord(r.Raw)
		if err != nil {
			s.log.Warn("a record another server stored is left out of the evidence", "room", h.id.String(), "record", r.Digest.String(), "err", err)
			continue
		}
		byRoom[h] = append(byRoom[h], evidence.Entry{Digest: rec.Digest(), Record: rec})
	}
	for h, es := range byRoom {
		h.addRecords(es)
		h.fromPeers.Add(uint64(len(es)))
	}
	for _, id := range b.Rooms {
		if h := s.hubs[id]; h != nil {
			if err := s.followHead(ctx, h); err != nil {
				return err
			}
		}
	}
	for _, id := range b.Policies {
		if h := s.hubs[id]; h != nil {
			if err := s.followPolicy(ctx, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// followHead installs the room's key log head as the store holds it, when
// it is newer than this server's.
func (s *Server) followHead(ctx context.Context, h *hub) error {
	rooms, err := s.st.Rooms(ctx)
	if err != nil {
		return err
	}
	var head []byte
	for _, r := range rooms {
		if r.ID == h.id {
			head = r.KeyLogHead
		}
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	cur := h.state.Load()
	if head == nil || bytes.Equal(head, cur.head) {
		return nil
	}
	st, aerr := s.installHead(ctx, h, head, false)
	switch {
	case aerr != nil && aerr.Code == api.StoreUnavailable:
		return aerr
	case aerr != nil:
		// An older head (this server installed a newer one meanwhile),
		// or one this server refuses: it keeps its own.
		s.log.Warn("a key log head another server stored is not installed", "room", h.id.String(), "err", aerr)
		return nil
	}
	seq, _ := st.keyLogSeq()
	s.log.Info("key log head replaced by another server", "room", h.id.String(), "seq", seq)
	return nil
}

// followPolicy installs the room's active policy as the store holds it,
// when it is not this server's operator policy already.
func (s *Server) followPolicy(ctx context.Context, h *hub) error {
	digest, raw, err := s.st.ActivePolicy(ctx, h.id)
	if err != nil {
		return err
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	if digest == h.base.Digest() {
		return nil
	}
	p, err := policy.Parse(raw)
	if err != nil {
		s.log.Warn("a policy another server stored does not read", "room", h.id.String(), "policy", digest.String(), "err", err)
		return nil
	}
	prev := h.base.Digest()
	_, st, aerr := s.install(ctx, h, p, false)
	switch {
	case aerr != nil && aerr.Code == api.StoreUnavailable:
		return aerr
	case aerr != nil:
		s.log.Warn("a policy another server stored is not installed", "room", h.id.String(), "policy", digest.String(), "err", aerr)
		return nil
	}
	s.log.Info("policy replaced by another server", "room", h.id.String(), "policy", digest.String(), "previous", prev.String(), "steering_by", st.digest.String())
	return nil
}
