package players

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/store"
)

// The pools' settings: the station seed's measurement (1 s checks,
// down_after 2, ttl_s 10). A check of a stopped edge is refused at once, so
// the timeout only bounds a check of an edge that hangs.
const (
	poolTTL          = 10 // s
	poolCheckEvery   = time.Second
	poolCheckTimeout = 500 * time.Millisecond
	poolDownAfter    = 2
	cloneID          = "cdn-b-clone"
	cloneBase        = "cdn-b" // clone_from: the pathway the clone copies
	perVariantDir    = "per-variant"
	stableVariantID  = "video" // the variants' STABLE-VARIANT-ID (media_test.go)
	probeHeader      = "X-Players-Probe"
)

// Each pool's weights: the clone's is so much the larger that it is first
// for all but two sessions in a million (w/Σw, the station seed), so that
// every player that applies clones starts on it; cdn-a and cdn-b are then
// ordered by each session's own draw, half of the sessions each way.
var poolWeights = map[string]uint32{"cdn-a": 1, "cdn-b": 1, cloneID: 1_000_000}

// dropLimit is how long after a kill the pool may still name the killed
// edge: down_after failed checks a check interval apart, the first within
// an interval of the kill, each at most the timeout, and a second of slack
// for a loaded machine.
const dropLimit = poolDownAfter*poolCheckEvery + poolCheckTimeout + time.Second

// poolPage is one page steered by a pool of its own, whose edges are
// servers of its own: the test stops, for each page, the edge its player
// plays from, whichever its session put first.
type poolPage struct {
	pageSpec
	pws []pathwaySpec // cdn-a, cdn-b (the content description's), the clone
}

// poolPathwaysOf gives page i (from 0) its own addresses: 127.0.0.<i+1><k>,
// with k 2, 3 and 4 for cdn-a, cdn-b and the clone, as the energy test's
// 127.0.0.2 to .4 (which this test leaves alone). Chromium resolves
// nothing but 127.0.0.* (browser_test.go).
func poolPathwaysOf(i int) []pathwaySpec {
	ip := func(k int) string { return fmt.Sprintf("127.0.0.%d", 10*(i+1)+k) }
	return []pathwaySpec{
		{id: "cdn-a", ip: ip(2)},
		{id: "cdn-b", ip: ip(3)},
		{id: cloneID, ip: ip(4), base: cloneBase},
	}
}

func (pp *poolPage) pathway(id string) pathwaySpec {
	for _, p := range pp.pws {
		if p.id == id {
			return p
		}
	}
	panic("no pathway " + id)
}

func (pp *poolPage) path() string { return "/pool/" + pp.name }

// perVariantURI is the clone's PER-VARIANT-URIS entry for the variant: on
// the clone's host, under a directory of its own, so that the log tells a
// player that took it from one that replaced the host of the base's URI.
func (pp *poolPage) perVariantURI() string {
	return "http://" + pp.pathway(cloneID).authority() + "/" + pp.name + "/hls/" + perVariantDir + "/media.m3u8"
}

// config is the page's pool: its three edges, each checked at its /health,
// the clone with its host, PARAMS and, for HLS, a per-variant URI.
func (pp *poolPage) config() pool.Config {
	c := pool.Config{
		Name: pp.name, Path: pp.path(), TTL: poolTTL,
		CheckEvery: poolCheckEvery, CheckTimeout: poolCheckTimeout, DownAfter: poolDownAfter,
		CloneFrom: cloneBase, Assign: pool.AssignRendezvous,
	}
	for _, p := range pp.pws {
		e := pool.Edge{Pathway: p.id, Weight: poolWeights[p.id], CheckURL: "http://" + p.authority() + "/health"}
		if p.base != "" {
			e.Host = p.ip
			e.Params = map[string]string{cloneParam: cloneValue}
			if pp.protocol == "hls" {
				e.PerVariantURIs = map[string]string{stableVariantID: pp.perVariantURI()}
			}
		}
		c.Edges = append(c.Edges, e)
	}
	return c
}

// applies returns the first pathway of a priority the player can apply:
// one the content description declares, or the clone where the player
// applies clones. "" when there is none.
func (pp *poolPage) applies(priority []string) string {
	for _, id := range priority {
		if i := slices.IndexFunc(pp.pws, func(p pathwaySpec) bool { return p.id == id }); i >= 0 && (pp.pws[i].base == "" || pp.b.appliesClones) {
			return id
		}
	}
	return ""
}

// rendezvousOrder is the order internal/pool's doc.go ("The order")
// writes, from its text alone: the listed edges of weight above 0 by the
// score w / −ln(u) of each, highest first, equal scores to the edge
// written first, where u = (⌊h / 2¹¹⌋ + ½) / 2⁵³, h = mix(s₀ ⊕ mix(s₁ ⊕ p)),
// s₀ and s₁ the session's bytes 0–7 and 8–15 read little-endian, p the
// FNV-1a 64-bit hash of the pathway ID, mix SplitMix64's output function;
// then the listed edges of weight 0 in the order written.
func rendezvousOrder(session [16]byte, edges []pathwaySpec, listed func(id string) bool) []string {
	return rendezvousOrderOf(session, edges, poolWeights, listed)
}

// rendezvousOrderOf is rendezvousOrder over edges of the given weights.
func rendezvousOrderOf(session [16]byte, edges []pathwaySpec, weights map[string]uint32, listed func(id string) bool) []string {
	mix := func(z uint64) uint64 {
		z += 0x9e3779b97f4a7c15
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	s0 := binary.LittleEndian.Uint64(session[:8])
	s1 := binary.LittleEndian.Uint64(session[8:])
	type scored struct {
		id    string
		score float64
		at    int
	}
	var ranked []scored
	var last []string
	for i, e := range edges {
		if !listed(e.id) {
			continue
		}
		w := weights[e.id]
		if w == 0 {
			last = append(last, e.id)
			continue
		}
		f := fnv.New64a()
		f.Write([]byte(e.id))
		h := mix(s0 ^ mix(s1^f.Sum64()))
		u := (float64(h>>11) + 0.5) / (1 << 53)
		ranked = append(ranked, scored{e.id, float64(w) / -math.Log(u), i})
	}
	slices.SortStableFunc(ranked, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return a.at - b.at
	})
	var out []string
	for _, r := range ranked {
		out = append(out, r.id)
	}
	return append(out, last...)
}

// poolOriginHandler serves the pages, the players and each page's content
// description with the steering tag or element written by hand, as an
// operator writes them for a pool: SERVER-URI the pool's route, the
// initial pathway cdn-a, and for DASH queryBeforeStart (RFC 8216bis 4.4.6.6,
// ETSI TS 103 998 clause 5.2).
func poolOriginHandler(m *media, steerURL string, pps map[string]*poolPage) http.Handler {
	mux := http.NewServeMux()
	files := http.FileServer(http.Dir("."))
	mux.Handle("GET /pages/", files)
	mux.Handle("GET /node_modules/", files)
	mux.HandleFunc("GET /content/{page}/master.m3u8", func(w http.ResponseWriter, r *http.Request) {
		pp, ok := pps[r.PathValue("page")]
		if !ok || pp.protocol != "hls" {
			http.NotFound(w, r)
			return
		}
		tag := `#EXT-X-CONTENT-STEERING:SERVER-URI="` + steerURL + pp.path() + `",PATHWAY-ID="cdn-a"`
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(m.multivariantOf(pp.name, tag, pp.pws))
	})
	mux.HandleFunc("GET /content/{page}/manifest.mpd", func(w http.ResponseWriter, r *http.Request) {
		pp, ok := pps[r.PathValue("page")]
		if !ok || pp.protocol != "dash" {
			http.NotFound(w, r)
			return
		}
		element := `<ContentSteering defaultServiceLocation="cdn-a" queryBeforeStart="true">` + steerURL + pp.path() + `</ContentSteering>`
		w.Header().Set("Content-Type", "application/dash+xml")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(m.mpdOf(pp.name, element, time.Now(), pp.pws))
	})
	return cors(mux)
}

// withHealth answers /health while the pathway's server serves, as the
// station seed's edge image does; a stopped server refuses it.
func withHealth(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Write([]byte("ok\n"))
	})
	mux.Handle("/", h)
	return mux
}

// startPools starts waisteer in-process with one pool per page, on the
// bbolt store, behind fasthttp as `waisteer serve` runs it, and returns
// its base URL. Requests carrying probeHeader are the test's own and are
// logged apart, as "probe".
func startPools(t *testing.T, log *hitLog, pps map[string]*poolPage) string {
	t.Helper()
	var pcs []pool.Config
	for _, pg := range pages {
		pcs = append(pcs, pps[pg.name].config())
	}
	return startPoolServer(t, log, pcs)
}

// startPoolServer is startPools for any pools: waisteer serving pcs.
func startPoolServer(t *testing.T, log *hitLog, pcs []pool.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "waisteer.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// Info: the checker logs each edge going down and coming back.
	logger := slog.New(slog.NewTextHandler(&logWriter{t: t, prefix: "waisteer: "}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := server.New(context.Background(), server.Config{Pools: pcs, Logger: logger}, st, store.NewLoads())
	if err != nil {
		t.Fatalf("starting waisteer: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("closing waisteer: %v", err)
		}
	})
	fs := srv.FastServer(server.FastLimits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10, Logger: logger})
	players, probes := log.fastLogged("steer", fs.Handler), log.fastLogged("probe", fs.Handler)
	fs.Handler = func(c *fasthttp.RequestCtx) {
		if len(c.Request.Header.Peek(probeHeader)) > 0 {
			probes(c)
			return
		}
		players(c)
	}
	done := make(chan struct{})
	go func() { defer close(done); fs.Serve(ln) }()
	t.Cleanup(func() {
		fs.Shutdown()
		ln.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// kill is one page's stopped edge.
type kill struct {
	pathway string
	ip      string
	at      time.Time // just before its server stopped
}

// probe asks the page's pool, with the player's session, every 50 ms from
// before the kill until a second after the pool stopped naming the killed
// edge (or until limit), so that the log holds the pool's last manifest
// naming it to within 50 ms. The answers are logged as "probe".
func probe(steerURL string, pp *poolPage, session, killed string, limit time.Time) {
	client := &http.Client{Timeout: 2 * time.Second}
	var without time.Time // since when the answers no longer name it
	for time.Now().Before(limit) {
		req, _ := http.NewRequest(http.MethodGet, steerURL+pp.path()+"?session="+session, nil)
		req.Header.Set(probeHeader, "1")
		if resp, err := client.Do(req); err == nil {
			var m steeringManifest
			err = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			switch {
			case err != nil || slices.Contains(m.Priority, killed):
				without = time.Time{}
			case without.IsZero():
				without = time.Now()
			case time.Since(without) > time.Second:
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPlayersFollowAPool plays a live stream in each player steered by a
// waisteer pool (issue 12: the station seed's health-checked, weighted
// edges, with Apple's clones), one pool per page with edges of its own:
// cdn-a and cdn-b, which the content description declares, and the clone
// of cdn-b on a third address with PARAMS and, for HLS, a per-variant URI.
// It judges what the servers logged:
//
//  1. Each player reloads at the RELOAD-URI with the session its first
//     answer minted, every answer is the rendezvous order of that session
//     (doc.go's formula, computed here), and the player takes its segments
//     from the first pathway of that order it can apply, applying the
//     clone's HOST, PARAMS and per-variant URI as README.md records.
//  2. For each page, the server of the edge its player plays from stops
//     (listener and connections closed, so that its /health fails too):
//     the pool stops naming it within down_after checks, the later answers
//     are the same order without it (only its sessions move), and the
//     player plays on from the next pathway of its order within ttl_s and
//     a few seconds, its video never stalled for good.
func TestPlayersFollowAPool(t *testing.T) {
	tl := requireTools(t)
	began := time.Now()
	m := makeMedia(t, tl.ffmpeg)
	t.Logf("media made in %v", time.Since(began).Round(time.Millisecond))
	m.epoch = time.Now().Add(-30 * time.Second)

	hits := &hitLog{}
	pps := map[string]*poolPage{}
	servers := map[string]*httpServer{} // by address
	for i, pg := range pages {
		pp := &poolPage{pageSpec: pg, pws: poolPathwaysOf(i)}
		pps[pg.name] = pp
		for _, p := range pp.pws {
			servers[p.ip] = serve(t, p.ip+":"+pathwayPort, hits.logged(p.id, false, withHealth(m.pathwayHandler())))
		}
	}
	steerURL := startPools(t, hits, pps)
	origin := serve(t, "127.0.0.1:0", hits.logged("origin", false, poolOriginHandler(m, steerURL, pps)))
	originURL := "http://" + origin.addr

	ws := startChromium(t, tl.chromium)
	var runs []pageRun
	for _, pg := range pages {
		src := originURL + pg.manifestPath()
		runs = append(runs, pageRun{Name: pg.name, URL: originURL + "/pages/" + pg.file + "?src=" + url.QueryEscape(src) + pg.extra})
	}
	d := startDriver(t, tl.node, ws, runs)
	snapshot := func() *observed { return &observed{hits: hits.all(), lines: d.all()} }
	t.Logf("players started at %v", time.Since(began).Round(time.Millisecond))

	// Phase 1: each player on the first pathway of its session's order it
	// can apply, and reloaded once.
	waitFor(t, snapshot, 60*time.Second, "every player plays from the first pathway of its order it can apply", func(o *observed, pg pageSpec) string {
		pp := pps[pg.name]
		reqs := o.steering(pg.name)
		if len(reqs) < 2 {
			return "fewer than 2 steering requests"
		}
		first := pp.applies(reqs[0].manifest.Priority)
		switch {
		case first == "":
			return fmt.Sprintf("its first answer's priority %v names no pathway it can apply", reqs[0].manifest.Priority)
		case len(o.segments(pg.name, first, reqs[0].End, time.Time{})) < 4:
			return "fewer than 4 segments from " + first
		case o.played(pg.name, reqs[0].End, time.Now()) < 3:
			return "played less than 3 s"
		}
		return ""
	})
	if t.Failed() {
		return
	}

	// Phase 2: each page's edge stops, the pool asked meanwhile with the
	// player's session.
	o := snapshot()
	kills := map[string]kill{}
	var probes sync.WaitGroup
	for _, pg := range pages {
		pp := pps[pg.name]
		reqs := o.steering(pg.name)
		last := reqs[len(reqs)-1].manifest
		k := kill{pathway: pp.applies(last.Priority)}
		k.ip = pp.pathway(k.pathway).ip
		kills[pg.name] = k
		session := sessionOf(last.Reload)
		probes.Add(1)
		go func() {
			defer probes.Done()
			probe(steerURL, pp, session, k.pathway, time.Now().Add(dropLimit+5*time.Second))
		}()
	}
	time.Sleep(300 * time.Millisecond) // the probes' first answers name it
	// The kills are spread over a check interval, so that they fall at
	// different instants of the pools' checks, whose grids start together.
	for i, pg := range pages {
		if i > 0 {
			time.Sleep(poolCheckEvery / time.Duration(len(pages)))
		}
		k := kills[pg.name]
		k.at = time.Now()
		servers[k.ip].stop()
		kills[pg.name] = k
	}
	waitFor(t, snapshot, 45*time.Second, "every player plays on from another edge", func(o *observed, pg pageSpec) string {
		k := kills[pg.name]
		reloaded := slices.ContainsFunc(o.steering(pg.name), func(r steerReq) bool {
			return r.Start.After(k.at) && r.err == nil && !slices.Contains(r.manifest.Priority, k.pathway)
		})
		switch {
		case time.Since(k.at) < poolTTL*time.Second+3*time.Second:
			return "waiting ttl_s + 3 s"
		case !reloaded:
			return "no answer without " + k.pathway + " since it stopped"
		case len(o.segments(pg.name, "", k.at, time.Time{})) < 4:
			return "fewer than 4 segments since " + k.pathway + " stopped"
		case o.played(pg.name, k.at, time.Now()) < 4:
			return "played less than 4 s since " + k.pathway + " stopped"
		}
		return ""
	})
	probes.Wait()
	tEnd := time.Now()
	d.stop(t)
	o = snapshot()

	type timing struct {
		first, drop, failover, stall time.Duration
		requests, failed             int
		second, next, clone          string
	}
	timings := map[string]*timing{}
	for _, pg := range pages {
		tm := &timing{first: -1, drop: -1, failover: -1, stall: -1}
		timings[pg.name] = tm
		pp, k := pps[pg.name], kills[pg.name]
		t.Run(pg.name, func(t *testing.T) {
			checkPlayer(t, o, pg, tl.versions[pg.pkg])
			var session [16]byte
			tm.requests, session, tm.second = checkPoolSteering(t, o, pp, k, steerURL)
			tm.drop = checkPoolDrop(t, o, pp, k, session)
			tm.first, tm.clone = checkPoolFirst(t, o, pp, k)
			tm.next, tm.failover, tm.stall, tm.failed = checkPoolFailover(t, o, pp, k, tEnd)
		})
	}

	var drops, moves []time.Duration
	var b strings.Builder
	fmt.Fprintf(&b, "players steered by a pool (ttl_s %d, checks every %v, down_after %d), run of %v:\n", poolTTL, poolCheckEvery, poolDownAfter, time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "  %-17s %-9s %-11s %-10s %-28s %-14s %-9s %-10s %-9s %s\n", "page", "requests", "order", "first move", "clone applied", "killed", "dropped", "failover", "to", "longest stall (failed requests)")
	for _, pg := range pages {
		tm, k := timings[pg.name], kills[pg.name]
		fmt.Fprintf(&b, "  %-17s %-9d %-11s %-10s %-28s %-14s %-9s %-10s %-9s %s (%d)\n", pg.name, tm.requests, "…, "+tm.second, roundMs(tm.first), tm.clone,
			k.pathway, roundMs(tm.drop), roundMs(tm.failover), tm.next, roundMs(tm.stall), tm.failed)
		drops = append(drops, tm.drop)
		moves = append(moves, tm.failover)
	}
	b.WriteString("  order: the second of the session's order (the clone is first);\n")
	b.WriteString("  first move: from the first answer to the first segment from the first pathway the player applies;\n")
	b.WriteString("  dropped: from the kill to the pool's last answer naming the killed edge (the seed: 1.3 to 1.7 s);\n")
	b.WriteString("  failover: from the kill to the first segment from the next edge (the seed: 1.5 to 1.8 s median for players that penalise)\n")
	fmt.Fprintf(&b, "  dropped: %s; failover: %s", spread(drops), spread(moves))
	t.Log(b.String())
}

// spread writes durations as their median and range.
func spread(ds []time.Duration) string {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	if len(ds) == 0 || ds[0] < 0 {
		return "-"
	}
	return fmt.Sprintf("median %s, %s to %s", roundMs(ds[len(ds)/2]), roundMs(ds[0]), roundMs(ds[len(ds)-1]))
}

// sessionOf is the session of a RELOAD-URI, "" when it has none.
func sessionOf(reload string) string {
	u, err := url.Parse(reload)
	if err != nil {
		return ""
	}
	return query(u.RawQuery)["session"]
}

// parseSession reads 32 lowercase hexadecimal digits (doc.go's wire
// format).
func parseSession(s string) ([16]byte, bool) {
	var out [16]byte
	if len(s) != 32 || strings.ToLower(s) != s {
		return out, false
	}
	_, err := hex.Decode(out[:], []byte(s))
	return out, err == nil
}

// checkPoolManifest judges one answer of the page's pool for its session:
// the seed's manifest (VERSION 1, the TTL, an absolute RELOAD-URI carrying
// the session), the session's rendezvous order over the edges up (all
// before the kill; without the killed one after it; either in the
// dropLimit between), and the clone of cdn-b with its URI-REPLACEMENT.
func checkPoolManifest(m steeringManifest, pp *poolPage, session [16]byte, reload string, start, end time.Time, k kill) string {
	full := rendezvousOrder(session, pp.pws, func(string) bool { return true })
	without := rendezvousOrder(session, pp.pws, func(id string) bool { return id != k.pathway })
	switch {
	case m.Version != 1 || m.TTL != poolTTL:
		return fmt.Sprintf("VERSION %d TTL %d, not 1 and %d", m.Version, m.TTL, poolTTL)
	case m.Reload != reload:
		return fmt.Sprintf("RELOAD-URI %q, not %q", m.Reload, reload)
	case end.Before(k.at) && !slices.Equal(m.Priority, full):
		return fmt.Sprintf("PATHWAY-PRIORITY %v before the kill, not the session's order %v", m.Priority, full)
	case start.After(k.at.Add(dropLimit)) && !slices.Equal(m.Priority, without):
		return fmt.Sprintf("PATHWAY-PRIORITY %v %v after the kill, not the session's order without %s, %v", m.Priority, start.Sub(k.at).Round(time.Millisecond), k.pathway, without)
	case !slices.Equal(m.Priority, full) && !slices.Equal(m.Priority, without):
		return fmt.Sprintf("PATHWAY-PRIORITY %v, neither the session's order %v nor that without %s", m.Priority, full, k.pathway)
	case len(m.Clones) != 1:
		return fmt.Sprintf("%d clones, not the one of %s", len(m.Clones), cloneID)
	}
	c := m.Clones[0]
	want := map[string]string(nil)
	if pp.protocol == "hls" {
		want = map[string]string{stableVariantID: pp.perVariantURI()}
	}
	if c.BaseID != cloneBase || c.ID != cloneID || c.Replacement.Host != pp.pathway(cloneID).ip ||
		!mapsEqual(c.Replacement.Params, map[string]string{cloneParam: cloneValue}) || !mapsEqual(c.Replacement.PerVariant, want) {
		return fmt.Sprintf("the clone %+v, not %s of %s with HOST %s, PARAMS %s=%s and per-variant URIs %v", c, cloneID, cloneBase, pp.pathway(cloneID).ip, cloneParam, cloneValue, want)
	}
	return ""
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkPoolSteering judges the page's steering requests: the first has no
// session, and its answer's RELOAD-URI is the pool's route, absolute, with
// the session minted (doc.go's wire format); every later request is that
// RELOAD-URI, with the player's parameters after it, every TTL; every
// answer is the session's (checkPoolManifest). It returns the count of
// requests, the session and the second pathway of its order.
func checkPoolSteering(t *testing.T, o *observed, pp *poolPage, k kill, steerURL string) (int, [16]byte, string) {
	reqs := o.steering(pp.name)
	var session [16]byte
	if len(reqs) < 2 {
		t.Errorf("%d steering requests, fewer than 2", len(reqs))
		return len(reqs), session, ""
	}
	first := reqs[0]
	if _, ok := query(first.Query)["session"]; ok {
		t.Errorf("the first steering request already carries a session: %s", first.Query)
	}
	if first.err != nil {
		t.Fatalf("the first answer is not a steering manifest: %v: %s", first.err, first.Body)
	}
	reload := first.manifest.Reload
	hexSession := sessionOf(reload)
	session, ok := parseSession(hexSession)
	if !ok || reload != steerURL+pp.path()+"?session="+hexSession {
		t.Fatalf("RELOAD-URI %q is not the pool's route, absolute, with a session of 32 hexadecimal digits", reload)
	}
	var gaps []time.Duration
	for i, r := range reqs {
		where := fmt.Sprintf("steering request %d (%s?%s)", i, r.Path, r.Query)
		if r.Status != http.StatusOK || r.err != nil {
			t.Errorf("%s: answered %d, %v: %s", where, r.Status, r.err, r.Body)
			continue
		}
		if i > 0 {
			gaps = append(gaps, r.Start.Sub(reqs[i-1].Start))
			if !strings.HasPrefix(r.Query, "session="+hexSession) {
				t.Errorf("%s: not a request of the RELOAD-URI with session %s", where, hexSession)
			}
		}
		if why := checkPoolManifest(r.manifest, pp, session, reload, r.Start, r.End, k); why != "" {
			t.Errorf("%s: %s", where, why)
		}
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < poolTTL*time.Second-500*time.Millisecond || med > poolTTL*time.Second+1500*time.Millisecond {
		t.Errorf("the median time between steering requests is %v, not the TTL of %ds (gaps %v)", med, poolTTL, gaps)
	}
	full := rendezvousOrder(session, pp.pws, func(string) bool { return true })
	t.Logf("%d steering requests, session %s, order %v; gaps %v", len(reqs), hexSession, full, gaps)
	t.Logf("first: %s?%s", first.Path, first.Query)
	t.Logf("last:  %s?%s", reqs[len(reqs)-1].Path, reqs[len(reqs)-1].Query)
	return len(reqs), session, full[1]
}

// checkPoolDrop judges the pool's answers to the test's probes, which
// carried the player's session: each is the session's (checkPoolManifest);
// those before the kill name the killed edge, and within dropLimit of the
// kill the pool stops naming it, for good. It returns the time from the
// kill to the last answer naming it.
func checkPoolDrop(t *testing.T, o *observed, pp *poolPage, k kill, session [16]byte) time.Duration {
	var probes []steerReq
	for _, h := range o.hits {
		if h.Server == "probe" && h.Path == pp.path() {
			r := steerReq{hit: h}
			r.err = json.Unmarshal(h.Body, &r.manifest)
			probes = append(probes, r)
		}
	}
	slices.SortFunc(probes, func(a, b steerReq) int { return a.Start.Compare(b.Start) })
	reload := o.steering(pp.name)[0].manifest.Reload
	before, last := 0, -1
	var wrong []string // one line for the first of the wrong answers, and their count
	for i, r := range probes {
		if r.Status != http.StatusOK || r.err != nil {
			wrong = append(wrong, fmt.Sprintf("probe %d: answered %d, %v: %s", i, r.Status, r.err, r.Body))
			continue
		}
		if why := checkPoolManifest(r.manifest, pp, session, reload, r.Start, r.End, k); why != "" {
			wrong = append(wrong, fmt.Sprintf("probe %d: %s", i, why))
		}
		if slices.Contains(r.manifest.Priority, k.pathway) {
			last = i
		}
		if r.End.Before(k.at) {
			before++
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of %d probes answered wrong, the first: %s", len(wrong), len(probes), wrong[0])
	}
	switch {
	case before == 0:
		t.Errorf("no probe was answered before the kill")
		return -1
	case last < 0:
		t.Errorf("no probe's answer named %s", k.pathway)
		return -1
	case last == len(probes)-1:
		t.Errorf("the pool still named %s in its last answer, %v after the kill", k.pathway, probes[last].End.Sub(k.at).Round(time.Millisecond))
		return -1
	}
	drop := probes[last].End.Sub(k.at)
	if drop > dropLimit {
		t.Errorf("the pool named %s until %v after the kill, more than %v", k.pathway, drop.Round(time.Millisecond), dropLimit)
	}
	t.Logf("the pool's last answer naming %s came %v after the kill (%d probes)", k.pathway, drop.Round(time.Millisecond), len(probes))
	return drop
}

// checkPoolFirst judges phase 1: from the first answer on, the player
// takes its segments from the first pathway of its order it can apply, and
// from nowhere else until the kill; where that is the clone, from the
// clone's host, through the per-variant URI where the player applies it,
// with the clone's PARAMS on the requests README.md records. It returns
// how long after the first answer its first segment came from there, and
// what of the clone it applied.
func checkPoolFirst(t *testing.T, o *observed, pp *poolPage, k kill) (time.Duration, string) {
	reqs := o.steering(pp.name)
	priority := reqs[0].manifest.Priority
	if len(priority) == 0 || priority[0] != cloneID {
		// Two sessions in a million draw this (poolWeights).
		t.Errorf("the first answer's priority %v does not put %s first", priority, cloneID)
	}
	want := pp.applies(priority)
	answered := reqs[0].End
	segs := o.segments(pp.name, "", time.Time{}, k.at)
	i := slices.IndexFunc(segs, func(m mediaHit) bool { return m.Server == want && !m.Start.Before(answered.Add(-50*time.Millisecond)) })
	if i < 0 {
		t.Errorf("no segment came from %s after the first answer", want)
		return -1, ""
	}
	at := segs[i].Start
	if d := at.Sub(answered); d > 6*time.Second {
		t.Errorf("the first segment from %s came %v after the first answer", want, d)
	}
	for _, m := range segs[i:] {
		if m.Server != want {
			t.Errorf("segment %d came from %s after the player moved to %s", m.seg, m.Server, want)
		}
	}
	clone := pp.pathway(cloneID)
	perVariant := pp.protocol == "hls" && pp.b.perVariantURIs
	withParams := map[string]bool{}
	toClone := 0
	for _, m := range o.media(pp.name, time.Time{}, k.at) {
		if host, _, _ := strings.Cut(m.Host, ":"); host != pp.pathway(m.Server).ip {
			t.Errorf("a request to %s names host %q, not its address", m.Server, m.Host)
		}
		if m.Server != cloneID {
			continue
		}
		toClone++
		dir := "/" + pp.name + "/hls/" + cloneBase + "/"
		if perVariant {
			dir = "/" + pp.name + "/hls/" + perVariantDir + "/"
		}
		if pp.protocol == "hls" && !strings.HasPrefix(m.Path, dir) {
			t.Errorf("a request to the clone is %s, not under %s", m.Path, dir)
		}
		has := query(m.Query)[cloneParam] == cloneValue
		if has {
			withParams[m.kind] = true
		}
		// A per-variant URI replaces HOST and PARAMS both (RFC 8216bis
		// 7.3.2, hls.js's performUriReplacement).
		if wantParams := !perVariant && slices.Contains(pp.b.cloneParams, m.kind); has != wantParams {
			t.Errorf("a %s request to the clone carries its PARAMS: %v, not %v as README.md records (%s?%s)", m.kind, has, wantParams, m.Path, m.Query)
		}
	}
	applied := "none"
	switch {
	case !pp.b.appliesClones && toClone > 0:
		t.Errorf("%d requests to the clone, which README.md says this player does not apply", toClone)
	case pp.b.appliesClones && toClone == 0:
		t.Errorf("no request to the clone, which README.md says this player applies")
	case perVariant:
		applied = "PER-VARIANT-URIS"
	case toClone > 0:
		applied = "HOST"
	}
	if len(withParams) > 0 {
		kinds := make([]string, 0, len(withParams))
		for kind := range withParams {
			kinds = append(kinds, kind)
		}
		slices.Sort(kinds)
		applied += ", PARAMS (" + strings.Join(kinds, ", ") + ")"
	}
	t.Logf("onto %s %v after the first answer; %d requests to the clone's host %s; applied: %s", want, at.Sub(answered).Round(time.Millisecond), toClone, clone.ip, applied)
	return at.Sub(answered), applied
}

// checkPoolFailover judges phase 2: from the kill on, the player takes its
// segments from the next pathway of its order it can apply (the order in
// force without the killed edge), the first within ttl_s and a few seconds
// of the kill, and plays on to the end. It returns that pathway, how long
// the move took, the longest stall, and how many requests to the killed
// edge the browser saw fail.
func checkPoolFailover(t *testing.T, o *observed, pp *poolPage, k kill, tEnd time.Time) (string, time.Duration, time.Duration, int) {
	var priority []string
	for _, r := range o.steering(pp.name) {
		if r.End.Before(k.at) {
			priority = r.manifest.Priority
		}
	}
	rest := slices.DeleteFunc(slices.Clone(priority), func(id string) bool { return id == k.pathway })
	next := pp.applies(rest)
	if pp.applies(priority) != k.pathway || next == "" {
		t.Errorf("the priority in force when %s stopped is %v", k.pathway, priority)
		return "", -1, -1, 0
	}
	segs := o.segments(pp.name, "", k.at, tEnd)
	if len(segs) == 0 {
		t.Errorf("no segment after %s stopped", k.pathway)
		return next, -1, -1, 0
	}
	for _, m := range segs {
		if m.Server != next {
			t.Errorf("segment %d came from %s after %s stopped, not from %s, next in the order %v it can apply", m.seg, m.Server, k.pathway, next, priority)
		}
	}
	move := segs[0].Start.Sub(k.at)
	if limit := poolTTL*time.Second + 3*time.Second; move > limit {
		t.Errorf("the first segment from another edge came %v after the kill, more than ttl_s and 3 s", move.Round(time.Millisecond))
	}
	span := tEnd.Sub(k.at).Seconds()
	if p := o.played(pp.name, k.at, tEnd); p < span/2 {
		t.Errorf("played %.1f s of the %.1f s after %s stopped", p, span, k.pathway)
	}
	// Not stalled for good: the video still advances at the end.
	if p := o.played(pp.name, tEnd.Add(-3*time.Second), tEnd); p < 1 {
		t.Errorf("played %.1f s in the last 3 s", p)
	}
	stall := o.stall(pp.name, k.at, tEnd)
	host := "http://" + pp.pathway(k.pathway).authority() + "/"
	failed := 0
	var lastFail time.Time
	for _, l := range o.lines {
		if l.Kind == "requestfailed" && l.Page == pp.name && strings.HasPrefix(l.URL, host) && !l.at.Before(k.at) {
			failed++
			lastFail = l.at
		}
	}
	lastAfter := "none"
	if !lastFail.IsZero() {
		lastAfter = lastFail.Sub(segs[0].Start).Round(time.Millisecond).String()
	}
	// Once an answer no longer names the edge, the player has no reason to
	// ask it again (dash.js, which goes back to a failed pathway every TTL
	// while an energy room keeps it first, included).
	for _, r := range o.steering(pp.name) {
		if r.Start.After(k.at) && r.err == nil && !slices.Contains(r.manifest.Priority, k.pathway) {
			if !lastFail.IsZero() && lastFail.After(r.End.Add(time.Second)) {
				t.Errorf("a request to %s failed %v after the answer that no longer named it", k.pathway, lastFail.Sub(r.End).Round(time.Millisecond))
			}
			break
		}
	}
	t.Logf("failover to %s %v after %s stopped; longest stall %v; %d failed requests to %s, the last %s after the move",
		next, move.Round(time.Millisecond), k.pathway, stall.Round(time.Millisecond), failed, k.pathway, lastAfter)
	return next, move, stall, failed
}
