package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/retry"
	"github.com/waisteer/waisteer/internal/roomsteer"
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
	byRoom := map[*roomsteer.Room][]store.Record{}
	for _, r := range b.Records {
		if h := s.hubs[r.Room]; h != nil { // else a room the store holds and this server does not steer
			byRoom[h] = append(byRoom[h], r)
		}
	}
	for h, rs := range byRoom {
		h.AddPeerRecords(rs)
	}
	for _, id := range b.Rooms {
		if h := s.hubs[id]; h != nil {
			if err := h.FollowHead(ctx); err != nil {
				return err
			}
		}
	}
	for _, id := range b.Policies {
		if h := s.hubs[id]; h != nil {
			if err := h.FollowPolicy(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
