package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/store"
)

// Issue 28, "Every pathway plays" and "URLs as players resolve them",
// through the server on both engines (TestMain).

// newPlayEnv is a server with pool c and a front over og at /hls/ (or at
// paths), with bases.
func newPlayEnv(t *testing.T, c pool.Config, og *origin.Origin, bases map[string]string, paths ...string) *frontEnv {
	t.Helper()
	if len(paths) == 0 {
		paths = []string{"/hls/"}
	}
	var pls []FrontPlaylist
	for _, p := range paths {
		pls = append(pls, FrontPlaylist{Path: p})
	}
	e := &poolEnv{t: t, loads: store.NewLoads(), logs: &syncBuffer{}}
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{c}, OperatorToken: testToken,
		Front:  &FrontConfig{Origin: og, Bases: bases, Playlists: pls},
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}, store.NewMemory(), e.loads)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = serveTest(t, srv)
	t.Cleanup(func() { e.ts.Close(); srv.Close(context.Background()) })
	return &frontEnv{poolEnv: e}
}

func (e *frontEnv) getH(path string, h http.Header) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header = h
	c := &http.Client{Transport: e.ts.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s: %v", path, err)
	}
	return resp, b
}

// TestFrontDefaultPathwayPlays (issue 28, "The default pathway does not
// play"): a viewer on the playlist's own pathway, as the README configures
// the front (a directory origin), resolves the variant and its segment
// against the front's URL and gets them: the media playlist as the origin
// wrote it, then a segment larger than any buffer (3 MiB and 17 bytes)
// whole, with its length, and a byte range of it as 206. The old front
// answered the segment 502 origin_not_playlist.
func TestFrontDefaultPathwayPlays(t *testing.T) {
	dir := t.TempDir()
	seg := make([]byte, 3<<20+17)
	for i := range seg {
		seg[i] = byte(i % 251)
	}
	for name, b := range map[string][]byte{"hls/live.m3u8": []byte(frontMultivariant), "hls/low/index.m3u8": []byte(frontMedia), "hls/low/seg10.ts": seg} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newPlayEnv(t, seedPool(nil, nil), og, nil)
	h := http.Header{"User-Agent": {chrome}}
	resp, b := e.getH("/hls/live.m3u8", h)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "#EXT-X-CONTENT-STEERING:") || !strings.Contains(string(b), "\nlow/index.m3u8\n") {
		t.Fatalf("multivariant: %d\n%s", resp.StatusCode, b)
	}
	// The viewer resolves "low/index.m3u8" against /hls/live.m3u8, then
	// "seg10.ts" against /hls/low/index.m3u8 (RFC 3986 §5.2).
	resp, b = e.getH("/hls/low/index.m3u8", h)
	if resp.StatusCode != 200 || string(b) != frontMedia {
		t.Fatalf("media playlist: %d\n%s", resp.StatusCode, b)
	}
	resp, b = e.getH("/hls/low/seg10.ts", h)
	if resp.StatusCode != 200 || !bytes.Equal(b, seg) || resp.Header.Get("Content-Type") != "video/mp2t" {
		t.Fatalf("segment: %d, %d bytes (want %d), %q", resp.StatusCode, len(b), len(seg), resp.Header.Get("Content-Type"))
	}
	if resp.ContentLength != int64(len(seg)) {
		t.Errorf("segment: length %d, want %d", resp.ContentLength, len(seg))
	}
	head, err := http.NewRequest("HEAD", e.ts.URL+"/hls/low/seg10.ts", nil)
	if err != nil {
		t.Fatal(err)
	}
	if hr, err := e.ts.Client().Do(head); err != nil || hr.StatusCode != 200 || hr.ContentLength != int64(len(seg)) {
		t.Errorf("HEAD: %v %v", hr, err)
	} else {
		hr.Body.Close()
	}
	h.Set("Range", "bytes=1048576-1048675")
	resp, b = e.getH("/hls/low/seg10.ts", h)
	if resp.StatusCode != 206 || !bytes.Equal(b, seg[1048576:1048676]) || resp.Header.Get("Content-Range") != "bytes 1048576-1048675/3145745" {
		t.Errorf("range: %d, %d bytes, %q", resp.StatusCode, len(b), resp.Header.Get("Content-Range"))
	}
	h.Set("Range", "bytes=3145745-")
	if resp, _ = e.getH("/hls/low/seg10.ts", h); resp.StatusCode != 416 || resp.Header.Get("Content-Range") != "bytes */3145745" {
		t.Errorf("past the end: %d, %q", resp.StatusCode, resp.Header.Get("Content-Range"))
	}
}

// TestFrontPassDisconnect (issue 28, "bounded"): a player that leaves in
// the middle of a segment from an HTTP origin ends the origin's exchange
// (its request's context is cancelled), the stream's place is given back
// (the front's status shows none running), and no goroutine is left; no
// answer, a refusal included, names the origin's address.
func TestFrontPassDisconnect(t *testing.T) {
	gone := make(chan struct{}, 1)
	stop := make(chan struct{}) // a test that fails ends the origin's stream anyway
	og := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hls/endless.ts":
			w.Header().Set("Content-Type", "video/mp2t")
			// A stream nobody reads any more blocks a write: bounded, so
			// that a test that fails ends.
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(15 * time.Second))
			chunk := bytes.Repeat([]byte{0x47}, 64<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					break
				}
				select {
				case <-r.Context().Done():
				case <-stop:
				case <-time.After(time.Millisecond):
					continue
				}
				break
			}
			gone <- struct{}{}
		case "/hls/fails.ts":
			w.Header().Set("X-Origin", r.Host)
			w.WriteHeader(503)
		default:
			http.NotFound(w, r)
		}
	}))
	defer func() { close(stop); og.Close() }()
	o, err := origin.New(og.URL, origin.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := newPlayEnv(t, seedPool(nil, nil), o, nil)
	originHost := strings.TrimPrefix(og.URL, "http://")

	tr := &http.Transport{}
	req, _ := http.NewRequest("GET", e.ts.URL+"/hls/endless.ts", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1<<20)); err != nil {
		t.Fatalf("reading the first MiB: %v", err)
	}
	for k, vs := range resp.Header {
		if strings.Contains(strings.Join(vs, ","), originHost) {
			t.Errorf("%s names the origin: %q", k, vs)
		}
	}
	resp.Body.Close()
	tr.CloseIdleConnections()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Error("the origin's exchange goes on 10 s after its player left")
	}
	deadline := time.Now().Add(10 * time.Second)
	var st FrontStatus
	for {
		_, b := e.do("GET", "/v1/front/status", "", http.Header{"Authorization": {"Bearer " + testToken}})
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if st.PassThrough.Active == 0 && streaming() == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.PassThrough.Active != 0 || st.PassThrough.Streams != 1 {
		t.Errorf("pass-through counts %+v: one opened, none running", st.PassThrough)
	}
	if g := streaming(); g != "" {
		t.Errorf("a goroutine of the stream is left:\n%s", g)
	}
	for _, p := range []string{"/hls/fails.ts", "/hls/none.ts"} {
		resp, b := e.getH(p, http.Header{})
		if resp.StatusCode < 400 || strings.Contains(string(b), originHost) || strings.Contains(string(b), "127.0.0.1") || resp.Header.Get("X-Origin") != "" {
			t.Errorf("%s: %d %q %v", p, resp.StatusCode, b, resp.Header)
		}
	}
}

// streaming is the stack of a goroutine still in the pass-through (the
// front's, fasthttp's adaptor's, an origin body's copy), or "". The
// servers' own goroutines (listeners, kept connections, fasthttp's
// workers and clock) are not the stream's.
func streaming() string {
	buf := make([]byte, 1<<20)
	for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		for _, mark := range []string{"internal/front.", "fasthttpadaptor", "server.passBody", "origin.(*idleBody)", "io.Copy"} {
			if strings.Contains(g, mark) {
				return g
			}
		}
	}
	return ""
}

// TestFrontCloneURLs (issue 28, "URLs as players resolve them"), the
// issue's example through a pool: clone_from = "cdn-a", bases = { cdn-a =
// "https://cdn-a.example" }, the edge cdn-a.eu with HOST
// eu.cdn-a.example.net and params { token = "a/b~" }: a redirected viewer
// whose first is cdn-a.eu goes to https://eu.cdn-a.example.net/hls/...,
// with the session and the params (RFC 8216bis §7.3, form-encoded), never
// to the request's http and port; one whose first is cdn-a goes to its
// base.
func TestFrontCloneURLs(t *testing.T) {
	c := seedPool(nil, nil)
	c.CloneFrom = "cdn-a"
	c.Edges = []pool.Edge{
		{Pathway: "cdn-a", Weight: 1},
		{Pathway: "cdn-a.eu", Host: "eu.cdn-a.example.net", Weight: 1, Params: map[string]string{"token": "a/b~"}},
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "hls"), 0o755)
	os.WriteFile(filepath.Join(dir, "hls", "live.m3u8"), []byte(frontMultivariant), 0o644)
	og, _ := origin.New(dir, origin.Options{})
	e := newPlayEnv(t, c, og, map[string]string{"cdn-a": "https://cdn-a.example"})
	seen := map[string]bool{}
	for i := 0; i < 40 && len(seen) < 2; i++ {
		resp, _ := e.getH("/hls/a%2Fb/live.m3u8?x=1", http.Header{"User-Agent": {"Lavf/61.1.100"}})
		loc := resp.Header.Get("Location")
		s := locationSession.FindStringSubmatch(loc)
		if resp.StatusCode != 302 || s == nil {
			t.Fatalf("%d %q", resp.StatusCode, loc)
		}
		first := e.steer("/api/v1/steering?session=" + s[1]).Priority[0]
		want := map[string]string{
			"cdn-a":    "https://cdn-a.example/hls/a%2Fb/live.m3u8?x=1&session=" + s[1],
			"cdn-a.eu": "https://eu.cdn-a.example.net/hls/a%2Fb/live.m3u8?x=1&session=" + s[1] + "&token=a%2Fb%7E",
		}[first]
		if _, err := url.Parse(loc); err != nil || loc != want {
			t.Fatalf("first %s: Location %q, want %q (%v)", first, loc, want, err)
		}
		seen[first] = true
	}
	if len(seen) != 2 {
		t.Errorf("40 viewers all had %v first", seen)
	}
}

// TestFrontPathwayWarnings (issue 28, "Warnings ... at start and in the
// status"): a pool with clone_from = "." fronting a playlist whose
// variants all declare other pathways is reported at start, before any
// viewer, in the front's status (the playlist, the pathway written, those
// declared) and as the metric waisteer_front_pathway_warnings 1.
func TestFrontPathwayWarnings(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "hls"), 0o755)
	os.WriteFile(filepath.Join(dir, "hls", "live.m3u8"), []byte("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,PATHWAY-ID=\"cdn-a\"\na.m3u8\n"), 0o644)
	og, _ := origin.New(dir, origin.Options{})
	e := newPlayEnv(t, seedPool(nil, nil), og, nil, "/hls/live.m3u8")
	var st FrontStatus
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, b := e.do("GET", "/v1/front/status", "", http.Header{"Authorization": {"Bearer " + testToken}})
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Warnings) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(st.Warnings) != 1 || st.Warnings[0].Path != "/hls/live.m3u8" || st.Warnings[0].Pathway != "." || strings.Join(st.Warnings[0].Declared, ",") != "cdn-a" {
		t.Fatalf("warnings %+v", st.Warnings)
	}
	_, mb := e.do("GET", "/metrics", "", nil)
	if !strings.Contains(string(mb), "waisteer_front_pathway_warnings 1\n") {
		t.Error("metrics lack waisteer_front_pathway_warnings 1")
	}
	if !strings.Contains(e.logs.String(), "declares no pathway") {
		t.Errorf("not logged:\n%s", e.logs.String())
	}
}
