package roomsteer

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/commit"
	"github.com/waisteer/waisteer/internal/reach"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// Deps is what a room steers with. Each is below the room: the store and
// the table of loads (the rule's), the group commits, the budgets, the
// clock and the log. Routes and the three funcs are the server's, on the
// operator's path only (a policy or key log head installed, a restart's
// recount), never on a steering request's.
type Deps struct {
	Store   store.Store
	Loads   store.Loads
	Log     *slog.Logger
	Clock   func() uint64 // the room clock, µs since the Unix epoch
	Grace   uint64        // µs a silent session still counts after its TTL (§6)
	Fails   *web.StoreFailures
	Commits *commit.Decisions
	Records *commit.Records
	Budgets *budget.Budgets // nil for none
	Reach   *reach.Reader   // names the client through trusted proxies (Forwarded, X-Forwarded-For)
	Closing *atomic.Bool    // set once the server closes: steering answers 503

	// Routes is the server's table of steering routes, which a new policy
	// changes.
	Routes Routes
	// KnowPolicy keeps a policy the room steered by, for rebuilding its
	// decisions (§9); PolicyOf reads one by digest.
	KnowPolicy func(*policy.Policy)
	PolicyOf   func(context.Context, sig.Hash) (*policy.Policy, error)
	// KeepEpoch records the room's key log head in force from now, as an
	// epoch of the room's log (issue 16).
	KeepEpoch func(context.Context, *Room, *State) error
}

// Routes is the server's table of steering routes. A room installing a
// policy holds it locked, builds the table with its new state (an error
// when a route of the state is another's), and publishes it once the
// state is stored.
type Routes interface {
	Lock()
	Unlock()
	Build(r *Room, st *State) (publish func(), err error)
}

// limitNow is the instant budgets are spent at: the room clock's.
func (h *Room) limitNow() time.Time { return time.UnixMicro(int64(h.d.Clock())) }
