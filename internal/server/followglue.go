package server

import (
	"context"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/follow"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// The follower's view of the server's rooms (internal/follow): thin
// adapters onto the hubs, to move with them.

// followRooms finds the server's hubs for the follower.
type followRooms struct{ s *Server }

func (fr followRooms) Room(id sig.Hash) (follow.Room, bool) {
	h := fr.s.hubs[id]
	if h == nil {
		return nil, false
	}
	return followRoom{s: fr.s, h: h}, true
}

// followRoom is one hub as the follower acts on it.
type followRoom struct {
	s *Server
	h *hub
}

func (r followRoom) ReadRecord(raw []byte) (*evidence.Record, error) {
	return r.h.state.Load().room.ReadRecord(raw)
}

func (r followRoom) AddFromPeers(es []evidence.Entry) {
	r.h.addRecords(es)
	r.h.fromPeers.Add(uint64(len(es)))
}

func (r followRoom) Hold() (release func()) {
	r.h.opMu.Lock()
	return r.h.opMu.Unlock
}

func (r followRoom) Head() []byte { return r.h.state.Load().head }

func (r followRoom) Policy() sig.Hash { return r.h.base.Digest() }

func (r followRoom) InstallHead(ctx context.Context, head []byte) (uint64, *api.Error) {
	st, aerr := r.s.installHead(ctx, r.h, head, false)
	if aerr != nil {
		return 0, aerr
	}
	seq, _ := st.keyLogSeq()
	return seq, nil
}

func (r followRoom) InstallPolicy(ctx context.Context, p *policy.Policy) (sig.Hash, *api.Error) {
	_, st, aerr := r.s.install(ctx, r.h, p, false)
	if aerr != nil {
		return sig.Hash{}, aerr
	}
	return st.digest, nil
}

// applyFeed applies one batch of the feed (follow.Follower.Apply).
func (s *Server) applyFeed(ctx context.Context, b store.FeedBatch) error {
	return s.follower.Apply(ctx, b)
}
