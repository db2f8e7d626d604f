package players

// The expected rendezvous order, the edges' origins, and the pools' server.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/fastserve"
	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/store"
)

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

// poolThroughFront says whether a page loads its content description
// through waisteer's front: the HLS pages do (issue 28: hls.js through the
// front in every test), and get the front's tag for a pool (SERVER-URI the
// pool's route, PATHWAY-ID its clone_from, cdn-b). The DASH pages keep the
// element written by hand, whose queryBeforeStart="true" the front's
// element for a pool does not write.
func poolThroughFront(pg pageSpec) bool { return pg.protocol == "hls" }

// poolOriginHandler serves the pages, the players and each page's content
// description, for a DASH page with the steering element written by hand,
// as an operator writes it for a pool: the pool's route, the initial
// pathway cdn-a and queryBeforeStart (ETSI TS 103 998 clause 5.2); for an
// HLS page with no tag, which the front adds (poolThroughFront).
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
		if poolThroughFront(pp.pageSpec) {
			tag = ""
		}
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
// bbolt store, behind fasthttp as `waisteer serve` runs it, with a front
// whose origin is originURL for the pages that load through it
// (poolThroughFront), and returns its base URL. Requests carrying
// probeHeader are the test's own and are logged apart, as "probe".
func startPools(t *testing.T, log *hitLog, pps map[string]*poolPage, originURL string, sv *serving) string {
	t.Helper()
	var pcs []pool.Config
	og, err := origin.New(originURL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fc := &server.FrontConfig{Origin: og}
	for _, pg := range pages {
		pcs = append(pcs, pps[pg.name].config())
		if poolThroughFront(pg) {
			fc.Playlists = append(fc.Playlists, server.FrontPlaylist{Path: "/content/" + pg.name + "/", Pool: pg.name})
		}
	}
	return startPoolServer(t, log, pcs, fc, sv)
}

// startPoolServer is startPools for any pools: waisteer serving pcs, and
// the front fc when it is not nil, reached as sv says.
func startPoolServer(t *testing.T, log *hitLog, pcs []pool.Config, fc *server.FrontConfig, sv *serving) string {
	t.Helper()
	ln, base := sv.listen(t, "127.0.0.1:0")
	st, err := store.Open(filepath.Join(t.TempDir(), "waisteer.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// Info: the checker logs each edge going down and coming back.
	logger := slog.New(slog.NewTextHandler(&logWriter{t: t, prefix: "waisteer: "}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := server.New(context.Background(), server.Config{Pools: pcs, Front: fc, Logger: logger}, st, store.NewLoads())
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
	go func() { defer close(done); fs.Serve(fastserve.Listener(ln)) }() // as serve serves it
	t.Cleanup(func() {
		fs.Shutdown()
		ln.Close()
		<-done
	})
	return base
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
func probe(client *http.Client, steerURL string, pp *poolPage, session, killed string, limit time.Time) {
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
