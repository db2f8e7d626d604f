package players

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// pageSpec is one player on one protocol, in a page of its own and steered
// in a room of its own, so that the steering server's log and the
// pathways' tell the players apart by path.
type pageSpec struct {
	name     string // the room's and the paths' name
	file     string // under pages/
	extra    string // more of the page's query
	protocol string // "hls" or "dash"
	pkg      string // the player's npm package
	b        behaviour
}

// behaviour is what a player was seen to do where players differ
// (README.md). The test requires it, so that a version that changes it
// fails here and the README is brought up to date.
type behaviour struct {
	// firstReport: the first steering request carries the pathway and
	// throughput parameters.
	firstReport bool
	// quotedList: the pathway parameter is a list in double quotes
	// (ETSI TS 103 998 clause 7 step 7) rather than one bare id.
	quotedList bool
	// cmcd: steering requests carry CMCD (with bl and mtp, §4.4).
	cmcd bool
	// appliesClones: the player applies PATHWAY-CLONES; one that does not
	// skips a clone in PATHWAY-PRIORITY.
	appliesClones bool
	// cloneParams are the kinds of request to a clone that carry its
	// PARAMS: "playlist" (the HLS media playlist), "init", "segment".
	cloneParams []string
	// throughputLags: the throughput item of a pathway is empty until the
	// player has timed a segment from it, so the first reload after a move
	// to a pathway sends it empty.
	throughputLags bool
	// perVariantURIs: the player takes a clone's PER-VARIANT-URIS for the
	// variants they name, over HOST and PARAMS (pool_test.go).
	perVariantURIs bool
	// retriesFailed: the player goes back to a failed pathway while it
	// is still first in the priority, within the phase (dash.js bars a
	// failed service location for one TTL only).
	retriesFailed bool
	// noCMCD: the player has no CMCD at all (VHS), so none on its
	// segments either.
	noCMCD bool
}

var (
	hlsjs    = behaviour{firstReport: true, appliesClones: true, cloneParams: []string{"playlist"}, perVariantURIs: true}
	dashjs   = behaviour{quotedList: true, cmcd: true, appliesClones: true, cloneParams: []string{"init", "segment"}, throughputLags: true, retriesFailed: true}
	shakaJS  = behaviour{}                    // the compiled build: clones lost to renaming
	shakaDbg = behaviour{appliesClones: true} // the debug build: HOST applied, PARAMS not
	// video.js 8.24's VHS 3.17 (HLS): it asks once it can play, with its
	// parameters, and takes a failed pathway back after one TTL. Its DASH
	// is not steered (README.md, "video.js").
	vjsHLS = behaviour{firstReport: true, appliesClones: true, cloneParams: []string{"playlist"}, retriesFailed: true, noCMCD: true}
)

var pages = []pageSpec{
	{name: "hlsjs", file: "hlsjs.html", protocol: "hls", pkg: "hls.js", b: hlsjs},
	{name: "dashjs", file: "dashjs.html", protocol: "dash", pkg: "dashjs", b: dashjs},
	{name: "shaka-hls", file: "shaka.html", protocol: "hls", pkg: "shaka-player", b: shakaJS},
	{name: "shaka-dash", file: "shaka.html", protocol: "dash", pkg: "shaka-player", b: shakaJS},
	{name: "shaka-hls-debug", file: "shaka.html", extra: "&build=debug", protocol: "hls", pkg: "shaka-player", b: shakaDbg},
	{name: "shaka-dash-debug", file: "shaka.html", extra: "&build=debug", protocol: "dash", pkg: "shaka-player", b: shakaDbg},
	{name: "videojs-hls", file: "videojs.html", protocol: "hls", pkg: "video.js", b: vjsHLS},
}

func (pg pageSpec) manifestPath() string {
	if pg.protocol == "hls" {
		return "/content/" + pg.name + "/master.m3u8"
	}
	return "/content/" + pg.name + "/manifest.mpd"
}

// firstPathway is the pathway the player plays from in phase 1: the
// first of PATHWAY-PRIORITY [cdn-b-clone, cdn-a, cdn-b] it can apply.
func (pg pageSpec) firstPathway() string {
	if pg.b.appliesClones {
		return "cdn-b-clone"
	}
	return "cdn-a"
}

// originHandler serves the pages, the players from node_modules, and each
// room's content description without a steering tag or element: every
// page loads it through waisteer's front, which adds the ones it writes
// for the room's policy (§8.2, §8.3). hls.js included (issue 28: README,
// "hls.js through the front").
func originHandler(m *media, s *steering) http.Handler {
	mux := http.NewServeMux()
	files := http.FileServer(http.Dir("."))
	mux.Handle("GET /pages/", files)
	mux.Handle("GET /node_modules/", files)
	mux.HandleFunc("GET /content/{page}/master.m3u8", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.rooms[r.PathValue("page")]; !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(m.multivariant(r.PathValue("page"), ""))
	})
	mux.HandleFunc("GET /content/{page}/manifest.mpd", func(w http.ResponseWriter, r *http.Request) {
		_, ok := s.rooms[r.PathValue("page")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/dash+xml")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(m.mpd(r.PathValue("page"), "", time.Now()))
	})
	return cors(mux)
}

// TestPlayersFollowWaisteer plays a live stream in each player, steered by
// waisteer, through three phases, and judges what the servers logged:
//
//  1. The records make the clone of cdn-b the cheapest (§5.3, §6.2): each
//     player asks the steering server (§4), reloads at the RELOAD-URI with
//     its session (§8.1), and takes its segments from the first pathway of
//     PATHWAY-PRIORITY it can apply: the clone (PATHWAY-CLONES, from the
//     clone's host) where it applies clones.
//  2. The next period's records make cdn-b the cheapest and the room clock
//     moves to that window (§5.1): each player moves to cdn-b at its next
//     reload.
//  3. cdn-b's server stops: each player goes on from the next pathway of
//     the priority, cdn-a; the test logs how long that took.
//
// Every decision served is fetched and verified (§9) with the manifest the
// player received.
func TestPlayersFollowWaisteer(t *testing.T) { followWaisteer(t, plainHTTP()) }

// followWaisteer is TestPlayersFollowWaisteer with the waisteer server
// reached as sv says.
func followWaisteer(t *testing.T, sv *serving) {
	tl := requireTools(t)
	began := time.Now()
	m := makeMedia(t, tl.ffmpeg)
	t.Logf("media made in %v", time.Since(began).Round(time.Millisecond))
	// The live stream began half a minute ago, so that every player finds
	// a full window to start in.
	m.epoch = time.Now().Add(-30 * time.Second)

	hits := &hitLog{}
	originLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	originURL := "http://" + originLn.Addr().String()
	s := startSteering(t, hits, originURL, sv)
	servers := map[string]*httpServer{}
	for _, p := range pathways {
		servers[p.id] = serve(t, p.ip+":"+pathwayPort, hits.logged(p.id, false, m.pathwayHandler()))
	}
	serveOn(t, originLn, hits.logged("origin", false, originHandler(m, s)))

	ws := startChromium(t, tl.chromium, sv.chromium()...)
	var runs []pageRun
	for _, pg := range pages {
		src := s.url + pg.manifestPath()
		runs = append(runs, pageRun{Name: pg.name, URL: originURL + "/pages/" + pg.file + "?src=" + url.QueryEscape(src) + pg.extra})
	}
	d := startDriver(t, tl.node, ws, runs)
	snapshot := func() *observed { return &observed{hits: hits.all(), lines: d.all()} }
	ttl := ttlSeconds * time.Second
	t.Logf("players started at %v", time.Since(began).Round(time.Millisecond))

	// Phase 1: steered to the clone.
	started := time.Now()
	waitFor(t, snapshot, 60*time.Second, "every player plays from the first pathway it can apply", func(o *observed, pg pageSpec) string {
		switch {
		case time.Since(started) < 3*ttl:
			return "waiting three TTLs"
		case len(o.steering(pg.name)) < 3:
			return "fewer than 3 steering requests"
		case len(o.segments(pg.name, pg.firstPathway(), started, time.Time{})) < 4:
			return "fewer than 4 segments from " + pg.firstPathway()
		case o.played(pg.name, started, time.Now()) < 3:
			return "played less than 3 s"
		}
		return ""
	})

	// Phase 2: the evidence changes.
	tChange := s.changeEvidence(t)
	waitFor(t, snapshot, 45*time.Second, "every player moves to cdn-b", func(o *observed, pg pageSpec) string {
		switch {
		case time.Since(tChange) < 3*ttl:
			return "waiting three TTLs"
		case len(o.segments(pg.name, "cdn-b", tChange, time.Time{})) < 4:
			return "fewer than 4 segments from cdn-b since the evidence changed"
		case o.played(pg.name, tChange, time.Now()) < 3:
			return "played less than 3 s since the evidence changed"
		}
		return ""
	})

	// Phase 3: cdn-b's server fails.
	tStop := time.Now()
	servers["cdn-b"].stop()
	waitFor(t, snapshot, 45*time.Second, "every player plays on after cdn-b stopped", func(o *observed, pg pageSpec) string {
		switch {
		case time.Since(tStop) < 4*ttl:
			return "waiting four TTLs"
		case len(o.segments(pg.name, "", tStop, time.Time{})) < 4:
			return "fewer than 4 segments since cdn-b stopped"
		case o.played(pg.name, tStop, time.Now()) < 4:
			return "played less than 4 s since cdn-b stopped"
		}
		return ""
	})
	tEnd := time.Now()
	d.stop(t)
	o := snapshot()

	type timing struct {
		first, cheaper, failover, stall time.Duration
		requests, retries               int
	}
	timings := map[string]*timing{}
	for _, pg := range pages {
		tm := &timing{}
		timings[pg.name] = tm
		t.Run(pg.name, func(t *testing.T) {
			checkPlayer(t, o, pg, tl.versions[pg.pkg])
			tm.requests = checkSteering(t, o, s, pg, tChange)
			tm.first = checkFirst(t, o, pg, tChange)
			tm.cheaper = checkEvidenceChange(t, o, pg, tChange, tStop)
			tm.failover, tm.stall, tm.retries = checkFailover(t, o, pg, "cdn-b", tStop, tEnd)
		})
	}

	var b strings.Builder
	fmt.Fprintf(&b, "players steered by waisteer over %s (TTL %ds, %v segments), run of %v:\n", sv.scheme, ttlSeconds, segDur, time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "  %-17s %-13s %-20s %-9s %-13s %-15s %-10s %s\n", "page", "player", "version", "requests", "first move", "to the cheaper", "failover", "longest stall (failed requests)")
	for _, pg := range pages {
		tm := timings[pg.name]
		fmt.Fprintf(&b, "  %-17s %-13s %-20s %-9d %-13s %-15s %-10s %s (%d)\n", pg.name, pg.pkg, tl.versions[pg.pkg], tm.requests,
			roundMs(tm.first), roundMs(tm.cheaper), roundMs(tm.failover), roundMs(tm.stall), tm.retries)
	}
	b.WriteString("  first move: from the first answer to the first segment from the first pathway the player applies;\n")
	b.WriteString("  to the cheaper: from the change of evidence to the first segment from cdn-b;\n")
	b.WriteString("  failover: from cdn-b's stop to the first segment from cdn-a.")
	t.Log(b.String())
}

func roundMs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return d.Round(10 * time.Millisecond).String()
}

// waitFor polls until cond holds for every page, or fails the test with
// what each page still lacks. A fatal line of the driver ends it at once.
func waitFor(t *testing.T, snapshot func() *observed, limit time.Duration, what string, cond func(*observed, pageSpec) string) {
	t.Helper()
	waitForPages(t, snapshot, pages, (*observed).diagnose, limit, what, cond)
}

// waitForPages is waitFor over the pages pgs, with diagnose saying what
// the players did when it fails.
func waitForPages(t *testing.T, snapshot func() *observed, pgs []pageSpec, diagnose func(*observed) string, limit time.Duration, what string, cond func(*observed, pageSpec) string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		o := snapshot()
		var pending []string
		for _, pg := range pgs {
			if why := cond(o, pg); why != "" {
				pending = append(pending, pg.name+": "+why)
			}
		}
		if len(pending) == 0 {
			return
		}
		for _, l := range o.lines {
			if l.Kind == "fatal" {
				t.Fatalf("the driver failed: %s", l.Text)
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: not within %v:\n  %s\n%s", what, limit, strings.Join(pending, "\n  "), diagnose(o))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}
