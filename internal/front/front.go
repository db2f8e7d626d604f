// Package front serves an origin's playlists as players should get them
// (issue 13): a multivariant playlist or an MPD with the steering line of
// its pool or energy room added on the way out (the station seed), and,
// for players that cannot steer, a redirect on opening to the first
// pathway of the viewer's order, or a playlist of backup variants (the OTT
// seed). Media playlists and segments are never changed: what is not a
// playlist the front steers passes through from the origin, streamed
// (pass.go), so that a viewer on the playlist's own pathway plays through
// the front; URIs it writes on other pathways are those a player would
// write (urls.go); a playlist that lacks the pathway its line names is
// reported (warnings.go). It knows nothing
// of how an order is decided: a Steering (a pool or an energy room, which
// internal/server gives it) says. What its answers carry as validators,
// and when it answers 304, is said at the head of validators.go (issue 28,
// "Validators exact").
package front

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/front/dash"
	"github.com/waisteer/waisteer/internal/front/hls"
	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/reach"
	"github.com/waisteer/waisteer/internal/web"
)

// Opening is a viewer's order, for a player sent no manifest.
type Opening struct {
	Order []string // the pathways, first first
	// Query carries the viewer's session on in the URIs the front writes
	// ("session=…"); "" when the steering has none to carry.
	Query string
	// Decision is the URI of the decision made and stored for the viewer
	// (an energy room's, §8.4); "" for a pool.
	Decision string
}

// Steering is what the front needs of the pool or energy room that steers
// a playlist.
type Steering interface {
	// Name names it in logs and metrics.
	Name() string
	// Tags are the HLS steering tag and the DASH element to add; both ""
	// while steering is off (a pool with no edges), when the playlist is
	// served as the origin wrote it.
	Tags() (hlsTag, dashElement string)
	// Open is the viewer's order: its session read from rawQuery (a
	// session the steering did not mint is replaced), or a fresh one.
	Open(ctx context.Context, rawQuery string, h http.Header) (Opening, error)
	// Clone says whether pathway is a clone (RFC 8216bis §7.3,
	// PATHWAY-CLONES) the steering sends, and its BASE-ID and its
	// URI-REPLACEMENT's HOST and PARAMS (name, value; in any order).
	Clone(pathway string) (base, host string, params [][2]string, ok bool)
	// Pathways are the pathways in the configuration's order, for the
	// status.
	Pathways() []string
}

// Playlist is a path the front serves and the steering of its playlists.
type Playlist struct {
	Path     string // an exact path, or a prefix ending in "/"
	Steering Steering
}

// Config configures a Front.
type Config struct {
	Origin    *origin.Origin
	Playlists []Playlist
	// Bases are the URL bases ("http://cdn-a.example") of pathways the
	// playlist declares, to which a redirect or a backup variant points;
	// a clone's comes from its host.
	Bases map[string]string
	// RedirectAgents, BackupAgents and SteerAgents are User-Agent
	// substrings (any case) of players to redirect on opening, to give
	// backup variants, and to steer; they win over the built-in classes
	// (agents.classify says the order).
	RedirectAgents, BackupAgents, SteerAgents []string
	Logger                                    *slog.Logger
	// CacheTTL is the longest an origin's answer is kept (cache.go);
	// 0 keeps none and fetches for every request. CacheEntries and
	// CacheBytes bound the cache; 0: DefaultCacheEntries, DefaultCacheBytes.
	CacheTTL     time.Duration
	CacheEntries int
	CacheBytes   int64
	// MaxStreams caps the pass-through streams at once (pass.go); 0:
	// DefaultMaxStreams.
	MaxStreams int
}

// ModeParam is the query parameter that forces a class for testing:
// "redirect", "backup" or "steer". The front removes it before the
// origin sees the query.
const ModeParam = "waisteer_mode"

// Front is the handler of the configured playlist paths.
type Front struct {
	origin    *origin.Origin
	exact     map[string]Steering
	prefixes  []Playlist
	bases     map[string]rawURL
	agents    agents
	log       *slog.Logger
	opens     [classCount]sync.Map // family → *atomic.Uint64
	rules     [classCount][ruleCount]atomic.Uint64
	redirects atomic.Uint64
	failures  sync.Map // code → *atomic.Uint64
	cache     *cache   // nil: none
	// Pass-through (pass.go): a place per stream running, and counts.
	streams    chan struct{}
	passed     atomic.Uint64
	passBusy   atomic.Uint64
	passActive atomic.Int64
	warn       warnings // warnings.go
}

// New makes the front of cfg.
func New(cfg Config) (*Front, error) {
	if cfg.Origin == nil {
		return nil, errors.New("front: no origin")
	}
	f := &Front{origin: cfg.Origin, exact: map[string]Steering{}, bases: map[string]rawURL{}, agents: newAgents(cfg.RedirectAgents, cfg.BackupAgents, cfg.SteerAgents), log: cfg.Logger}
	if f.log == nil {
		f.log = slog.Default()
	}
	if cfg.MaxStreams < 0 {
		return nil, fmt.Errorf("front: MaxStreams %d is negative", cfg.MaxStreams)
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	f.streams = make(chan struct{}, cfg.MaxStreams)
	if cfg.CacheTTL > 0 {
		f.cache = newCache(cfg.CacheTTL, cfg.CacheEntries, cfg.CacheBytes)
	}
	for _, p := range cfg.Playlists {
		if p.Steering == nil || p.Path == "" || p.Path[0] != '/' {
			return nil, fmt.Errorf("front: playlist path %q needs an absolute path and a steering", p.Path)
		}
		if strings.HasSuffix(p.Path, "/") {
			f.prefixes = append(f.prefixes, p)
		} else {
			f.exact[p.Path] = p.Steering
		}
	}
	for k, v := range cfg.Bases {
		b, ok := parseHTTP(v)
		if !ok || b.hasQuery || b.hasFragment {
			return nil, fmt.Errorf("front: the base of %q, %q, is not an http or https base URL", k, v)
		}
		f.bases[k] = b
	}
	return f, nil
}

// Paths are the paths and prefixes the front answers, for the server's
// route table.
func (f *Front) Paths() (exact, prefixes []string) {
	for p := range f.exact {
		exact = append(exact, p)
	}
	for _, p := range f.prefixes {
		prefixes = append(prefixes, p.Path)
	}
	return exact, prefixes
}

// Match finds the steering of a path, and whether the front answers it.
func (f *Front) Match(path string) (Steering, bool) {
	if s, ok := f.exact[path]; ok {
		return s, true
	}
	best := -1
	for i, p := range f.prefixes {
		if strings.HasPrefix(path, p.Path) && (best < 0 || len(p.Path) > len(f.prefixes[best].Path)) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	return f.prefixes[best].Steering, true
}

// ServeHTTP answers a GET or HEAD of a configured path.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st, ok := f.Match(r.URL.EscapedPath())
	if !ok {
		api.WriteError(w, api.Errorf(api.NotFound, "the front serves no playlist at %q", r.URL.Path))
		return
	}
	f.Serve(w, r, st)
}

// Serve answers a request of a path Match gave st for: a GET or HEAD, or
// a CORS preflight (Preflight).
func (f *Front) Serve(w http.ResponseWriter, r *http.Request, st Steering) {
	if r.Method == http.MethodOptions {
		Preflight(w)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		api.WriteError(w, api.Errorf(api.MethodNotAllowed, "%s is not answered here; use GET, HEAD", r.Method))
		return
	}
	// Playlists are public, as the steering manifest is: a player in a
	// page on another origin may read them.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !f.Steers(r.URL.Path) && f.pass(w, r) {
		return // a segment, a key, a media playlist by another name: as the origin has it
	}
	class, family, rule := f.agents.classify(r.Header.Get("User-Agent"))
	query, forced := stripMode(r.URL.RawQuery)
	switch forced {
	case noMode:
	case "redirect":
		class, rule = RedirectOnly, RuleMode
	case "backup":
		class, rule = BackupOnly, RuleMode
	case "steer":
		class, rule = Steers, RuleMode
	default:
		// A test that names a class the front does not have must not be
		// answered as if it had named none (issue 29).
		api.WriteError(w, api.Errorf(api.BadQuery, "%s=%q is none of redirect, backup or steer", ModeParam, forced))
		return
	}
	who := viewer{class, family, rule}
	hlsTag, dashEl := st.Tags()
	off := hlsTag == "" && dashEl == ""

	if class == RedirectOnly && !off {
		f.count(who)
		f.redirect(w, r, st, query)
		return
	}
	// The validators, and when to ask the origin conditionally: the head
	// of validators.go.
	rv := revalidate(r.Header, class, hlsTag, dashEl, off)
	res, aerr := f.fetch(r, query, rv.ifNoneMatch())
	if aerr == nil && res.Status == http.StatusNotModified {
		if h, ok := rv.notModified(res.Header); ok {
			writeNotModified(w, h)
			return
		}
		res, aerr = f.fetch(r, query, "") // a 304 the front cannot vouch for: the whole playlist
	}
	if aerr != nil {
		f.fail(aerr)
		api.WriteError(w, aerr)
		return
	}
	body, kind, aerr := f.rewrite(r, st, res.Body, who, query, hlsTag, dashEl, off)
	if aerr != nil {
		f.fail(aerr)
		if aerr.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1") // a store down, a budget spent: players retry
		}
		api.WriteError(w, aerr)
		return
	}
	hdr := res.Header.Clone()
	switch {
	case off || kind == "media":
		shape(hdr, asWritten, "")
	case class == BackupOnly && kind == "multivariant":
		shape(hdr, ownPlaylist, "")
	case kind == "mpd":
		shape(hdr, steered, dashEl)
	default:
		shape(hdr, steered, hlsTag)
	}
	if fresh(r.Header, hdr) {
		writeNotModified(w, hdr)
		return
	}
	h := w.Header()
	for k, vs := range hdr {
		h[k] = vs
	}
	if res.ContentType != "" {
		h.Set("Content-Type", res.ContentType)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// Preflight answers a CORS preflight of a front path (the Fetch standard's
// CORS-preflight request), 204 with no body, without asking the origin: a
// player in a page of another origin needs one before a GET that carries
// CMCD in headers (CTA-5004-B header mode), a Range, or a validator of its
// cache (issue 28).
func Preflight(w http.ResponseWriter) {
	web.Preflight(w, "GET, HEAD, OPTIONS", "CMCD-Request, CMCD-Object, CMCD-Session, CMCD-Status, Range, If-Range, If-None-Match, If-Modified-Since")
}

// fetch gets the path from the origin, conditionally when ifNoneMatch
// (the origin's tags) is not "", through the cache when there is one.
func (f *Front) fetch(r *http.Request, query, ifNoneMatch string) (*origin.Response, *api.Error) {
	var res *origin.Response
	var err error
	if f.cache != nil {
		res, err = f.cached(r, query, ifNoneMatch)
	} else {
		res, err = f.origin.Fetch(r.Context(), &origin.Request{Path: r.URL.Path, RawQuery: query, IfNoneMatch: ifNoneMatch})
	}
	if err != nil {
		var oe *origin.Error
		if errors.As(err, &oe) {
			return nil, &api.Error{Code: api.Code(oe.Code), Detail: oe.Detail, Status: oe.Status}
		}
		return nil, &api.Error{Code: "origin_unreachable", Detail: err.Error(), Status: http.StatusBadGateway}
	}
	return res, nil
}

// rewrite is what the front makes of the origin's bytes: a multivariant
// playlist or an MPD with its steering line, or for a player that fails
// over between variants only, a playlist of backups; a media playlist as
// it is. Bytes that are neither HLS nor an MPD are refused: the front
// never serves what it cannot tell is a playlist.
func (f *Front) rewrite(r *http.Request, st Steering, b []byte, who viewer, query, hlsTag, dashEl string, off bool) ([]byte, string, *api.Error) {
	if dash.IsMPD(b) {
		out, kind, aerr := f.mpd(b, who, dashEl, off)
		if aerr == nil && !off {
			f.checkPathways(r.URL.Path, st, b, "", dashEl, false)
		}
		return out, kind, aerr
	}
	kind, err := hls.Classify(b)
	switch {
	case err != nil:
		return nil, "", &api.Error{Code: "origin_not_playlist", Detail: "the origin's answer is not a playlist the front can serve: " + err.Error(), Status: http.StatusBadGateway}
	case kind == hls.Media:
		return b, "media", nil
	case kind == hls.Multivariant:
		f.count(who)
		if off {
			return b, "multivariant", nil
		}
		if who.class == BackupOnly {
			out, aerr := f.backups(r, st, b, query)
			return out, "multivariant", aerr
		}
		out, err := hls.SetSteering(nil, b, hlsTag)
		if err != nil {
			return nil, "", &api.Error{Code: "origin_not_playlist", Detail: err.Error(), Status: http.StatusBadGateway}
		}
		f.checkPathways(r.URL.Path, st, b, hlsTag, "", false)
		return out, "multivariant", nil
	}
	return nil, "", &api.Error{Code: "origin_not_playlist", Detail: "the origin's answer is neither an HLS playlist nor an MPD", Status: http.StatusBadGateway}
}

// mpd is an MPD with its steering element.
func (f *Front) mpd(b []byte, who viewer, dashEl string, off bool) ([]byte, string, *api.Error) {
	f.count(who)
	if off {
		return b, "mpd", nil
	}
	out, err := dash.SetSteering(nil, b, dashEl)
	if err != nil {
		return nil, "", &api.Error{Code: "origin_not_playlist", Detail: err.Error(), Status: http.StatusBadGateway}
	}
	return out, "mpd", nil
}

// backups writes the viewer's playlist of backup variants (the OTT seed):
// each variant on the viewer's own pathway, the first of its order, then
// again on the next two, so that a failed pathway's viewers spread over
// the others as their orders do; none of the origin's steering is kept
// (hls.Backup), nor a variable reference changed (onPathwayVars).
func (f *Front) backups(r *http.Request, st Steering, b []byte, query string) ([]byte, *api.Error) {
	o, err := st.Open(r.Context(), query, r.Header)
	if err != nil {
		return nil, openFailed(err, &api.Error{Code: api.Internal, Detail: "the viewer's order: " + err.Error(), Status: http.StatusInternalServerError})
	}
	base, ok := parseHTTP(requestURL(r))
	if !ok {
		return nil, &api.Error{Code: api.Internal, Detail: "the request's URL does not read", Status: http.StatusInternalServerError}
	}
	order := o.Order
	if len(order) > 3 {
		order = order[:3]
	}
	// The viewer's own pathway, the first of its order, carries its
	// variants; the next two carry the backups. Each is made from the URI
	// the origin wrote, its variable references kept (vars.go).
	on := map[string]int{} // a variant's URI as written → its pathway's place in order
	out, err := hls.Backup(nil, b, func(uri string) string {
		return f.onPathwayVars(base, uri, order[0], st)
	}, func(uri string) []string {
		var us []string
		for k, p := range order[1:] {
			if u := f.onPathwayVars(base, uri, p, st); u != "" {
				us = append(us, u)
				on[u] = k + 1
			}
		}
		return us
	})
	if err != nil {
		return nil, &api.Error{Code: "origin_not_playlist", Detail: err.Error(), Status: http.StatusBadGateway}
	}
	// Renditions and I-frame playlists on the same pathways, each backup
	// variant naming its own pathway's groups (hls.PlaceRenditions).
	out, err = hls.PlaceRenditions(nil, out, len(order), func(uri string) int { return on[uri] }, func(uri string, k int) string {
		return f.onPathwayVars(base, uri, order[k], st)
	})
	if err != nil {
		return nil, &api.Error{Code: "origin_not_playlist", Detail: err.Error(), Status: http.StatusBadGateway}
	}
	return out, nil
}

// onPathway is uri, resolved against the playlist's URL base, on a
// pathway as a player would write it (urls.go): on the pathway's
// configured base, or, for a clone, on its base pathway's URL with the
// clone's HOST and PARAMS; "" when the pathway has neither, or when uri is
// not an http or https URI.
func (f *Front) onPathway(base rawURL, uri, pathway string, st Steering) string {
	u, ok := resolve(base, uri)
	if !ok {
		return ""
	}
	if u, ok = f.place(u, pathway, st, 0); !ok {
		return ""
	}
	return u.String()
}

// maxCloneDepth bounds a chain of clones of clones (a policy's clone names
// a base before it; a loop is refused on the way).
const maxCloneDepth = 8

// place puts u, the URL as the viewer resolves it, on pathway, and reports
// whether the pathway has a base or is a clone (false: u as it came).
func (f *Front) place(u rawURL, pathway string, st Steering, depth int) (rawURL, bool) {
	baseID, host, params, clone := st.Clone(pathway)
	if b, ok := f.bases[pathway]; ok {
		// A configured base wins over a clone's HOST (issue 28): the
		// scheme and authority are the base's, its path goes first.
		u.scheme, u.authority = b.scheme, b.authority
		u.path = strings.TrimSuffix(b.path, "/") + u.path
	} else if clone && depth < maxCloneDepth && baseID != pathway {
		// RFC 8216bis §7.3: the base pathway's URI with the host
		// replaced; the base's scheme and port kept.
		u, _ = f.place(u, baseID, st, depth+1)
		u.authority = withHost(u.authority, host)
	} else {
		return u, false
	}
	if clone {
		u.query, u.hasQuery = withParams(u.query, u.hasQuery, params)
	}
	return u, true
}

// redirect sends a player that cannot steer to the same path on the first
// pathway of its order (the OTT seed's redirect on opening) that has a
// base, carrying its session on in the Location so that it keeps its
// pathway when it comes back; an energy room's decision is named in
// WAI-Decision.
func (f *Front) redirect(w http.ResponseWriter, r *http.Request, st Steering, query string) {
	w.Header().Set("Cache-Control", "no-store")
	o, err := st.Open(r.Context(), query, r.Header)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		api.WriteError(w, openFailed(err, api.Errorf(api.StoreUnavailable, "deciding the viewer's pathway: %v", err)))
		return
	}
	base, ok := parseHTTP(requestURL(r))
	if !ok {
		api.WriteError(w, api.Errorf(api.Internal, "the request's URL does not read"))
		return
	}
	// The same path, byte for byte as the viewer sent it, on the pathway.
	here := rawURL{scheme: base.scheme, authority: base.authority, path: base.path}
	q := withoutSession(query)
	if o.Query != "" {
		if q != "" {
			q += "&"
		}
		q += o.Query
	}
	// A query no request target may hold (RFC 9112 §3.2) would not be
	// one in a Location either.
	for i := 0; i < len(q); i++ {
		if c := q[i]; c <= 0x20 || c >= 0x7f || c == '#' {
			api.WriteError(w, api.Errorf(api.BadQuery, "the query holds the byte 0x%02x, which no request may carry", c))
			return
		}
	}
	here.query, here.hasQuery = q, q != ""
	for _, p := range o.Order {
		u, ok := f.place(here, p, st, 0)
		if !ok {
			continue
		}
		if o.Decision != "" {
			w.Header().Set("WAI-Decision", o.Decision)
		}
		w.Header().Set("Location", u.String())
		w.Header().Set("Vary", "User-Agent")
		f.redirects.Add(1)
		w.WriteHeader(http.StatusFound)
		return
	}
	api.WriteError(w, api.Errorf(api.Internal, "no pathway of %s's order %v has a host or a base to redirect to", st.Name(), o.Order))
}

// requestURL is the URL the player asked for, as it reached the front:
// through the proxies the server trusts, or on its public_url, as the
// server put it in r's context (reach.BaseOf).
func requestURL(r *http.Request) string {
	return reach.BaseOf(r) + r.URL.RequestURI()
}

// noMode is stripMode's value for a query without ModeParam.
const noMode = "\x00none"

// stripMode removes ModeParam from a raw query, byte for byte otherwise,
// and returns its first value as written (not decoded), or noMode.
func stripMode(raw string) (string, string) {
	if !strings.Contains(raw, ModeParam) {
		return raw, noMode
	}
	var keep []string
	mode := noMode
	for part := range strings.SplitSeq(raw, "&") {
		if k, v, _ := strings.Cut(part, "="); k == ModeParam {
			if mode == noMode {
				mode = v
			}
			continue
		}
		keep = append(keep, part)
	}
	return strings.Join(keep, "&"), mode
}

// withoutSession removes the front's own session and bucket parameters
// from a query it carries on, so that the Location has only the new.
func withoutSession(raw string) string {
	if raw == "" {
		return ""
	}
	var keep []string
	for part := range strings.SplitSeq(raw, "&") {
		k, _, _ := strings.Cut(part, "=")
		if k == "session" || k == "bucket" || k == "wai_session" {
			continue
		}
		keep = append(keep, part)
	}
	return strings.Join(keep, "&")
}

// viewer is who opened a playlist: its class, its family and the rule
// that decided its class.
type viewer struct {
	class  Class
	family string
	rule   Rule
}

func (f *Front) count(who viewer) {
	v, ok := f.opens[who.class].Load(who.family)
	if !ok {
		v, _ = f.opens[who.class].LoadOrStore(who.family, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
	f.rules[who.class][who.rule].Add(1)
}

func (f *Front) fail(e *api.Error) {
	v, ok := f.failures.Load(string(e.Code))
	if !ok {
		v, _ = f.failures.LoadOrStore(string(e.Code), new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
	f.log.Warn("a playlist could not be served", "code", string(e.Code), "detail", e.Detail)
}

// Opens counts the viewers that opened a playlist, by class and family.
type Opens struct {
	ByClass  map[string]uint64            `json:"by_class"`
	ByFamily map[string]map[string]uint64 `json:"by_family"` // class → family → opens
	// ByRule says what decided each class (issue 28): class → the
	// operator's list (redirect_agents, backup_agents, steer_agents), a
	// built-in rule (builtin_…) or waisteer_mode → opens.
	ByRule map[string]map[string]uint64 `json:"by_rule"`
	// SteeringShare is the share of the openings by players that steer.
	SteeringShare float64           `json:"steering_share"`
	Redirects     uint64            `json:"redirects"`
	Failures      map[string]uint64 `json:"failures"`
	// PassThrough counts what went through from the origin unchanged
	// (pass.go): streams opened, running now, and refused for MaxStreams.
	PassThrough PassCounts `json:"pass_through"`
	// Warnings are the playlists served naming a pathway they do not
	// declare (warnings.go).
	Warnings []Warning `json:"warnings"`
	At       time.Time `json:"at"`
}

// PassCounts are the pass-through's counts.
type PassCounts struct {
	Streams uint64 `json:"streams"`
	Active  int64  `json:"active"`
	Busy    uint64 `json:"busy"`
}

// Opens is the count so far.
func (f *Front) Opens() Opens {
	o := Opens{ByClass: map[string]uint64{}, ByFamily: map[string]map[string]uint64{}, ByRule: map[string]map[string]uint64{},
		Failures: map[string]uint64{}, At: time.Now().UTC()}
	var total uint64
	for c := range classCount {
		fam := map[string]uint64{}
		f.opens[c].Range(func(k, v any) bool {
			n := v.(*atomic.Uint64).Load()
			fam[k.(string)] = n
			o.ByClass[c.String()] += n
			total += n
			return true
		})
		o.ByFamily[c.String()] = fam
		rules := map[string]uint64{}
		for r := range ruleCount {
			if n := f.rules[c][r].Load(); n > 0 {
				rules[r.String()] = n
			}
		}
		o.ByRule[c.String()] = rules
		if _, ok := o.ByClass[c.String()]; !ok {
			o.ByClass[c.String()] = 0
		}
	}
	if total > 0 {
		o.SteeringShare = float64(o.ByClass[Steers.String()]) / float64(total)
	}
	o.Redirects = f.redirects.Load()
	o.Warnings = f.Warnings()
	o.PassThrough = PassCounts{Streams: f.passed.Load(), Active: f.passActive.Load(), Busy: f.passBusy.Load()}
	f.failures.Range(func(k, v any) bool { o.Failures[k.(string)] = v.(*atomic.Uint64).Load(); return true })
	return o
}

// openFailed is the answer to a viewer whose order could not be had: the
// steering's own refusal when it gave one (a store that is down, a budget
// spent: it says what a player may be told, and no more), else otherwise.
func openFailed(err error, otherwise *api.Error) *api.Error {
	if ae, ok := errors.AsType[*api.Error](err); ok {
		return ae
	}
	return otherwise
}
