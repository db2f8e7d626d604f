package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/store"
)

// frontSteeredOrigin is an origin's steered multivariant playlist, by hand
// from rfc8216bis-22: a variable (§4.4.2.3 EXT-X-DEFINE) referenced in the
// URI lines (§4.3), its own steering tag (§4.4.6.6), each variant on its
// two pathways (§4.4.6.2 PATHWAY-ID).
const frontSteeredOrigin = "#EXTM3U\n" +
	"#EXT-X-VERSION:11\n" +
	"#EXT-X-DEFINE:NAME=\"rend\",VALUE=\"720p\"\n" +
	"#EXT-X-CONTENT-STEERING:SERVER-URI=\"https://steer.origin.example/s\",PATHWAY-ID=\"cdn-a\"\n" +
	"#EXT-X-STREAM-INF:BANDWIDTH=1000000,PATHWAY-ID=\"cdn-a\"\n" +
	"https://cdn-a.example/live/{$rend}.m3u8\n" +
	"#EXT-X-STREAM-INF:BANDWIDTH=1000000,PATHWAY-ID=\"cdn-b\"\n" +
	"https://cdn-b.example/live/{$rend}.m3u8\n"

// cdnFields are the fields by which an origin tells a CDN, over
// Cache-Control, how long to keep an answer (RFC 9213 §3 and §2; the older
// Surrogate-Control and Edge-Control).
var cdnFields = []string{"CDN-Cache-Control", "Cloudflare-CDN-Cache-Control", "Surrogate-Control", "Edge-Control"}

// TestFrontBackupsIssue28 (issue 28, "Backups"), on both engines, with the
// station seed's pool over an HTTP origin that sends CDN-Cache-Control: a
// player given backup variants (the OTT seed: it moves to the backups
// listed, steering nothing) gets a playlist with none of the origin's
// steering tags or PATHWAY-IDs, "{$rend}" as the origin wrote it, the
// variant the origin had on two pathways once per pathway of its order,
// and, being its own ("private, no-store"), none of the CDN's fields. The
// redirect and the steering manifest, which the server writes itself,
// carry none either.
func TestFrontBackupsIssue28(t *testing.T) {
	og := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "max-age=2")
		for _, f := range cdnFields {
			w.Header().Set(f, "max-age=60")
		}
		io.WriteString(w, frontSteeredOrigin)
	}))
	defer og.Close()
	o, err := origin.New(og.URL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &poolEnv{t: t, loads: store.NewLoads(), logs: &syncBuffer{}}
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{seedPool(nil, nil)}, OperatorToken: testToken,
		Front:  &FrontConfig{Origin: o, Playlists: []FrontPlaylist{{Path: "/live/"}}},
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}, store.NewMemory(), e.loads)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = serveTest(t, srv)
	t.Cleanup(func() { e.ts.Close(); srv.Close(context.Background()) })
	fe := &frontEnv{poolEnv: e}

	resp, b := fe.get("/live/main.m3u8?waisteer_mode=backup", chrome)
	// The seed's pool: edge-1 and edge-2 in the viewer's order, then bunny
	// (kettle-cdn.example); a clone replaces the host of the origin's
	// https URI.
	want := func(first, second string) string {
		return "#EXTM3U\n" +
			"#EXT-X-VERSION:11\n" +
			"#EXT-X-DEFINE:NAME=\"rend\",VALUE=\"720p\"\n" +
			"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
			"https://" + first + "/live/{$rend}.m3u8\n" +
			"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
			"https://" + second + "/live/{$rend}.m3u8\n" +
			"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
			"https://kettle-cdn.example/live/{$rend}.m3u8\n"
	}
	if s := string(b); resp.StatusCode != 200 || s != want("edge-1.edges.example", "edge-2.edges.example") && s != want("edge-2.edges.example", "edge-1.edges.example") {
		t.Errorf("backup: %d\n%s\nwant\n%s(or edge-2 first)", resp.StatusCode, b, want("edge-1.edges.example", "edge-2.edges.example"))
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "private, no-store" {
		t.Errorf("backup: Cache-Control %q", cc)
	}
	for _, f := range cdnFields {
		if v := resp.Header.Values(f); len(v) > 0 {
			t.Errorf("backup: %s %q on a viewer's own playlist", f, v)
		}
	}

	resp, _ = fe.get("/live/main.m3u8", "Lavf/60.16.100")
	if resp.StatusCode != http.StatusFound {
		t.Errorf("ffmpeg: %d, want a redirect", resp.StatusCode)
	}
	steer, _ := fe.get(pool.DefaultPath, chrome)
	for _, r := range []*http.Response{resp, steer} {
		for _, f := range cdnFields {
			if v := r.Header.Values(f); len(v) > 0 {
				t.Errorf("%s: %s %q", r.Request.URL.Path, f, v)
			}
		}
	}
}
