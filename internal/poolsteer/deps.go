package poolsteer

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/reach"
	"github.com/waisteer/waisteer/store"
)

// Deps is what the pools take from the server that steers them.
type Deps struct {
	Server  string      // names the server in the operator's views (its Config.Name)
	Secrets Secrets     // holds the pools' session secret
	Loads   store.Loads // the table of loads: a pool's sessions by the edge put first
	Clock   func() uint64
	Grace   uint64 // µs a silent session still counts past its TTL
	Log     *slog.Logger

	// Budgets are the steering routes' budgets, the server's (one for
	// every room and pool); nil for none. Reach reads, through the
	// trusted proxies, the client that budgets and QoE weigh requests by
	// and the base the RELOAD-URI is written on (nil: no proxy trusted).
	Budgets *budget.Budgets
	Reach   *reach.Reader
	// Operator checks the operator's token, answering when it fails.
	Operator func(http.ResponseWriter, *http.Request) bool
	// PathFree refuses a pool's path that is one of the server's own
	// routes, or that no request could reach.
	PathFree func(path string) error
	// Routes builds the server's route table with next for its pools,
	// and returns what publishes it, or why the pools' paths conflict.
	Routes func(next []*Steerer) (publish func(), err error)
}

// Secrets is the store's secrets (store.Store's Secret).
type Secrets interface {
	Secret(ctx context.Context, name string, n int) ([]byte, error)
}
