package players

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
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
//
// waisteer (the pools' steering routes and the front) is on HTTPS (issue
// 28), as in TestPlayersFollowWaisteerOverHTTPS: every player steered by a
// pool, on the default pathway its first answer keeps and on the clone,
// over https. The pools over plain http are the QoE and first-answer
// tests'.
func TestPlayersFollowAPool(t *testing.T) {
	tl := requireTools(t)
	sv := overHTTPS(t, "127.0.0.1")
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
	originLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	originURL := "http://" + originLn.Addr().String()
	steerURL := startPools(t, hits, pps, originURL, sv)
	serveOn(t, originLn, hits.logged("origin", false, poolOriginHandler(m, steerURL, pps)))

	ws := startChromium(t, tl.chromium, sv.chromium()...)
	var runs []pageRun
	for _, pg := range pages {
		src := originURL + pg.manifestPath()
		extra := pg.extra
		if poolThroughFront(pg) {
			src = steerURL + pg.manifestPath()
		}
		if pg.name == "hlsjs" {
			// The server's first answer keeps hls.js where it is
			// (internal/pool's doc, "The order"): the page attaches its
			// media at once, as a site does.
			extra += "&attach=early"
		}
		runs = append(runs, pageRun{Name: pg.name, URL: originURL + "/pages/" + pg.file + "?src=" + url.QueryEscape(src) + extra})
	}
	d := startDriver(t, tl.node, ws, runs)
	snapshot := func() *observed { return &observed{hits: hits.all(), lines: d.all()} }
	t.Logf("players started at %v", time.Since(began).Round(time.Millisecond))

	// Phase 1: each player on the first pathway of its session's order it
	// can apply, and reloaded once.
	waitFor(t, snapshot, 60*time.Second, "every player plays from the first pathway of its order it can apply", func(o *observed, pg pageSpec) string {
		pp := pps[pg.name]
		reqs := o.steering(pg.name)
		own := ownAnswer(reqs, pp)
		if len(reqs) < 2 || own < 0 {
			return "fewer than 2 steering requests"
		}
		first := pp.applies(reqs[own].manifest.Priority)
		switch {
		case first == "":
			return fmt.Sprintf("its answer's priority %v names no pathway it can apply", reqs[own].manifest.Priority)
		case len(o.segments(pg.name, first, reqs[own].End, time.Time{})) < 4:
			return "fewer than 4 segments from " + first
		case o.played(pg.name, reqs[own].End, time.Now()) < 3:
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
			probe(sv.client, steerURL, pp, session, k.pathway, time.Now().Add(dropLimit+5*time.Second))
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
