package web

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/store"
)

// StoreReason is what a client is told of a store that failed its request.
// The store's own error may name the database's address, user and name, or
// SQL (issue 26 item 6): none of that is a player's, and it goes to the log.
const StoreReason = "the store is unavailable"

// StoreFailures tells clients of a store's failures in fixed words and the
// log in the store's.
type StoreFailures struct {
	st     store.Store
	log    *slog.Logger
	logged atomic.Int64 // when Failed last logged at warn level, Unix ns
}

// NewStoreFailures reports st's failures to log.
func NewStoreFailures(st store.Store, log *slog.Logger) *StoreFailures {
	return &StoreFailures{st: st, log: log}
}

// Failed is the refusal of a request that the store failed while the
// server was doing what (in the server's words, with nothing of the
// store's), and logs err: at debug level for a store that logs its own
// outages once each (store.Health), otherwise at warn level at most once
// every storeLogEvery, so that an outage under load is not a line per
// request.
func (f *StoreFailures) Failed(what string, err error) *api.Error {
	level := slog.LevelWarn
	if _, ok := f.st.(store.Health); ok {
		level = slog.LevelDebug
	} else if now, last := time.Now().UnixNano(), f.logged.Load(); now-last < int64(storeLogEvery) || !f.logged.CompareAndSwap(last, now) {
		level = slog.LevelDebug
	}
	f.log.Log(context.Background(), level, "the store failed a request", "while", what, "err", err)
	return api.Errorf(api.StoreUnavailable, "%s: %s", what, StoreReason)
}

// storeLogEvery spaces Failed's lines about a store without a health.
const storeLogEvery = time.Minute
