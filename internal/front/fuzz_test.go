package front

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// fixed is a steering of three pathways in a fixed order.
type fixed struct{}

func (fixed) Name() string { return "fixed" }
func (fixed) Tags() (string, string) {
	return `#EXT-X-CONTENT-STEERING:SERVER-URI="/s",PATHWAY-ID="."`, `<ContentSteering>/s</ContentSteering>`
}
func (fixed) Open(_ context.Context, q string, _ http.Header) (Opening, error) {
	return Opening{Order: []string{"a", "b", "c"}, Query: "session=0123"}, nil
}
func (fixed) Host(p string) string { return p + ".example" }
func (fixed) Pathways() []string   { return []string{"a", "b", "c"} }

// FuzzFront: any path, query, User-Agent and If-None-Match a player sends
// is answered without a panic: a playlist with the line, a redirect whose
// Location parses and drops the mode parameter, or a refusal; the origin
// never sees the mode parameter.
func FuzzFront(f *testing.F) {
	dir := f.TempDir()
	os.WriteFile(filepath.Join(dir, "live.m3u8"), []byte("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "live.mpd"), []byte(`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"><Period/></MPD>`), 0o644)
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		f.Fatal(err)
	}
	fr, err := New(Config{Origin: og, Playlists: []Playlist{{Path: "/", Steering: fixed{}}}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][4]string{
		{"/live.m3u8", "", "Mozilla/5.0 Chrome", ""},
		{"/live.m3u8", "waisteer_mode=backup", "x", `"a-ws01234567"`},
		{"/live.mpd", "session=zz&waisteer_mode=redirect&waisteer_mode=steer", "", ""},
		{"/live.m3u8", "a=%zz&b", "VLC/3", `W/"x", *`},
		{"/../x", "", "Lavf", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, p, q, ua, inm string) {
		u := &url.URL{Path: p, RawQuery: q}
		r := httptest.NewRequest("GET", "http://front.example/", nil)
		r.URL, r.RequestURI = u, u.RequestURI()
		r.Header.Set("User-Agent", ua)
		r.Header.Set("If-None-Match", inm)
		w := httptest.NewRecorder()
		fr.ServeHTTP(w, r)
		if w.Code == http.StatusFound {
			loc := w.Header().Get("Location")
			lu, err := url.Parse(loc)
			if err != nil || !strings.HasSuffix(lu.Host, ".example") {
				t.Fatalf("Location %q: %v", loc, err)
			}
			if strings.Contains(lu.RawQuery, ModeParam+"=") {
				t.Fatalf("Location %q carries the mode", loc)
			}
		}
		if w.Code == http.StatusOK && strings.HasSuffix(p, ".m3u8") && !strings.Contains(w.Body.String(), "BANDWIDTH") {
			t.Fatalf("a playlist without variants: %q", w.Body)
		}
	})
}

// FuzzOnPathwayVars (issue 28, "Backups"): any URI an origin writes is put
// on a pathway without a panic, and when it is, as a URI that parses and
// with exactly its variable references (rfc8216bis-22 §4.3), in order,
// byte for byte.
func FuzzOnPathwayVars(f *testing.F) {
	for _, s := range []string{"live/{$rend}.m3u8", "https://o.example/{$a}/x?t={$t}", "{$base}/x", "a/{$x}/../b", "x{$a.b}y", "wvar0z{$q}", "//h/{$x}", "?{$q}#{$f}"} {
		f.Add(s)
	}
	fr := &Front{bases: map[string]string{}}
	base, _ := url.Parse("https://front.example/hls/live.m3u8")
	f.Fuzz(func(t *testing.T, uri string) {
		out := fr.onPathwayVars(base, uri, "b", fixed{})
		if out == "" {
			return
		}
		if got, want := varRefs(out), varRefs(uri); !slices.Equal(got, want) {
			t.Fatalf("%q written %q: references %q, want %q", uri, out, got, want)
		}
		if _, err := url.Parse(out); err != nil {
			t.Fatalf("%q written %q: %v", uri, out, err)
		}
	})
}
