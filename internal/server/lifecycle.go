package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/restore"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/store"
)

// newServer is the server of cfg with nothing opened yet.
func newServer(cfg Config, st store.Store, loads store.Loads) *Server {
	s := &Server{
		st:       st,
		loads:    loads,
		log:      cfg.Logger,
		clock:    cfg.Clock,
		grace:    uint64(cmpOr(cfg.SessionGrace, DefaultSessionGrace) / time.Microsecond),
		token:    []byte(cfg.OperatorToken),
		retain:   uint64(max(cfg.Retention, 0) / time.Microsecond),
		hubs:     map[sig.Hash]*roomsteer.Room{},
		archived: map[sig.Hash]store.Room{},
		metrics:  newMetrics(),
		limits:   budget.New(cfg.Limits),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.fails = web.NewStoreFailures(st, s.log)
	if s.name = cfg.Name; s.name == "" {
		host, _ := os.Hostname()
		s.name = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if s.clock == nil {
		s.clock = func() uint64 { return uint64(time.Now().UnixMicro()) }
	}
	return s
}

// openRooms opens the configured rooms (roomsteer.Open), in the
// configuration's order, and keeps the rooms the store holds and the
// configuration does not name, for audit, when it may
// (Config.KeepForeignRooms).
func (s *Server) openRooms(ctx context.Context, cfg Config) ([]*roomsteer.Room, error) {
	stored, err := s.st.Rooms(ctx)
	if err != nil {
		return nil, fmt.Errorf("server: reading the store's rooms: %w", err)
	}
	byID := map[sig.Hash]store.Room{}
	for _, r := range stored {
		byID[r.ID] = r
	}
	var hubs []*roomsteer.Room
	for i, rc := range cfg.Rooms {
		h, err := roomsteer.Open(ctx, rc, byID, s.roomDeps())
		if err != nil {
			return nil, fmt.Errorf("server: room %d: %w", i, err)
		}
		if _, dup := s.hubs[h.ID()]; dup {
			return nil, fmt.Errorf("server: room %d: room %s is configured twice", i, h.ID())
		}
		s.hubs[h.ID()] = h
		hubs = append(hubs, h)
	}
	var foreign []string
	for _, r := range stored {
		if _, ok := s.hubs[r.ID]; !ok {
			foreign = append(foreign, r.ID.String())
			s.archived[r.ID] = r
		}
	}
	if n := len(foreign); n > 0 && !cfg.KeepForeignRooms {
		if n > 10 {
			foreign = append(foreign[:10], fmt.Sprintf("and %d more", n-10))
		}
		return nil, fmt.Errorf("server: the store holds rooms this configuration does not name: %s; set keep_foreign_rooms = true in [store] to serve beside them", strings.Join(foreign, ", "))
	}
	return hubs, nil
}

// resumeRooms has a table of loads in memory, which starts empty, read on
// from each room's latest decision logged (restore.Resume), and returns
// what counts the rooms' live sessions again from their logs beside
// steering (restore.Count), so that a restart keeps §6.1's capacities and
// the loads an audit recounts. A shared table keeps its sessions.
func (s *Server) resumeRooms(ctx context.Context, hubs []*roomsteer.Room) (recount func(context.Context), err error) {
	memLoads, _ := s.loads.(*store.MemLoads)
	if memLoads == nil {
		// A shared table counts the live sessions the others hold beside
		// steering (postgres.Loads.Restored, issue 31).
		shared, ok := s.loads.(interface{ Restored() <-chan struct{} })
		if !ok {
			for _, h := range hubs {
				h.MarkRestored()
			}
			return func(context.Context) {}, nil
		}
		return func(bg context.Context) {
			s.spawn(func() {
				select {
				case <-shared.Restored():
					for _, h := range hubs {
						h.MarkRestored()
					}
				case <-bg.Done():
				}
			})
		}, nil
	}
	resumed := make([]restore.Logged, len(hubs))
	for i, h := range hubs {
		if resumed[i], err = restore.Resume(ctx, s.st, h.ID(), len(h.State().IDs()), memLoads); err != nil {
			return nil, fmt.Errorf("server: room %s's log: %w", h.ID(), err)
		}
	}
	src := restore.Source{Store: s.st, PolicyOf: s.audit.PolicyOf, Grace: s.grace, Clock: s.clock}
	return func(bg context.Context) {
		for i, h := range hubs {
			s.spawn(func() {
				began := time.Now()
				var n int
				err := guard.Try(s.log, "restore", func() (err error) {
					st := h.State()
					n, err = restore.Count(bg, src, restore.Room{ID: h.ID(), Policy: st.Policy(), IDs: st.IDs()}, memLoads, resumed[i])
					return err
				})
				if err != nil && bg.Err() == nil {
					s.log.Error("counting the live sessions again from the log", "room", h.ID().String(), "err", err, "sessions", n)
				} else if n > 0 {
					s.log.Info("live sessions counted again from the log", "room", h.ID().String(), "sessions", n, "took", time.Since(began).String())
				}
				h.MarkRestored()
			})
		}
	}, nil
}

// follow follows the shared store's feed from at until ctx ends. A panic
// in applying a batch is retried as the store's error is
// (follow.Follower.Follow); one in the store's own reading starts the
// follower again from the start, after a pause: what comes again is known
// already.
func (s *Server) follow(ctx context.Context, feed store.Feed, at store.FeedPosition) {
	for ctx.Err() == nil {
		if guard.Do(s.log, "follow", func() { s.follower.Follow(ctx, feed, at) }) != nil {
			select {
			case <-ctx.Done():
			case <-time.After(followPanicPause):
			}
		}
	}
}

// spawn runs fn in the background, which Close waits for.
func (s *Server) spawn(fn func()) {
	s.bg.Add(1)
	go func() { defer s.bg.Done(); fn() }()
}
