// Package dashboard is the operator's dashboard (issue 18): the page, what
// it shows and its decision inspector.
//
// It owns its four routes (Routes), all counted under the family
// "dashboard":
//
//	GET  /dashboard, /dashboard/{file}  the page: HTML, CSS and JavaScript embedded in the binary (Serve)
//	GET  /v1/dashboard                  State: every room and pool, with their history
//	POST /v1/dashboard/inspect          {"input": DIGEST | DECISION_URL | DECISION_BYTES}: Inspection
//
// and the history the page charts, which it samples when the server calls
// Sample (every Every). The page has no build step and asks nothing of any
// other host; it signs in with the operator's token, kept for the tab only
// (sessionStorage), and polls the two operator routes.
//
// What it reads of the server it is given in Deps: the rooms' statuses and
// the records of their windows (Room), the pools' views (Pool), the front's
// status, the server's name and clock, the operator's check, and the
// server's handler, which the inspector's verifier asks in process. It
// changes nothing of the server, and imports neither internal/server nor
// another capability's package.
package dashboard

import (
	"context"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
)

// Deps is what the dashboard reads of the server.
type Deps struct {
	Name  string        // the server's (Config.Name)
	Clock func() uint64 // µs on the rooms' clock
	Rooms func() []Room // the energy rooms, by id
	Pools func() []Pool // the pools, by name ("" first)
	// Front is the front's status; nil when the server has no [front].
	Front func(context.Context) view.FrontStatus
	// Operator checks the operator's token, answering the request when it
	// fails (and setting the headers every operator answer has).
	Operator func(http.ResponseWriter, *http.Request) bool
	// Handler is the server's, which the inspector's verifier asks for what
	// a verifier fetches, in process (handlerTransport).
	Handler http.Handler
}

// A Room is an energy room as the dashboard reads it.
type Room interface {
	ID() sig.Hash
	// Status is the room's status route's answer, with its live sessions as
	// of the instant loadsAt.
	Status(ctx context.Context, loadsAt uint64) (view.Status, *api.Error)
	// Hops is each hop's records in the window [a, b) (evidence.Index's
	// InWindow), by pathway in the policy's order and hop in the pathway's,
	// read at one state of the room, each hop's in a slice of its own
	// (the dashboard sorts it).
	Hops(a, b uint64) []Hop
	// Basis is the basis of the operator's policy (§3.1): what a
	// figure's delivery D counts.
	Basis() policy.Basis
}

// A Hop is one hop of one pathway and its records in a window.
type Hop struct {
	Pathway string
	Key     sig.PublicKey
	Records []evidence.Entry
}

// A Pool is a pool as the dashboard reads it.
type Pool interface {
	Name() string
	// View is the pool's edges route's answer, with its live sessions as
	// of the instant loadsAt.
	View(ctx context.Context, loadsAt uint64) view.PoolView
}

// Dashboard is the operator's dashboard of one server: its routes and the
// history it samples.
type Dashboard struct {
	d    Deps
	hist history
}

// New returns the dashboard of the server d describes, with no history yet.
func New(d Deps) *Dashboard {
	return &Dashboard{d: d, hist: history{rooms: map[sig.Hash][]RoomSample{}, pools: map[string][]PoolSample{}}}
}

// Routes are the dashboard's routes, all of the family "dashboard".
func (d *Dashboard) Routes() []web.Route {
	get, post := http.MethodGet, http.MethodPost
	return []web.Route{
		{Method: get, Pattern: "/v1/dashboard", Family: "dashboard", Serve: d.serveState},
		{Method: post, Pattern: "/v1/dashboard/inspect", Family: "dashboard", Serve: d.serveInspect},
		{Method: get, Pattern: "/dashboard", Family: "dashboard", Serve: Serve},
		{Method: get, Pattern: "/dashboard/{file}", Family: "dashboard", Serve: Serve},
	}
}

//go:embed assets
var assets embed.FS

// files is the assets, by name.
var files, _ = fs.Sub(assets, "assets")

// Serve answers GET /dashboard (the page) and /dashboard/{file} (its
// assets). Every answer forbids framing and any origin but the server's
// own (the page asks nothing of another host), and is not cached, so that
// a new binary's page is the one served.
func Serve(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/dashboard")
	name = strings.TrimPrefix(name, "/")
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(files, name)
	if err != nil || strings.Contains(name, "/") {
		web.Refuse(w, api.Errorf(api.NotFound, "no such file of the dashboard"))
		return
	}
	h := w.Header()
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b)
}
