package front

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// The lines of these tests and the first 8 bytes of their SHA-256, in
// hexadecimal, as `printf '%s' LINE | sha256sum | cut -c1-16` gives them.
const (
	lineA   = `#EXT-X-CONTENT-STEERING:SERVER-URI="/s",PATHWAY-ID="a"`
	digestA = "b913951a97f52704"
	lineB   = `#EXT-X-CONTENT-STEERING:SERVER-URI="/s",PATHWAY-ID="b"`
	digestB = "9b9a62aae2ae4025"
	dashA   = `<ContentSteering defaultServiceLocation="a">/s</ContentSteering>`
	digestD = "395cea06a13c03fb"

	originLM = "Tue, 01 Dec 2026 10:00:00 GMT"
	laterLM  = "Tue, 01 Dec 2026 10:00:01 GMT"
	chromeUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36"
)

// reloaded is a steering whose lines a test changes, as a reload does;
// both "" is steering off (a pool with no edges).
type reloaded struct {
	mu        sync.Mutex
	hls, dash string
}

func (s *reloaded) set(hls, dash string) { s.mu.Lock(); s.hls, s.dash = hls, dash; s.mu.Unlock() }
func (s *reloaded) Name() string         { return "reloaded" }
func (s *reloaded) Tags() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hls, s.dash
}
func (s *reloaded) Open(context.Context, string, http.Header) (Opening, error) {
	return Opening{Order: []string{"a", "b", "c"}, Query: "session=0123"}, nil
}
func (s *reloaded) Clone(p string) (string, string, [][2]string, bool) {
	return ".", p + ".example", nil, true
}
func (s *reloaded) Pathways() []string { return []string{"a", "b", "c"} }

// validatingOrigin is an HTTP origin whose validators are fixed: each
// file's ETag, one Last-Modified, Cache-Control: max-age=1 and
// Vary: Accept-Encoding. It answers 304 as RFC 9110 §13.2.2 says (the
// weak comparison for If-None-Match, else If-Modified-Since not before
// Last-Modified), or, lying, to any conditional request with the ETag
// "v0"; it keeps the conditional fields of each request.
type validatingOrigin struct {
	mu   sync.Mutex
	lie  bool
	seen [][2]string // If-None-Match, If-Modified-Since
}

var originFiles = map[string][3]string{ // body, ETag, Content-Type
	"/live.m3u8": {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n", `"v1"`, "application/vnd.apple.mpegurl"},
	"/low.m3u8":  {"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns.ts\n", `"m1"`, "application/vnd.apple.mpegurl"},
	"/live.mpd":  {`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"><Period/></MPD>`, `W/"d1"`, "application/dash+xml"},
}

func (o *validatingOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	inm, ims := r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")
	o.mu.Lock()
	o.seen = append(o.seen, [2]string{inm, ims})
	lie := o.lie
	o.mu.Unlock()
	f, ok := originFiles[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("ETag", f[1])
	h.Set("Last-Modified", originLM)
	h.Set("Cache-Control", "max-age=1")
	h.Set("Vary", "Accept-Encoding")
	notModified := false
	switch {
	case lie && (inm != "" || ims != ""):
		h.Set("ETag", `"v0"`)
		notModified = true
	case inm != "":
		for part := range strings.SplitSeq(inm, ",") {
			notModified = notModified || strings.TrimPrefix(strings.TrimSpace(part), "W/") == strings.TrimPrefix(f[1], "W/")
		}
	case ims != "":
		since, err1 := http.ParseTime(ims)
		mod, _ := http.ParseTime(originLM)
		notModified = err1 == nil && !mod.After(since)
	}
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", f[2])
	io.WriteString(w, f[0])
}

func (o *validatingOrigin) take() [][2]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.seen
	o.seen = nil
	return s
}

// TestValidators (issue 28, "Validators exact"): hand-derived requests to
// the front's handler, in turn, while the steering's line changes as
// reloads change it. Each says what the front answers (status, ETag,
// Vary, Cache-Control, whether Last-Modified is there) and what the
// origin was asked. What each shows:
//   - a steered ETag is the origin's with the digest of the exact line
//     served (RFC 9110 §8.8.3), and its revalidation asks the origin for
//     the origin's tag;
//   - a tag whose line part is wrong or old, the origin's bare tag, and
//     If-Modified-Since on a steered playlist get a 200 with the current
//     line, and the origin is asked for the whole playlist;
//   - steering off, the playlist and its validators are the origin's, and
//     If-Modified-Since is honoured when it is the Last-Modified exactly
//     (§13.1.3); when steering comes back, neither the bare tag nor the
//     date keeps the line-less playlist;
//   - a 304 carries its 200's ETag, Vary and Cache-Control and no ETag its
//     200 lacks (§15.4.5): a media playlist keeps the origin's tag, a
//     viewer's own playlist of backups has none;
//   - an origin's 304 naming a tag not asked for is not believed: the
//     playlist is fetched whole and the front judges the tag itself.
func TestValidators(t *testing.T) {
	og := &validatingOrigin{}
	srv := httptest.NewServer(og)
	t.Cleanup(srv.Close)
	o, err := origin.New(srv.URL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &reloaded{}
	fr, err := New(Config{Origin: o, Playlists: []Playlist{{Path: "/", Steering: st}}})
	if err != nil {
		t.Fatal(err)
	}
	tagA, tagB := `"v1-ws`+digestA+`"`, `"v1-ws`+digestB+`"`
	steeredVary, plainVary := "Accept-Encoding, User-Agent", "Accept-Encoding"
	const whole = "" // the origin asked for the whole playlist
	for _, c := range []struct {
		name       string
		hls, dash  string // the steering's lines now
		target     string
		inm, ims   string
		lie        bool
		status     int
		etag, vary string
		cc         string
		lm         bool
		originINM  []string // what each origin request's If-None-Match was
	}{
		{name: "steered", hls: lineA, dash: dashA, target: "/live.m3u8",
			status: 200, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "its tag, revalidated with the origin's", hls: lineA, dash: dashA, target: "/live.m3u8", inm: tagA,
			status: 304, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{`"v1"`}},
		{name: "two field lines, the tag weak", hls: lineA, dash: dashA, target: "/live.m3u8", inm: `"zz"` + "\n" + `W/"v1-ws` + digestA + `"`,
			status: 304, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{`W/"v1"`}},
		{name: "a line digest that is wrong", hls: lineA, dash: dashA, target: "/live.m3u8", inm: `"v1-ws0000000000000000"`,
			status: 200, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "the origin's bare tag", hls: lineA, dash: dashA, target: "/live.m3u8", inm: `"v1"`,
			status: 200, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "the origin's date", hls: lineA, dash: dashA, target: "/live.m3u8", ims: originLM,
			status: 200, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "*", hls: lineA, dash: dashA, target: "/live.m3u8", inm: "*",
			status: 304, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "not a tag", hls: lineA, dash: dashA, target: "/live.m3u8", inm: `v1-ws` + digestA,
			status: 200, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "the origin's 304 names a tag not asked for", hls: lineA, dash: dashA, target: "/live.m3u8", inm: tagA, lie: true,
			status: 304, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{`"v1"`, whole}},
		// A reload changes the pool's PATHWAY-ID.
		{name: "reloaded: the old tag", hls: lineB, dash: dashA, target: "/live.m3u8", inm: tagA,
			status: 200, etag: tagB, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "reloaded: the new tag", hls: lineB, dash: dashA, target: "/live.m3u8", inm: tagB,
			status: 304, etag: tagB, vary: steeredVary, cc: "max-age=1", originINM: []string{`"v1"`}},
		// The pool loses its edges: the playlist as the origin wrote it.
		{name: "off: a steered tag", target: "/live.m3u8", inm: tagB,
			status: 200, etag: `"v1"`, vary: plainVary, cc: "max-age=1", lm: true, originINM: []string{whole}},
		{name: "off: the origin's tag", target: "/live.m3u8", inm: `"v1"`,
			status: 304, etag: `"v1"`, vary: plainVary, cc: "max-age=1", lm: true, originINM: []string{whole}},
		{name: "off: the date exactly", target: "/live.m3u8", ims: originLM,
			status: 304, etag: `"v1"`, vary: plainVary, cc: "max-age=1", lm: true, originINM: []string{whole}},
		{name: "off: a later date", target: "/live.m3u8", ims: laterLM,
			status: 200, etag: `"v1"`, vary: plainVary, cc: "max-age=1", lm: true, originINM: []string{whole}},
		// A reload gives the empty pool an edge.
		{name: "on again: the origin's tag", hls: lineA, dash: dashA, target: "/live.m3u8", inm: `"v1"`,
			status: 200, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "on again: the date", hls: lineA, dash: dashA, target: "/live.m3u8", ims: originLM,
			status: 200, etag: tagA, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "a media playlist", hls: lineA, dash: dashA, target: "/low.m3u8", inm: `"m1"`,
			status: 304, etag: `"m1"`, vary: plainVary, cc: "max-age=1", lm: true, originINM: []string{whole}},
		{name: "backups: a steered tag", hls: lineA, dash: dashA, target: "/live.m3u8?" + ModeParam + "=backup", inm: tagA,
			status: 200, vary: steeredVary, cc: "private, no-store", originINM: []string{whole}},
		{name: "an MPD", hls: lineA, dash: dashA, target: "/live.mpd",
			status: 200, etag: `W/"d1-ws` + digestD + `"`, vary: steeredVary, cc: "max-age=1", originINM: []string{whole}},
		{name: "an MPD revalidated", hls: lineA, dash: dashA, target: "/live.mpd", inm: `W/"d1-ws` + digestD + `"`,
			status: 304, etag: `W/"d1-ws` + digestD + `"`, vary: steeredVary, cc: "max-age=1", originINM: []string{`W/"d1"`}},
		{name: "an MPD revalidated by a backup player, who gets the same", hls: lineA, dash: dashA, target: "/live.mpd?" + ModeParam + "=backup", inm: `W/"d1-ws` + digestD + `"`,
			status: 304, etag: `W/"d1-ws` + digestD + `"`, vary: steeredVary, cc: "max-age=1", originINM: []string{`W/"d1"`}},
	} {
		st.set(c.hls, c.dash)
		og.mu.Lock()
		og.lie = c.lie
		og.mu.Unlock()
		og.take()
		r := httptest.NewRequest("GET", "http://front.example"+c.target, nil)
		r.Header.Set("User-Agent", chromeUA)
		for v := range strings.SplitSeq(c.inm, "\n") {
			if v != "" {
				r.Header.Add("If-None-Match", v)
			}
		}
		if c.ims != "" {
			r.Header.Set("If-Modified-Since", c.ims)
		}
		w := httptest.NewRecorder()
		fr.ServeHTTP(w, r)
		h := w.Header()
		if w.Code != c.status || h.Get("ETag") != c.etag || strings.Join(h.Values("Vary"), ", ") != c.vary ||
			h.Get("Cache-Control") != c.cc || (h.Get("Last-Modified") != "") != c.lm {
			t.Errorf("%s: %d ETag %q Vary %q Cache-Control %q Last-Modified %q; want %d %q %q %q (Last-Modified: %v)",
				c.name, w.Code, h.Get("ETag"), h.Values("Vary"), h.Get("Cache-Control"), h.Get("Last-Modified"), c.status, c.etag, c.vary, c.cc, c.lm)
		}
		if w.Code == http.StatusNotModified && (w.Body.Len() != 0 || h.Get("Content-Type") != "" || h.Get("Content-Length") != "") {
			t.Errorf("%s: a 304 with a body's fields: %q, Content-Type %q, Content-Length %q", c.name, w.Body, h.Get("Content-Type"), h.Get("Content-Length"))
		}
		if w.Code == http.StatusOK && !strings.Contains(w.Body.String(), "low.m3u8") && !strings.Contains(w.Body.String(), "<MPD") && !strings.Contains(w.Body.String(), "s.ts") {
			t.Errorf("%s: a 200 without the playlist: %q", c.name, w.Body)
		}
		seen := og.take()
		var inms []string
		for _, s := range seen {
			inms = append(inms, s[0])
			if s[1] != "" {
				t.Errorf("%s: the origin was sent If-Modified-Since %q", c.name, s[1])
			}
		}
		if strings.Join(inms, " | ") != strings.Join(c.originINM, " | ") || len(inms) != len(c.originINM) {
			t.Errorf("%s: the origin was sent If-None-Match %q, want %q", c.name, inms, c.originINM)
		}
	}
}

// TestSplitTag: a served ETag reads back into the origin's tag and the
// digest, by hand-made cases (RFC 9110 §8.8.3's grammar); a tag without a
// line part, or not an entity-tag, reads as none.
func TestSplitTag(t *testing.T) {
	for _, c := range []struct{ tag, origin, digest string }{
		{`"v1-ws` + digestA + `"`, `"v1"`, digestA},
		{`W/"v1-ws` + digestA + `"`, `W/"v1"`, digestA},
		{`"-ws` + digestA + `"`, `""`, digestA},
		{`"a-wsb-ws` + digestB + `"`, `"a-wsb"`, digestB},
		{`"v1-ws` + digestA + `-ws` + digestB + `"`, `"v1-ws` + digestA + `"`, digestB},
		{`"v1"`, "", ""},
		{`"v1-ws` + strings.ToUpper(digestA) + `"`, "", ""},
		{`"v1-ws` + digestA[:15] + `"`, "", ""},
		{`"v1-ws` + digestA + `x"`, "", ""},
		{`v1-ws` + digestA, "", ""},
		{`"v1 -ws` + digestA + `"`, "", ""},
		{`W/"`, "", ""},
		{``, "", ""},
	} {
		o, d, ok := splitTag(c.tag)
		if o != c.origin || d != c.digest || ok != (c.origin != "") {
			t.Errorf("splitTag(%q) = %q %q %v, want %q %q", c.tag, o, d, ok, c.origin, c.digest)
		}
	}
	if got, ok := servedETag(`W/"v1"`, lineA); !ok || got != `W/"v1-ws`+digestA+`"` {
		t.Errorf("servedETag: %q %v", got, ok)
	}
	if got, ok := servedETag(`v1`, lineA); ok {
		t.Errorf("servedETag of no entity-tag: %q", got)
	}
}
