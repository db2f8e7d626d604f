package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/health"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/qoewatch"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
)

// A steerer answers the GETs of a steering route. The server has two: an
// energy room (hub), which decides each request by the rule (§6), signs the
// decision and stores it before it answers; and a pool (poolHub), which
// orders its edges by health and weight (internal/pool) and signs and
// stores nothing. Everything around them is the server's, the same for
// both: the routes, the preflight, the sessions counted in the table of
// loads, the metrics, the logs and the operator's token.
type steerer interface {
	// ServeSteer answers a request on the route: a GET, or a refusal.
	ServeSteer(w http.ResponseWriter, r *http.Request)
	// Label names the steerer in messages: "room <id>", "pool <name>".
	Label() string
	// ReadsHost says whether the answer depends on the Host the request
	// reached (a pool's RELOAD-URI), which the fasthttp path then copies.
	ReadsHost() bool
	// ReportsTo is where a CMCD event report posted to the route goes:
	// the steerer's QoE watch (nil when it steers by none), its pathways
	// and the request's cohort.
	ReportsTo(r *http.Request) (*qoewatch.Watch, []string, string)
}

// A poolHub is one pool the server steers: the pool itself, the checker of
// its edges' health, and what the operator sees of both.
type poolHub struct {
	s    *Server
	p    *pool.Pool
	name string   // "" for the configuration's [steering] table
	id   sig.Hash // the pool's key in the table of loads (poolLoadsID)

	// route is what a request reads of the configuration, swapped whole
	// when it is reloaded.
	route atomic.Pointer[poolRoute]

	checker *health.Checker // nil while no edge has a check_url
	started bool            // whether checker runs (Server.routesMu)
	checks  web.Counters[string]
	latency sync.Map // pathway → *web.Histogram of its checks' durations

	mu      sync.Mutex // guards changes
	changes []EdgeChange

	// qoe is the pool's steering by what players report, nil for none
	// (or for the per-client rule alone); replaced by a reload that
	// changes its settings.
	qoe  atomic.Pointer[qoewatch.Watch]
	away qoewatch.Away
	// unread counts the steering requests' report values that do not
	// count, by reason (issue 26 item 3).
	unread qoewatch.Unread

	limited budget.Counts // requests over budget (steerlimit.go)
}

// poolRoute is what a steering request needs of a pool's configuration.
type poolRoute struct {
	path         string
	ttl          int
	cohortHeader string
	ids          []string // the edges' pathways, in the order written
	// qoe is the pool's QoE settings, nil for none: lowest for the
	// per-client rule, hold for how long it keeps a client away.
	qoe *pool.QoE
}

// maxChanges is how many of its latest changes a pool keeps for the view.
const maxChanges = 64

// poolLoadsID is a pool's key in the table of loads: apart from every
// room id, which is a digest of a descriptor (COMPANION §4).
func poolLoadsID(name string) sig.Hash {
	return sha256.Sum256([]byte("waisteer pool\x00" + name))
}

func (ph *poolHub) Label() string {
	if ph.name == "" {
		return "pool [steering]"
	}
	return "pool " + ph.name
}

func (ph *poolHub) ReadsHost() bool { return true }

func (ph *poolHub) logName() string {
	if ph.name == "" {
		return "steering"
	}
	return ph.name
}

func newPoolRoute(c pool.Config) *poolRoute {
	rt := &poolRoute{path: c.Path, ttl: c.TTL, cohortHeader: http.CanonicalHeaderKey(c.CohortHeader), qoe: c.QoE}
	for _, e := range c.Edges {
		rt.ids = append(rt.ids, e.Pathway)
	}
	return rt
}

// openPool makes the hub of a configured pool, with its checker made and
// not started.
func (s *Server) openPool(c pool.Config, key [16]byte) (*poolHub, error) {
	p, err := pool.New(c, key)
	if err != nil {
		return nil, err
	}
	ph := &poolHub{s: s, p: p, name: c.Name, id: poolLoadsID(c.Name)}
	ph.route.Store(newPoolRoute(c))
	if err := ph.check(c); err != nil {
		return nil, err
	}
	if err := ph.watch(c); err != nil {
		return nil, err
	}
	return ph, nil
}

// watch makes the pool's QoE watch for c, or keeps the one it has when
// c's aggregator settings are its own (a reload that changes other keys
// keeps the figures and moves); nil when c has no cohort rule.
func (ph *poolHub) watch(c pool.Config) error {
	if w := ph.qoe.Load(); w != nil && c.QoE != nil && w.Agg.Config() == c.QoE.Config {
		return nil
	}
	agg, err := c.Aggregator()
	if err != nil {
		return err
	}
	if agg == nil {
		ph.qoe.Store(nil)
		ph.p.SetBehind(nil)
		return nil
	}
	// A new aggregator's figures start empty: its settings' moves start
	// afresh.
	ph.p.SetBehind(nil)
	ph.qoe.Store(qoewatch.New(agg, ph.Label(), ph.p.SetBehind))
	return nil
}

func (ph *poolHub) ReportsTo(r *http.Request) (*qoewatch.Watch, []string, string) {
	rt := ph.route.Load()
	w := ph.qoe.Load()
	if w == nil {
		return nil, nil, ""
	}
	return w, rt.ids, ph.p.CohortOf(&pool.Request{RawQuery: r.URL.RawQuery, Cohort: cohortHeaderOf(r, rt.cohortHeader)})
}

// check makes or updates the pool's checker for c's edges.
func (ph *poolHub) check(c pool.Config) error {
	st, targets := poolChecks(c)
	if ph.checker != nil {
		return ph.checker.Update(st, targets)
	}
	if len(targets) == 0 {
		// A checker is made once an edge has a check_url; a reload may
		// add one later.
		return nil
	}
	ch, err := health.New(st, targets, health.Options{
		OnChange: ph.healthChanged,
		OnCheck:  ph.checked,
		Logger:   ph.s.log.With("pool", ph.logName()),
	})
	if err != nil {
		return err
	}
	ph.checker = ch
	return nil
}

func poolChecks(c pool.Config) (health.Settings, []health.Target) {
	st := health.Settings{Every: c.CheckEvery, Timeout: c.CheckTimeout, DownAfter: c.DownAfter}
	var ts []health.Target
	for _, e := range c.Edges {
		if e.CheckURL != "" {
			ts = append(ts, health.Target{Name: e.Pathway, URL: e.CheckURL})
		}
	}
	return st, ts
}

// healthChanged takes an edge out of the pool's orders or puts it back.
func (ph *poolHub) healthChanged(c health.Change) {
	ph.p.SetUp(c.Name, c.Up)
	what, detail := "up", ""
	if !c.Up {
		what, detail = "down", c.Status.LastError
	}
	ph.note(c.Name, what, detail)
}

// checked counts a check for the metrics.
func (ph *poolHub) checked(name string, o health.Outcome, d time.Duration) {
	ph.checks.Add(name + "\x00" + string(o))
	v, ok := ph.latency.Load(name)
	if !ok {
		v, _ = ph.latency.LoadOrStore(name, web.NewLatencyHistogram())
	}
	v.(*web.Histogram).ObserveDuration(d)
}

// note records a change for the operator's view; the checker and the
// operator's routes log it.
func (ph *poolHub) note(pathway, what, detail string) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	ph.changes = append(ph.changes, EdgeChange{At: time.Now().UTC(), Pathway: pathway, What: what, Detail: detail})
	if n := len(ph.changes); n > maxChanges {
		ph.changes = append(ph.changes[:0], ph.changes[n-maxChanges:]...)
	}
}

// poolSteering is one pool request's work, reused so that a request
// allocates little beyond what net/http does.
type poolSteering struct {
	req     pool.Request
	first   int
	expires uint64
	rule    func([]uint32, uint64) (int, uint64, error) // x.decide, bound once
}

var poolSteerings = sync.Pool{New: func() any {
	x := &poolSteering{}
	x.rule = x.decide
	return x
}}

// decide counts the session on the edge its manifest puts first, until
// its TTL and the grace have passed (the table of loads, as a room's).
func (x *poolSteering) decide([]uint32, uint64) (int, uint64, error) { return x.first, x.expires, nil }

// serveSteer answers a GET of the pool's route with the session's
// manifest (the station seed's route): 404 while the pool has no edges,
// which the seed calls steering off; never 410 or 429 (players.md).
func (ph *poolHub) ServeSteer(w http.ResponseWriter, r *http.Request) {
	if !answer.Steerable(w, r) {
		return
	}
	rt := ph.route.Load()
	if !ph.p.Enabled() {
		web.Refuse(w, api.Errorf(api.NotFound, "steering is off: %s has no edges", ph.Label()))
		return
	}
	// The players' parameters and CMCD are read as a room reads them
	// (§4): a pool orders by health and weight, and, with QoE, by what
	// its players report.
	q := report.ParseQuery(r.RequestURI)
	_, rep, unread := q.ReportUnread(r.Header, rt.ids)
	ph.unread.Note(unread, rep)

	x := poolSteerings.Get().(*poolSteering)
	x.req.RawQuery = r.URL.RawQuery
	x.req.Cohort = cohortHeaderOf(r, rt.cohortHeader)
	x.req.Base = requestBase(r)
	if l := ph.s.limits; l != nil {
		_, has := ph.p.SessionOf(&x.req)
		if why := l.Admit(ph.s.clientAddr(r), !has, ph.s.limitNow()); why != "" {
			ph.overBudget(w, rt, &x.req, rep, why, has)
			x.req = pool.Request{}
			poolSteerings.Put(x)
			return
		}
	}
	now := ph.s.clock()
	var at time.Time
	if rt.qoe != nil {
		at = time.UnixMicro(int64(now))
		x.req.Away = ph.awayOf(rt, &x.req, rep, at)
	}
	mb := answer.Buffers.Get().(*[]byte)
	m, first, session := ph.p.Steer((*mb)[:0], &x.req)
	if w := ph.qoe.Load(); w != nil && rep.Present&report.HasPathway != 0 {
		w.AddReport(rt.ids, rep, ph.p.CohortOf(&x.req), report.Session(session), qoe.ClientOf(ph.s.clientAddr(r)), at)
	}
	x.first = first
	x.expires = now + uint64(x.req.TTL)*1_000_000 + ph.s.grace
	if err := ph.s.loads.Steer(r.Context(), ph.id, len(rt.ids), report.Session(session), now, x.rule); err != nil {
		// The count of live sessions is the operator's view; the
		// player's manifest does not depend on it.
		ph.s.log.Warn("counting a pool's session", "pool", ph.logName(), "err", err)
	}
	x.req = pool.Request{}
	poolSteerings.Put(x)
	answer.Manifest(w, answer.HeaderJSON, nil, m, mb)
}

// awayOf is the per-client rule (apex-steering's): the pathway a client
// reports a throughput below 1.2 times the lowest variant's bitrate on is
// put behind the others, for this manifest and, for a session this server
// minted, until the QoE's hold has passed; "" for none. A client kept away
// already stays as it is until then: if the next pathway is slow for it
// too, its own link is the likelier cause, and sending it back would only
// swap the pathway it is kept from. A throughput of 0 is no measurement
// (a player that timed nothing, as dash.js's CMCD mtp before its first
// segment), and moves no one.
func (ph *poolHub) awayOf(rt *poolRoute, req *pool.Request, rep report.Report, at time.Time) string {
	below := rt.qoe.Lowest > 0 && rep.Present&report.HasPathway != 0 && rep.Present&report.HasThroughput != 0 &&
		int(rep.Pathway) < len(rt.ids) && rep.Throughput > 0 && qoe.BelowLowest(rep.Throughput, rt.qoe.Lowest)
	if !below && ph.away.Empty() {
		return "" // the common case: no session to read
	}
	ps, has := ph.p.SessionOf(req)
	s := report.Session(ps)
	if has {
		if id := ph.away.Of(s, at); id != "" {
			return id
		}
	}
	if !below {
		return ""
	}
	id := rt.ids[rep.Pathway]
	if has {
		ph.away.Keep(s, id, at.Add(rt.qoe.Hold))
	}
	return id
}

// requestBase is the scheme and authority a request reached, which a
// pool's RELOAD-URI is written under unless its public_url says otherwise:
// players resolve a relative one against different bases (players.md).
func requestBase(r *http.Request) string {
	if r.Host == "" {
		return ""
	}
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// poolsSorted lists the pools by name ("" first).
func (s *Server) poolsSorted() []*poolHub {
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	out := make([]*poolHub, len(s.pools))
	copy(out, s.pools)
	return out
}

// startPools starts every pool's checker.
func (s *Server) startPools(ctx context.Context) {
	for _, ph := range s.poolsSorted() {
		if ph.checker != nil {
			ph.checker.Start(ctx)
			ph.started = true
		}
	}
}

func (s *Server) stopPools() {
	for _, ph := range s.poolsSorted() {
		if ph.checker != nil {
			ph.checker.Stop()
		}
	}
}

// poolKey is the secret a pool's sessions are made with: one for every
// pool, in the store, so that a session outlives a restart and is known to
// every server on the store.
func (s *Server) poolKey(ctx context.Context) ([16]byte, error) {
	var k [16]byte
	b, err := s.st.Secret(ctx, "pool-sessions", len(k))
	if err != nil {
		return k, fmt.Errorf("the pools' session secret: %w", err)
	}
	copy(k[:], b)
	return k, nil
}

// logPool logs at level with the pool's name.
func (ph *poolHub) log(level slog.Level, msg string, args ...any) {
	ph.s.log.Log(context.Background(), level, msg, append([]any{"pool", ph.logName()}, args...)...)
}
