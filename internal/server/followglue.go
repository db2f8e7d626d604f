package server

import (
	"context"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/follow"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// The follower's view of the server's rooms (internal/follow): thin
// adapters onto roomsteer.

// followRooms finds the server's rooms for the follower.
type followRooms struct{ s *Server }

func (fr followRooms) Room(id sig.Hash) (follow.Room, bool) {
	h := fr.s.hubs[id]
	if h == nil {
		return nil, false
	}
	return followRoom{s: fr.s, h: h}, true
}

// followRoom is one room as the follower acts on it.
type followRoom struct {
	s *Server
	h *roomsteer.Room
}

func (r followRoom) ReadRecord(raw []byte) (*evidence.Record, error) {
	return r.h.State().Room().ReadRecord(raw)
}

func (r followRoom) AddFromPeers(es []evidence.Entry) { r.h.AddFromPeers(es) }

func (r followRoom) Hold() (release func()) { return r.h.Hold() }

func (r followRoom) Head() []byte { return r.h.State().Head() }

// Policy is the operator's policy's digest; Hold is held.
func (r followRoom) Policy() sig.Hash { return r.h.BasePolicy().Digest() }

func (r followRoom) InstallHead(ctx context.Context, head []byte) (uint64, *api.Error) {
	return r.h.InstallHead(ctx, head)
}

func (r followRoom) InstallPolicy(ctx context.Context, p *policy.Policy) (sig.Hash, *api.Error) {
	return r.h.InstallPolicy(ctx, p)
}

// applyFeed applies one batch of the feed (follow.Follower.Apply).
func (s *Server) applyFeed(ctx context.Context, b store.FeedBatch) error {
	return s.follower.Apply(ctx, b)
}
