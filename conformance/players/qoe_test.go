package players

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/report/qoe"
)

// The QoE pools' settings (issue 17, the per-client rule alone): the
// weights' order for a client that reports well, with a TTL long enough
// for a player to time a few throttled segments before its first reload;
// a short TTL for a manifest the rule shaped, so that a moved player asks
// again soon.
const (
	qoeTTL      = 10 // s
	qoeShortTTL = 4  // s
	// qoeHold is how long the rule keeps a moved client off the pathway it
	// left (the QoE's hold, readQoE's default): longer than the test.
	qoeHold = time.Minute
	slowID  = "cdn-slow"
	fastID  = "cdn-fast"
	// The throttled pathway paces every answer to Lowest / throttleDiv
	// bits/s, so that a player's estimate on it is far below 1.2 × Lowest.
	throttleDiv = 3
	// throttleChunk is the pacing's unit: a chunk leaves when its last byte
	// is due, so that no byte arrives before the rate allows.
	throttleChunk = 512
)

// The weights put the throttled pathway first for every session: it is
// the only ranked edge, and a weight-0 edge follows the ranked ones
// (internal/pool/doc.go, "The order").
var qoeWeights = map[string]uint32{slowID: 1, fastID: 0}

// qoePathways are the two pathways, shared by the pages (each page's
// requests are under its own prefix): the throttled one first, as the
// content descriptions and the weights' order name them. Addresses no
// other test of the package uses.
var qoePathways = []pathwaySpec{
	{id: slowID, ip: "127.0.0.102"},
	{id: fastID, ip: "127.0.0.103"},
}

// The players the issue names, one page each, and Shaka Player's compiled
// build on DASH, told to estimate from smaller downloads than its
// defaults: it ignores one under 16 kB and reports its default estimate
// (here Chromium's Network Information figure, 1.5 Mbit/s) until 128 kB
// have been sampled (abr.advanced.minBytes, minTotalBytes), so on this
// stream's segments of about 15 kB it reports nothing it measured for the
// length of a test (README.md).
var qoePages = []pageSpec{
	{name: "qoe-hlsjs", file: "hlsjs.html", protocol: "hls", pkg: "hls.js", b: hlsjs},
	{name: "qoe-dashjs", file: "dashjs.html", protocol: "dash", pkg: "dashjs", b: dashjs},
	{name: "qoe-shaka-dash", file: "shaka.html", extra: "&minBytes=8000&minTotalBytes=32000", protocol: "dash", pkg: "shaka-player", b: shakaJS},
}

func qoePath(page string) string { return "/pool/" + page }

// qoePoolConfig is a page's pool: the two edges by qoeWeights, never
// health-checked (both stay up), and the per-client rule with lowest.
// The cohort rule is off (no floor, no fraction); its other settings are
// readQoE's defaults and unused.
func qoePoolConfig(page string, lowest uint64) pool.Config {
	c := pool.Config{
		Name: page, Path: qoePath(page), TTL: qoeTTL,
		CheckEvery: time.Second, CheckTimeout: 500 * time.Millisecond, DownAfter: 2,
		Assign: pool.AssignRendezvous,
		QoE: &pool.QoE{
			Config:   qoe.Config{Window: time.Minute, MinSessions: 30, Margin: 0.2, Hold: qoeHold},
			ShortTTL: qoeShortTTL,
			Lowest:   lowest,
		},
	}
	for _, p := range qoePathways {
		c.Edges = append(c.Edges, pool.Edge{Pathway: p.id, Weight: qoeWeights[p.id]})
	}
	return c
}

// qoeContent is one page's content description as the origin serves it:
// for HLS with no tag, which waisteer's front adds for the pool (issue 28:
// hls.js through the front in every test; the pool has no clone_from, so
// the tag names no PATHWAY-ID and hls.js starts on the first variant's,
// the throttled one); for DASH with the element written by hand as for a
// pool: the page's pool, the initial pathway the throttled one.
func qoeContent(m *media, steerURL string, pg pageSpec) []byte {
	if pg.protocol == "hls" {
		return m.multivariantOf(pg.name, "", qoePathways)
	}
	element := `<ContentSteering defaultServiceLocation="` + slowID + `" queryBeforeStart="true">` + steerURL + qoePath(pg.name) + `</ContentSteering>`
	return m.mpdOf(pg.name, element, time.Now(), qoePathways)
}

var (
	hlsBandwidth  = regexp.MustCompile(`#EXT-X-STREAM-INF:(?:[^\n]*,)?BANDWIDTH=([0-9]+)`)
	dashBandwidth = regexp.MustCompile(`<Representation [^>]*bandwidth="([0-9]+)"`)
)

// lowestOf is the lowest variant's bitrate as a content description
// states it: the least BANDWIDTH of its variant streams (RFC 8216bis
// 4.4.6.2), or the least @bandwidth of its Representations.
func lowestOf(t *testing.T, desc []byte, re *regexp.Regexp) uint64 {
	t.Helper()
	var lowest uint64
	ms := re.FindAllSubmatch(desc, -1)
	for _, sm := range ms {
		n, err := strconv.ParseUint(string(sm[1]), 10, 64)
		if err != nil {
			t.Fatalf("the bitrate %q does not read: %v", sm[1], err)
		}
		if lowest == 0 || n < lowest {
			lowest = n
		}
	}
	if len(ms) == 0 || lowest == 0 {
		t.Fatalf("the content description states no bitrate:\n%s", desc)
	}
	return lowest
}

// qoeOriginHandler serves the pages, the players and each page's content
// description.
func qoeOriginHandler(m *media, steerURL string) http.Handler {
	mux := http.NewServeMux()
	files := http.FileServer(http.Dir("."))
	mux.Handle("GET /pages/", files)
	mux.Handle("GET /node_modules/", files)
	serveContent := func(protocol, contentType string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			i := slices.IndexFunc(qoePages, func(pg pageSpec) bool { return pg.name == r.PathValue("page") })
			if i < 0 || qoePages[i].protocol != protocol {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Cache-Control", "no-store")
			w.Write(qoeContent(m, steerURL, qoePages[i]))
		}
	}
	mux.HandleFunc("GET /content/{page}/master.m3u8", serveContent("hls", "application/vnd.apple.mpegurl"))
	mux.HandleFunc("GET /content/{page}/manifest.mpd", serveContent("dash", "application/dash+xml"))
	return cors(mux)
}

// throttled paces every answer of h to rate bits/s from its first byte,
// as a slow link would: a chunk of throttleChunk bytes leaves when its last
// byte is due, byte k at (k+1)·8/rate s, each flushed to the connection.
// Every request is paced on its own.
func throttled(rate uint64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&pacedWriter{ResponseWriter: w, rc: http.NewResponseController(w), rate: rate}, r)
	})
}

type pacedWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	rate  uint64 // bits/s
	start time.Time
	sent  uint64 // bytes
}

// Unwrap lets the handler's own flushes reach the connection.
func (p *pacedWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

func (p *pacedWriter) Write(b []byte) (int, error) {
	if p.start.IsZero() {
		p.start = time.Now()
	}
	n := 0
	for len(b) > 0 {
		k := min(len(b), throttleChunk)
		due := p.start.Add(time.Duration((p.sent + uint64(k)) * 8 * uint64(time.Second) / p.rate))
		time.Sleep(time.Until(due))
		w, err := p.ResponseWriter.Write(b[:k])
		n += w
		p.sent += uint64(w)
		if err != nil {
			return n, err
		}
		p.rc.Flush()
		b = b[k:]
	}
	return n, nil
}

// TestPlayersLeaveAThrottledPathway plays a live stream in hls.js and
// dash.js steered by a waisteer pool with QoE on (issue 17, the per-client
// rule alone: Lowest the lowest variant's bitrate as the content
// description states it). The pool's weights put a throttled pathway,
// paced to a third of Lowest, first for every session; the other pathway
// serves at full pace. From what the servers logged, for each player:
//
//   - every answer is the one the rule gives the report its request
//     carried, read as the extension's §4 reads it (c and T; T from CMCD
//     mtp × 1000 when the request has none of its own): the weights' order
//     with the pool's TTL, or, for a client below 1.2 × Lowest on its
//     pathway, that pathway behind with the short TTL;
//   - the player starts on the throttled pathway, and at a reload after it
//     has timed segments there it reports less than 1.2 × Lowest for it; the
//     answer puts the other pathway first with the short TTL, and the
//     player's next segments come from the other pathway.
//
// It logs, per player, the value reported, the time from its first
// throttled segment to that reload and to its first segment from the other
// pathway, and what it did after: a player that goes back to the throttled
// pathway is tolerated and counted.
func TestPlayersLeaveAThrottledPathway(t *testing.T) {
	tl := requireTools(t)
	began := time.Now()
	m := makeMedia(t, tl.ffmpeg)
	t.Logf("media made in %v", time.Since(began).Round(time.Millisecond))
	m.epoch = time.Now().Add(-30 * time.Second)

	// Lowest as the content descriptions state it; both say the same.
	lowest := lowestOf(t, qoeContent(m, "http://127.0.0.1", qoePages[0]), hlsBandwidth)
	if l := lowestOf(t, qoeContent(m, "http://127.0.0.1", qoePages[1]), dashBandwidth); l != lowest {
		t.Fatalf("the playlist's lowest BANDWIDTH is %d, the MPD's lowest bandwidth %d", lowest, l)
	}
	rate := lowest / throttleDiv
	t.Logf("Lowest %d bit/s (the content descriptions' BANDWIDTH); the rule's threshold 1.2 × Lowest = %d bit/s; %s paced to %d bit/s",
		lowest, lowest*6/5, slowID, rate)

	hits := &hitLog{}
	for _, p := range qoePathways {
		h := m.pathwayHandler()
		if p.id == slowID {
			h = throttled(rate, h)
		}
		serve(t, p.ip+":"+pathwayPort, hits.logged(p.id, false, h))
	}
	var pcs []pool.Config
	for _, pg := range qoePages {
		pcs = append(pcs, qoePoolConfig(pg.name, lowest))
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
	for _, pg := range qoePages {
		if pg.protocol == "hls" {
			fc.Playlists = append(fc.Playlists, server.FrontPlaylist{Path: "/content/" + pg.name + "/", Pool: pg.name})
		}
	}
	steerURL := startPoolServer(t, hits, pcs, fc, plainHTTP())
	serveOn(t, originLn, hits.logged("origin", false, qoeOriginHandler(m, steerURL)))

	ws := startChromium(t, tl.chromium)
	var runs []pageRun
	for _, pg := range qoePages {
		src := originURL + pg.manifestPath()
		if pg.protocol == "hls" {
			src = steerURL + pg.manifestPath()
		}
		runs = append(runs, pageRun{Name: pg.name, URL: originURL + "/pages/" + pg.file + "?src=" + url.QueryEscape(src) + pg.extra})
	}
	d := startDriver(t, tl.node, ws, runs)
	snapshot := func() *observed { return &observed{hits: hits.all(), lines: d.all()} }
	t.Logf("players started at %v", time.Since(began).Round(time.Millisecond))

	// Until each player has moved, and been seen through two short TTLs
	// after: the reload that follows and what the player did with it.
	diagnose := func(o *observed) string { return diagnoseQoE(o, qoePages) }
	waitForPages(t, snapshot, qoePages, diagnose, 40*time.Second, "every player leaves the throttled pathway", func(o *observed, pg pageSpec) string {
		mv, why := findQoEMove(o, pg, lowest)
		switch {
		case why != "":
			return why
		case time.Since(mv.End) < 2*qoeShortTTL*time.Second+time.Second:
			return "watching two short TTLs after the move"
		}
		return ""
	})
	tEnd := time.Now()
	d.stop(t)
	o := snapshot()

	moves := map[string]*qoeMove{}
	for _, pg := range qoePages {
		mv := &qoeMove{toReload: -1, toFast: -1}
		moves[pg.name] = mv
		t.Run(pg.name, func(t *testing.T) {
			checkPlayer(t, o, pg, tl.versions[pg.pkg])
			checkQoESteering(t, o, pg, lowest, steerURL, mv)
			checkQoEMove(t, o, m, pg, lowest, rate, tEnd, mv)
		})
	}

	var b strings.Builder
	fmt.Fprintf(&b, "players leaving a throttled pathway (pool ttl_s %d, short_ttl_s %d, Lowest %d bit/s, %s paced to %d bit/s), run of %v:\n",
		qoeTTL, qoeShortTTL, lowest, slowID, rate, time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "  %-15s %-9s %-10s %-42s %-10s %-9s %-7s %-8s %s\n", "page", "requests", "served at", "reported at the move", "to reload", "to fast", "back", "returns", "answers after the move")
	for _, pg := range qoePages {
		mv := moves[pg.name]
		fmt.Fprintf(&b, "  %-15s %-9d %-10d %-42s %-10s %-9s %-7d %-8d %s\n", pg.name, mv.requests, mv.slowRate, mv.reported, roundMs(mv.toReload), roundMs(mv.toFast),
			mv.back, mv.returns, strings.Join(mv.answers, "; "))
	}
	b.WriteString("  served at: the median rate of the throttled segments as the server sent them, bit/s;\n")
	b.WriteString("  to reload, to fast: from the first segment from " + slowID + " to the reload that moved the player, and to its first segment from " + fastID + ";\n")
	b.WriteString("  back: answers after the move that put " + slowID + " first again; returns: times the player took a segment from it again")
	t.Log(b.String())
}

// TestQoEReference checks the test's own reading of reports and of the
// rule against cases worked by hand from §4 and the brief, so that the
// players' test does not lean on a reference that is itself wrong.
func TestQoEReference(t *testing.T) {
	ids := []string{slowID, fastID}
	for _, c := range []struct {
		protocol, query, cmcd string
		want                  qoeReport
	}{
		// §4.2: the pathway unquoted, the throughput an integer.
		{"hls", `_HLS_pathway=%22cdn-slow%22&_HLS_throughput=45000`, "", qoeReport{slowID, 45000, true, "_HLS_throughput"}},
		{"hls", `_HLS_pathway=cdn-x&_HLS_throughput=45000`, "", qoeReport{"", 45000, true, "_HLS_throughput"}},
		{"hls", `_HLS_pathway=cdn-fast&_HLS_throughput=%2B5`, "", qoeReport{fastID, 0, false, "_HLS_throughput"}},
		// §4.3: the first listed pathway of the policy, and its item.
		{"dash", `_DASH_pathway=%22cdn-x,cdn-fast,cdn-slow%22&_DASH_throughput=1,2,3`, "", qoeReport{fastID, 2, true, "_DASH_throughput"}},
		{"dash", `_DASH_pathway=cdn-slow&_DASH_throughput=45000`, "", qoeReport{slowID, 45000, true, "_DASH_throughput"}},
		// §4.4: an empty item gives no T; CMCD mtp × 1000 does, from the
		// parameter before the header.
		{"dash", `_DASH_pathway=%22cdn-slow,cdn-fast%22&_DASH_throughput=,7&CMCD=bl%3D100%2Cmtp%3D200`, "mtp=9", qoeReport{slowID, 200000, true, "CMCD mtp × 1000"}},
		{"dash", `_DASH_pathway=%22cdn-slow%22&_DASH_throughput=`, "bl=1,mtp=0", qoeReport{slowID, 0, true, "CMCD mtp × 1000"}},
		{"dash", `CMCD=bl%3D100`, "", qoeReport{}},
	} {
		if got := readQoEReport(hit{Query: c.query, CMCD: c.cmcd}, c.protocol, ids); got != c.want {
			t.Errorf("%s %s (CMCD-Request %q): read %+v, not %+v", c.protocol, c.query, c.cmcd, got, c.want)
		}
	}
	// T < 1.2 × Lowest is 5T < 6L: at L = 5, T = 5 is below and 6 is not;
	// near 2⁶⁴ the products do not wrap.
	for _, c := range []struct {
		t, lowest uint64
		want      bool
	}{{5, 5, true}, {6, 5, false}, {0, 1, true}, {0, 0, false}, {1<<64 - 1, 1<<64 - 1, true}, {1<<64 - 1, 1 << 62, false}} {
		if got := belowLowest(c.t, c.lowest); got != c.want {
			t.Errorf("belowLowest(%d, %d) = %v", c.t, c.lowest, got)
		}
	}
	// The rule over one session: the weights' order; moved off the slow
	// pathway; kept off it while reporting well on the other; moved off
	// the other when it reports below there; the weights' order once the
	// hold has passed; no hold for a request without a session.
	const lowest = 100
	t0 := time.Unix(1_000_000, 0)
	rule := &qoeRule{lowest: lowest}
	for i, c := range []struct {
		r       qoeReport
		session bool
		after   time.Duration
		order   string
		ttl     int
	}{
		{qoeReport{slowID, 500, true, ""}, false, 0, "cdn-slow,cdn-fast", qoeTTL},
		{qoeReport{slowID, 119, true, ""}, false, time.Second, "cdn-fast,cdn-slow", qoeShortTTL},
		{qoeReport{slowID, 500, true, ""}, true, 2 * time.Second, "cdn-slow,cdn-fast", qoeTTL},
		{qoeReport{slowID, 119, true, ""}, true, 10 * time.Second, "cdn-fast,cdn-slow", qoeShortTTL},
		{qoeReport{fastID, 5000, true, ""}, true, 14 * time.Second, "cdn-fast,cdn-slow", qoeShortTTL},
		{qoeReport{}, true, 18 * time.Second, "cdn-fast,cdn-slow", qoeShortTTL},
		{qoeReport{fastID, 119, true, ""}, true, 22 * time.Second, "cdn-slow,cdn-fast", qoeShortTTL},
		{qoeReport{slowID, 120, true, ""}, true, 26 * time.Second, "cdn-slow,cdn-fast", qoeShortTTL},
		{qoeReport{slowID, 120, true, ""}, true, 22*time.Second + qoeHold + time.Second, "cdn-slow,cdn-fast", qoeTTL},
	} {
		order, ttl, why, doubt := rule.answer(c.r, c.session, t0.Add(c.after))
		if strings.Join(order, ",") != c.order || ttl != c.ttl || doubt {
			t.Errorf("request %d (%s at +%v): %v TTL %d (%s; in doubt %v), not %s TTL %d", i, c.r, c.after, order, ttl, why, doubt, c.order, c.ttl)
		}
	}
}
