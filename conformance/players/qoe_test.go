package players

import (
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
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

// qoeContent is one page's content description, written by hand as for a
// pool: SERVER-URI the page's pool, the initial pathway the throttled one.
func qoeContent(m *media, steerURL string, pg pageSpec) []byte {
	if pg.protocol == "hls" {
		tag := `#EXT-X-CONTENT-STEERING:SERVER-URI="` + steerURL + qoePath(pg.name) + `",PATHWAY-ID="` + slowID + `"`
		return m.multivariantOf(pg.name, tag, qoePathways)
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

// qoeReport is what the extension's §4 reads of a steering request, the
// reading the brief gives the per-client rule: the client's current
// pathway c and its throughput T.
type qoeReport struct {
	pathway    string // c; "" when absent
	throughput uint64 // T, bits/s
	hasT       bool
	from       string // where T came from: the throughput parameter, or CMCD mtp
}

func (r qoeReport) String() string {
	c := r.pathway
	if c == "" {
		c = "no pathway"
	}
	if !r.hasT {
		return c + " with no throughput"
	}
	return fmt.Sprintf("%s at %d bit/s (%s)", c, r.throughput, r.from)
}

// unquote removes one `"` at each end when the value both begins and ends
// with one (§4.1).
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// integer reads §4.1's integer: 1 to 20 ASCII digits, at most 2⁶⁴ − 1.
func integer(v string) (uint64, bool) {
	if len(v) < 1 || len(v) > 20 || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// readQoEReport reads c and T from a steering request as §4.2 (HLS), §4.3
// (DASH) and §4.4 (CMCD mtp × 1000 when neither gives T) say, for a policy
// (here a pool) of the pathways ids. CMCD is read in the simple form the
// players write (cmcdKey).
func readQoEReport(h hit, protocol string, ids []string) qoeReport {
	q := query(h.Query)
	var r qoeReport
	if protocol == "hls" {
		if c := unquote(q["_HLS_pathway"]); slices.Contains(ids, c) {
			r.pathway = c
		}
		if v, ok := q["_HLS_throughput"]; ok {
			r.throughput, r.hasT = integer(v)
			r.from = "_HLS_throughput"
		}
	} else {
		j := 0
		if pw, ok := q["_DASH_pathway"]; ok {
			for i, c := range strings.Split(unquote(pw), ",") {
				if slices.Contains(ids, c) {
					r.pathway, j = c, i
					break
				}
			}
		}
		if tp, ok := q["_DASH_throughput"]; ok {
			if items := strings.Split(tp, ","); j < len(items) {
				r.throughput, r.hasT = integer(items[j])
				r.from = "_DASH_throughput"
			}
		}
	}
	if !r.hasT {
		cmcd, ok := q["CMCD"]
		if !ok {
			cmcd = h.CMCD
		}
		if mtp := cmcdKey(cmcd, "mtp"); mtp >= 0 {
			r.throughput, r.hasT, r.from = uint64(mtp)*1000, true, "CMCD mtp × 1000"
		}
	}
	return r
}

// belowLowest is the per-client rule's test, exactly: T < 1.2 × Lowest.
func belowLowest(t, lowest uint64) bool {
	lhs := new(big.Int).Mul(big.NewInt(5), new(big.Int).SetUint64(t))
	rhs := new(big.Int).Mul(big.NewInt(6), new(big.Int).SetUint64(lowest))
	return lhs.Cmp(rhs) < 0
}

// qoeRule is the per-client rule as the brief states it, and as the
// server keeps it (issue 17: "a client kept away for the hold"), for one
// session's requests in the order they came: a request that reports
// below 1.2 × Lowest on its pathway has that pathway moved behind the
// others with the short TTL, and a request of the session (one that
// carries it) keeps the session off that pathway until qoeHold after it;
// a later request that reports nothing below is answered so too while the
// hold lasts; any other, the weights' order (the throttled pathway, then
// the weight-0 one) with the pool's TTL.
type qoeRule struct {
	lowest uint64
	away   string    // the pathway the session is kept off, "" for none
	until  time.Time // the end of its hold
}

// answer is the order and TTL for a request that began at, carrying the
// report r, with a session or not, and why; doubt when the answer is in
// doubt, as for a request within a second of the hold's end, which the
// server may see on either side.
func (q *qoeRule) answer(r qoeReport, session bool, at time.Time) (order []string, ttl int, why string, doubt bool) {
	behind := ""
	switch {
	case r.pathway != "" && r.hasT && belowLowest(r.throughput, q.lowest):
		behind, why = r.pathway, fmt.Sprintf("below 1.2 × Lowest = %d on %s", q.lowest*6/5, r.pathway)
		if session {
			q.away, q.until = r.pathway, at.Add(qoeHold)
		}
	case q.away != "" && at.Before(q.until):
		behind, why = q.away, fmt.Sprintf("the session kept off %s for the hold, until %s", q.away, q.until.Format("15:04:05.000"))
		doubt = q.until.Sub(at) < time.Second
	default:
		why = "nothing below 1.2 × Lowest and no hold: the weights' order"
		doubt = q.away != "" && at.Sub(q.until) < time.Second
	}
	order = []string{slowID, fastID}
	if behind == "" {
		return order, qoeTTL, why, doubt
	}
	order = slices.DeleteFunc(order, func(id string) bool { return id == behind })
	return append(order, behind), qoeShortTTL, why, doubt
}

// qoeMove is what the test found of a page's move off the throttled
// pathway, for the log and README.md's table.
type qoeMove struct {
	reported    qoeReport
	toReload    time.Duration // from the first throttled segment to the reload that moved it
	toFast      time.Duration // ... to its first segment from the other pathway
	slowSegs    int           // segments from the throttled pathway before the move
	slowRate    uint64        // their median rate as served, bits/s
	back        int           // answers after the move that put the throttled pathway first again
	returns     int           // times the player went back to it
	answers     []string      // every answer after the move, in brief
	requests    int
	fastPlayed  float64 // s of media played in the shortTTL after its first fast segment
	lastPathway string  // the pathway of its last segment
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
	steerURL := startPoolServer(t, hits, pcs)
	origin := serve(t, "127.0.0.1:0", hits.logged("origin", false, qoeOriginHandler(m, steerURL)))
	originURL := "http://" + origin.addr

	ws := startChromium(t, tl.chromium)
	var runs []pageRun
	for _, pg := range qoePages {
		src := originURL + pg.manifestPath()
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

// diagnoseQoE lists, for a failure's message, each page's steering
// requests with their answers, and its media requests by pathway.
func diagnoseQoE(o *observed, pgs []pageSpec) string {
	var b strings.Builder
	for _, pg := range pgs {
		fmt.Fprintf(&b, "  %s:\n", pg.name)
		for _, r := range o.steering(pg.name) {
			fmt.Fprintf(&b, "    %s ?%s -> %v TTL %d\n", r.Start.Format("15:04:05.000"), r.Query, r.manifest.Priority, r.manifest.TTL)
		}
		count := map[string]int{}
		for _, mh := range o.media(pg.name, time.Time{}, time.Time{}) {
			count[mh.Server+" "+mh.kind+" "+strconv.Itoa(mh.Status)]++
		}
		keys := make([]string, 0, len(count))
		for k := range count {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("    media:")
		for _, k := range keys {
			fmt.Fprintf(&b, " [%s]×%d", k, count[k])
		}
		if ss := o.samples(pg.name); len(ss) > 0 {
			s := ss[len(ss)-1]
			fmt.Fprintf(&b, "; currentTime %.1f readyState %d", s.CurrentTime, s.ReadyState)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// findQoEMove finds the page's reload that reported, for the throttled
// pathway, a throughput below 1.2 × Lowest after the player had timed a
// segment there (one served whole before the reload began), and says what
// is still missing when there is none yet, or no segment from the other
// pathway after it.
func findQoEMove(o *observed, pg pageSpec, lowest uint64) (steerReq, string) {
	ids := []string{slowID, fastID}
	slow := o.segments(pg.name, slowID, time.Time{}, time.Time{})
	if len(slow) == 0 {
		return steerReq{}, "no segment from " + slowID + " yet"
	}
	for _, r := range o.steering(pg.name) {
		rep := readQoEReport(r.hit, pg.protocol, ids)
		if r.Start.Before(slow[0].End) || rep.pathway != slowID || !rep.hasT || !belowLowest(rep.throughput, lowest) {
			continue
		}
		if len(o.segments(pg.name, fastID, r.End, time.Time{})) == 0 {
			return r, "no segment from " + fastID + " since the reload that reported " + rep.String()
		}
		return r, ""
	}
	return steerReq{}, fmt.Sprintf("no reload has reported %s below 1.2 × Lowest (%d segments from it so far)", slowID, len(slow))
}

// checkQoESteering judges every steering request of the page: the first
// has no session and its answer's RELOAD-URI is the pool's route, absolute,
// with the session minted; every later request is that RELOAD-URI with the
// player's parameters after it; and every answer is VERSION 1 with the
// same RELOAD-URI, the PATHWAY-PRIORITY and TTL that the rule gives the
// report its request carried and the session's earlier ones (qoeRule),
// and no clones.
func checkQoESteering(t *testing.T, o *observed, pg pageSpec, lowest uint64, steerURL string, mv *qoeMove) {
	reqs := o.steering(pg.name)
	mv.requests = len(reqs)
	if len(reqs) < 2 {
		t.Errorf("%d steering requests, fewer than 2", len(reqs))
		return
	}
	first := reqs[0]
	if _, ok := query(first.Query)["session"]; ok {
		t.Errorf("the first steering request already carries a session: %s", first.Query)
	}
	if first.err != nil {
		t.Fatalf("the first answer is not a steering manifest: %v: %s", first.err, first.Body)
	}
	reload := first.manifest.Reload
	session := sessionOf(reload)
	if _, ok := parseSession(session); !ok || reload != steerURL+qoePath(pg.name)+"?session="+session {
		t.Fatalf("RELOAD-URI %q is not the pool's route, absolute, with a session of 32 hexadecimal digits", reload)
	}
	ids := []string{slowID, fastID}
	rule := &qoeRule{lowest: lowest}
	for i, r := range reqs {
		where := fmt.Sprintf("steering request %d (%s?%s)", i, r.Path, r.Query)
		if r.Status != http.StatusOK || r.err != nil {
			t.Errorf("%s: answered %d, %v: %s", where, r.Status, r.err, r.Body)
			continue
		}
		if i > 0 && !strings.HasPrefix(r.Query, "session="+session) {
			t.Errorf("%s: not a request of the RELOAD-URI with session %s", where, session)
		}
		rep := readQoEReport(r.hit, pg.protocol, ids)
		_, carried := parseSession(query(r.Query)["session"])
		order, ttl, why, doubt := rule.answer(rep, carried, r.Start)
		if r.manifest.Version != 1 || r.manifest.Reload != reload || len(r.manifest.Clones) != 0 {
			t.Errorf("%s: VERSION %d, RELOAD-URI %q, %d clones: not 1, %q and none", where, r.manifest.Version, r.manifest.Reload, len(r.manifest.Clones), reload)
		}
		if !doubt && (!slices.Equal(r.manifest.Priority, order) || r.manifest.TTL != ttl) {
			t.Errorf("%s: reported %s; answered PATHWAY-PRIORITY %v TTL %d, not %v TTL %d as the rule gives (%s)",
				where, rep, r.manifest.Priority, r.manifest.TTL, order, ttl, why)
		}
	}
	t.Logf("%d steering requests; first: %s?%s", len(reqs), first.Path, first.Query)
}

// checkQoEMove judges the move: the player starts on the throttled
// pathway, and takes every segment from it until the reload that reports
// it below 1.2 × Lowest; that answer puts the other pathway first with the
// short TTL; the player's next segments come from the other pathway, the
// first within a few seconds, and none from the throttled one until its
// next answer. What it did after is logged and counted, not required.
func checkQoEMove(t *testing.T, o *observed, m *media, pg pageSpec, lowest, rate uint64, tEnd time.Time, mv *qoeMove) {
	// The throttle, as the server sent: no segment from it faster than its
	// pace (a few per cent for the clock's grain), so that none could be
	// timed above it. A segment the player gave up on is not timed.
	var rates []uint64
	for _, s := range o.segments(pg.name, slowID, time.Time{}, tEnd) {
		if size := m.segmentSize(s.seg); size > 0 && s.Bytes == int64(size) {
			rates = append(rates, uint64(float64(size*8)/s.End.Sub(s.Start).Seconds()))
		}
	}
	slices.Sort(rates)
	if len(rates) > 0 {
		mv.slowRate = rates[len(rates)/2]
		if top := rates[len(rates)-1]; top > rate+rate/20 {
			t.Errorf("a segment from %s was served at %d bit/s, above its pace of %d", slowID, top, rate)
		}
	}

	reqs := o.steering(pg.name)
	if len(reqs) == 0 {
		t.Errorf("no steering request")
		return
	}
	segs := o.segments(pg.name, "", time.Time{}, tEnd)
	if len(segs) == 0 || segs[0].Server != slowID {
		t.Errorf("the player did not start on %s: its first segments %v", slowID, servers(segs, 4))
		return
	}
	r, why := findQoEMove(o, pg, lowest)
	if why != "" {
		t.Errorf("%s", why)
		return
	}
	ids := []string{slowID, fastID}
	mv.reported = readQoEReport(r.hit, pg.protocol, ids)
	if len(r.manifest.Priority) == 0 || r.manifest.Priority[0] != fastID || r.manifest.TTL != qoeShortTTL {
		t.Errorf("the reload that reported %s was answered PATHWAY-PRIORITY %v TTL %d, not %s first with the short TTL %d",
			mv.reported, r.manifest.Priority, r.manifest.TTL, fastID, qoeShortTTL)
	}

	// Before the move, every segment from the throttled pathway.
	firstSlow := segs[0]
	for _, s := range segs {
		if !s.Start.Before(r.End) {
			break
		}
		if s.Server != slowID {
			t.Errorf("segment %d came from %s before the move", s.seg, s.Server)
			continue
		}
		mv.slowSegs++
	}

	// The next segments: from the other pathway, until the next answer.
	var next time.Time // the end of the answer after the move's, or tEnd
	for _, q := range reqs {
		if q.Start.After(r.End) {
			next = q.End
			break
		}
	}
	if next.IsZero() {
		next = tEnd
	}
	after := o.segments(pg.name, "", r.End, next)
	// A segment asked for just as the answer left may still go to the
	// throttled pathway: the player reads the answer a moment later.
	const reading = 250 * time.Millisecond
	i := slices.IndexFunc(after, func(s mediaHit) bool { return s.Server == fastID })
	if i < 0 {
		t.Errorf("no segment from %s between the answer that put it first and the next answer (%d segments: %v)", fastID, len(after), servers(after, 8))
		return
	}
	for _, s := range after {
		if s.Server != fastID && s.Start.After(r.End.Add(reading)) {
			t.Errorf("segment %d came from %s %v after the answer that put %s first", s.seg, s.Server, s.Start.Sub(r.End).Round(time.Millisecond), fastID)
		}
	}
	firstFast := after[i]
	if d := firstFast.Start.Sub(r.End); d > 6*time.Second {
		t.Errorf("the first segment from %s came %v after the answer that put it first", fastID, d.Round(time.Millisecond))
	}
	mv.toReload = r.Start.Sub(firstSlow.Start)
	mv.toFast = firstFast.Start.Sub(firstSlow.Start)
	mv.fastPlayed = o.played(pg.name, firstFast.Start, firstFast.Start.Add(qoeShortTTL*time.Second))

	// After the move: tolerated, counted and logged.
	for _, q := range reqs {
		if !q.Start.After(r.Start) {
			continue
		}
		if len(q.manifest.Priority) > 0 && q.manifest.Priority[0] == slowID {
			mv.back++
		}
		mv.answers = append(mv.answers, fmt.Sprintf("+%.1fs %s, read as %s -> %s TTL %d", q.Start.Sub(r.Start).Seconds(), playerParams(q.hit, pg.protocol),
			readQoEReport(q.hit, pg.protocol, ids), strings.Join(q.manifest.Priority, ","), q.manifest.TTL))
	}
	last := ""
	for _, s := range o.segments(pg.name, "", firstFast.Start, tEnd) {
		if s.Server == slowID && last == fastID {
			mv.returns++
		}
		last = s.Server
	}
	mv.lastPathway = last
	t.Logf("started on %s (%d segments, served at a median %d bit/s); the reload %v after its first segment there reported %s and was answered %v TTL %d; first segment from %s %v after that answer (%v after the first from %s); played %.1f s in the %d s after",
		slowID, mv.slowSegs, mv.slowRate, mv.toReload.Round(time.Millisecond), mv.reported, r.manifest.Priority, r.manifest.TTL,
		fastID, firstFast.Start.Sub(r.End).Round(time.Millisecond), mv.toFast.Round(time.Millisecond), slowID, mv.fastPlayed, qoeShortTTL)
	t.Logf("after the move: %d answers put %s first again, the player went back to it %d times, its last segment from %s; answers: %s",
		mv.back, slowID, mv.returns, last, strings.Join(mv.answers, "; "))
}

// segmentSize is segment n's size in bytes, 0 when it cannot be read.
func (m *media) segmentSize(n int) int {
	st, err := os.Stat(filepath.Join(m.dir, fmt.Sprintf("seg_%d.m4s", n)))
	if err != nil {
		return 0
	}
	return int(st.Size())
}

// playerParams is the pathway and throughput parameters of a request as
// the player wrote them, decoded, for the log.
func playerParams(h hit, protocol string) string {
	q := query(h.Query)
	prefix := "_HLS_"
	if protocol == "dash" {
		prefix = "_DASH_"
	}
	return "pathway=" + q[prefix+"pathway"] + " throughput=" + q[prefix+"throughput"]
}

// servers lists the pathways of the first n segments, for a message.
func servers(segs []mediaHit, n int) []string {
	var out []string
	for _, s := range segs[:min(n, len(segs))] {
		out = append(out, fmt.Sprintf("%d@%s", s.seg, s.Server))
	}
	return out
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
