package players

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
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
}

var (
	hlsjs    = behaviour{firstReport: true, appliesClones: true, cloneParams: []string{"playlist"}, perVariantURIs: true}
	dashjs   = behaviour{quotedList: true, cmcd: true, appliesClones: true, cloneParams: []string{"init", "segment"}, throughputLags: true, retriesFailed: true}
	shakaJS  = behaviour{}                    // the compiled build: clones lost to renaming
	shakaDbg = behaviour{appliesClones: true} // the debug build: HOST applied, PARAMS not
)

var pages = []pageSpec{
	{name: "hlsjs", file: "hlsjs.html", protocol: "hls", pkg: "hls.js", b: hlsjs},
	{name: "dashjs", file: "dashjs.html", protocol: "dash", pkg: "dashjs", b: dashjs},
	{name: "shaka-hls", file: "shaka.html", protocol: "hls", pkg: "shaka-player", b: shakaJS},
	{name: "shaka-dash", file: "shaka.html", protocol: "dash", pkg: "shaka-player", b: shakaJS},
	{name: "shaka-hls-debug", file: "shaka.html", extra: "&build=debug", protocol: "hls", pkg: "shaka-player", b: shakaDbg},
	{name: "shaka-dash-debug", file: "shaka.html", extra: "&build=debug", protocol: "dash", pkg: "shaka-player", b: shakaDbg},
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

// throughFront says whether a page loads its content description through
// waisteer's front. hls.js does not: loaded from the steering server's
// host, its first steering answer comes back on the connection already
// open while its first init segment loads, and hls.js 1.7.4 stalls for
// good (README, "hls.js stalls for good when a steering manifest that moves
// it arrives while its first init segment is loading"): two runs of two.
func throughFront(page string) bool { return page != "hlsjs" }

// originHandler serves the pages, the players from node_modules, and each
// room's content description without a steering tag or element: waisteer's
// front adds the ones it writes for the room's policy (§8.2, §8.3); for a
// page that does not load through the front, with the tag.
func originHandler(m *media, s *steering) http.Handler {
	mux := http.NewServeMux()
	files := http.FileServer(http.Dir("."))
	mux.Handle("GET /pages/", files)
	mux.Handle("GET /node_modules/", files)
	mux.HandleFunc("GET /content/{page}/master.m3u8", func(w http.ResponseWriter, r *http.Request) {
		sc, ok := s.rooms[r.PathValue("page")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "no-store")
		tag := ""
		if !throughFront(r.PathValue("page")) {
			tag = decision.HLSTag(sc.Policy)
		}
		w.Write(m.multivariant(r.PathValue("page"), tag))
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
func TestPlayersFollowWaisteer(t *testing.T) {
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
	s := startSteering(t, hits, originURL)
	servers := map[string]*httpServer{}
	for _, p := range pathways {
		servers[p.id] = serve(t, p.ip+":"+pathwayPort, hits.logged(p.id, false, m.pathwayHandler()))
	}
	serveOn(t, originLn, hits.logged("origin", false, originHandler(m, s)))

	ws := startChromium(t, tl.chromium)
	var runs []pageRun
	for _, pg := range pages {
		src := originURL + pg.manifestPath()
		if throughFront(pg.name) {
			src = s.url + pg.manifestPath()
		}
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
	fmt.Fprintf(&b, "players steered by waisteer (TTL %ds, %v segments), run of %v:\n", ttlSeconds, segDur, time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "  %-17s %-13s %-8s %-9s %-13s %-15s %-10s %s\n", "page", "player", "version", "requests", "first move", "to the cheaper", "failover", "longest stall (failed requests)")
	for _, pg := range pages {
		tm := timings[pg.name]
		fmt.Fprintf(&b, "  %-17s %-13s %-8s %-9d %-13s %-15s %-10s %s (%d)\n", pg.name, pg.pkg, tl.versions[pg.pkg], tm.requests,
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

// observed is what the servers logged and the driver reported, at one
// instant.
type observed struct {
	hits  []hit
	lines []line
}

// steerReq is one steering request and the manifest it was answered with.
type steerReq struct {
	hit
	manifest steeringManifest
	err      error // the answer did not read as a manifest
}

// steeringManifest is §8.1's JSON text, as a player reads it.
type steeringManifest struct {
	Version  int      `json:"VERSION"`
	TTL      int      `json:"TTL"`
	Reload   string   `json:"RELOAD-URI"`
	Priority []string `json:"PATHWAY-PRIORITY"`
	Clones   []struct {
		BaseID      string `json:"BASE-ID"`
		ID          string `json:"ID"`
		Replacement struct {
			Host       string            `json:"HOST"`
			Params     map[string]string `json:"PARAMS"`
			PerVariant map[string]string `json:"PER-VARIANT-URIS"`
		} `json:"URI-REPLACEMENT"`
	} `json:"PATHWAY-CLONES"`
	Decision string `json:"science.transaction.wai-decision"`
}

// steering returns the page's steering requests, in the order they began.
func (o *observed) steering(page string) []steerReq {
	var rs []steerReq
	for _, h := range o.hits {
		// The energy rooms' route is /steer/<page>, the pools' /pool/<page>.
		if h.Server != "steer" || h.Path != "/steer/"+page && h.Path != "/pool/"+page {
			continue
		}
		r := steerReq{hit: h}
		r.err = json.Unmarshal(h.Body, &r.manifest)
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b steerReq) int { return a.Start.Compare(b.Start) })
	return rs
}

// mediaHit is a request to a pathway: its kind ("playlist", "init",
// "segment") and, for a segment, its number.
type mediaHit struct {
	hit
	kind string
	seg  int
}

// media returns the page's requests to the pathways that began in
// [from, to) (to zero: no end), in the order they began.
func (o *observed) media(page string, from, to time.Time) []mediaHit {
	var ms []mediaHit
	for _, h := range o.hits {
		if h.Server == "steer" || h.Server == "origin" || h.Start.Before(from) || !to.IsZero() && !h.Start.Before(to) {
			continue
		}
		parts := strings.Split(h.Path, "/") // "", page, hls|dash, [pathway,] file
		if len(parts) < 4 || parts[1] != page {
			continue
		}
		mh := mediaHit{hit: h}
		file := parts[len(parts)-1]
		switch {
		case file == "media.m3u8":
			mh.kind = "playlist"
		case file == "init.mp4":
			mh.kind = "init"
		case strings.HasPrefix(file, "seg_"):
			mh.kind = "segment"
			mh.seg, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(file, "seg_"), ".m4s"))
		default:
			mh.kind = "other"
		}
		ms = append(ms, mh)
	}
	slices.SortFunc(ms, func(a, b mediaHit) int { return a.Start.Compare(b.Start) })
	return ms
}

// segments returns the page's segments served whole (200) by the pathway
// (any pathway for "") that began in [from, to).
func (o *observed) segments(page, pathway string, from, to time.Time) []mediaHit {
	var ss []mediaHit
	for _, m := range o.media(page, from, to) {
		if m.kind == "segment" && m.Status == http.StatusOK && (pathway == "" || m.Server == pathway) {
			ss = append(ss, m)
		}
	}
	return ss
}

// samples returns the page's samples of its video element.
func (o *observed) samples(page string) []line {
	var ss []line
	for _, l := range o.lines {
		if l.Kind == "sample" && l.Page == page {
			ss = append(ss, l)
		}
	}
	return ss
}

// currentTime is the page's video currentTime at the last sample read at
// or before at (0 before any).
func (o *observed) currentTime(page string, at time.Time) float64 {
	ct := 0.0
	for _, s := range o.samples(page) {
		if s.at.After(at) {
			break
		}
		ct = s.CurrentTime
	}
	return ct
}

// played is how many seconds of media the page played between from and to.
func (o *observed) played(page string, from, to time.Time) float64 {
	return o.currentTime(page, to) - o.currentTime(page, from)
}

// stall is the longest stretch of [from, to) in which the page's video
// did not advance.
func (o *observed) stall(page string, from, to time.Time) time.Duration {
	var longest time.Duration
	var since time.Time
	last := -1.0
	for _, s := range o.samples(page) {
		if s.at.Before(from) {
			last = s.CurrentTime
			continue
		}
		if s.at.After(to) {
			break
		}
		if since.IsZero() {
			since = s.at
		}
		if s.CurrentTime > last {
			since, last = s.at, s.CurrentTime
		}
		longest = max(longest, s.at.Sub(since))
	}
	return longest
}

// diagnose describes what each page did, for a failure's message.
func (o *observed) diagnose() string {
	var b strings.Builder
	for _, pg := range pages {
		fmt.Fprintf(&b, "  %s: %d steering requests; media requests by pathway:", pg.name, len(o.steering(pg.name)))
		count := map[string]int{}
		for _, m := range o.media(pg.name, time.Time{}, time.Time{}) {
			count[m.Server+" "+m.kind+" "+strconv.Itoa(m.Status)]++
		}
		keys := make([]string, 0, len(count))
		for k := range count {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " [%s]×%d", k, count[k])
		}
		ss := o.samples(pg.name)
		if len(ss) > 0 {
			s := ss[len(ss)-1]
			fmt.Fprintf(&b, "; currentTime %.1f readyState %d paused %v %s, %d frames dropped", s.CurrentTime, s.ReadyState, s.Paused, s.Visibility, s.Dropped)
		}
		b.WriteString("\n")
		var trace []string // the page's own trace, when it keeps one (hlsjs.html)
		for _, l := range o.lines {
			for _, e := range l.Events {
				if l.Page == pg.name && e.Kind == "trace" {
					trace = append(trace, time.UnixMilli(e.T).Format("15:04:05.000")+" "+strings.Trim(string(e.Detail), `"`))
				}
			}
		}
		if len(trace) > 0 && (len(ss) == 0 || ss[len(ss)-1].ReadyState < 2) {
			// It never played: how it started is what tells why.
			fmt.Fprintf(&b, "    its first events: %s\n", strings.Join(trace[:min(len(trace), 40)], "; "))
		}
		n := 0
		for _, l := range o.lines {
			if l.Page != pg.name {
				continue
			}
			for _, e := range l.Errors {
				if n < 8 {
					fmt.Fprintf(&b, "    error: %s\n", e.Text)
				}
				n++
			}
			if l.Kind == "console" && n < 8 {
				fmt.Fprintf(&b, "    console %s: %s\n", l.Type, l.Text)
				n++
			}
		}
	}
	return b.String()
}

// query reads a raw query as §4.1 cuts it: each part at its first `=`,
// percent-decoded, `+` not a space; the first part with a name wins.
func query(raw string) map[string]string {
	q := map[string]string{}
	for part := range strings.SplitSeq(raw, "&") {
		name, value, _ := strings.Cut(part, "=")
		n, err1 := url.PathUnescape(name)
		v, err2 := url.PathUnescape(value)
		if err1 != nil || err2 != nil {
			continue
		}
		if _, ok := q[n]; !ok {
			q[n] = v
		}
	}
	return q
}

// checkPlayer requires the pinned version, no fatal error, and CMCD on the
// player's segment requests: each page turns CMCD on, so that a player
// that sends none to the steering server is seen to send it elsewhere.
func checkPlayer(t *testing.T, o *observed, pg pageSpec, version string) {
	ss := o.samples(pg.name)
	if len(ss) == 0 {
		t.Fatalf("the page reported nothing")
	}
	if got := strings.TrimSuffix(strings.TrimPrefix(ss[len(ss)-1].Version, "v"), "-debug"); got != version {
		t.Errorf("the page runs %s %q, not the pinned %s", pg.pkg, got, version)
	}
	var errs []string
	for _, l := range o.lines {
		if l.Page != pg.name {
			continue
		}
		for _, e := range l.Errors {
			if e.Fatal {
				t.Errorf("fatal error: %s", e.Text)
			} else {
				errs = append(errs, e.Text)
			}
		}
		if l.Kind == "console" && l.Type == "pageerror" {
			t.Errorf("page error: %s", l.Text)
		}
	}
	if len(errs) > 0 {
		t.Logf("%d errors the player recovered from, the first: %s", len(errs), errs[0])
	}
	withCMCD := 0
	segs := o.segments(pg.name, "", time.Time{}, time.Time{})
	for _, m := range segs {
		if _, ok := query(m.Query)["CMCD"]; ok || m.CMCD != "" {
			withCMCD++
		}
	}
	if withCMCD < len(segs)/2 {
		t.Errorf("CMCD on %d of %d segment requests: the page turns it on", withCMCD, len(segs))
	}
}

// cmcdKey reads an Integer key of a CMCD value in the simple form players
// write (key=value, comma-separated), or -1.
func cmcdKey(cmcd, key string) int64 {
	for item := range strings.SplitSeq(cmcd, ",") {
		if v, ok := strings.CutPrefix(item, key+"="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// checkSteering judges the page's steering requests (§4, §8.1) and the
// decisions they were answered with (§7, §9). It returns their count.
func checkSteering(t *testing.T, o *observed, s *steering, pg pageSpec, tChange time.Time) int {
	reqs := o.steering(pg.name)
	if len(reqs) < 3 {
		t.Errorf("%d steering requests, fewer than 3", len(reqs))
		return len(reqs)
	}
	sc := s.rooms[pg.name]
	ids := make([]string, len(sc.Policy.Pathways))
	for i, p := range sc.Policy.Pathways {
		ids[i] = p.ID
	}
	pathwayParam, throughputParam := "_HLS_pathway", "_HLS_throughput"
	if pg.protocol == "dash" {
		pathwayParam, throughputParam = "_DASH_pathway", "_DASH_throughput"
	}

	// The first request has no session; its answer's RELOAD-URI carries
	// the one the server minted (§8.1).
	first := reqs[0]
	if _, ok := query(first.Query)["wai_session"]; ok {
		t.Errorf("the first steering request already carries a session: %s", first.Query)
	}
	if first.err != nil {
		t.Fatalf("the first answer is not a steering manifest: %v: %s", first.err, first.Body)
	}
	reloadURL, err := url.Parse(first.manifest.Reload)
	if err != nil {
		t.Fatalf("RELOAD-URI %q: %v", first.manifest.Reload, err)
	}
	session := query(reloadURL.RawQuery)["wai_session"]
	if want := sc.Policy.ReloadURI + "?wai_session=" + session; first.manifest.Reload != want || len(session) != 32 {
		t.Errorf("RELOAD-URI is %q, not the reload_uri with a session (§8.1)", first.manifest.Reload)
	}
	_, firstHas := query(first.Query)[pathwayParam]
	if firstHas != pg.b.firstReport {
		t.Errorf("the first steering request carries %s: %v, not %v as README.md records (%q)", pathwayParam, firstHas, pg.b.firstReport, first.Query)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	var gaps []time.Duration
	cmcdSeen, fromMTP := 0, 0
	forms := map[string]int{} // the throughput parameter's forms, for the log
	for i, r := range reqs {
		where := fmt.Sprintf("steering request %d (%s?%s)", i, r.Path, r.Query)
		if r.Status != http.StatusOK || r.err != nil {
			t.Errorf("%s: answered %d, %v: %s", where, r.Status, r.err, r.Body)
			continue
		}
		if i > 0 {
			gaps = append(gaps, r.Start.Sub(reqs[i-1].Start))
		}
		q := query(r.Query)
		// Every later request is the RELOAD-URI, with the player's
		// parameters after it.
		if i > 0 && !strings.HasPrefix(r.Query, "wai_session="+session) {
			t.Errorf("%s: not a request of the RELOAD-URI with session %s", where, session)
		}
		if r.manifest.Reload != first.manifest.Reload {
			t.Errorf("%s: RELOAD-URI %q changed from %q", where, r.manifest.Reload, first.manifest.Reload)
		}
		pw, hasPw := q[pathwayParam]
		tp, hasTp := q[throughputParam]
		if i > 0 && (!hasPw || !hasTp) {
			t.Errorf("%s: a reload without %s and %s", where, pathwayParam, throughputParam)
		}
		named := -1   // the pathway the request names (§4.2, §4.3)
		namedTp := "" // its throughput item
		if hasPw {
			quoted := len(pw) >= 2 && pw[0] == '"' && pw[len(pw)-1] == '"'
			if quoted != pg.b.quotedList {
				t.Errorf("%s: %s=%s quoted: %v, not %v as README.md records", where, pathwayParam, pw, quoted, pg.b.quotedList)
			}
			list := strings.Split(strings.Trim(pw, `"`), ",")
			tps := strings.Split(tp, ",")
			for j, id := range list {
				if k := slices.Index(ids, id); k >= 0 {
					named = k
					if j < len(tps) {
						namedTp = tps[j]
					}
					break
				}
			}
			if named < 0 {
				t.Errorf("%s: %s=%s names no pathway of the policy", where, pathwayParam, pw)
			}
			for _, v := range tps {
				if _, err := strconv.ParseUint(v, 10, 64); err != nil && (v != "" || pg.protocol == "hls") {
					t.Errorf("%s: %s=%s is not a list of integers", where, throughputParam, tp)
				}
			}
			// The throughput of one pathway alone: a number, or
			// empty where README.md says the player has none yet.
			if len(list) == 1 && named >= 0 {
				form := "a number"
				if namedTp == "" {
					form = "empty"
					if !pg.b.throughputLags || !firstOn(reqs[:i], pathwayParam, pw) {
						t.Errorf("%s: the throughput of %s is empty, not as README.md records", where, ids[named])
					}
				}
				forms[ids[named]+": "+form]++
			}
		}
		cmcd, hasCMCD := q["CMCD"]
		if r.CMCD != "" {
			hasCMCD, cmcd = true, r.CMCD
		}
		if hasCMCD {
			cmcdSeen++
			if !pg.b.cmcd {
				t.Errorf("%s: CMCD %q, which README.md says this player does not send", where, cmcd)
			}
		}

		// The decision the answer names verifies with the manifest the
		// player received (§8.4, §9), and states the report the server
		// read from the request (§4).
		raw, err := fetch(client, r.manifest.Decision)
		if err != nil {
			t.Errorf("%s: fetching its decision: %v", where, err)
			continue
		}
		if _, err := verify.Verify(verify.Input{
			Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes, Policy: sc.PolicyBytes,
			Decision: raw, Records: sc.Records, Manifest: r.Body,
		}); err != nil {
			t.Errorf("%s: its decision does not verify: %v", where, err)
			continue
		}
		dec, err := decision.Parse(raw)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		rep := dec.Report
		if dec.Reason != decision.Rank || dec.TTL != ttlSeconds {
			t.Errorf("%s: reason %s TTL %d, not rank and %d: the evidence alone orders these pathways", where, dec.Reason, dec.TTL, ttlSeconds)
		}
		if named >= 0 && (rep.Present&report.HasPathway == 0 || int(rep.Pathway) != named) {
			t.Errorf("%s: the decision states pathway %d (present %03b), not %d the request names", where, rep.Pathway, rep.Present, named)
		}
		switch mtp := cmcdKey(cmcd, "mtp"); {
		case named >= 0 && namedTp != "":
			if n, _ := strconv.ParseUint(namedTp, 10, 64); rep.Present&report.HasThroughput == 0 || rep.Throughput != n {
				t.Errorf("%s: the decision states throughput %d (present %03b), not %s", where, rep.Throughput, rep.Present, namedTp)
			}
		case hasCMCD && mtp >= 0:
			// §4.4: with no throughput of its own, T is mtp × 1000.
			fromMTP++
			if rep.Present&report.HasThroughput == 0 || rep.Throughput != uint64(mtp)*1000 {
				t.Errorf("%s: the decision states throughput %d (present %03b), not CMCD mtp %d × 1000", where, rep.Throughput, rep.Present, mtp)
			}
		}
		if bl := cmcdKey(cmcd, "bl"); hasCMCD && bl >= 0 && (rep.Present&report.HasBuffer == 0 || rep.Buffer != uint64(bl)) {
			t.Errorf("%s: CMCD bl=%d, the decision states buffer %d (present %03b)", where, bl, rep.Buffer, rep.Present)
		}
		// Before the change the clone is the cheapest, after it cdn-b
		// (a request across the instant may have either).
		want := ""
		switch {
		case r.End.Before(tChange):
			want = "cdn-b-clone"
		case r.Start.After(tChange):
			want = "cdn-b"
		}
		if want != "" && (len(r.manifest.Priority) == 0 || r.manifest.Priority[0] != want) {
			t.Errorf("%s: PATHWAY-PRIORITY %v, not %s first as the evidence gives", where, r.manifest.Priority, want)
		}
	}
	if pg.b.cmcd && cmcdSeen < len(reqs)-1 {
		t.Errorf("CMCD on %d of %d steering requests; README.md says this player sends it", cmcdSeen, len(reqs))
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < ttlSeconds*time.Second-300*time.Millisecond || med > ttlSeconds*time.Second+time.Second {
		t.Errorf("the median time between steering requests is %v, not the TTL of %ds", med, ttlSeconds)
	}
	t.Logf("%d steering requests, %d with CMCD, %d with T from CMCD mtp; throughput of one pathway: %v", len(reqs), cmcdSeen, fromMTP, forms)
	t.Logf("first: %s?%s", first.Path, first.Query)
	t.Logf("last:  %s?%s", reqs[len(reqs)-1].Path, reqs[len(reqs)-1].Query)
	return len(reqs)
}

// firstOn reports whether none of the requests before named the same
// pathway list as pw after the last that named another: whether this is
// the first reload since the player moved.
func firstOn(before []steerReq, param, pw string) bool {
	if len(before) == 0 {
		return true
	}
	return query(before[len(before)-1].Query)[param] != pw
}

func fetch(c *http.Client, u string) ([]byte, error) {
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, b)
	}
	return b, err
}

// checkFirst judges phase 1: once the first answer puts the clone first,
// the player takes its segments from the first pathway of the priority it
// applies (the clone, from the clone's host, where it applies clones) and
// from nowhere else, with the clone's PARAMS where README.md says. It
// returns how long after that answer its first segment came from there.
func checkFirst(t *testing.T, o *observed, pg pageSpec, tChange time.Time) time.Duration {
	clone, first := pathwayByID("cdn-b-clone"), pg.firstPathway()
	var answered time.Time
	for _, r := range o.steering(pg.name) {
		if len(r.manifest.Priority) > 0 && r.manifest.Priority[0] == clone.id {
			answered = r.End
			break
		}
	}
	if answered.IsZero() {
		t.Errorf("no steering answer put %s first", clone.id)
		return -1
	}
	segs := o.segments(pg.name, "", time.Time{}, tChange)
	i := slices.IndexFunc(segs, func(m mediaHit) bool { return m.Server == first && !m.Start.Before(answered.Add(-50*time.Millisecond)) })
	if i < 0 {
		t.Errorf("no segment came from %s after the answer that put %s first", first, clone.id)
		return -1
	}
	at := segs[i].Start
	if d := at.Sub(answered); d > 6*time.Second {
		t.Errorf("the first segment from %s came %v after the answer that put %s first", first, d, clone.id)
	}
	for _, m := range segs[i:] {
		if m.Server != first {
			t.Errorf("segment %d came from %s after the player moved to %s", m.seg, m.Server, first)
		}
	}
	toClone := 0
	for _, m := range o.media(pg.name, time.Time{}, tChange) {
		if m.Server != clone.id {
			continue
		}
		toClone++
		if host, _, _ := strings.Cut(m.Host, ":"); host != clone.ip {
			t.Errorf("a request to the clone names host %q, not the clone's HOST %s", m.Host, clone.ip)
		}
		if pg.protocol == "hls" && m.kind == "playlist" && !strings.Contains(m.Path, "/hls/"+clone.base+"/") {
			t.Errorf("the clone's media playlist is %s, not the base's URI with the clone's host", m.Path)
		}
		has := query(m.Query)[cloneParam] == cloneValue
		if want := slices.Contains(pg.b.cloneParams, m.kind); has != want {
			t.Errorf("a %s request to the clone carries the clone's PARAMS: %v, not %v as README.md records (%s?%s)", m.kind, has, want, m.Path, m.Query)
		}
	}
	if !pg.b.appliesClones && toClone > 0 {
		t.Errorf("%d requests to the clone, which README.md says this player does not apply", toClone)
	}
	t.Logf("onto %s %v after the first answer put %s first; %d requests to the clone's host", first, at.Sub(answered).Round(time.Millisecond), clone.id, toClone)
	return at.Sub(answered)
}

// checkEvidenceChange judges phase 2: once the records of the next period
// make cdn-b the cheapest, the player's next reload puts it first, and the
// player takes its segments from it from then on. It returns how long
// after the change the first segment came from cdn-b.
func checkEvidenceChange(t *testing.T, o *observed, pg pageSpec, tChange, tStop time.Time) time.Duration {
	var reload steerReq
	for _, r := range o.steering(pg.name) {
		if r.Start.After(tChange) && len(r.manifest.Priority) > 0 && r.manifest.Priority[0] == "cdn-b" {
			reload = r
			break
		}
	}
	if reload.Start.IsZero() {
		t.Errorf("no steering answer after the change put cdn-b first")
		return -1
	}
	// The next reload: the first request after the change (checkSteering
	// requires every answer after it to put cdn-b first), a TTL at most
	// after it, with some slack for a loaded machine.
	if d := reload.Start.Sub(tChange); d > ttlSeconds*time.Second+2*time.Second {
		t.Errorf("the first reload after the change came %v after it, more than the TTL", d)
	}
	segs := o.segments(pg.name, "", tChange, tStop)
	i := slices.IndexFunc(segs, func(m mediaHit) bool { return m.Server == "cdn-b" })
	if i < 0 {
		t.Errorf("no segment from cdn-b after the change")
		return -1
	}
	at := segs[i].Start
	if at.Before(reload.Start) {
		t.Errorf("a segment came from cdn-b %v before the reload that put it first", reload.Start.Sub(at))
	}
	if d := at.Sub(reload.End); d > 6*time.Second {
		t.Errorf("the first segment from cdn-b came %v after the reload that put it first", d)
	}
	for _, m := range segs[i:] {
		if m.Server != "cdn-b" {
			t.Errorf("segment %d came from %s after the player moved to cdn-b", m.seg, m.Server)
		}
	}
	t.Logf("onto cdn-b %v after the evidence changed (the reload %v after it, the first segment %v after the reload)",
		at.Sub(tChange).Round(time.Millisecond), reload.Start.Sub(tChange).Round(time.Millisecond), at.Sub(reload.End).Round(time.Millisecond))
	return at.Sub(tChange)
}

// checkFailover judges phase 3: from the instant cdn-b's server stopped,
// the player takes its segments from the next pathway of the priority in
// force, and plays on. It returns how long the move took (to the first
// segment served by the next pathway), the longest stall, and how many
// requests to the stopped pathway failed.
func checkFailover(t *testing.T, o *observed, pg pageSpec, stopped string, tStop, tEnd time.Time) (move, stall time.Duration, failed int) {
	var priority []string
	for _, r := range o.steering(pg.name) {
		if r.End.Before(tStop) {
			priority = r.manifest.Priority
		}
	}
	i := slices.Index(priority, stopped)
	if i != 0 || len(priority) < 2 {
		t.Errorf("the priority in force when %s stopped is %v", stopped, priority)
		return -1, -1, 0
	}
	next := priority[1]
	segs := o.segments(pg.name, "", tStop, tEnd)
	if len(segs) == 0 {
		t.Errorf("no segment after %s stopped", stopped)
		return -1, -1, 0
	}
	for _, m := range segs {
		if m.Server != next {
			t.Errorf("segment %d came from %s after %s stopped, not from %s, next in the priority %v", m.seg, m.Server, stopped, next, priority)
		}
	}
	move = segs[0].Start.Sub(tStop)
	stall = o.stall(pg.name, tStop, tEnd)
	span := tEnd.Sub(tStop).Seconds()
	if p := o.played(pg.name, tStop, tEnd); p < span/2 {
		t.Errorf("played %.1f s of the %.1f s after %s stopped", p, span, stopped)
	}
	// The server cannot log a refused connection; the browser can.
	host := "http://" + pathwayByID(stopped).authority() + "/"
	var last time.Time
	for _, l := range o.lines {
		if l.Kind == "requestfailed" && l.Page == pg.name && strings.HasPrefix(l.URL, host) && !l.at.Before(tStop) {
			failed++
			last = l.at
		}
	}
	lastAfter := "none"
	if !last.IsZero() {
		lastAfter = last.Sub(segs[0].Start).Round(time.Millisecond).String()
	}
	backLater := !last.IsZero() && last.Sub(segs[0].Start) > 1500*time.Millisecond
	if backLater != pg.b.retriesFailed {
		t.Errorf("went back to the stopped pathway after moving: %v (the last failure after the move: %s), not %v as README.md records",
			backLater, lastAfter, pg.b.retriesFailed)
	}
	t.Logf("failover to %s %v after %s stopped; longest stall %v; %d failed requests to %s, the last %s after the move",
		next, move.Round(time.Millisecond), stopped, stall.Round(time.Millisecond), failed, stopped, lastAfter)
	return move, stall, failed
}
