package front

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// TestOnPathwayVars (issue 28, "Backups"): a variable reference
// (rfc8216bis-22 §4.3: "{$" name "}", the name of [A-Za-z0-9_-]) is
// written byte for byte wherever it sits in a URI the front puts on a
// pathway, where net/url alone writes "%7B$rend%7D"; a URI whose scheme or
// host, or whose start, is a reference cannot be placed before the player
// substitutes it, and is not. Expected URIs written by hand from fixed's
// hosts ("<pathway>.example") and the base below.
func TestOnPathwayVars(t *testing.T) {
	f := &Front{bases: map[string]rawURL{"z": mustHTTP(t, "https://cdn-z.example/pre")}}
	base := mustHTTP(t, "http://front.example/hls/live.m3u8")
	noHost := hostless{}
	for _, c := range []struct {
		uri, pathway string
		st           Steering
		want         string
	}{
		{"live/{$rend}.m3u8", "a", fixed{}, "http://a.example/hls/live/{$rend}.m3u8"},
		{"https://origin.example/{$dir}/x.m3u8?token={$tok}&v={$A-b_9}", "b", fixed{}, "https://b.example/{$dir}/x.m3u8?token={$tok}&v={$A-b_9}"},
		{"live/{$rend}.m3u8", "z", noHost, "https://cdn-z.example/pre/hls/live/{$rend}.m3u8"},
		{"/{$a}{$b}/{$a}.m3u8", "a", fixed{}, "http://a.example/{$a}{$b}/{$a}.m3u8"},
		// Not references: written byte for byte as well, as every path is
		// (issue 28, "paths kept byte for byte").
		{"x{$}.m3u8", "a", fixed{}, "http://a.example/hls/x{$}.m3u8"},
		{"x{$a.b}.m3u8", "a", fixed{}, "http://a.example/hls/x{$a.b}.m3u8"},
		// Not placeable.
		{"{$base}/x.m3u8", "a", fixed{}, ""},
		{"https://{$host}/x.m3u8", "a", fixed{}, ""},
		{"{$scheme}://h/x.m3u8", "a", fixed{}, ""},
		{"a/{$x}/../b.m3u8", "a", fixed{}, ""}, // the reference's segment removed before substitution
		// A mask the URI already holds is not reused.
		{"wvar0z/{$x}.m3u8", "a", fixed{}, "http://a.example/hls/wvar0z/{$x}.m3u8"},
	} {
		if got := f.onPathwayVars(base, c.uri, c.pathway, c.st); got != c.want {
			t.Errorf("%q on %s: %q, want %q", c.uri, c.pathway, got, c.want)
		}
	}
}

func mustHTTP(t testing.TB, s string) rawURL {
	t.Helper()
	u, ok := parseHTTP(s)
	if !ok {
		t.Fatalf("%q does not read as an http URL", s)
	}
	return u
}

// hostless is a steering with no clones: its pathways' URIs come from the
// front's bases.
type hostless struct{ fixed }

func (hostless) Clone(string) (string, string, [][2]string, bool) { return "", "", nil, false }

// TestDropTargeted: the fields RFC 9213 aims at a CDN (§3 CDN-Cache-Control,
// §2 a targeted field of another name) and the older Surrogate-Control and
// Edge-Control go; Cache-Control and the rest stay.
func TestDropTargeted(t *testing.T) {
	h := http.Header{
		"Cdn-Cache-Control":            {"max-age=600"},
		"Cloudflare-Cdn-Cache-Control": {"max-age=600"},
		"Akamai-Cache-Control":         {"max-age=600"},
		"Surrogate-Control":            {"max-age=600"},
		"Edge-Control":                 {"cache-maxage=600s"},
		"Cache-Control":                {"private, no-store"},
		"Last-Modified":                {"Wed, 02 Dec 2026 07:00:00 GMT"},
		"Vary":                         {"Accept-Encoding"},
	}
	dropTargeted(h)
	var left []string
	for k := range h {
		left = append(left, k)
	}
	slices.Sort(left)
	if want := []string{"Cache-Control", "Last-Modified", "Vary"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
}

// An origin's steered multivariant playlist, by hand from rfc8216bis-22
// (EXT-X-DEFINE §4.4.2.3 with its reference in the URI lines, §4.3; the
// steering tag §4.4.6.6; PATHWAY-ID §4.4.6.2), each variant on the
// origin's two pathways.
const steeredPlaylist = "#EXTM3U\n" +
	"#EXT-X-VERSION:11\n" +
	"#EXT-X-DEFINE:NAME=\"rend\",VALUE=\"720p\"\n" +
	"#EXT-X-CONTENT-STEERING:SERVER-URI=\"https://steer.origin.example/s\",PATHWAY-ID=\"cdn-a\"\n" +
	"#EXT-X-STREAM-INF:BANDWIDTH=1000000,PATHWAY-ID=\"cdn-a\"\n" +
	"https://cdn-a.example/live/{$rend}.m3u8\n" +
	"#EXT-X-STREAM-INF:BANDWIDTH=1000000,PATHWAY-ID=\"cdn-b\"\n" +
	"https://cdn-b.example/live/{$rend}.m3u8\n"

// TestFrontBackupPlaylist (issue 28, "Backups"), through the handler, from
// an HTTP origin that sends CDN-Cache-Control: the viewer's backup playlist
// (the OTT seed: a player that does not steer moves to the backup variants
// listed) carries none of the origin's steering lines or PATHWAY-IDs, its
// "{$rend}" as the origin wrote it, and none of the CDN's own cache field
// on a "private, no-store" answer, which a CDN would obey over
// Cache-Control (RFC 9213 §2.2) and serve to the next viewer. A player
// that steers gets the shared playlist, the origin's field with it.
func TestFrontBackupPlaylist(t *testing.T) {
	og := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "max-age=2")
		w.Header().Set("CDN-Cache-Control", "max-age=60")
		w.Write([]byte(steeredPlaylist))
	}))
	defer og.Close()
	o, err := origin.New(og.URL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := New(Config{Origin: o, Playlists: []Playlist{{Path: "/live/", Steering: fixed{}}}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(query string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://front.example/live/main.m3u8"+query, nil)
		r.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0.0.0 Safari/537.36")
		w := httptest.NewRecorder()
		fr.ServeHTTP(w, r)
		return w
	}
	// fixed's order is a, b, c on the hosts a.example, b.example and
	// c.example: the primaries on a, the backups on b and c; the variant
	// the origin had on cdn-b is the same variant once on a.
	want := "#EXTM3U\n" +
		"#EXT-X-VERSION:11\n" +
		"#EXT-X-DEFINE:NAME=\"rend\",VALUE=\"720p\"\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
		"https://a.example/live/{$rend}.m3u8\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
		"https://b.example/live/{$rend}.m3u8\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
		"https://c.example/live/{$rend}.m3u8\n"
	w := get("?" + ModeParam + "=backup")
	if w.Code != http.StatusOK || w.Body.String() != want {
		t.Errorf("backup: %d\n%s\nwant\n%s", w.Code, w.Body, want)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "private, no-store" {
		t.Errorf("backup: Cache-Control %q", cc)
	}
	if v := w.Header().Values("CDN-Cache-Control"); len(v) != 0 {
		t.Errorf("backup: the origin's CDN-Cache-Control %q passed on a viewer's own playlist", v)
	}

	w = get("")
	wantSteered := strings.Replace(steeredPlaylist,
		"#EXT-X-CONTENT-STEERING:SERVER-URI=\"https://steer.origin.example/s\",PATHWAY-ID=\"cdn-a\"\n",
		"#EXT-X-CONTENT-STEERING:SERVER-URI=\"/s\",PATHWAY-ID=\".\"\n", 1)
	if w.Code != http.StatusOK || w.Body.String() != wantSteered {
		t.Fatalf("steered: %d\n%s\nwant\n%s", w.Code, w.Body, wantSteered)
	}
	if v := w.Header().Get("CDN-Cache-Control"); v != "max-age=60" {
		t.Errorf("steered: CDN-Cache-Control %q, want the origin's", v)
	}
}
