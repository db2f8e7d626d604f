package poolsteer

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
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
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
)

// A Steerer is one pool the server steers: the pool itself, the checker of
// its edges' health, and what the operator sees of both. It orders its
// edges by health and weight (internal/pool) and signs and stores nothing.
type Steerer struct {
	d    *Deps
	p    *pool.Pool
	name string   // "" for the configuration's [steering] table
	id   sig.Hash // the pool's key in the table of loads (LoadsID)

	// route is what a request reads of the configuration, swapped whole
	// when it is reloaded.
	route atomic.Pointer[poolRoute]

	checker *health.Checker // nil while no edge has a check_url
	started bool            // whether checker runs (serialised by the server's route rebuilds)
	checks  web.Counters[string]
	latency sync.Map // pathway → *web.Histogram of its checks' durations

	mu      sync.Mutex // guards changes
	changes []view.EdgeChange

	// qoe is the pool's steering by what players report, nil for none
	// (or for the per-client rule alone); replaced by a reload that
	// changes its settings.
	qoe  atomic.Pointer[watched]
	away qoewatch.Away
	// unread counts the steering requests' report values that do not
	// count, by reason (issue 26 item 3).
	unread qoewatch.Unread

	limited budget.Counts // requests over budget
}

// watched is a pool's QoE watch and the aggregator it was made over.
type watched struct {
	agg *qoe.Aggregator
	w   *qoewatch.Watch
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
	// base is clone_from when no edge has that pathway (the content's own,
	// which a new session that reports it is kept on), as a list of one
	// to read a report against; nil otherwise.
	base []string
}

// maxChanges is how many of its latest changes a pool keeps for the view.
const maxChanges = 64

// LoadsID is a pool's key in the table of loads: apart from every room
// id, which is a digest of a descriptor (COMPANION §4).
func LoadsID(name string) sig.Hash {
	return sha256.Sum256([]byte("waisteer pool\x00" + name))
}

// Label names the pool in messages: "pool <name>", "pool [steering]".
func (ph *Steerer) Label() string {
	if ph.name == "" {
		return "pool [steering]"
	}
	return "pool " + ph.name
}

// ReadsHost says that a pool's answer depends on the Host the request
// reached (its RELOAD-URI), which the fasthttp path then copies.
func (ph *Steerer) ReadsHost() bool { return true }

// Name is the pool's name, "" for [steering].
func (ph *Steerer) Name() string { return ph.name }

// Path is the pool's steering path, as it stands after reloads.
func (ph *Steerer) Path() string { return ph.route.Load().path }

// CohortHeader is the header a request's cohort is read from, "" for none.
func (ph *Steerer) CohortHeader() string { return ph.route.Load().cohortHeader }

// Pool is the pool's rule and state.
func (ph *Steerer) Pool() *pool.Pool { return ph.p }

// Watch is the pool's QoE watch, nil while it steers by none.
func (ph *Steerer) Watch() *qoewatch.Watch {
	if w := ph.qoe.Load(); w != nil {
		return w.w
	}
	return nil
}

// Unread is the pool's counts of report values that do not count.
func (ph *Steerer) Unread() *qoewatch.Unread { return &ph.unread }

// Limited is the pool's counts of requests over budget, by reason and
// answer.
func (ph *Steerer) Limited() *budget.Counts { return &ph.limited }

// SweepAway forgets the clients the per-client rule keeps away once their
// time is up at now.
func (ph *Steerer) SweepAway(now time.Time) { ph.away.Sweep(now) }

func (ph *Steerer) logName() string {
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
	if c.CloneFrom != "" && !slices.Contains(rt.ids, c.CloneFrom) {
		rt.base = []string{c.CloneFrom}
	}
	return rt
}

// open makes the steerer of a configured pool, with its checker made and
// not started.
func open(d *Deps, c pool.Config, key [16]byte) (*Steerer, error) {
	p, err := pool.New(c, key)
	if err != nil {
		return nil, err
	}
	ph := &Steerer{d: d, p: p, name: c.Name, id: LoadsID(c.Name)}
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
func (ph *Steerer) watch(c pool.Config) error {
	if w := ph.qoe.Load(); w != nil && c.QoE != nil && w.agg.Config() == c.QoE.Config {
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
	ph.qoe.Store(&watched{agg: agg, w: qoewatch.New(agg, ph.Label(), ph.p.SetBehind)})
	return nil
}

// ReportsTo is where a CMCD event report posted to the pool's route goes:
// its QoE watch (nil when it steers by none), its pathways and the
// request's cohort.
func (ph *Steerer) ReportsTo(r *http.Request) (*qoewatch.Watch, []string, string) {
	rt := ph.route.Load()
	w := ph.qoe.Load()
	if w == nil {
		return nil, nil, ""
	}
	return w.w, rt.ids, ph.p.CohortOf(&pool.Request{RawQuery: r.URL.RawQuery, Cohort: cohortHeaderOf(r, rt.cohortHeader)})
}

// check makes or updates the pool's checker for c's edges.
func (ph *Steerer) check(c pool.Config) error {
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
		Logger:   ph.d.Log.With("pool", ph.logName()),
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
func (ph *Steerer) healthChanged(c health.Change) {
	ph.p.SetUp(c.Name, c.Up)
	what, detail := "up", ""
	if !c.Up {
		what, detail = "down", c.Status.LastError
	}
	ph.note(c.Name, what, detail)
}

// checked counts a check for the metrics.
func (ph *Steerer) checked(name string, o health.Outcome, d time.Duration) {
	ph.checks.Add(name + "\x00" + string(o))
	v, ok := ph.latency.Load(name)
	if !ok {
		v, _ = ph.latency.LoadOrStore(name, web.NewLatencyHistogram())
	}
	v.(*web.Histogram).ObserveDuration(d)
}

// note records a change for the operator's view; the checker and the
// operator's routes log it.
func (ph *Steerer) note(pathway, what, detail string) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	ph.changes = append(ph.changes, view.EdgeChange{At: time.Now().UTC(), Pathway: pathway, What: what, Detail: detail})
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

// ServeSteer answers a GET of the pool's route with the session's
// manifest (the station seed's route): 404 while the pool has no edges,
// which the seed calls steering off; never 410 or 429 (players.md).
func (ph *Steerer) ServeSteer(w http.ResponseWriter, r *http.Request) {
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
	viewer := ph.d.Reach.Of(r)
	x.req.Base = viewer.Base()
	// A new session's answer keeps the pathway it reports first (pool's
	// doc, "The order"): an edge's, or clone_from when no edge has it,
	// which the report names no edge for.
	if rep.Present&report.HasPathway != 0 && int(rep.Pathway) < len(rt.ids) {
		x.req.Reported = rt.ids[rep.Pathway]
	} else if rt.base != nil {
		if _, b := q.Report(r.Header, rt.base); b.Present&report.HasPathway != 0 {
			x.req.Reported = rt.base[0]
		}
	}
	if l := ph.d.Budgets; l != nil {
		_, has := ph.p.SessionOf(&x.req)
		if why := l.Admit(viewer.Client, !has, time.UnixMicro(int64(ph.d.Clock()))); why != "" {
			ph.overBudget(w, rt, &x.req, rep, why, has)
			x.req = pool.Request{}
			poolSteerings.Put(x)
			return
		}
	}
	now := ph.d.Clock()
	var at time.Time
	if rt.qoe != nil {
		at = time.UnixMicro(int64(now))
		x.req.Away = ph.awayOf(rt, &x.req, rep, at)
	}
	mb := answer.Buffers.Get().(*[]byte)
	m, first, session := ph.p.Steer((*mb)[:0], &x.req)
	if w := ph.qoe.Load(); w != nil && rep.Present&report.HasPathway != 0 {
		w.w.AddReport(rt.ids, rep, ph.p.CohortOf(&x.req), report.Session(session), qoe.ClientOf(viewer.Client), at)
	}
	x.first = first
	x.expires = now + uint64(x.req.TTL)*1_000_000 + ph.d.Grace
	if err := ph.d.Loads.Steer(r.Context(), ph.id, len(rt.ids), report.Session(session), now, x.rule); err != nil {
		// The count of live sessions is the operator's view; the
		// player's manifest does not depend on it.
		ph.d.Log.Warn("counting a pool's session", "pool", ph.logName(), "err", err)
	}
	x.req = pool.Request{}
	poolSteerings.Put(x)
	answer.Manifest(w, answer.HeaderJSON, nil, m, mb)
}

// CountViewer counts a viewer the front redirects or gives backups
// (issue 28: headroom counts live front viewers per edge) as a live
// session of the pool on first, the pathway its order puts first, as
// ServeSteer counts a steering request's session: in the table of loads
// under the pool's key, keyed by the session (a viewer who reopens with
// it counts once, on its latest first), until its TTL (ttl, in seconds:
// the request's, which pool.Order sets) and the grace have passed.
func (ph *Steerer) CountViewer(ctx context.Context, session pool.Session, first string, ttl int) error {
	ids := ph.route.Load().ids
	i := slices.Index(ids, first)
	if i < 0 {
		return fmt.Errorf("%s has no edge %q", ph.Label(), first)
	}
	ttl = max(ttl, 0)
	now := ph.d.Clock()
	expires := now + uint64(ttl)*1_000_000 + ph.d.Grace
	return ph.d.Loads.Steer(ctx, ph.id, len(ids), report.Session(session), now, func([]uint32, uint64) (int, uint64, error) {
		return i, expires, nil
	})
}

// overBudget answers a pool's steering request that is over budget (why):
// with a session the pool minted (hasSession), the manifest the pool
// orders for it, with neither its report nor its session counted; else
// 503.
func (ph *Steerer) overBudget(w http.ResponseWriter, rt *poolRoute, req *pool.Request, rep report.Report, why string, hasSession bool) {
	if !hasSession {
		ph.limited.Note(why, budget.Refused)
		budget.Refuse(w, uint32(rt.ttl))
		return
	}
	ph.limited.Note(why, budget.Replayed)
	if rt.qoe != nil {
		req.Away = ph.awayOf(rt, req, rep, time.UnixMicro(int64(ph.d.Clock())))
	}
	mb := answer.Buffers.Get().(*[]byte)
	m, _, _ := ph.p.Steer((*mb)[:0], req)
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
func (ph *Steerer) awayOf(rt *poolRoute, req *pool.Request, rep report.Report, at time.Time) string {
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

// cohortHeaderOf is the first value of a cohort header, "" for none.
func cohortHeaderOf(r *http.Request, name string) string {
	if name == "" {
		return ""
	}
	if v := r.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// log logs at level with the pool's name.
func (ph *Steerer) log(level slog.Level, msg string, args ...any) {
	ph.d.Log.Log(context.Background(), level, msg, append([]any{"pool", ph.logName()}, args...)...)
}
