package front

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// Clone: each pathway is a clone of the playlist's own pathway "." on the
// host "<pathway>.example", with no PARAMS.
func (fixed) Clone(p string) (string, string, [][2]string, bool) {
	return ".", p + ".example", nil, true
}
func (fixed) Pathways() []string { return []string{"a", "b", "c"} }

// FuzzFront: any path, query, User-Agent, If-None-Match and
// If-Modified-Since a player sends is answered without a panic: a playlist
// with the line, a redirect whose Location parses and drops the mode
// parameter, a 304, or a refusal; the origin never sees the mode
// parameter. A 304 (issue 28, "Validators exact"; RFC 9110 §13.2.2,
// §15.4.5) names the 200 the same request gets without its conditions:
// its If-None-Match is "*" or holds that 200's ETag, or, without one, its
// If-Modified-Since is that 200's Last-Modified; and it carries that
// 200's ETag, Vary and Cache-Control.
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
	// The files' directory ETags, and their served ones with fixed's lines,
	// as sha256sum gives them (the origin's package doc; validators.go).
	const (
		liveTag  = `"1408048475449b990e1b488c227eb747"`
		steerTag = `"1408048475449b990e1b488c227eb747-ws135cc91d2e5c6a39"`
	)
	for _, s := range [][5]string{
		{"/live.m3u8", "", "Mozilla/5.0 Chrome", "", ""},
		{"/live.m3u8", "waisteer_mode=backup", "x", `"a-ws0123456789abcdef"`, ""},
		{"/live.mpd", "session=zz&waisteer_mode=redirect&waisteer_mode=steer", "", "", ""},
		{"/live.m3u8", "a=%zz&b", "VLC/3", `W/"x", *`, ""},
		{"/live.m3u8", "", "Mozilla/5.0 Chrome", liveTag, ""},
		{"/live.m3u8", "", "Mozilla/5.0 Chrome", steerTag + `, W/"x"`, ""},
		{"/live.m3u8", "waisteer_mode=steer", "Lavf", "", "Tue, 01 Dec 2026 10:00:00 GMT"},
		{"/../x", "", "Lavf", "", ""},
		{"/live.m3u8", "", tizen2024, "", ""},
		{"/live.m3u8", "", webOS24, "", ""},
		{"/live.mpd", "", "Mozilla/5.0 (SMART-TV; Tizen 6.) Web0S Chrome/9999999", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	serve := func(p, q, ua, inm, ims string) *httptest.ResponseRecorder {
		u := &url.URL{Path: p, RawQuery: q}
		r := httptest.NewRequest("GET", "http://front.example/", nil)
		r.URL, r.RequestURI = u, u.RequestURI()
		r.Header.Set("User-Agent", ua)
		if inm != "" {
			r.Header.Set("If-None-Match", inm)
		}
		if ims != "" {
			r.Header.Set("If-Modified-Since", ims)
		}
		w := httptest.NewRecorder()
		fr.ServeHTTP(w, r)
		return w
	}
	f.Fuzz(func(t *testing.T, p, q, ua, inm, ims string) {
		w := serve(p, q, ua, inm, ims)
		if w.Code == http.StatusNotModified {
			whole := serve(p, q, ua, "", "")
			h, wh := w.Header(), whole.Header()
			if whole.Code != http.StatusOK {
				t.Fatalf("304, and without its conditions %d", whole.Code)
			}
			for _, k := range []string{"ETag", "Vary", "Cache-Control"} {
				if strings.Join(h.Values(k), ", ") != strings.Join(wh.Values(k), ", ") {
					t.Fatalf("the 304's %s %q, its 200's %q", k, h.Values(k), wh.Values(k))
				}
			}
			etag := strings.TrimPrefix(wh.Get("ETag"), "W/")
			lm, lmErr := http.ParseTime(wh.Get("Last-Modified"))
			since, sinceErr := http.ParseTime(ims)
			switch {
			case strings.TrimSpace(inm) == "*":
			case inm != "" && etag != "" && strings.Contains(inm, etag):
			case inm == "" && lmErr == nil && sinceErr == nil && lm.Equal(since):
			default:
				t.Fatalf("304 to If-None-Match %q, If-Modified-Since %q; the 200's ETag %q, Last-Modified %q", inm, ims, wh.Get("ETag"), wh.Get("Last-Modified"))
			}
		}
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

// FuzzClassify: any User-Agent gets a class, a family and a rule without a
// panic; one the operator's steer_agents names steers, whatever else it
// says (issue 28), unless a redirect or backup pattern names it too.
func FuzzClassify(f *testing.F) {
	for _, ua := range []string{tizen2024, tizen2016, webOS24, webOS1, "", "tizen 9999999.99999", "web0s chrome/", "tizen tizen 6.5", "Tizen 6.", "chrome/87.x web0s"} {
		f.Add(ua)
	}
	a := newAgents([]string{"redirect-me"}, []string{"backup-me"}, []string{"steer-me"})
	f.Fuzz(func(t *testing.T, ua string) {
		c, fam, r := a.classify(ua)
		if c >= classCount || r >= ruleCount || fam == "" {
			t.Fatalf("%q: %d %q %d", ua, c, fam, r)
		}
		l := strings.ToLower(ua)
		if strings.Contains(l, "steer-me") && !strings.Contains(l, "redirect-me") && !strings.Contains(l, "backup-me") && strings.TrimSpace(ua) != "" && (c != Steers || r != RuleSteerAgents) {
			t.Fatalf("%q: %s by %s, want steers by steer_agents", ua, c, r)
		}
	})
}

// FuzzValidators: the reader of served ETags and the writer agree (issue
// 28, "Validators exact"): an origin's entity-tag with a line's digest
// added reads back to both, and any tag read as one with a line part is
// written back byte for byte; If-None-Match is read without a panic into
// entity-tags only.
func FuzzValidators(f *testing.F) {
	for _, s := range [][2]string{
		{`"v1"`, `#EXT-X-CONTENT-STEERING:SERVER-URI="/s"`},
		{`W/"v1-ws0123456789abcdef"`, ""},
		{`"a", W/"b-ws0123456789abcdef" ,, *`, "x"},
		{`W/""`, "\x00"},
		{`"\x80\xff"`, "<ContentSteering>/s</ContentSteering>"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, tag, line string) {
		if served, ok := servedETag(tag, line); ok {
			o, d, ok := splitTag(served)
			if !ok || o != tag || d != lineDigest(line) || !isEntityTag(served) {
				t.Fatalf("servedETag(%q) = %q reads back as %q %q %v", tag, served, o, d, ok)
			}
		} else if isEntityTag(tag) {
			t.Fatalf("the entity-tag %q was given no served tag", tag)
		}
		if o, d, ok := splitTag(tag); ok {
			if back := o[:len(o)-1] + lineMark + d + `"`; back != tag || !isEntityTag(o) {
				t.Fatalf("splitTag(%q) = %q %q, written back %q", tag, o, d, back)
			}
		}
		star, tags, ok := noneMatch(http.Header{"If-None-Match": {tag, line}})
		if ok && !star && len(tags) == 0 {
			t.Fatalf("If-None-Match %q, %q read as no tags", tag, line)
		}
		for _, tg := range tags {
			if !isEntityTag(tg) {
				t.Fatalf("If-None-Match %q, %q read as %q", tag, line, tg)
			}
		}
	})
}

// FuzzOnPathwayVars (issue 28, "Backups"): any URI an origin writes is put
// on a pathway without a panic, and when it is, as an http URL on the
// pathway's host with exactly its variable references (rfc8216bis-22
// §4.3), in order, byte for byte.
func FuzzOnPathwayVars(f *testing.F) {
	for _, s := range []string{"live/{$rend}.m3u8", "https://o.example/{$a}/x?t={$t}", "{$base}/x", "a/{$x}/../b", "x{$a.b}y", "wvar0z{$q}", "//h/{$x}", "?{$q}#{$f}", "a0:0"} {
		f.Add(s)
	}
	fr := &Front{bases: map[string]rawURL{}}
	base := mustHTTP(f, "https://front.example/hls/live.m3u8")
	f.Fuzz(func(t *testing.T, uri string) {
		out := fr.onPathwayVars(base, uri, "b", fixed{})
		if out == "" {
			return
		}
		if got, want := varRefs(out), varRefs(uri); !slices.Equal(got, want) {
			t.Fatalf("%q written %q: references %q, want %q", uri, out, got, want)
		}
		u, ok := parseHTTP(out)
		if !ok || withHost(u.authority, "b.example") != u.authority {
			t.Fatalf("%q written %q: not on b.example", uri, out)
		}
	})
}

// FuzzResolve (issue 28, "paths kept byte for byte"): the front's resolver
// (urls.go, RFC 3986 §5.2) agrees with net/url's ResolveReference on every
// reference net/url writes back as it read it (letters, digits and
// "-._~/?=&:", no escapes), and never panics on any other.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"a.m3u8", "../x/./y.m3u8?a=1", "/abs", "//h.example/p", "http://o.example:81/p/../q", "?q", "", ".", "..", "a/..", "g;x", "a0:0", "HTTP://X/y"} {
		f.Add("http://front.example:18082/live/main.m3u8?s=1", s)
	}
	f.Fuzz(func(t *testing.T, b, s string) {
		base, ok := parseHTTP(b)
		got, rok := resolve(base, s)
		if r := splitRef(s); r.hasAuthority && r.authority == "" && !rok {
			return // "///x": no host, which the front refuses to place on
		}
		if !ok || !plain(b) || !plain(s) || strings.Contains(splitRef(s).path, "//") || strings.Contains(base.path, "//") {
			// An empty segment: net/url's ResolveReference collapses it
			// where RFC 3986 §5.2.4 and the URL standard keep it.
			return
		}
		bu, err1 := url.Parse(b)
		ru, err2 := url.Parse(s)
		if err1 != nil || err2 != nil || bu.String() != b || ru.String() != s || bu.Host == "" {
			return
		}
		want := bu.ResolveReference(ru)
		if want.Scheme != "http" && want.Scheme != "https" || want.Opaque != "" || want.Host == "" {
			if rok {
				t.Fatalf("%q against %q: %q, net/url %q", s, b, got, want)
			}
			return
		}
		if want.Path == "" {
			want.Path = "/" // an empty path is "/" to a player (the URL standard), and so to the front
		}
		if !rok || got.String() != want.String() {
			t.Fatalf("%q against %q: %q %v, net/url %q", s, b, got, rok, want)
		}
	})
}

// plain: only bytes net/url neither escapes nor decodes.
func plain(s string) bool {
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/?=&:") == ""
}

// FuzzCacheControl: the cache's reader of the origin's Cache-Control, Age
// and Expires (cachecontrol.go) never panics; two field lines read as the
// one line they join into (RFC 9110 §5.3); a lone max-age of digits is its
// number, capped at 2^31 (RFC 9111 §1.2.2), by strconv; a lifetime or an
// age is never negative, and takes the response delay in.
func FuzzCacheControl(f *testing.F) {
	for _, s := range [][3]string{
		{"max-age=2", "", ""}, {"no-store", "max-age=1", "3"}, {`private="Set-Cookie"`, "", ""},
		{`max-age="5", s-maxage=1`, "", "0"}, {"max-age=99999999999999999999", "public", ""},
		{"max-age=1, max-age=2", "", "x"}, {`no-cache="a\"b"`, ",,", "-1"}, {"max-age", "=", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, a, b, age string) {
		cc, ok := parseCacheControl([]string{a, b})
		joined, jok := parseCacheControl([]string{a + "," + b})
		if ok != jok || cc != joined {
			t.Fatalf("%q, %q: %+v %v; joined %+v %v", a, b, cc, ok, joined, jok)
		}
		if digits := strings.TrimPrefix(a, "max-age="); digits != a && digits != "" && strings.Trim(digits, "0123456789") == "" && b == "" {
			want := int64(1 << 31)
			if n, err := strconv.ParseUint(digits, 10, 64); err == nil && n < 1<<31 {
				want = int64(n)
			}
			if !ok || cc.maxAge != want {
				t.Fatalf("%q: max-age %d %v, want %d", a, cc.maxAge, ok, want)
			}
		}
		h := http.Header{"Cache-Control": {a, b}, "Age": {age}, "Expires": {b}}
		life, init, stored := freshness(h, at, at.Add(time.Millisecond))
		if stored && (life < 0 || init < time.Millisecond) {
			t.Fatalf("%v: lifetime %v, initial age %v", h, life, init)
		}
	})
}

// FuzzCacheKey: two fetches share a cache key only when the origin sees
// one request: the same path and the same query. Paths are those the
// origin accepts (no control character, origin's checkPath).
func FuzzCacheKey(f *testing.F) {
	f.Add("/live/a.m3u8", "", "/live/a.m3u8", "x=1")
	f.Add("/live/a.m3u8?", "x", "/live/a.m3u8", "?x")
	f.Add("/a", "\x00b", "/a\x00", "b")
	f.Fuzz(func(t *testing.T, p1, q1, p2, q2 string) {
		for _, p := range []string{p1, p2} {
			if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return
			}
		}
		same := cacheKey(p1, q1) == cacheKey(p2, q2)
		if same != (p1 == p2 && q1 == q2) {
			t.Fatalf("(%q, %q) and (%q, %q): same key %v", p1, q1, p2, q2, same)
		}
	})
}

// FuzzWithParams (RFC 8216bis §7.3): any query an origin writes gets a
// clone's PARAMS without a panic, each once, in order, at the end, and
// keeps every other part of the query byte for byte, in order.
func FuzzWithParams(f *testing.F) {
	for _, q := range []string{"", "a=1&token=x", "tok%65n=1&&b", "%zz=1&token", "+=&="} {
		f.Add(q)
	}
	ps := [][2]string{{"token", "a b"}, {"cdn", "eu"}}
	f.Fuzz(func(t *testing.T, q string) {
		got, _ := withParams(q, true, ps)
		if !strings.HasSuffix(got, "cdn=eu&token=a+b") {
			t.Fatalf("%q: %q", q, got)
		}
		var kept []string
		for part := range strings.SplitSeq(q, "&") {
			if k, _, _ := strings.Cut(part, "="); part != "" && formDecode(k) != "token" && formDecode(k) != "cdn" {
				kept = append(kept, part)
			}
		}
		if want := strings.Join(append(kept, "cdn=eu&token=a+b"), "&"); got != want {
			t.Fatalf("%q: %q, want %q", q, got, want)
		}
	})
}
