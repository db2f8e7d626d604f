package front

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// TestResolveRFC3986: the front's resolver gives RFC 3986 §5.4's answers
// (§5.4.1 normal, §5.4.2 abnormal, strict), copied from the RFC, against
// its base "http://a/b/c/d;p?q"; "//g" is "http://g/", as a player (the
// URL standard) writes an empty path; a reference with another scheme
// ("g:h", and "http:g", which the strict parser reads as a scheme and a
// path with no host) is not placed.
func TestResolveRFC3986(t *testing.T) {
	base := mustHTTP(t, "http://a/b/c/d;p?q")
	for ref, want := range map[string]string{
		"g": "http://a/b/c/g", "./g": "http://a/b/c/g", "g/": "http://a/b/c/g/", "/g": "http://a/g",
		"//g": "http://g/", "?y": "http://a/b/c/d;p?y", "g?y": "http://a/b/c/g?y", "#s": "http://a/b/c/d;p?q#s",
		"g#s": "http://a/b/c/g#s", "g?y#s": "http://a/b/c/g?y#s", ";x": "http://a/b/c/;x", "g;x": "http://a/b/c/g;x",
		"g;x?y#s": "http://a/b/c/g;x?y#s", "": "http://a/b/c/d;p?q", ".": "http://a/b/c/", "./": "http://a/b/c/",
		"..": "http://a/b/", "../": "http://a/b/", "../g": "http://a/b/g", "../..": "http://a/", "../../": "http://a/",
		"../../g":    "http://a/g",
		"../../../g": "http://a/g", "../../../../g": "http://a/g", "/./g": "http://a/g", "/../g": "http://a/g",
		"g.": "http://a/b/c/g.", ".g": "http://a/b/c/.g", "g..": "http://a/b/c/g..", "..g": "http://a/b/c/..g",
		"./../g": "http://a/b/g", "./g/.": "http://a/b/c/g/", "g/./h": "http://a/b/c/g/h", "g/../h": "http://a/b/c/h",
		"g;x=1/./y": "http://a/b/c/g;x=1/y", "g;x=1/../y": "http://a/b/c/y", "g?y/./x": "http://a/b/c/g?y/./x",
		"g?y/../x": "http://a/b/c/g?y/../x", "g#s/./x": "http://a/b/c/g#s/./x", "g#s/../x": "http://a/b/c/g#s/../x",
		// Escapes are names, never decoded (issue 28: paths byte for byte).
		"a%2Fb/%2e%2E/c%7Bx%7D": "http://a/b/c/a%2Fb/%2e%2E/c%7Bx%7D",
	} {
		got, ok := resolve(base, ref)
		if !ok || got.String() != want {
			t.Errorf("%q: %q %v, want %q", ref, got, ok, want)
		}
	}
	for _, ref := range []string{"g:h", "http:g", "a0:0", "data:text/plain,x", "mailto:a@b", "///g"} {
		if got, ok := resolve(base, ref); ok {
			t.Errorf("%q placed as %q", ref, got)
		}
	}
}

// TestWithParams (RFC 8216bis §7.3, URI-REPLACEMENT PARAMS; hls.js
// URL.searchParams.set with the names sorted): each parameter is added,
// replacing one of the same name, in the order of the names, as the URL
// standard's form serializer writes it (' ' '+', '/' "%2F", '~' "%7E",
// 'é' "%C3%A9", '*-._' as they are); the query's other parameters byte
// for byte.
func TestWithParams(t *testing.T) {
	ps := [][2]string{{"token", "a b/c~"}, {"cdn", "eu"}, {"n*-._", "é"}}
	for _, c := range []struct {
		q    string
		has  bool
		want string
	}{
		{"", false, "cdn=eu&n*-._=%C3%A9&token=a+b%2Fc%7E"},
		{"sig=a%2fb~&token=old", true, "sig=a%2fb~&cdn=eu&n*-._=%C3%A9&token=a+b%2Fc%7E"},
		{"tok%65n=old&cdn&x=1", true, "x=1&cdn=eu&n*-._=%C3%A9&token=a+b%2Fc%7E"}, // "tok%65n" reads "token", "cdn" with no value is named
		{"", true, "cdn=eu&n*-._=%C3%A9&token=a+b%2Fc%7E"},
	} {
		got, has := withParams(c.q, c.has, ps)
		if got != c.want || !has {
			t.Errorf("%q: %q, want %q", c.q, got, c.want)
		}
	}
	if got, has := withParams("a=%zz", true, nil); got != "a=%zz" || !has {
		t.Errorf("no params: %q", got)
	}
}

// clones is a steering whose pathways are those of the example
// (issue 28, "URLs"): cdn-a declared (its base configured), cdn-a.eu a
// clone of cdn-a on eu.cdn-a.example.net with PARAMS, cdn-b.x a clone of
// the playlist's own pathway "." (no base), cdn-z a clone with a base of
// its own; the order is set by the test.
type clones struct{ order []string }

func (clones) Name() string { return "clones" }
func (clones) Tags() (string, string) {
	return `#EXT-X-CONTENT-STEERING:SERVER-URI="/s",PATHWAY-ID="cdn-a"`, ""
}
func (c clones) Open(context.Context, string, http.Header) (Opening, error) {
	return Opening{Order: c.order, Query: "session=0123"}, nil
}
func (clones) Clone(p string) (string, string, [][2]string, bool) {
	switch p {
	case "cdn-a.eu":
		return "cdn-a", "eu.cdn-a.example.net", [][2]string{{"token", "a b/c"}, {"cdn", "eu"}}, true
	case "cdn-b.x":
		return ".", "x.cdn-b.example", nil, true
	case "cdn-z":
		return "cdn-a", "ignored.example", [][2]string{{"z", "1"}}, true
	}
	return "", "", nil, false
}
func (clones) Pathways() []string { return []string{"cdn-a", "cdn-a.eu", "cdn-b.x", "cdn-z"} }

func newClonesFront(t *testing.T, order ...string) *Front {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "live"), 0o755)
	os.WriteFile(filepath.Join(dir, "live", "master.m3u8"), []byte("#EXTM3U\n"+
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n720p.m3u8\n"+
		"#EXT-X-STREAM-INF:BANDWIDTH=500000\n360p.m3u8?token=old&x=%2F\n"+
		"#EXT-X-STREAM-INF:BANDWIDTH=100000\na0:0\n"), 0o644)
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := New(Config{Origin: og, Playlists: []Playlist{{Path: "/live/", Steering: clones{order}}},
		Bases: map[string]string{"cdn-a": "https://cdn-a.example", "cdn-z": "https://z.example/pre/"}})
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

// TestRedirectAsPlayers (issue 28, "URLs as players resolve them"): the
// issue's own example, bases = { cdn-a = "https://cdn-a.example" } and
// the clone cdn-a.eu of HOST eu.cdn-a.example.net, redirects to
// https://eu.cdn-a.example.net/live/..., not to the request's
// http://...:18082; PARAMS added (sorted, form-encoded); the path, "%2F"
// included, byte for byte; a clone of "." keeps the scheme and port the
// viewer reached; a clone's configured base wins over its HOST.
func TestRedirectAsPlayers(t *testing.T) {
	for _, c := range []struct {
		first, path, want string
	}{
		{"cdn-a.eu", "/live/master.m3u8?t=1", "https://eu.cdn-a.example.net/live/master.m3u8?t=1&session=0123&cdn=eu&token=a+b%2Fc"},
		{"cdn-a", "/live/a%2Fb/master.m3u8", "https://cdn-a.example/live/a%2Fb/master.m3u8?session=0123"},
		{"cdn-a.eu", "/live/a%2Fb/x%7e.m3u8", "https://eu.cdn-a.example.net/live/a%2Fb/x%7e.m3u8?session=0123&cdn=eu&token=a+b%2Fc"},
		{"cdn-b.x", "/live/master.m3u8", "http://x.cdn-b.example:18082/live/master.m3u8?session=0123"},
		{"cdn-z", "/live/master.m3u8", "https://z.example/pre/live/master.m3u8?session=0123&z=1"},
	} {
		fr := newClonesFront(t, c.first)
		r := httptest.NewRequest("GET", "http://front.example:18082"+c.path, nil)
		r.Header.Set("User-Agent", "Lavf/61.1.100")
		w := httptest.NewRecorder()
		fr.ServeHTTP(w, r)
		if got := w.Header().Get("Location"); w.Code != http.StatusFound || got != c.want {
			t.Errorf("%s %s: %d %q, want %q", c.first, c.path, w.Code, got, c.want)
		}
	}
}

// TestBackupsAsPlayers (issue 28, "URLs as players resolve them"): a
// backup viewer's variants are on its order's pathways as a player that
// steers would write them: the clone of cdn-a on cdn-a's https base with
// the host replaced and PARAMS (replacing the origin's token, the rest of
// the query byte for byte), the clone of "." on the viewer's scheme and
// port, the clone with a base on its base with its PARAMS; an opaque URI
// ("a0:0") left as the origin wrote it, with no backups.
func TestBackupsAsPlayers(t *testing.T) {
	fr := newClonesFront(t, "cdn-a.eu", "cdn-b.x", "cdn-z")
	r := httptest.NewRequest("GET", "http://front.example:18082/live/master.m3u8?"+ModeParam+"=backup", nil)
	w := httptest.NewRecorder()
	fr.ServeHTTP(w, r)
	want := "#EXTM3U\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\nhttps://eu.cdn-a.example.net/live/720p.m3u8?cdn=eu&token=a+b%2Fc\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=500000\nhttps://eu.cdn-a.example.net/live/360p.m3u8?x=%2F&cdn=eu&token=a+b%2Fc\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=100000\na0:0\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\nhttp://x.cdn-b.example:18082/live/720p.m3u8\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=500000\nhttp://x.cdn-b.example:18082/live/360p.m3u8?token=old&x=%2F\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\nhttps://z.example/pre/live/720p.m3u8?z=1\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=500000\nhttps://z.example/pre/live/360p.m3u8?token=old&x=%2F&z=1\n"
	if w.Code != http.StatusOK || w.Body.String() != want {
		t.Errorf("%d\n%s\nwant\n%s", w.Code, w.Body, want)
	}
}
