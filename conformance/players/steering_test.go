package players

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/fastserve"
	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// The test's policies (§3.1): a TTL short enough that the players ask
// every two seconds; a window of one period (P = W), so that the records of
// one period are the whole evidence and the next period's replace them;
// tiers far below what a player measures on loopback, so that no player is
// at its floor (§6.4 step 2); no minimum buffer (step 1) and no bands
// (step 4), so that the evidence alone orders the pathways (§6.2, step 6).
const (
	period     = 10 * time.Minute
	lag        = time.Second
	ttlSeconds = 2
	minTTL     = 1
)

// Each phase's figures: a pathway's edge hop states these microjoules for
// the period's 10^9 media bytes, all ModelBased, so that the figures are
// compared within one class (§6.2 step 2) and each beats the next by far
// more than the 5% margin (§6.4 step 5).
var (
	joulesFirst = map[string]uint64{"cdn-b-clone": 10_000_000, "cdn-a": 20_000_000, "cdn-b": 30_000_000}
	joulesThen  = map[string]uint64{"cdn-b": 5_000_000, "cdn-a": 20_000_000, "cdn-b-clone": 40_000_000}
)

// roomClock is the steering server's room clock: the wall clock, from an
// instant chosen so that the first period's records are the window
// (§5.1), which jumps a period ahead when the test changes the evidence.
type roomClock struct {
	start time.Time
	first uint64 // the first window's start (µs)
	jump  atomic.Uint64
}

func newRoomClock() *roomClock {
	now := time.Now()
	p := uint64(period / time.Microsecond)
	c := &roomClock{start: now}
	c.first = uint64(now.UnixMicro())/p*p - p
	return c
}

// now: the first window [first, first+P) holds while the clock is in
// [first+P+L, first+2P+L) (§5.1), which the test stays well inside.
func (c *roomClock) now() uint64 {
	return c.first + uint64((period+lag+time.Second)/time.Microsecond) +
		uint64(time.Since(c.start)/time.Microsecond) + c.jump.Load()
}

// steering is waisteer serving one room per page.
type steering struct {
	url   string // http://127.0.0.1:PORT, or https://
	sv    *serving
	clock *roomClock
	rooms map[string]*scenario.Scenario // by page
}

// startSteering starts waisteer in-process, on the bbolt store as `serve`
// uses it, with a room per page whose policy names the pathways, and
// gives each room its first period of records.
func startSteering(t *testing.T, log *hitLog, originURL string, sv *serving) *steering {
	t.Helper()
	ln, base := sv.listen(t, "127.0.0.1:0")
	s := &steering{url: base, sv: sv, clock: newRoomClock(), rooms: map[string]*scenario.Scenario{}}
	var rcs []server.RoomConfig
	for _, pg := range pages {
		sc, err := scenario.Build(scenario.Spec{
			Name:     "players " + pg.name,
			Pathways: scenarioPathways(),
			Policy:   s.policyFor(pg.name),
		})
		if err != nil {
			t.Fatalf("building the room of %s: %v", pg.name, err)
		}
		s.rooms[pg.name] = sc
		rcs = append(rcs, server.RoomConfig{
			Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes,
			Policy: sc.PolicyBytes, SteeringKey: sc.SteerKey,
		})
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "waisteer.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.NewTextHandler(&logWriter{t: t, prefix: "waisteer: "}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The content descriptions are served by waisteer's front, which adds
	// each room's tag and element (§8.2, §8.3) to the origin's (issue 13).
	og, err := origin.New(originURL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fc := &server.FrontConfig{Origin: og}
	for _, pg := range pages {
		fc.Playlists = append(fc.Playlists, server.FrontPlaylist{Path: "/content/" + pg.name + "/", Room: s.rooms[pg.name].Room.ID().String()})
	}
	srv, err := server.New(context.Background(), server.Config{Rooms: rcs, Front: fc, Clock: s.clock.now, Logger: logger}, st, store.NewLoads())
	if err != nil {
		t.Fatalf("starting waisteer: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("closing waisteer: %v", err)
		}
	})
	// As `waisteer serve` runs it on plain HTTP: behind fasthttp, the
	// steering route on fasthttp's own requests (server.FastHandler).
	fs := srv.FastServer(server.FastLimits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10, Logger: logger})
	fs.Handler = log.fastLogged("steer", fs.Handler)
	done := make(chan struct{})
	go func() { defer close(done); fs.Serve(fastserve.Listener(ln)) }() // as serve serves it
	t.Cleanup(func() {
		fs.Shutdown()
		ln.Close() // Shutdown closes it only once Serve has begun
		<-done
	})
	s.addRecords(t, 0, joulesFirst)
	return s
}

// fastLogged logs every request h answers as a hit of server, with the
// answer's body.
func (l *hitLog) fastLogged(server string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(c *fasthttp.RequestCtx) {
		start := time.Now()
		if l.delay != nil {
			_, q, _ := bytes.Cut(c.Request.Header.RequestURI(), []byte{'?'})
			time.Sleep(l.delay(server, string(c.Path()), string(q)))
		}
		h(c)
		_, query, _ := bytes.Cut(c.Request.Header.RequestURI(), []byte{'?'})
		ht := hit{
			Server: server, Host: string(c.Host()), Method: string(c.Method()), Path: string(c.Request.URI().Path()),
			Query: string(query), CMCD: string(c.Request.Header.Peek("CMCD-Request")),
			Status: c.Response.StatusCode(), Start: start, End: time.Now(), Body: bytes.Clone(c.Response.Body()), TLS: c.IsTLS(),
		}
		l.mu.Lock()
		l.hits = append(l.hits, ht)
		l.mu.Unlock()
	}
}

// policyFor is the policy of a page's room, its URIs on the steering
// server: the steering route and the decisions under the page's name.
func (s *steering) policyFor(page string) func(p *policy.Policy) {
	return func(p *policy.Policy) {
		p.PeriodUs = uint64(period / time.Microsecond)
		p.WindowUs = p.PeriodUs
		p.LagUs = uint64(lag / time.Microsecond)
		p.Basis = policy.PerByte
		p.Tiers = []uint64{50_000, 100_000}
		p.Floor = 0
		p.LatencyCeilingMs = 500
		p.MinBufferMs = 0
		p.HysteresisPPM = 50_000
		p.TTLs = ttlSeconds
		p.MinTTLs = minTTL
		p.Flags = policy.FlagQueryBeforeStart
		p.Initial = 0 // cdn-a, the tag's PATHWAY-ID and the MPD's defaultServiceLocation
		p.ServerURI = s.url + "/steer/" + page
		p.ReloadURI = p.ServerURI
		p.DecisionURI = s.url + "/decisions/" + page + "/"
	}
}

// scenarioPathways are the pathways of every room, each with one edge hop
// of its own (§3.3: a hop belongs to one pathway).
func scenarioPathways() []scenario.Pathway {
	var ps []scenario.Pathway
	for _, p := range pathways {
		sp := scenario.Pathway{
			ID: p.id, TopTier: 1, LatencyMs: 50, Capacity: policy.Unlimited,
			Hops: []scenario.Hop{{Place: policy.Edge, Class: evidence.ModelBased, Joules: joulesFirst[p.id], Bytes: 1_000_000_000}},
		}
		if p.base != "" {
			sp.CloneOf, sp.Host = p.base, p.ip
			sp.Params = []policy.Param{{Name: cloneParam, Value: cloneValue}}
		}
		ps = append(ps, sp)
	}
	return ps
}

// addRecords signs, for every room, each pathway's record of period k
// (from the first window's) with the given figures, and posts them to
// waisteer as a hop would.
func (s *steering) addRecords(t *testing.T, k int, joules map[string]uint64) {
	t.Helper()
	p := uint64(period / time.Microsecond)
	start := s.clock.first + uint64(k)*p
	for _, pg := range pages {
		sc := s.rooms[pg.name]
		var body []byte
		for i, pw := range pathways {
			raw, err := sc.AddRecord(i, 0, start, start+p, func(r *evidence.Record) { r.Joules = joules[pw.id] })
			if err != nil {
				t.Fatal(err)
			}
			body = append(body, raw...)
		}
		url := fmt.Sprintf("%s/v1/rooms/%s/records", s.url, sc.Policy.Room)
		resp, err := s.sv.client.Post(url, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("posting records: %v", err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("waisteer refused the records of %s: %s %s", pg.name, resp.Status, answer)
		}
		var a struct {
			Results []struct {
				Outcome string `json:"outcome"`
			} `json:"results"`
		}
		if err := json.Unmarshal(answer, &a); err != nil || len(a.Results) != len(pathways) {
			t.Fatalf("waisteer's answer to the records of %s: %s", pg.name, answer)
		}
	}
}

// changeEvidence makes the next period's records the evidence: they are
// posted, then the room clock moves a period on, so that the window is
// that period (§5.1). It returns the instant the clock moved.
func (s *steering) changeEvidence(t *testing.T) time.Time {
	s.addRecords(t, 1, joulesThen)
	s.clock.jump.Store(uint64(period / time.Microsecond))
	return time.Now()
}
