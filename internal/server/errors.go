package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/store"
)

// writeError answers a refused request (api.WriteError), remembering the
// refusal for the request's log line (count).
func writeError(w http.ResponseWriter, e *api.Error) {
	if sw, ok := w.(*statusWriter); ok {
		sw.refusal = e
	}
	api.WriteError(w, e)
}

// storeReason is what a client is told of a store that failed its request.
// The store's own error may name the database's address, user and name, or
// SQL (issue 26 item 6): none of that is a player's, and it goes to the log.
const storeReason = "the store is unavailable"

// storeFailed is the refusal of a request that the store failed while the
// server was doing what (in the server's words, with nothing of the
// store's), and logs err: at debug level for a store that logs its own
// outages once each (store.Health), otherwise at warn level at most once
// every storeLogEvery, so that an outage under load is not a line per
// request.
func (s *Server) storeFailed(what string, err error) *api.Error {
	level := slog.LevelWarn
	if _, ok := s.st.(store.Health); ok {
		level = slog.LevelDebug
	} else if now, last := time.Now().UnixNano(), s.storeLogged.Load(); now-last < int64(storeLogEvery) || !s.storeLogged.CompareAndSwap(last, now) {
		level = slog.LevelDebug
	}
	s.log.Log(context.Background(), level, "the store failed a request", "while", what, "err", err)
	return api.Errorf(api.StoreUnavailable, "%s: %s", what, storeReason)
}

// storeLogEvery spaces storeFailed's lines about a store without a health.
const storeLogEvery = time.Minute

// storeUp says whether the store answers, and how many outages it has
// had: a shared store's own account (store.Health), or else whether the
// last group commit was durable, and how many times group commits began
// failing.
func (s *Server) storeUp() (bool, uint64) {
	if h, ok := s.st.(store.Health); ok {
		return h.Up(), h.Outages()
	}
	return !s.commits.failing.Load(), s.commits.outages.Load()
}

// storeReachable is storeUp's first answer.
func (s *Server) storeReachable() bool {
	up, _ := s.storeUp()
	return up
}
