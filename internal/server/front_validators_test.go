package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
)

// TestFrontValidators (issue 28, "Validators exact"), through the server
// behind each engine, on newFrontEnv's directory origin. The expected
// tags are derived by hand: the directory's ETag is the first 16 bytes of
// the SHA-256 of the file (origin's package doc), the front's adds "-ws"
// and the first 8 bytes of the SHA-256 of the line served, each as
// `printf '%s' … | sha256sum` gives it. It shows that a 304 never keeps
// an old line: after a reload that changes the pool's PATHWAY-ID the old
// tag gets a 200 and the new line; after a reload that gives the pool no
// edges, and one that gives it edges again, the tag of the other state
// gets a 200; the origin's bare tag and a date get a 200 of a steered
// playlist; and a 304 carries its 200's ETag and Vary: User-Agent
// (RFC 9110 §15.4.5), a media playlist's the origin's tag and no Vary.
func TestFrontValidators(t *testing.T) {
	const (
		dirTag   = `"1853c1b0dd65c3b1f788e30b17eaf8eb"` // frontMultivariant
		mediaTag = `"660206987b076c0c50412d1224393413"` // frontMedia
		dotTag   = `"1853c1b0dd65c3b1f788e30b17eaf8eb-wsc6b1a6710a108585"`
		mainTag  = `"1853c1b0dd65c3b1f788e30b17eaf8eb-wsd83ab22217c0eabd"`
	)
	seed := seedPool(nil, nil)
	e := newFrontEnv(t, seed)
	reload := func(c pool.Config) {
		t.Helper()
		if err := e.srv.ReloadPools(context.Background(), []pool.Config{c}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string, h ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", e.ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("User-Agent", chrome)
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	check := func(what string, resp *http.Response, status int, etag, vary string) {
		t.Helper()
		h := resp.Header
		if resp.StatusCode != status || h.Get("ETag") != etag || strings.Join(h.Values("Vary"), ", ") != vary {
			t.Errorf("%s: %d ETag %q Vary %q; want %d %q %q", what, resp.StatusCode, h.Get("ETag"), h.Values("Vary"), status, etag, vary)
		}
		if status == http.StatusNotModified && h.Get("Content-Type") != "" {
			t.Errorf("%s: a 304 with Content-Type %q", what, h.Get("Content-Type"))
		}
		if status == http.StatusOK && etag != dirTag && h.Get("Last-Modified") != "" {
			t.Errorf("%s: a steered playlist with the origin's Last-Modified %q", what, h.Get("Last-Modified"))
		}
	}
	const pl = "/hls/live.m3u8"
	check("steered", get(pl), 200, dotTag, "User-Agent")
	check("its tag", get(pl, "If-None-Match", dotTag), 304, dotTag, "User-Agent")
	check("the origin's bare tag", get(pl, "If-None-Match", dirTag), 200, dotTag, "User-Agent")
	check("a wrong line digest", get(pl, "If-None-Match", `"1853c1b0dd65c3b1f788e30b17eaf8eb-ws0000000000000000"`), 200, dotTag, "User-Agent")
	// The file was written before now: the directory origin would answer
	// this date 304.
	check("a date", get(pl, "If-Modified-Since", time.Now().UTC().Format(http.TimeFormat)), 200, dotTag, "User-Agent")
	check("a media playlist", get("/hls/low/index.m3u8", "If-None-Match", mediaTag), 304, mediaTag, "")

	// SIGHUP: the pool's PATHWAY-ID is now cdn-main. The tag served
	// before, whatever it is, names the old line.
	before := get(pl).Header.Get("ETag")
	main := seedPool(nil, nil)
	main.CloneFrom = "cdn-main"
	reload(main)
	check("reloaded: the tag served before", get(pl, "If-None-Match", before), 200, mainTag, "User-Agent")
	check("reloaded: the old tag", get(pl, "If-None-Match", dotTag), 200, mainTag, "User-Agent")
	check("reloaded: the new tag", get(pl, "If-None-Match", mainTag), 304, mainTag, "User-Agent")

	// SIGHUP: no edges, the playlist as the origin wrote it; then edges.
	before = get(pl).Header.Get("ETag")
	empty := seedPool(nil, nil)
	empty.Edges = nil
	reload(empty)
	check("no edges: the tag served before", get(pl, "If-None-Match", before), 200, dirTag, "")
	check("no edges: a steered tag", get(pl, "If-None-Match", mainTag), 200, dirTag, "")
	check("no edges: the origin's tag", get(pl, "If-None-Match", dirTag), 304, dirTag, "")
	reload(seed)
	check("edges again: the origin's tag", get(pl, "If-None-Match", dirTag), 200, dotTag, "User-Agent")
}
