package players

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/server"
)

// The first-answer test (issue 28, "hls.js through the front"): three
// hls.js pages, each through waisteer's front and steered by a pool of its
// own. hls.js starts on cdn-x, the playlist's first pathway, and reports
// it; each pool's own order puts cdn-far first:
//
//   - "first-moved": the playlist declares cdn-x and cdn-far, the pool's
//     one edge is cdn-far and it has no clone_from, so the front's tag
//     names no PATHWAY-ID. cdn-x is neither an edge nor clone_from, so the
//     first answer moves hls.js to cdn-far, as every pool's first answer
//     did before issue 28 for a session whose order starts elsewhere.
//   - "first-kept": the playlist declares cdn-x; the pool lists cdn-x
//     (weight 1) and cdn-far, its clone (weight 10⁶, first in all but two
//     sessions in a million). The first answer keeps cdn-x, the edge hls.js
//     reports, first (internal/pool's doc, "The order").
//   - "first-base": the playlist declares cdn-x; the pool's one edge is
//     cdn-far, a clone of cdn-x, its clone_from, which the front's tag
//     names as PATHWAY-ID: the station seed's shape. The first answer
//     names cdn-x, the content's own pathway, ahead of the edges.
//
// The kept pages move to cdn-far at their second answer.
//
// The test makes the race of README.md's "hls.js through the front" fall
// the same way every run, for both pages alike: each pool's first answer
// waits firstAnswerDelay, cdn-x's first two segments of each page wait
// slowSegment (so the first answer arrives while hls.js loads its first
// fragment), and cdn-far's media playlist waits farPlaylistDelay when
// asked within farSlowFor of its page's first answer (so that fragment
// completes before the moved-to pathway's playlist). The moved page must stall for good, with
// hls.js's own warning of the dropped fragment; the kept pages must play,
// and move to cdn-far at their second answer.
const (
	firstAnswerDelay = time.Second
	slowSegment      = 2500 * time.Millisecond
	farPlaylistDelay = 4 * time.Second
	farSlowFor       = 3 * time.Second
	firstTTL         = 6 // the pools' ttl_s, below keepTTL: the kept answer states it
)

// firstPage is one page of the test, its pathways' addresses and its
// pool's edges.
type firstPage struct {
	name      string
	x, far    pathwaySpec // far is a clone of x unless the playlist declares it
	xIsAnEdge bool
}

var firstPages = []firstPage{
	{name: "first-moved", x: pathwaySpec{id: "cdn-x", ip: "127.0.0.92"}, far: pathwaySpec{id: "cdn-far", ip: "127.0.0.94"}},
	{name: "first-kept", x: pathwaySpec{id: "cdn-x", ip: "127.0.0.95"}, far: pathwaySpec{id: "cdn-far", ip: "127.0.0.97", base: "cdn-x"}, xIsAnEdge: true},
	{name: "first-base", x: pathwaySpec{id: "cdn-x", ip: "127.0.0.98"}, far: pathwaySpec{id: "cdn-far", ip: "127.0.0.99", base: "cdn-x"}},
}

// declared is what the playlist declares: cdn-x, and cdn-far when it is
// not a clone.
func (fp firstPage) declared() []pathwaySpec { return []pathwaySpec{fp.x, fp.far} }

// edges are the pool's edges, in the order written, and their weights.
func (fp firstPage) edges() ([]pathwaySpec, map[string]uint32) {
	es := []pathwaySpec{fp.far}
	if fp.xIsAnEdge {
		es = []pathwaySpec{fp.x, fp.far}
	}
	return es, map[string]uint32{fp.x.id: 1, fp.far.id: 1_000_000}
}

func (fp firstPage) pool() pool.Config {
	c := pool.Config{
		Name: fp.name, Path: "/pool/" + fp.name, TTL: firstTTL,
		CheckEvery: time.Second, CheckTimeout: 500 * time.Millisecond, DownAfter: 2,
		Assign: pool.AssignRendezvous,
	}
	if fp.far.base != "" {
		c.CloneFrom = fp.far.base
	}
	es, ws := fp.edges()
	for _, e := range es {
		pe := pool.Edge{Pathway: e.id, Weight: ws[e.id]}
		if e.base != "" {
			pe.Host = e.ip
		}
		c.Edges = append(c.Edges, pe)
	}
	return c
}

// TestHLSjsFirstAnswer shows the cause of hls.js 1.7.4's stall at start and
// that a pool's first answer avoids it: see firstPages.
func TestHLSjsFirstAnswer(t *testing.T) {
	tl := requireTools(t)
	m := makeMedia(t, tl.ffmpeg)
	m.epoch = time.Now().Add(-30 * time.Second)

	hits := &hitLog{}
	var (
		mu       sync.Mutex
		started  time.Time                // when the players started
		answered = map[string]time.Time{} // by page: when its first answer left
		slow     = map[string]int{}
	)
	hits.delay = func(srv, path, rawQuery string) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		_, rest, _ := strings.Cut(path, "/")
		page, _, _ := strings.Cut(rest, "/")
		switch {
		case srv == "steer" && strings.HasPrefix(path, "/pool/") && !strings.Contains(rawQuery, "session="):
			answered[strings.TrimPrefix(path, "/pool/")] = time.Now().Add(firstAnswerDelay)
			return firstAnswerDelay
		case srv == "cdn-x" && strings.Contains(path, "/seg_") && slow[page] < 2:
			slow[page]++
			return slowSegment
		case srv == "cdn-far" && strings.HasSuffix(path, "/media.m3u8") && !answered[page].IsZero() && time.Since(answered[page]) < farSlowFor:
			return farPlaylistDelay
		}
		return 0
	}
	for _, fp := range firstPages {
		for _, p := range []pathwaySpec{fp.x, fp.far} {
			serve(t, p.ip+":"+pathwayPort, hits.logged(p.id, false, m.pathwayHandler()))
		}
	}
	originLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	originURL := "http://" + originLn.Addr().String()
	og, err := origin.New(originURL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fc := &server.FrontConfig{Origin: og}
	var pcs []pool.Config
	for _, fp := range firstPages {
		pcs = append(pcs, fp.pool())
		fc.Playlists = append(fc.Playlists, server.FrontPlaylist{Path: "/content/" + fp.name + "/", Pool: fp.name})
	}
	steerURL := startPoolServer(t, hits, pcs, fc, plainHTTP())
	mux := http.NewServeMux()
	files := http.FileServer(http.Dir("."))
	mux.Handle("GET /pages/", files)
	mux.Handle("GET /node_modules/", files)
	mux.HandleFunc("GET /content/{page}/master.m3u8", func(w http.ResponseWriter, r *http.Request) {
		i := slices.IndexFunc(firstPages, func(fp firstPage) bool { return fp.name == r.PathValue("page") })
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(m.multivariantOf(firstPages[i].name, "", firstPages[i].declared()))
	})
	serveOn(t, originLn, hits.logged("origin", false, cors(mux)))

	ws := startChromium(t, tl.chromium)
	var runs []pageRun
	var pgs []pageSpec
	for _, fp := range firstPages {
		src := steerURL + "/content/" + fp.name + "/master.m3u8"
		runs = append(runs, pageRun{Name: fp.name, URL: originURL + "/pages/hlsjs.html?src=" + url.QueryEscape(src) + "&attach=early"})
		pgs = append(pgs, pageSpec{name: fp.name, file: "hlsjs.html", protocol: "hls", pkg: "hls.js", b: hlsjs})
	}
	mu.Lock()
	started = time.Now()
	mu.Unlock()
	d := startDriver(t, tl.node, ws, runs)
	snapshot := func() *observed { return &observed{hits: hits.all(), lines: d.all()} }

	moved, keptPages := firstPages[0], firstPages[1:]
	diagnose := func(o *observed) string { return o.diagnosePages(pgs) }
	waitForPages(t, snapshot, pgs, diagnose, 40*time.Second, "the kept pages move to cdn-far and play; the moved page is watched", func(o *observed, pg pageSpec) string {
		reqs := o.steering(pg.name)
		switch {
		case time.Since(started) < 15*time.Second:
			return "waiting 15 s"
		case pg.name == moved.name:
			return ""
		case len(reqs) < 2:
			return "fewer than 2 steering requests"
		case len(o.segments(pg.name, "cdn-far", reqs[1].End, time.Time{})) < 4:
			return "fewer than 4 segments from cdn-far since its second answer"
		case o.played(pg.name, reqs[1].End, time.Now()) < 3:
			return "played less than 3 s since its second answer"
		}
		return ""
	})
	tEnd := time.Now()
	d.stop(t)
	o := snapshot()

	t.Run(moved.name, func(t *testing.T) {
		checkPlayer(t, o, pgs[0], tl.versions["hls.js"])
		reqs := o.steering(moved.name)
		if len(reqs) == 0 || reqs[0].err != nil {
			t.Fatalf("no first answer")
		}
		first := reqs[0]
		if got := reportedPathway(first.Query); got != moved.x.id {
			t.Errorf("the first request reports %q, not %s, its playlist's first pathway (%s)", got, moved.x.id, first.Query)
		}
		if !slices.Equal(first.manifest.Priority, []string{moved.far.id}) || first.manifest.TTL != firstTTL {
			t.Errorf("the first answer %v TTL %d, not [%s] TTL %d: a pool that does not list the reported pathway moves the player", first.manifest.Priority, first.manifest.TTL, moved.far.id, firstTTL)
		}
		// The answer came while the first fragment loaded (the delays).
		segs := o.media(moved.name, time.Time{}, time.Time{})
		i := slices.IndexFunc(segs, func(h mediaHit) bool { return h.kind == "segment" })
		if i < 0 || !segs[i].Start.Before(first.End) || !segs[i].End.After(first.End) {
			t.Errorf("the first answer did not arrive while the first segment loaded: %v", segs)
		}
		for _, s := range o.samples(moved.name) {
			if s.ReadyState >= 2 {
				t.Errorf("hls.js played (readyState %d at %s): README.md's stall did not happen", s.ReadyState, s.at.Format("15:04:05.000"))
				break
			}
		}
		if n := len(o.segments(moved.name, moved.far.id, time.Time{}, time.Time{})); n > 0 {
			t.Errorf("%d segments from %s: hls.js went on loading after the move", n, moved.far.id)
		}
		if !hasTrace(o, moved.name, "after level details were reset") {
			t.Errorf("no hls.js warning \"Dropping fragment ... after level details were reset\" in the page's trace")
		}
		t.Logf("first answer %v %v after the start; stalled, readyState below 2 for %v; trace: %s", first.manifest.Priority,
			first.End.Sub(started).Round(time.Millisecond), tEnd.Sub(first.End).Round(time.Second), traceWith(o, moved.name, "Dropping"))
	})
	for i, kept := range keptPages {
		t.Run(kept.name, func(t *testing.T) {
			checkPlayer(t, o, pgs[i+1], tl.versions["hls.js"])
			checkKeptFirst(t, o, kept, tEnd)
		})
	}
}

// checkKeptFirst judges a kept page: its first answer names cdn-x, which
// hls.js reported, first, then the session's order of the edges (cdn-x
// named once), with the pool's ttl_s (below keepTTL); its second answer is
// the session's order; it plays from cdn-x between them, then from cdn-far,
// and plays at the end.
func checkKeptFirst(t *testing.T, o *observed, kept firstPage, tEnd time.Time) {
	reqs := o.steering(kept.name)
	if len(reqs) < 2 || reqs[0].err != nil || reqs[1].err != nil {
		t.Fatalf("%d steering requests", len(reqs))
	}
	if got := reportedPathway(reqs[0].Query); got != kept.x.id {
		t.Errorf("the first request reports %q, not %s", got, kept.x.id)
	}
	session, ok := parseSession(sessionOf(reqs[0].manifest.Reload))
	if !ok {
		t.Fatalf("RELOAD-URI %q", reqs[0].manifest.Reload)
	}
	edges, weights := kept.edges()
	own := rendezvousOrderOf(session, edges, weights, func(string) bool { return true })
	want := keeping(own, kept.x.id)
	if !kept.xIsAnEdge {
		want = append([]string{kept.x.id}, own...)
	}
	if !slices.Equal(reqs[0].manifest.Priority, want) || reqs[0].manifest.TTL != min(firstTTL, keepTTL) {
		t.Errorf("the first answer %v TTL %d, not %v TTL %d: the pathway the player reports kept first", reqs[0].manifest.Priority, reqs[0].manifest.TTL, want, min(firstTTL, keepTTL))
	}
	if !slices.Equal(reqs[1].manifest.Priority, own) || own[0] != kept.far.id {
		t.Errorf("the second answer %v, not the session's order %v", reqs[1].manifest.Priority, own)
	}
	before := o.segments(kept.name, kept.x.id, reqs[0].End, reqs[1].Start)
	if len(before) < 2 {
		t.Errorf("%d segments from %s between the first two answers", len(before), kept.x.id)
	}
	if p := o.played(kept.name, tEnd.Add(-3*time.Second), tEnd); p < 2 {
		t.Errorf("played %.1f s in the last 3 s", p)
	}
	// A move in play may still drop the fragment in flight: hls.js plays
	// on (README.md), which the checks above require; logged.
	dropped := traceWith(o, kept.name, "after level details were reset")
	far := o.segments(kept.name, kept.far.id, time.Time{}, time.Time{})
	if len(far) == 0 || far[0].Start.Before(reqs[1].Start) {
		t.Fatalf("the first segment from %s does not follow the second answer", kept.far.id)
	}
	t.Logf("first answer %v TTL %d, %d segments from %s, then %v; onto %s %v after it; a fragment dropped: %q", reqs[0].manifest.Priority, reqs[0].manifest.TTL,
		len(before), kept.x.id, reqs[1].manifest.Priority, kept.far.id, far[0].Start.Sub(reqs[1].End).Round(time.Millisecond), dropped)
}

// hasTrace says whether the page's trace holds a line containing s.
func hasTrace(o *observed, page, s string) bool { return traceWith(o, page, s) != "" }

// traceWith is the first line of the page's trace containing s, "" for none.
func traceWith(o *observed, page, s string) string {
	for _, l := range o.lines {
		if l.Page != page {
			continue
		}
		for _, e := range l.Events {
			if e.Kind == "trace" && strings.Contains(string(e.Detail), s) {
				return fmt.Sprintf("%s %s", time.UnixMilli(e.T).Format("15:04:05.000"), strings.Trim(string(e.Detail), `"`))
			}
		}
	}
	return ""
}
