package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/verify"
)

// The front (issue 13): the station seed's line added to a multivariant
// playlist and an MPD as they are served; the OTT seed's redirect on
// opening and backup variants for players that cannot steer.

const frontMultivariant = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=640x360\nlow/index.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=2560000,RESOLUTION=1280x720\nhttps://origin.example/hls/high/index.m3u8\n"

const frontMedia = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:10\n#EXTINF:2.0,\nseg10.ts\n#EXTINF:2.0,\nseg11.ts\n"

const frontMPD = `<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT10S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
  <Period id="p0">
  </Period>
</MPD>
`

// frontEnv is a server with the station seed's pool and a front over a
// directory origin holding the files above.
type frontEnv struct {
	*poolEnv
	dir string
}

func newFrontEnv(t *testing.T, c pool.Config) *frontEnv {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"hls/live.m3u8": frontMultivariant, "hls/low/index.m3u8": frontMedia, "dash/live.mpd": frontMPD, "hls/junk.m3u8": "<html>login</html>"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &poolEnv{t: t, loads: store.NewLoads(), logs: &syncBuffer{}}
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{c}, OperatorToken: testToken,
		Front:  &FrontConfig{Origin: og, Playlists: []FrontPlaylist{{Path: "/hls/"}, {Path: "/dash/live.mpd"}}},
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}, store.NewMemory(), e.loads)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = serveTest(t, srv)
	t.Cleanup(func() { e.ts.Close(); srv.Close(context.Background()) })
	return &frontEnv{poolEnv: e, dir: dir}
}

func (e *frontEnv) get(path, ua string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("User-Agent", ua)
	c := &http.Client{Transport: e.ts.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

const chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36"

// TestFrontSteeringLine: the multivariant playlist and the MPD are served
// with the pool's line (the station seed: SERVER-URI the pool's path,
// PATHWAY-ID clone_from), the media playlist as it is, and with no edges
// the playlist as the origin wrote it.
func TestFrontSteeringLine(t *testing.T) {
	e := newFrontEnv(t, seedPool(nil, nil))
	resp, b := e.get("/hls/live.m3u8", chrome)
	want := strings.Replace(frontMultivariant, "#EXT-X-VERSION:7\n", "#EXT-X-VERSION:7\n#EXT-X-CONTENT-STEERING:SERVER-URI=\"/api/v1/steering\",PATHWAY-ID=\".\"\n", 1)
	if resp.StatusCode != 200 || string(b) != want || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("the multivariant playlist: %d (ACAO %q)\n%s\nwant\n%s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b, want)
	}
	if _, b := e.get("/hls/low/index.m3u8", chrome); string(b) != frontMedia {
		t.Errorf("the media playlist was changed:\n%s", b)
	}
	_, b = e.get("/dash/live.mpd", chrome)
	wantMPD := strings.Replace(frontMPD, "  <Period", "  <ContentSteering defaultServiceLocation=\".\" queryBeforeStart=\"false\">/api/v1/steering</ContentSteering>\n  <Period", 1)
	if string(b) != wantMPD {
		t.Errorf("the MPD:\n%s\nwant\n%s", b, wantMPD)
	}

	off := seedPool(nil, nil)
	off.Edges = nil
	e = newFrontEnv(t, off)
	if _, b := e.get("/hls/live.m3u8", chrome); string(b) != frontMultivariant {
		t.Errorf("a pool with no edges changed the playlist:\n%s", b)
	}
	// Not a playlist, a path outside the configured ones.
	if resp, b := e.get("/hls/junk.m3u8", chrome); resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "origin_not_playlist") {
		t.Errorf("a page that is no playlist: %d %s", resp.StatusCode, b)
	}
	if resp, _ := e.get("/other/live.m3u8", chrome); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a path outside the front's: %d", resp.StatusCode)
	}
	if resp, _ := e.get("/hls/missing.m3u8", chrome); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a playlist the origin does not have: %d", resp.StatusCode)
	}
}

var locationSession = regexp.MustCompile(`[?&]session=([0-9a-f]{32})`)

// TestFrontRedirect: a player that cannot steer (ffmpeg's libavformat,
// VLC, none at all) is sent to the same path on the first pathway of its
// order (the OTT seed's redirect on opening), with its session in the
// Location: the same session comes back to the same pathway, a forged one
// gets a fresh session.
func TestFrontRedirect(t *testing.T) {
	e := newFrontEnv(t, seedPool(nil, nil))
	port := e.ts.URL[strings.LastIndexByte(e.ts.URL, ':'):]
	for _, ua := range []string{"Lavf/60.16.100", "VLC/3.0.20 LibVLC/3.0.20", "", "mpv 0.37.0", "GStreamer souphttpsrc", chrome + " " + "x"} {
		mode := ""
		if strings.HasPrefix(ua, "Mozilla") {
			mode = "&waisteer_mode=redirect" // a player that steers, forced
		}
		resp, _ := e.get("/hls/live.m3u8?x=1"+mode, ua)
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("%q: %d, want 302", ua, resp.StatusCode)
		}
		loc := resp.Header.Get("Location")
		u, err := url.Parse(loc)
		if err != nil || u.Path != "/hls/live.m3u8" || !strings.HasSuffix(u.Host, ".example"+port) || strings.Contains(loc, "waisteer_mode") || !strings.HasPrefix(u.RawQuery, "x=1&session=") {
			t.Fatalf("%q: Location %q", ua, loc)
		}
		s := locationSession.FindStringSubmatch(loc)
		if s == nil {
			t.Fatalf("%q: Location %q carries no session", ua, loc)
		}
		m := e.steer("/api/v1/steering?session=" + s[1])
		if host := strings.TrimSuffix(u.Host, port); host != m.Priority[0]+".edges.example" && !(m.Priority[0] == "bunny" && host == "kettle-cdn.example") {
			t.Errorf("%q: sent to %s, the session's first is %s", ua, host, m.Priority[0])
		}
		again, _ := e.get("/hls/live.m3u8?x=1&session="+s[1]+mode, ua)
		if again.Header.Get("Location") != loc {
			t.Errorf("%q: back with its session: %q, first %q", ua, again.Header.Get("Location"), loc)
		}
	}
	forged, _ := e.get("/hls/live.m3u8?session=00112233445566778899aabbccddeeff", "Lavf/60")
	if strings.Contains(forged.Header.Get("Location"), "00112233445566778899aabbccddeeff") {
		t.Errorf("a forged session was kept: %s", forged.Header.Get("Location"))
	}
	e.get("/hls/live.m3u8", chrome) // one that steers
	_, mb := e.do("GET", "/metrics", "", nil)
	for _, want := range []string{`waisteer_front_opens_total{class="redirect",family="ffmpeg"}`, `waisteer_front_opens_total{class="steers",family="chrome"} 1`,
		`waisteer_front_opens_total{class="redirect",family="none"}`, "waisteer_front_steering_share 0.", "waisteer_front_redirects_total"} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var st FrontStatus
	resp, b := e.do("GET", "/v1/front/status", "", http.Header{"Authorization": {"Bearer " + testToken}})
	if resp.StatusCode != 200 || json.Unmarshal(b, &st) != nil || st.ByClass["redirect"] < 6 || st.Redirects < 6 {
		t.Errorf("status %d %s", resp.StatusCode, b)
	}
}

// TestFrontSpread: over 400 000 viewers of a pool of N = 4 edges of equal
// weight, each of the N − 1 others takes 1/(N − 1) of a failed edge's
// viewers within ±1 % absolute (the OTT seed's capacity rule), through
// redirects (the viewer's next pathway once its first is down) and through
// backup variants (the first backup of the viewer's playlist) alike. The
// sessions are random: with a failed edge's 100 000 viewers, ±1 % is 6.7
// standard deviations of a share (100 000 of the seed's viewers, a
// quarter each, left it at 3.3, and a run here failed at 0.345).
func TestFrontSpread(t *testing.T) {
	c := seedPool(nil, nil)
	c.Edges = []pool.Edge{{Pathway: "a", Host: "a.example", Weight: 1}, {Pathway: "b", Host: "b.example", Weight: 1},
		{Pathway: "c", Host: "c.example", Weight: 1}, {Pathway: "d", Host: "d.example", Weight: 1}}
	e := newFrontEnv(t, c)
	ph := e.srv.poolNamed("")
	pf := &poolFront{s: e.srv, name: ""}
	const viewers = 400_000
	var queries []string
	backups := map[string]int{}
	for range viewers {
		o, err := pf.Open(context.Background(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if o.Order[0] == "a" {
			queries = append(queries, o.Query)
			backups[o.Order[1]]++
		}
	}
	ph.Pool().SetUp("a", false)
	moved := map[string]int{}
	for _, q := range queries {
		o, err := pf.Open(context.Background(), q, nil)
		if err != nil {
			t.Fatal(err)
		}
		moved[o.Order[0]]++
	}
	for _, p := range []string{"b", "c", "d"} {
		for what, m := range map[string]map[string]int{"redirect": moved, "backup": backups} {
			share := float64(m[p]) / float64(len(queries))
			if math.Abs(share-1.0/3) > 0.01 {
				t.Errorf("%s: %s takes %.4f of a's %d viewers, want 1/3 ± 0.01", what, p, share, len(queries))
			}
		}
	}
	if moved["a"] != 0 {
		t.Errorf("%d viewers still sent to a while it is down", moved["a"])
	}
}

// TestFrontBackups: a player that fails over between variants but does
// not steer gets its own playlist (the OTT seed's backup variants): each
// variant on the first pathway of its order, then on the second, then the
// third, with the variants' attributes, and no steering line; the same
// session gets the same playlist.
func TestFrontBackups(t *testing.T) {
	e := newFrontEnv(t, seedPool(nil, nil))
	port := e.ts.URL[strings.LastIndexByte(e.ts.URL, ':'):]
	resp, b := e.get("/hls/live.m3u8", "Mozilla/5.0 (SMART-TV; Linux; Tizen 2.4.0)")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("Cache-Control"), b)
	}
	// Which order? The session is not in the playlist; the hosts say.
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var hosts []string
	for _, l := range lines {
		if strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") {
			u, _ := url.Parse(l)
			hosts = append(hosts, strings.TrimSuffix(u.Host, port)+u.Path)
		}
	}
	if len(hosts) != 6 || strings.Contains(string(b), "CONTENT-STEERING") {
		t.Fatalf("want 2 variants × 3 pathways and no steering line:\n%s", b)
	}
	host := func(p string) string {
		if p == "bunny" {
			return "kettle-cdn.example"
		}
		return p + ".edges.example"
	}
	// The seed's pool: edge-1 and edge-2 in some order, then bunny.
	var order []string
	for _, h := range []string{hosts[0], hosts[2], hosts[4]} {
		order = append(order, strings.SplitN(h, "/", 2)[0])
	}
	if order[2] != host("bunny") || order[0] == order[1] {
		t.Fatalf("the pathways %v: want both edges, then bunny", order)
	}
	for i, want := range []string{"/hls/low/index.m3u8", "/hls/high/index.m3u8"} {
		for k := range 3 {
			if got := hosts[2*k+i]; got != order[k]+want {
				t.Errorf("variant %d on pathway %d: %s, want %s%s", i, k, got, order[k], want)
			}
		}
	}
	if n := strings.Count(string(b), "#EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=640x360\n"); n != 3 {
		t.Errorf("the low variant's attributes appear %d times, want 3", n)
	}
}

// TestFrontEnergyRoom: a playlist steered by an energy room carries §8.2's
// tag and its MPD §8.3's element, byte for byte as decision.HLSTag and
// decision.DASHElement write them; a player that cannot steer is sent to
// the first pathway of a decision made and stored for it, whose URI rides
// in WAI-Decision and verifies (§9).
func TestFrontEnergyRoom(t *testing.T) {
	e, bases := newFrontRoomEnv(t, nil)
	_, b := e.get("/hls/live.m3u8")
	want := strings.Replace(frontMultivariant, "#EXT-X-VERSION:7\n", "#EXT-X-VERSION:7\n"+decision.HLSTag(e.sc.Policy)+"\n", 1)
	if string(b) != want {
		t.Errorf("the room's playlist:\n%s\nwant\n%s", b, want)
	}
	_, b = e.get("/hls/live.mpd")
	if wantMPD := strings.Replace(frontMPD, "  <Period", "  "+decision.DASHElement(e.sc.Policy)+"\n  <Period", 1); string(b) != wantMPD {
		t.Errorf("the room's MPD:\n%s\nwant\n%s", b, wantMPD)
	}
	req, _ := http.NewRequest("GET", e.ts.URL+"/hls/live.m3u8", nil)
	req.Header.Set("User-Agent", "Lavf/60.16.100")
	noFollow := &http.Client{Transport: e.ts.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, dec := resp.Header.Get("Location"), resp.Header.Get("WAI-Decision")
	if resp.StatusCode != http.StatusFound || dec == "" {
		t.Fatalf("ffmpeg: %d, Location %q, WAI-Decision %q", resp.StatusCode, loc, dec)
	}
	raw := e.fetch(path(t, dec))
	d, err := decision.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	first := e.sc.Policy.Pathways[d.Priority[0]].ID
	if !strings.HasPrefix(loc, bases[first]+"/hls/live.m3u8?wai_session=") {
		t.Errorf("sent to %q, the decision's first is %s", loc, first)
	}
	in := verify.Input{Descriptor: e.sc.Room.DescriptorBytes, KeyLogHead: e.sc.Room.HeadBytes, Policy: e.sc.PolicyBytes, Decision: raw}
	for _, pw := range d.Pathways {
		for _, h := range pw.Records {
			in.Records = append(in.Records, e.fetch("/v1/records/"+h.String()))
		}
	}
	if _, err := verify.Verify(in); err != nil {
		t.Errorf("the redirect's decision does not verify: %v", err)
	}
}

// newFrontRoomEnv is an energy room whose front serves /hls/live.m3u8 and
// /hls/live.mpd from a directory origin, each pathway at its own base
// (returned), with its records posted; more configures the server further.
func newFrontRoomEnv(t *testing.T, more func(*Config)) (*env, map[string]string) {
	t.Helper()
	e := newEnv(t, scenario.Spec{Periods: 6}, false)
	e.stop()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "hls"), 0o755)
	os.WriteFile(filepath.Join(dir, "hls", "live.m3u8"), []byte(frontMultivariant), 0o644)
	os.WriteFile(filepath.Join(dir, "hls", "live.mpd"), []byte(frontMPD), 0o644)
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bases := map[string]string{}
	for _, id := range e.sc.Policy.IDs() {
		bases[id] = "http://" + id + ".cdn.example"
	}
	e.start(func(c *Config) {
		c.Front = &FrontConfig{Origin: og, Bases: bases, Playlists: []FrontPlaylist{{Path: "/hls/", Room: e.sc.Room.ID().String()}}}
		if more != nil {
			more(c)
		}
	})
	e.postRecords(e.sc.Records, http.StatusOK)
	return e, bases
}

// TestFrontConditional: the front's ETag is the origin's with the
// steering line's digest in it; If-None-Match with it is answered 304 (the
// origin's validator passed back), and a change of the line changes it.
func TestFrontConditional(t *testing.T) {
	e := newFrontEnv(t, seedPool(nil, nil))
	resp, _ := e.get("/hls/live.m3u8", chrome)
	etag := resp.Header.Get("ETag")
	if etag == "" || !strings.Contains(etag, "-ws") || !strings.Contains(resp.Header.Get("Vary"), "User-Agent") {
		t.Fatalf("ETag %q, Vary %q", etag, resp.Header.Get("Vary"))
	}
	req, _ := http.NewRequest("GET", e.ts.URL+"/hls/live.m3u8", nil)
	req.Header.Set("User-Agent", chrome)
	req.Header.Set("If-None-Match", etag)
	r2, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusNotModified || r2.Header.Get("ETag") != etag {
		t.Errorf("If-None-Match %s: %d, ETag %q", etag, r2.StatusCode, r2.Header.Get("ETag"))
	}
	// Media playlists keep the origin's own ETag.
	if resp, _ := e.get("/hls/low/index.m3u8", chrome); strings.Contains(resp.Header.Get("ETag"), "-ws") {
		t.Errorf("a media playlist's ETag was changed: %q", resp.Header.Get("ETag"))
	}
}

// TestFrontOriginFails: an origin that refuses, hangs or answers too much
// gives a 502 naming why, never a playlist without variants (issue 13,
// "Bad input").
func TestFrontOriginFails(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "#EXTM3U\n")
		w.Write(bytes.Repeat([]byte("#EXT-X-STREAM-INF:BANDWIDTH=1\nx.m3u8\n"), 100_000))
	}))
	t.Cleanup(big.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, c := range []struct{ base, code string }{
		{hang.URL, "origin_timeout"}, {big.URL, "origin_too_large"}, {closedURL, "origin_unreachable"},
	} {
		og, err := origin.New(c.base, origin.Options{Timeout: 300 * time.Millisecond, MaxBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(context.Background(), Config{Pools: []pool.Config{seedPool(nil, nil)},
			Front:  &FrontConfig{Origin: og, Playlists: []FrontPlaylist{{Path: "/hls/"}}},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store.NewMemory(), store.NewLoads())
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		start := time.Now()
		req := httptest.NewRequest("GET", "/hls/live.m3u8", nil)
		req.Header.Set("User-Agent", chrome)
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), `"`+c.code+`"`) || time.Since(start) > 2*time.Second {
			t.Errorf("%s: %d %s after %v, want 502 %s", c.code, w.Code, w.Body, time.Since(start), c.code)
		}
		srv.Close(context.Background())
	}
}

// TestFrontBudgets (issue 26 item 5): a room's front signs and stores a
// decision for each viewer it redirects on opening (the OTT seed), so the
// viewer's address spends the steering routes' budgets: past its budget of
// new sessions, a viewer without a session is answered 503 over_budget
// with Retry-After and nothing is decided; one that carries its session
// (wai_session) spends only the decisions' budget and is redirected.
func TestFrontBudgets(t *testing.T) {
	e, _ := newFrontRoomEnv(t, func(c *Config) { c.Limits = SteerLimits{AddressSessions: tiny(2)} })
	noFollow := &http.Client{Transport: e.ts.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	open := func(target string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", e.ts.URL+target, nil)
		req.Header.Set("User-Agent", "Lavf/60.16.100") // ffmpeg: redirected on opening
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	var session string
	for i := range 2 {
		resp := open("/hls/live.m3u8")
		if resp.StatusCode != http.StatusFound || resp.Header.Get("WAI-Decision") == "" {
			t.Fatalf("opening %d within the budget: %d", i, resp.StatusCode)
		}
		u, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		session = u.Query().Get("wai_session")
	}
	resp := open("/hls/live.m3u8")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get("WAI-Decision") != "" {
		t.Fatalf("a third new viewer from one address over a budget of 2: %d, Retry-After %q, WAI-Decision %q; want 503 with Retry-After and no decision",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("WAI-Decision"))
	}
	if resp := open("/hls/live.m3u8?wai_session=" + session); resp.StatusCode != http.StatusFound {
		t.Errorf("a viewer with its session: %d, want 302 (it starts no session)", resp.StatusCode)
	}
	if st := e.status(); st.Limited == nil || st.Limited.Refused["address_sessions"] != 1 {
		t.Errorf("the room's limited %+v, want refused address_sessions 1", st.Limited)
	}
}
