package poolsteer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/internal/pool"
)

// TestSteerKeepsReportedFirst: the pool's route reads the pathway a
// player's first request reports (hls.js's _HLS_pathway, the first of
// dash.js's _DASH_pathway) and its answer keeps it first, with a TTL of
// at most pool.KeepTTL, so that hls.js 1.7.4 is not moved while its first
// fragments load (issue 28, "hls.js through the front": it stalls for
// good when its first answer moves it). The RELOAD-URI's session then
// gets its own order; a request with no report gets it at once.
func TestSteerKeepsReportedFirst(t *testing.T) {
	d, _, _ := testDeps(t)
	ps, err := New(context.Background(), d, []pool.Config{testPool()})
	if err != nil {
		t.Fatal(err)
	}
	ph := ps.Named("")
	type manifest struct {
		TTL      int      `json:"TTL"`
		Reload   string   `json:"RELOAD-URI"`
		Priority []string `json:"PATHWAY-PRIORITY"`
	}
	get := func(target string) manifest {
		t.Helper()
		rec := httptest.NewRecorder()
		ph.ServeSteer(rec, httptest.NewRequest(http.MethodGet, target, nil))
		var m manifest
		if err := json.Unmarshal(rec.Body.Bytes(), &m); rec.Code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s: %v", target, rec.Code, rec.Body, err)
		}
		return m
	}
	kept := 0
	for range 50 {
		for _, q := range []string{"_HLS_pathway=bunny&_HLS_throughput=500000", `_DASH_pathway="bunny,edge-1"&_DASH_throughput=1000,2000`} {
			first := get(pool.DefaultPath + "?" + q)
			u, err := url.Parse(first.Reload)
			if err != nil {
				t.Fatal(err)
			}
			own := get(u.RequestURI() + "&" + q)
			if own.TTL != 300 || slices.Index(own.Priority, "bunny") != 2 {
				// bunny weighs 0: it follows the ranked edges in every
				// session's own order (the pool's doc).
				t.Fatalf("the session's own answer: %+v, want bunny last, TTL 300", own)
			}
			want := append([]string{"bunny"}, own.Priority[:2]...)
			if !slices.Equal(first.Priority, want) || first.TTL != pool.KeepTTL {
				t.Fatalf("first answer to %s: %q TTL %d, want %q TTL %d", q, first.Priority, first.TTL, want, pool.KeepTTL)
			}
			kept++
		}
		if plain := get(pool.DefaultPath); plain.Priority[0] == "bunny" || plain.TTL != 300 {
			t.Fatalf("a first request with no report: %+v", plain)
		}
	}
	if kept != 100 {
		t.Fatal(kept)
	}
}

// TestSteerKeepsBaseFirst: a pool whose edges are all clones of clone_from
// (the station seed's "."; here "origin", which the front's tag names as
// PATHWAY-ID) reads a first request's _HLS_pathway or _DASH_pathway naming
// clone_from, which the report names no edge for, and keeps the session
// on it: clone_from first, then the session's order, TTL pool.KeepTTL.
func TestSteerKeepsBaseFirst(t *testing.T) {
	d, _, _ := testDeps(t)
	for _, base := range []string{"origin", "."} {
		c := testPool()
		c.CloneFrom = base
		ps, err := New(context.Background(), d, []pool.Config{c})
		if err != nil {
			t.Fatal(err)
		}
		ph := ps.Named("")
		get := func(target string) (int, []string, string) {
			t.Helper()
			rec := httptest.NewRecorder()
			ph.ServeSteer(rec, httptest.NewRequest(http.MethodGet, target, nil))
			var m struct {
				TTL      int      `json:"TTL"`
				Reload   string   `json:"RELOAD-URI"`
				Priority []string `json:"PATHWAY-PRIORITY"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &m); rec.Code != http.StatusOK || err != nil {
				t.Fatalf("%s: %d %s: %v", target, rec.Code, rec.Body, err)
			}
			return m.TTL, m.Priority, m.Reload
		}
		for _, q := range []string{"_HLS_pathway=" + url.QueryEscape(base) + "&_HLS_throughput=500000", `_DASH_pathway="` + url.QueryEscape(base) + `"`} {
			ttl, prio, reload := get(pool.DefaultPath + "?" + q)
			u, err := url.Parse(reload)
			if err != nil {
				t.Fatal(err)
			}
			ownTTL, own, _ := get(u.RequestURI() + "&" + q)
			if want := append([]string{base}, own...); !slices.Equal(prio, want) || ttl != pool.KeepTTL || ownTTL != 300 || slices.Contains(own, base) {
				t.Fatalf("clone_from %q, %s: first %q TTL %d, then %q TTL %d; want %q TTL %d, then the session's order", base, q, prio, ttl, own, ownTTL, want, pool.KeepTTL)
			}
		}
		if _, prio, _ := get(pool.DefaultPath + "?_HLS_pathway=elsewhere"); prio[0] == base {
			t.Fatalf("a pathway of neither: %q", prio)
		}
		ps.Stop()
	}
}
