package players

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/waisteer/waisteer/internal/fastserve"
	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/store"
)

// The front tests (issue 13): players that cannot steer, served by
// waisteer's front (internal/front) for a pool of three clones of one
// pathway, each on a loopback address of its own, checked every second
// and down after two failed checks, as the pool test's.
//
// frontSetup is one such test: the front's address, the pool's name (also
// the prefix of the media's paths), and its edges.
type frontSetup struct {
	name    string
	ip      string // the front's address; it listens on port 80, as the edges do (443 over HTTPS)
	edges   []pathwaySpec
	weights map[string]uint32
	sv      *serving // how the front, and the edges' content, are reached
}

// frontCloneFrom is the pool's clone_from: the content description's one
// pathway, of which every edge is a clone (its host on the edge's address).
const frontCloneFrom = "cdn"

// newFrontSetup gives the test's edges 127.0.0.<10n+k>, k 2 to 4, and the
// front 127.0.0.<10n>: addresses no other test of the package uses. The
// first edge weighs so much more than the others that it is first for all
// but two sessions in a million (w/Σw): a new viewer goes to it while it is
// up, so that a new viewer sent elsewhere after its kill was sent there
// because the pool saw it down.
func newFrontSetup(name string, n int) *frontSetup {
	fs := &frontSetup{name: name, ip: fmt.Sprintf("127.0.0.%d", 10*n), weights: map[string]uint32{}, sv: plainHTTP()}
	for k := 2; k <= 4; k++ {
		id := fmt.Sprintf("edge-%d", k-1)
		fs.edges = append(fs.edges, pathwaySpec{id: id, ip: fmt.Sprintf("127.0.0.%d", 10*n+k), base: frontCloneFrom})
		fs.weights[id] = 1
	}
	fs.weights["edge-1"] = 1_000_000
	return fs
}

func (fs *frontSetup) edgeAt(host string) (pathwaySpec, bool) {
	for _, e := range fs.edges {
		if e.ip == host {
			return e, true
		}
	}
	return pathwaySpec{}, false
}

func (fs *frontSetup) playlistPath() string { return "/" + fs.name + "/hls/master.m3u8" }

func (fs *frontSetup) frontURL() string { return fs.sv.scheme + "://" + fs.ip + fs.playlistPath() }

// port is the scheme's default port, which the front and the edges'
// content listen on, so that URLs name none.
func (fs *frontSetup) port() string {
	if fs.sv.tls != nil {
		return "443"
	}
	return pathwayPort
}

func (fs *frontSetup) poolConfig() pool.Config {
	c := pool.Config{
		Name: fs.name, Path: "/pool/" + fs.name, TTL: poolTTL,
		CheckEvery: poolCheckEvery, CheckTimeout: poolCheckTimeout, DownAfter: poolDownAfter,
		CloneFrom: frontCloneFrom, Assign: pool.AssignRendezvous,
	}
	for _, e := range fs.edges {
		c.Edges = append(c.Edges, pool.Edge{Pathway: e.id, Weight: fs.weights[e.id], Host: e.ip, CheckURL: "http://" + e.authority() + "/health"})
	}
	return c
}

// order is the session's rendezvous order (internal/pool's doc.go,
// computed in pool_servers_test.go from its text) over the edges listed.
func (fs *frontSetup) order(session [16]byte, listed func(string) bool) []string {
	return rendezvousOrderOf(session, fs.edges, fs.weights, listed)
}

// originPlaylist is the multivariant playlist as the origin writes it: no
// steering tag, one variant whose URI is relative, so that a player
// resolves it against wherever it got the playlist from.
func (m *media) originPlaylist() []byte {
	var b strings.Builder
	b.WriteString("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n")
	fmt.Fprintf(&b, "#EXT-X-STREAM-INF:BANDWIDTH=%d,AVERAGE-BANDWIDTH=%d,CODECS=\"%s\",RESOLUTION=%dx%d,FRAME-RATE=%d.000,STABLE-VARIANT-ID=\"%s\"\n",
		m.bandwidth, m.average, m.codecs, width, height, fps, stableVariantID)
	b.WriteString("video/media.m3u8\n")
	return []byte(b.String())
}

// contentHandler is what the origin and every edge serve: the playlist as
// the origin wrote it, the live media playlist and the segments
// (pathwayHandler, under /<name>/hls/video/), and /health.
func (m *media) contentHandler(fs *frontSetup) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+fs.playlistPath(), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Write(m.originPlaylist())
	})
	mux.Handle("/", m.pathwayHandler())
	return withHealth(mux)
}

// frontHit is one answer of the front, with its Location.
type frontHit struct {
	Path, Query, UA, Location string
	Status                    int
	Start, End                time.Time
	Body                      []byte
	TLS                       bool
}

type frontLog struct {
	mu   sync.Mutex
	hits []frontHit
}

func (l *frontLog) all() []frontHit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hits)
}

// startFront starts waisteer in-process with the setup's pool and a front
// for its playlist, whose origin is an HTTP server on loopback serving the
// content, on the bbolt store, behind fasthttp as `waisteer serve` runs
// it, on fs.ip port 80. When files is set, the same address also serves
// the pages and the players (so that a page reads the front's playlist
// from its own origin). It returns the front's log.
func startFront(t *testing.T, fs *frontSetup, originURL string, files bool) *frontLog {
	t.Helper()
	org, err := origin.New(originURL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "waisteer.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.NewTextHandler(&logWriter{t: t, prefix: "waisteer: "}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := server.Config{
		Pools:  []pool.Config{fs.poolConfig()},
		Front:  &server.FrontConfig{Origin: org, Playlists: []server.FrontPlaylist{{Path: fs.playlistPath(), Pool: fs.name}}},
		Logger: logger,
	}
	srv, err := server.New(context.Background(), cfg, st, store.NewLoads())
	if err != nil {
		t.Fatalf("starting waisteer: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("closing waisteer: %v", err)
		}
	})
	ln, _ := fs.sv.listen(t, fs.ip+":"+fs.port())
	fsrv := srv.FastServer(server.FastLimits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10, Logger: logger})
	waisteer := fsrv.Handler
	static := fasthttpadaptor.NewFastHTTPHandler(http.FileServer(http.Dir(".")))
	log := &frontLog{}
	fsrv.Handler = func(c *fasthttp.RequestCtx) {
		p := string(c.Path())
		if files && (strings.HasPrefix(p, "/pages/") || strings.HasPrefix(p, "/node_modules/")) {
			static(c)
			return
		}
		start := time.Now()
		waisteer(c)
		_, q, _ := bytes.Cut(c.Request.Header.RequestURI(), []byte{'?'})
		h := frontHit{Path: p, Query: string(q), UA: string(c.UserAgent()), Location: string(c.Response.Header.Peek("Location")),
			Status: c.Response.StatusCode(), Start: start, End: time.Now(), Body: bytes.Clone(c.Response.Body()), TLS: c.IsTLS()}
		log.mu.Lock()
		log.hits = append(log.hits, h)
		log.mu.Unlock()
	}
	done := make(chan struct{})
	go func() { defer close(done); fsrv.Serve(fastserve.Listener(ln)) }() // as serve serves it
	t.Cleanup(func() {
		fsrv.Shutdown()
		ln.Close()
		<-done
	})
	return log
}

// waitDropped asks the pool, with a session, every 50 ms until its answer
// no longer names the killed edge, and returns when that answer came
// (zero when it never did within limit).
func waitDropped(fs *frontSetup, session, killed string, limit time.Duration) time.Time {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		resp, err := fs.sv.client.Get(fs.sv.scheme + "://" + fs.ip + "/pool/" + fs.name + "?session=" + session)
		if err == nil {
			var m steeringManifest
			err = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if err == nil && len(m.Priority) > 0 && !slices.Contains(m.Priority, killed) {
				return time.Now()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}
}

// ffmpegRun is one ffmpeg opening the front's playlist.
type ffmpegRun struct {
	start, end time.Time
	out        string
	err        error
}

// runFFmpeg reads four seconds of the stream at u and writes them nowhere,
// with ffmpeg's own User-Agent (Lavf/…), which the front redirects; extra
// are input options (the TLS ones).
func runFFmpeg(ffmpeg, u string, extra ...string) ffmpegRun {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	r := ffmpegRun{start: time.Now()}
	args := append(append([]string{"-hide_banner", "-nostdin", "-loglevel", "info"}, extra...),
		"-i", u, "-t", "4", "-c", "copy", "-f", "null", "-")
	out, err := exec.CommandContext(ctx, ffmpeg, args...).CombinedOutput()
	r.end, r.out, r.err = time.Now(), string(out), err
	return r
}

// checkRedirected judges one ffmpeg run: the front answered its one
// request with a 302 to the same path on an edge's host (the scheme and
// the port, its default, kept), with a session of 32 hexadecimal digits (doc.go's wire format),
// or the one it asked with; that edge is the first of the session's order
// over the edges listed (the OTT seed's redirect on opening: the first
// pathway of the viewer's order); and ffmpeg read the playlist, the media
// playlist, the init segment and at least three segments from that edge
// alone, and nothing more from the front. It returns the edge, the
// session, and the time from ffmpeg's start to its first segment.
func checkRedirected(t *testing.T, fs *frontSetup, run ffmpegRun, flog *frontLog, hits *hitLog, asked string, listed func(string) bool) (pathwaySpec, string, time.Duration) {
	t.Helper()
	if run.err != nil {
		t.Fatalf("ffmpeg: %v\n%s", run.err, run.out)
	}
	var fronts []frontHit
	for _, h := range flog.all() {
		if !h.Start.Before(run.start) && !h.End.After(run.end) && h.Path == fs.playlistPath() {
			fronts = append(fronts, h)
		}
	}
	if len(fronts) != 1 {
		t.Fatalf("ffmpeg asked the front %d times, not once: %+v", len(fronts), fronts)
	}
	fh := fronts[0]
	if !strings.HasPrefix(fh.UA, "Lavf/") {
		t.Errorf("ffmpeg's User-Agent is %q, not libavformat's Lavf/…", fh.UA)
	}
	if fh.TLS != (fs.sv.tls != nil) {
		t.Errorf("ffmpeg reached the front over TLS %v, the front's scheme %s", fh.TLS, fs.sv.scheme)
	}
	if fh.Status != http.StatusFound {
		t.Fatalf("the front answered ffmpeg %d, not 302: %s", fh.Status, fh.Body)
	}
	loc, err := url.Parse(fh.Location)
	if err != nil {
		t.Fatalf("Location %q: %v", fh.Location, err)
	}
	edge, ok := fs.edgeAt(loc.Host)
	if !ok || loc.Scheme != fs.sv.scheme || loc.Path != fs.playlistPath() {
		t.Fatalf("Location %q is not the playlist's path on an edge's host (%v)", fh.Location, fs.edges)
	}
	session := query(loc.RawQuery)["session"]
	sb, ok := parseSession(session)
	if !ok || loc.RawQuery != "session="+session {
		t.Fatalf("Location %q carries no session of 32 hexadecimal digits alone", fh.Location)
	}
	if asked != "" && session != asked {
		t.Errorf("ffmpeg asked with session %s, and the Location carries %s", asked, session)
	}
	want := fs.order(sb, listed)
	if edge.id != want[0] {
		t.Errorf("redirected to %s (%s), not %s, the first of session %s's order %v", edge.id, edge.ip, want[0], session, want)
	}
	kinds := map[string]int{}
	var first time.Time
	for _, h := range hits.all() {
		// The pool's health checks are not ffmpeg's.
		if h.Start.Before(fh.End) || h.Start.After(run.end) || h.Path == "/health" {
			continue
		}
		if h.Server != edge.id || h.Host != edge.ip || h.TLS != (fs.sv.tls != nil) {
			t.Errorf("ffmpeg asked %s (host %q, TLS %v) for %s, not only %s over %s", h.Server, h.Host, h.TLS, h.Path, edge.id, fs.sv.scheme)
			continue
		}
		if h.Status != http.StatusOK {
			t.Errorf("%s answered %s with %d", h.Server, h.Path, h.Status)
		}
		file := h.Path[strings.LastIndex(h.Path, "/")+1:]
		switch {
		case h.Path == fs.playlistPath():
			kinds["multivariant"]++
		case file == "media.m3u8":
			kinds["media playlist"]++
		case file == "init.mp4":
			kinds["init"]++
		case strings.HasPrefix(file, "seg_"):
			kinds["segment"]++
			if first.IsZero() {
				first = h.Start
			}
		default:
			kinds["other"]++
		}
	}
	if kinds["multivariant"] != 1 || kinds["media playlist"] < 1 || kinds["init"] < 1 || kinds["segment"] < 3 {
		t.Errorf("ffmpeg's requests to %s: %v, not the playlist, the media playlist, the init segment and 3 segments or more\n%s", edge.id, kinds, run.out)
	}
	t.Logf("ffmpeg: 302 to %s (%s), session %s, order %v; from %s: %v", edge.id, edge.ip, session, want, edge.id, kinds)
	if first.IsZero() {
		return edge, session, -1
	}
	return edge, session, first.Sub(run.start)
}

// TestFFmpegThroughTheFront shows the OTT seed's redirect on opening with
// a player that cannot steer (issue 13, "Real clients on loopback"):
// ffmpeg, with its own User-Agent (Lavf/…, which the front redirects),
// opens the front's multivariant playlist for a pool of three clones, is
// sent to the first pathway of its session's order, and reads every
// segment from there (the edges' logs). Then that edge's server stops;
// once the pool's checks see it down (down_after 2 checks, 1 s apart), a
// new ffmpeg is sent to another edge, the first of its order without the
// killed one, and one that comes back with the first session keeps it and
// is sent to the next of that session's order.
func TestFFmpegThroughTheFront(t *testing.T) { ffmpegThroughTheFront(t, newFrontSetup("ffmpeg", 7)) }

// ffmpegThroughTheFront is TestFFmpegThroughTheFront for fs. Over HTTPS
// the front and the edges' content are on 443 (the redirect keeps the
// request's scheme and port), the edges' /health on 80 still, for the
// pool's checks, and ffmpeg verifies the test CA's certificates.
func ffmpegThroughTheFront(t *testing.T, fs *frontSetup) {
	tl := requireTools(t)
	began := time.Now()
	m := makeMedia(t, tl.ffmpeg)
	m.epoch = time.Now().Add(-30 * time.Second)

	hits := &hitLog{}
	servers := map[string][]*httpServer{}
	for _, e := range fs.edges {
		h := hits.logged(e.id, false, m.contentHandler(fs))
		servers[e.id] = []*httpServer{serve(t, e.ip+":"+pathwayPort, h)}
		if fs.sv.tls != nil {
			ln, _ := fs.sv.listen(t, e.ip+":"+fs.port())
			servers[e.id] = append(servers[e.id], serveOn(t, ln, h))
		}
	}
	org := serve(t, "127.0.0.1:0", hits.logged("origin", false, m.contentHandler(fs)))
	flog := startFront(t, fs, "http://"+org.addr, false)
	// The pool's first checks: every edge up.
	time.Sleep(2 * poolCheckEvery)
	all := func(string) bool { return true }
	if fs.sv.tls != nil {
		// ffmpeg verifies: without the test's CA it refuses the front.
		r := runFFmpeg(tl.ffmpeg, fs.frontURL(), "-tls_verify", "1")
		if r.err == nil {
			t.Fatalf("ffmpeg read the front without the test's CA:\n%s", r.out)
		}
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		why := lines[len(lines)-1]
		if i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(strings.ToLower(l), "certificate") }); i >= 0 {
			why = lines[i]
		}
		t.Logf("without the test's CA, ffmpeg refused the front: %s", why)
	}

	run1 := runFFmpeg(tl.ffmpeg, fs.frontURL(), fs.sv.ffmpeg()...)
	edge1, session1, firstSeg1 := checkRedirected(t, fs, run1, flog, hits, "", all)
	if t.Failed() {
		return
	}
	if edge1.id != "edge-1" {
		t.Errorf("the first ffmpeg went to %s; edge-1 weighs 10⁶ against 1 and 1", edge1.id)
	}

	killed := time.Now()
	for _, s := range servers[edge1.id] {
		s.stop()
	}
	dropped := waitDropped(fs, session1, edge1.id, dropLimit+2*time.Second)
	if dropped.IsZero() {
		t.Fatalf("the pool still names %s %v after its server stopped", edge1.id, time.Since(killed).Round(time.Millisecond))
	}
	if d := dropped.Sub(killed); d > dropLimit {
		t.Errorf("the pool dropped %s %v after its server stopped, more than %v", edge1.id, d.Round(time.Millisecond), dropLimit)
	}
	without := func(id string) bool { return id != edge1.id }

	run2 := runFFmpeg(tl.ffmpeg, fs.frontURL(), fs.sv.ffmpeg()...)
	edge2, _, firstSeg2 := checkRedirected(t, fs, run2, flog, hits, "", without)
	if edge2.id == edge1.id {
		t.Errorf("the new ffmpeg was sent to the killed %s", edge1.id)
	}

	run3 := runFFmpeg(tl.ffmpeg, fs.frontURL()+"?session="+session1, fs.sv.ffmpeg()...)
	sb, _ := parseSession(session1)
	edge3, _, _ := checkRedirected(t, fs, run3, flog, hits, session1, without)
	if next := fs.order(sb, all)[1]; edge3.id != next {
		t.Errorf("ffmpeg with the first session went to %s, not %s, the next of its order", edge3.id, next)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "ffmpeg through the front over %s (pool of 3 clones, checks every %v, down_after %d), run of %v:\n", fs.sv.scheme, poolCheckEvery, poolDownAfter, time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "  first ffmpeg: to %s, its first segment %s after it started, ran %s\n", edge1.id, roundMs(firstSeg1), roundMs(run1.end.Sub(run1.start)))
	fmt.Fprintf(&b, "  %s stopped: the pool's answer without it %s later\n", edge1.id, roundMs(dropped.Sub(killed)))
	fmt.Fprintf(&b, "  new ffmpeg: to %s, %s after the kill, its first segment %s after it started\n", edge2.id, roundMs(run2.start.Sub(killed)), roundMs(firstSeg2))
	fmt.Fprintf(&b, "  ffmpeg with the first session: to %s", edge3.id)
	t.Log(b.String())
}

// backupHosts reads a multivariant playlist of backup variants: the hosts
// of its variants' URIs, in the order listed (the primary first, then the
// first backup, then the second, internal/front/hls's layout).
func backupHosts(body []byte) []string {
	var hosts []string
	lines := strings.Split(string(body), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "#EXT-X-STREAM-INF:") && i+1 < len(lines) {
			if u, err := url.Parse(strings.TrimSpace(lines[i+1])); err == nil {
				hosts = append(hosts, u.Host)
			}
		}
	}
	return hosts
}

// TestHLSjsBackupsThroughTheFront shows the OTT seed's backup variants
// with a player that fails over between variants but does not steer
// (issue 13, "Real clients on loopback"): hls.js with its content-steering
// controller switched off opens the front's playlist for a pool of three
// clones with the query flag that makes it a backup-variant player. The
// front serves the variant on the viewer's first edge, then on the next
// two of its order; hls.js plays from the first; when that edge's server
// stops, it plays on from its first backup, the next of its order.
func TestHLSjsBackupsThroughTheFront(t *testing.T) {
	tl := requireTools(t)
	began := time.Now()
	m := makeMedia(t, tl.ffmpeg)
	m.epoch = time.Now().Add(-30 * time.Second)
	fs := newFrontSetup("hlsbackup", 8)

	hits := &hitLog{}
	servers := map[string]*httpServer{}
	for _, e := range fs.edges {
		servers[e.id] = serve(t, e.ip+":"+pathwayPort, hits.logged(e.id, false, m.contentHandler(fs)))
	}
	org := serve(t, "127.0.0.1:0", hits.logged("origin", false, m.contentHandler(fs)))
	flog := startFront(t, fs, "http://"+org.addr, true)
	time.Sleep(2 * poolCheckEvery) // the pool's first checks: every edge up

	ws := startChromium(t, tl.chromium)
	src := fs.frontURL() + "?waisteer_mode=backup"
	d := startDriver(t, tl.node, ws, []pageRun{{Name: fs.name, URL: "http://" + fs.ip + "/pages/hlsjs-backup.html?src=" + url.QueryEscape(src)}})
	snapshot := func() *observed { return &observed{hits: hits.all(), lines: d.all()} }
	started := time.Now()

	// The playlist as served: three copies of the variant, on three
	// different edges, edge-1 first (its weight, as in the ffmpeg test).
	var served []string
	var order []pathwaySpec
	deadline := time.Now().Add(30 * time.Second)
	for len(served) == 0 && time.Now().Before(deadline) {
		for _, h := range flog.all() {
			if h.Path == fs.playlistPath() && h.Status == http.StatusOK {
				served = backupHosts(h.Body)
				t.Logf("the front's playlist for hls.js:\n%s", h.Body)
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, host := range served {
		if e, ok := fs.edgeAt(host); ok && !slices.ContainsFunc(order, func(p pathwaySpec) bool { return p.id == e.id }) {
			order = append(order, e)
		}
	}
	if len(served) != 3 || len(order) != 3 || order[0].id != "edge-1" {
		t.Fatalf("the front's playlist of backups names the hosts %v, not edge-1's then the other two edges' (%v)", served, fs.edges)
	}

	// Phase 1: hls.js plays from the playlist's edges.
	var o *observed
	for o = snapshot(); ; o = snapshot() {
		segs := o.segments(fs.name, "", time.Time{}, time.Time{})
		if len(segs) >= 4 && o.played(fs.name, started, time.Now()) >= 3 {
			break
		}
		if time.Since(started) > 60*time.Second {
			t.Fatalf("hls.js did not play 3 s from the front's playlist within 60 s: %d segments\n%s", len(segs), o.diagnose())
		}
		time.Sleep(250 * time.Millisecond)
	}
	// hls.js 1.7.4 without its steering controller does not keep to the
	// first copy (README.md): the edge to kill is the one it plays from.
	segs := o.segments(fs.name, "", time.Time{}, time.Time{})
	var from []string
	for _, s := range segs {
		if len(from) == 0 || from[len(from)-1] != s.Server {
			from = append(from, s.Server)
		}
	}
	playing := slices.IndexFunc(order, func(p pathwaySpec) bool { return p.id == segs[len(segs)-1].Server })
	if playing < 0 {
		t.Fatalf("hls.js plays from %s, which the playlist does not list", segs[len(segs)-1].Server)
	}
	primary := order[playing]
	t.Logf("before the kill, hls.js took its segments from %v (the playlist's order %s, %s, %s)", from, order[0].id, order[1].id, order[2].id)

	// Phase 2: the primary's server stops.
	killed := time.Now()
	servers[primary.id].stop()
	for o = snapshot(); ; o = snapshot() {
		segs := o.segments(fs.name, "", killed, time.Time{})
		if time.Since(killed) > 8*time.Second && len(segs) >= 4 && o.played(fs.name, killed, time.Now()) >= 4 {
			break
		}
		if time.Since(killed) > 40*time.Second {
			t.Fatalf("hls.js did not play on 4 s within 40 s of %s's stop: %d segments since\n%s", primary.id, len(segs), o.diagnose())
		}
		time.Sleep(250 * time.Millisecond)
	}
	tEnd := time.Now()
	d.stop(t)
	o = snapshot()
	segs = o.segments(fs.name, "", killed, tEnd)
	next := segs[0].Server
	for _, s := range segs {
		if s.Server == primary.id || s.Server != next {
			t.Errorf("segment %d came from %s after %s stopped; hls.js moved to %s first", s.seg, s.Server, primary.id, next)
		}
	}
	at := slices.IndexFunc(order, func(p pathwaySpec) bool { return p.id == next })
	if at < 0 {
		t.Errorf("hls.js moved to %s, which the playlist does not list", next)
	}
	move := segs[0].Start.Sub(killed)
	if move > 10*time.Second {
		t.Errorf("the first segment from another edge came %v after the kill", move.Round(time.Millisecond))
	}
	if p := o.played(fs.name, tEnd.Add(-3*time.Second), tEnd); p < 1 {
		t.Errorf("played %.1f s in the last 3 s", p)
	}
	for _, h := range flog.all() {
		if h.Path == fs.playlistPath() && h.Start.After(killed) {
			t.Errorf("hls.js asked the front again after the kill: it should fail over within the playlist it has")
		}
	}
	stall := o.stall(fs.name, killed, tEnd)
	t.Logf("hls.js without steering, on backup variants: order %s, %s, %s; killed %s (copy %d), moved to %s (copy %d) %s later; longest stall %s; run of %v",
		order[0].id, order[1].id, order[2].id, primary.id, playing+1, next, at+1, roundMs(move), roundMs(stall), time.Since(began).Round(time.Second))
}
