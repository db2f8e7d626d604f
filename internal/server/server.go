package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/audit"
	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/commit"
	"github.com/waisteer/waisteer/internal/dashboard"
	"github.com/waisteer/waisteer/internal/follow"
	"github.com/waisteer/waisteer/internal/front"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/internal/reach"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/store"
)

// Config configures a Server.
type Config struct {
	Rooms []roomsteer.Config
	// Pools are steered by their edges' health and weight, unsigned
	// (internal/pool); their paths are their own.
	Pools []pool.Config
	// Front, when set, serves the origin's playlists with the steering
	// line added, and helps players that cannot steer (internal/front).
	Front         *FrontConfig
	OperatorToken string // bearer token for operator routes; empty disables them
	// SessionGrace is how long after its manifest's TTL a silent session
	// still counts toward the load of the pathway its latest decision put
	// first (§6); 0 = DefaultSessionGrace.
	SessionGrace time.Duration
	// Retention: decisions and records older than this are pruned; 0 =
	// keep forever.
	Retention time.Duration
	Clock     func() uint64 // room clock, µs since the Unix epoch; nil = time.Now
	Logger    *slog.Logger  // nil = slog.Default()
	// Limits are the steering routes' budgets (internal/budget); the zero
	// value, none. Its TrustedProxies are also those whose Forwarded and
	// X-Forwarded-* say what a viewer reached (internal/reach).
	Limits SteerLimits
	// PublicURL, when set, is the scheme://host[:port] every URL written
	// for a viewer is built on (a pool's own public_url first), whatever
	// the request reached (issue 28, "Trusted proxies").
	PublicURL string

	// KeepForeignRooms lets the server start on a store that holds rooms
	// the configuration does not name (another deployment's, or rooms
	// this one no longer steers, which it then serves for audit); without
	// it New refuses such a store with their ids (issue 26 item 6).
	KeepForeignRooms bool
	// Name says which server answered an operator's route (its
	// Waisteer-Server header and the status's "server"), for several
	// servers on one store; "" = HOST/PID.
	Name string
}

// DefaultSessionGrace is the default SessionGrace: 20 s, the load time
// limit hls.js gives a steering manifest (/work/shared/players.md). A
// player asks again TTL seconds after its last manifest arrived, and that
// manifest may have taken up to its load limit to arrive after the
// decision's t; a poll the player itself still counts as on time reaches
// the server within TTL + 20 s of t. A session silent for longer has missed
// a poll (a failed request is retried only a TTL later) and no longer
// counts until it asks again.
const DefaultSessionGrace = 20 * time.Second

// Body limits.
const (
	maxRecordsBody = 4 << 20 // a hop's POST: about 17 000 records of no tracks
	maxPolicyBody  = 4 << 20 // a policy of 32 pathways with every field at its longest is under 3 MiB
	maxKeyLogBody  = 1 << 20
	// maxBody is the largest of the limits above: FastServer refuses a
	// larger body before reading it.
	maxBody = max(maxRecordsBody, maxPolicyBody, maxKeyLogBody)
)

// Server is the steering server: players' steering requests, hops'
// records, auditors' fetches and the operator's changes, over HTTP.
type Server struct {
	st     store.Store
	loads  store.Loads
	log    *slog.Logger
	clock  func() uint64
	grace  uint64 // µs
	token  []byte
	retain uint64 // µs; 0 keeps everything
	name   string // Config.Name

	hubs     map[sig.Hash]*roomsteer.Room
	pools    *poolsteer.Pools // by name; replaced whole by ReloadPools
	front    *front.Front
	archived map[sig.Hash]store.Room // rooms the store holds and the config does not steer

	routes   atomic.Pointer[routeTable]
	routesMu sync.Mutex // serialises the table's rebuilds

	policies sync.Map // digest → *policy.Policy, policies read for rebuilding decisions

	audit *audit.Audit // the auditors' routes and the log's

	limits *budget.Budgets // nil for none
	reach  *reach.Reader   // Config.Limits.TrustedProxies and Config.PublicURL

	commits *commit.Decisions
	records *commit.Records
	metrics *metrics
	mux     http.Handler

	dash *dashboard.Dashboard // the operator's page, its state and inspector

	fails *web.StoreFailures // the store's failures, told to clients and logged

	follower *follow.Follower // the other servers' writes on a shared store

	closing atomic.Bool
	bgCtx   context.Context // the background work's, ended by Close
	stop    context.CancelFunc
	bg      sync.WaitGroup
}

// New starts a server for the configured rooms over the store st and the
// table of loads. Each room's descriptor and key log head pass the room
// step (COMPANION §4.1); a key log head the store holds with a greater seq
// than the configuration's is kept. The policy is the configuration's
// unless the store already holds it and another is active (an operator
// replaced it since), and passes §9.1 step 2 (wrong_room, its signature and
// its signer, §3.5). The steering key must be allowed to sign the decisions
// of the policy (newState). Each room's evidence is rebuilt from the
// records the store holds for its window.
func New(ctx context.Context, cfg Config, st store.Store, loads store.Loads) (*Server, error) {
	if st == nil || loads == nil {
		return nil, errors.New("server: a store and a table of loads are required")
	}
	public, err := reach.ParsePublicURL(cfg.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("server: public_url: %w", err)
	}
	s := newServer(cfg, st, loads)
	s.reach = reach.NewReader(cfg.Limits.TrustedProxies, public, s.log)
	// A shared store's feed is followed from before its state is read:
	// what is written meanwhile comes again, and is known already.
	feed, shared := st.(store.Feed)
	var feedAt store.FeedPosition
	if shared {
		var err error
		if feedAt, err = feed.FeedHead(ctx); err != nil {
			return nil, fmt.Errorf("server: reading the shared store's feed: %w", err)
		}
	}
	// What the group commits, the audit and the follower need is made
	// first: the rooms are given them as they open.
	s.commits = commit.NewDecisions(st, s.log)
	s.commits.Undo = func(d *store.Decision) { loads.Unsteer(d.Room, d.Session, d.T) }
	s.records = commit.NewRecords(st, s.log)
	s.audit = audit.New(audit.Deps{Store: st, Rooms: auditRooms{s}, Policies: &s.policies, Fails: s.fails, Log: s.log})
	s.follower = follow.New(followRooms{s}, st, s.log)

	// The capabilities, each checked before anything is stored or used.
	hubs, err := s.openRooms(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if s.pools, err = poolsteer.New(ctx, s.poolDeps(), cfg.Pools); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.Front != nil {
		if s.front, err = s.openFront(cfg.Front); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	var known []string // decision prefixes of policies superseded at the start
	for _, h := range hubs {
		if d := h.SupersededDecisions(); d != "" {
			known = append(known, d)
		}
	}
	rt, err := buildRoutes(hubs, s.pools.Sorted(), nil, nil, known)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	for _, h := range hubs {
		if err := h.Publish(ctx); err != nil {
			return nil, fmt.Errorf("server: room %s: %w", h.ID(), err)
		}
	}
	recount, err := s.resumeRooms(ctx, hubs)
	if err != nil {
		return nil, err
	}
	s.routes.Store(rt)
	s.dash = s.newDashboard()
	s.mux = s.newMux()

	// The background work, each loop guarded, until Close.
	bg, stop := context.WithCancel(context.Background())
	s.bgCtx, s.stop = bg, stop
	s.spawn(s.commits.Run)
	s.spawn(s.records.Run)
	recount(bg)
	s.pools.Start(bg)
	if shared {
		s.spawn(func() { s.follow(bg, feed, feedAt) })
	}
	for _, h := range hubs {
		if h.HasOverlay() {
			s.spawn(func() { h.RunOverlay(bg) })
		}
	}
	s.spawn(func() {
		guard.Do(s.log, "dashboard", func() { s.dash.Sample(bg) })
		s.every(bg, "dashboard", dashboard.Every, s.dash.Sample)
	})
	if len(s.watches()) > 0 || s.pools.Len() > 0 {
		// Pools may gain QoE by a reload.
		s.spawn(func() { s.every(bg, "qoe", qoeEvery, s.evaluateQoE) })
	}
	if s.limits != nil {
		s.spawn(func() {
			s.every(bg, "limits", 10*time.Second, func(context.Context) { s.limits.Sweep(s.limitNow()) })
		})
	}
	if s.retain > 0 {
		s.spawn(func() { s.every(bg, "prune", time.Minute, s.prune) })
	}
	if s.front != nil {
		// The front's playlists checked for the pathway their line names
		// (issue 28, "Warnings"), before a viewer opens them.
		s.spawn(func() { guard.Do(s.log, "front check", func() { s.front.Check(bg) }) })
	}
	if sw, ok := loads.(sweeper); ok {
		// Steer and Snapshot drop a room's expired sessions as they
		// pass; a room no request reaches is swept here.
		s.spawn(func() { s.every(bg, "sweep", time.Minute, func(context.Context) { sw.Sweep(s.clock()) }) })
	}
	return s, nil
}

// followPanicPause is how long the follower waits before it starts again
// after a panic outside a batch's applying.
const followPanicPause = 5 * time.Second

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Handler returns the handler of every route.
func (s *Server) Handler() http.Handler { return s }

// ServeHTTP serves every route (newMux).
//
// A GET on a steering route, the request every player sends every TTL, is
// answered without the mux, on the same condition as FastHandler answers it
// (serveFast): its target is a plain origin-form path (plainPath), so that
// both fronts route it alike. Matching it against every pattern of the mux
// before the fallback finds the policies' routes cost about 5 % of a
// decision's CPU on the net/http front (issue 14's profile).
//
// A panic in a route is logged at ERROR with its stack and counted
// (guard, "request"), and ends the request as net/http's
// http.ErrAbortHandler does: the connection is closed with no answer, on
// either engine, and the server goes on.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.recoverRequest()
	s.serve(w, r)
}

// serve is ServeHTTP without the recovery.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.RawPath == "" && len(r.RequestURI) > 0 && r.RequestURI[0] == '/' && plainPath(r.URL.Path) {
		if h, ok, aerr := s.routes.Load().steerHub(r.URL.Path, r.URL.RawQuery); ok {
			s.steerRoute(w, r, h, aerr)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// recoverRequest, deferred, turns a route's panic into
// http.ErrAbortHandler once it is logged and counted.
func (s *Server) recoverRequest() {
	if v := recover(); v != nil {
		if v != http.ErrAbortHandler {
			guard.Recovered(s.log, "request", v)
		}
		panic(http.ErrAbortHandler)
	}
}

// steerRoute answers a request on a room's steering route (aerr: the
// route's refusal, when it has one): a preflight, or a steering request.
func (s *Server) steerRoute(w http.ResponseWriter, r *http.Request, h steerer, aerr *api.Error) {
	if r.Method == http.MethodOptions {
		s.count(routePreflight, w, r, answer.Preflight)
		return
	}
	if r.Method == http.MethodPost {
		s.count(routeReports, w, r, func(w http.ResponseWriter, r *http.Request) {
			if aerr != nil {
				answer.Headers(w)
				web.Refuse(w, aerr)
				return
			}
			s.serveReports(w, r, h)
		})
		return
	}
	s.count(routeSteer, w, r, func(w http.ResponseWriter, r *http.Request) {
		if aerr != nil {
			answer.Headers(w)
			web.Refuse(w, aerr)
			return
		}
		h.ServeSteer(w, r)
	})
}

// newMux routes every request. The server's own routes are Go method
// patterns, each path with a fallback that answers 405 with the methods it
// takes; every other path goes to the policies' routes (servePolicyRoutes),
// which change as operators install policies. In front of the mux, a path
// with a dot segment or an empty segment is refused (cleanPath), since the
// mux would otherwise answer it with a redirect to another path; and every
// body is bounded by the largest any route reads (limitBody).
func (s *Server) newMux() http.Handler {
	get, put, post := http.MethodGet, http.MethodPut, http.MethodPost
	// The audit's first: the GET of /v1/rooms/{room}/keylog comes before
	// its PUT, so that the path's 405 is counted under keylog and its
	// Allow reads GET, HEAD, PUT.
	routes := s.audit.Routes()
	routes = append(routes, []web.Route{
		{Method: put, Pattern: "/v1/rooms/{room}/keylog", Family: "keylog_put", Serve: s.serveKeyLogPut},
		{Method: post, Pattern: "/v1/rooms/{room}/records", Family: "records_post", Serve: s.serveRecords},
		{Method: put, Pattern: "/v1/rooms/{room}/policy", Family: "policy_put", Serve: s.servePolicyPut},
		{Method: get, Pattern: "/v1/rooms/{room}/status", Family: "status", Serve: s.serveStatus},
		{Method: get, Pattern: "/v1/front/status", Family: "front_status", Serve: s.serveFrontStatus},
		{Method: get, Pattern: "/healthz", Family: "healthz", Serve: s.serveHealth},
		{Method: get, Pattern: "/readyz", Family: "readyz", Serve: s.serveReady},
		{Method: get, Pattern: "/metrics", Family: "metrics", Serve: s.serveMetrics},
	}...)
	routes = append(routes, s.dash.Routes()...)
	m := http.NewServeMux()
	if err := s.register(m, routes); err != nil {
		panic(err) // the routes above are the server's own
	}
	m.HandleFunc("/", s.servePolicyRoutes)
	return s.cleanPath(limitBody(m))
}

// register adds routes to m, each counted under its family: a method
// pattern each, and for each path a fallback that answers 405 with the
// methods its routes take (a GET takes HEAD too).
func (s *Server) register(m *http.ServeMux, routes []web.Route) error {
	var paths []string
	allowed := map[string][]string{}
	first := map[string]route{}
	for _, rt := range routes {
		fam, ok := routeNamed(rt.Family)
		if !ok {
			return fmt.Errorf("route %s %s: no family %q", rt.Method, rt.Pattern, rt.Family)
		}
		if _, seen := allowed[rt.Pattern]; !seen {
			paths = append(paths, rt.Pattern)
			first[rt.Pattern] = fam
		}
		allowed[rt.Pattern] = append(allowed[rt.Pattern], rt.Method)
		if rt.Method == http.MethodGet {
			allowed[rt.Pattern] = append(allowed[rt.Pattern], http.MethodHead)
		}
		serve := rt.Serve
		m.HandleFunc(rt.Method+" "+rt.Pattern, func(w http.ResponseWriter, r *http.Request) { s.count(fam, w, r, serve) })
	}
	for _, p := range paths {
		methods, fam := allowed[p], first[p]
		m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			s.count(fam, w, r, func(w http.ResponseWriter, r *http.Request) { web.Allow(w, r, methods...) })
		})
	}
	return nil
}

// limitBody bounds every request's body by the largest any route reads
// (each route bounds its own below that). Unlike http.MaxBytesHandler it
// copies no request, and leaves a request with no body, every steering GET,
// as it is.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		next.ServeHTTP(w, r)
	})
}

// servePolicyRoutes answers the paths the policies name: a steering path of
// a room's policy first, then the decision prefixes (§8.4); any other path
// is not found.
func (s *Server) servePolicyRoutes(w http.ResponseWriter, r *http.Request) {
	rt := s.routes.Load()
	path := r.URL.EscapedPath()
	if h, ok, aerr := rt.steerHub(path, r.URL.RawQuery); ok {
		s.steerRoute(w, r, h, aerr)
		return
	}
	if ph, rest, ok := rt.poolEdges(path); ok {
		fam := routePoolEdges
		if rest != "" {
			fam = routePoolChange
		}
		s.count(fam, w, r, func(w http.ResponseWriter, r *http.Request) { ph.ServeEdges(w, r, rest) })
		return
	}
	if digest, inQuery, ok := rt.decisionDigest(path, r.URL.RawQuery); ok {
		s.count(routeDecision, w, r, func(w http.ResponseWriter, r *http.Request) {
			if web.Allow(w, r, http.MethodGet, http.MethodHead) && (inQuery || web.NoQuery(w, r)) {
				s.audit.ServeDecision(w, r, digest)
			}
		})
		return
	}
	if s.front != nil {
		if st, ok := s.front.Match(path); ok {
			s.serveFront(w, r, st)
			return
		}
	}
	s.count(routeOther, w, r, func(w http.ResponseWriter, r *http.Request) {
		web.Refuse(w, api.Errorf(api.NotFound, "no route at %q", path))
	})
}

// cleanPath refuses, with 400 bad_path, a request whose path has a dot
// segment ("." or "..", percent-encoded or not) or an empty segment ("//"):
// no route has one (routeURL refuses a policy URI with one), and ServeMux
// would answer it with a redirect to the path it cleans it to, which for
// "/v1/records/../../etc/passwd" is a path of nothing the server serves.
func (s *Server) cleanPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := web.PathDefect(r.URL.EscapedPath()); why != "" && r.Method != http.MethodConnect {
			s.count(routeOther, w, r, func(w http.ResponseWriter, r *http.Request) {
				web.Refuse(w, api.Errorf(api.BadPath, "the path %q %s", r.URL.EscapedPath(), why))
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hubOf finds the room a {room} path segment names, by id or name.
func (s *Server) hubOf(r *http.Request) (*roomsteer.Room, *api.Error) {
	id, aerr := s.roomOf(r.PathValue("room"))
	if aerr != nil {
		return nil, aerr
	}
	h, ok := s.hubs[id]
	if !ok {
		return nil, api.Errorf(api.RoomNotFound, "the server steers no room %s", id)
	}
	return h, nil
}

// roomOf finds the room a {room} path segment names (web.RoomOf): among
// the rooms steered, then among those the store holds and the
// configuration does not name.
func (s *Server) roomOf(segment string) (sig.Hash, *api.Error) {
	if id, aerr := web.Digest(segment); aerr == nil {
		return id, nil // the audit's tiles are fetched by id, many at once
	}
	var steered []web.RoomName
	for _, h := range s.sortedHubs() {
		steered = append(steered, web.RoomName{ID: h.ID(), Name: h.State().Room().Name()})
	}
	id, aerr := web.RoomOf(segment, steered)
	if aerr == nil || aerr.Code != api.RoomNotFound {
		return id, aerr
	}
	var archived []web.RoomName
	for id, r := range s.archived {
		if d, err := room.ParseDescriptor(r.Descriptor); err == nil {
			archived = append(archived, web.RoomName{ID: id, Name: d.Name})
		}
	}
	if id, aerr2 := web.RoomOf(segment, archived); aerr2 == nil {
		return id, nil
	}
	return id, aerr
}

func (s *Server) sortedHubs() []*roomsteer.Room {
	hs := make([]*roomsteer.Room, 0, len(s.hubs))
	for _, h := range s.hubs {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b *roomsteer.Room) int { x, y := a.ID(), b.ID(); return bytes.Compare(x[:], y[:]) })
	return hs
}

// serveHealth answers whether the process serves at all.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// serveReady answers whether the server can steer: it is not closing, its
// last group commit was durable, and its store answers (store.Health).
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case s.closing.Load():
		web.Refuse(w, api.Errorf(api.Closing, "the server is closing"))
	case s.commits.Failing():
		web.Refuse(w, api.Errorf(api.StoreUnavailable, "the store refused the last group of decisions"))
	case !s.storeReachable():
		web.Refuse(w, api.Errorf(api.StoreUnavailable, web.StoreReason))
	default:
		api.WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "rooms": len(s.hubs)})
	}
}

// sweeper is a table of loads that frees the sessions that have expired
// (store.MemLoads).
type sweeper interface{ Sweep(now uint64) int }

// every runs fn every period until ctx ends; a panic in one run is
// recovered, logged and counted under loop (guard), and the next runs on
// time.
func (s *Server) every(ctx context.Context, loop string, period time.Duration, fn func(context.Context)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			guard.Do(s.log, loop, func() { fn(ctx) })
		}
	}
}

// prune removes from the store what is older than the retention.
func (s *Server) prune(ctx context.Context) {
	now := s.clock()
	if now <= s.retain {
		return
	}
	// A decision kept must still verify (§9.1 step 4.1), so records are
	// kept while a decision kept in any room can name them.
	decisionsBefore := now - s.retain
	recordsBefore := s.recordHorizon(decisionsBefore)
	st, err := s.st.Prune(ctx, recordsBefore, decisionsBefore)
	if err != nil {
		s.log.Error("pruning the store", "err", err)
		return
	}
	s.log.Info("pruned the store", "records", st.Records, "decisions", st.Decisions, "snapshots", st.Snapshots)
}

// Close stops the background work (the group committer, the pruner) and
// waits for the decisions already handed to the committer to be committed.
// A steering request that arrives after is answered 503. It does not close
// the store.
func (s *Server) Close(ctx context.Context) error {
	if !s.closing.CompareAndSwap(false, true) {
		return nil
	}
	s.stop()
	s.pools.Stop()
	s.commits.Close()
	s.records.Close()
	done := make(chan struct{})
	go func() { s.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recordHorizon is, over the rooms, the end before which no decision at
// oldest or later names a record (evidence.RecordHorizon), and never past
// oldest.
func (s *Server) recordHorizon(oldest uint64) uint64 {
	before := oldest
	for _, h := range s.sortedHubs() {
		if st := h.State(); st != nil && st.Policy() != nil {
			before = min(before, evidence.RecordHorizon(st.Policy(), oldest))
		}
	}
	return before
}
