package origin

// The origin's base: https, the paths refused, and what New refuses.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// An https origin through a client the front gives (here the test
// server's, which trusts its certificate); the package's redirect rule
// holds for that client too. The package's own client does not trust the
// test certificate, and says so.
func TestHTTPS(t *testing.T) {
	var followed atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved.m3u8":
			http.Redirect(w, r, "/live.m3u8", http.StatusFound)
		default:
			followed.Add(1)
			io.WriteString(w, playlist)
		}
	}))
	t.Cleanup(srv.Close)
	o := newOrigin(t, srv.URL, Options{Client: srv.Client()})
	resp, err := o.Fetch(t.Context(), &Request{Path: "/live.m3u8"})
	if err != nil || string(resp.Body) != playlist {
		t.Fatalf("%v", err)
	}
	_, err = o.Fetch(t.Context(), &Request{Path: "/moved.m3u8"})
	wantError(t, err, 502, CodeRedirect, "302")
	if followed.Load() != 1 {
		t.Fatalf("the redirect was followed")
	}
	if srv.Client().CheckRedirect != nil {
		t.Fatalf("the client given was changed")
	}

	_, err = newOrigin(t, srv.URL, Options{}).Fetch(t.Context(), &Request{Path: "/live.m3u8"})
	wantError(t, err, 502, CodeUnreachable, "certificate")
	// TLS spoken to a plain-HTTP server: an answer, not in TLS.
	plain := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, playlist) })
	_, err = newOrigin(t, "https://"+strings.TrimPrefix(plain.URL, "http://"), Options{}).Fetch(t.Context(), &Request{Path: "/live.m3u8"})
	wantError(t, err, 502, CodeBadAnswer, "HTTPS")
}

// Paths that could mean another than they say are refused by either
// origin before anything is asked (the package doc's rule).
func TestHTTPPaths(t *testing.T) {
	var asked atomic.Int64
	var target atomic.Value
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		target.Store(r.RequestURI)
		io.WriteString(w, playlist)
	})
	o := newOrigin(t, srv.URL+"/base", Options{})
	for _, p := range []string{"", "live.m3u8", "/", "/../etc/passwd", "/a/../b.m3u8", "/./a.m3u8", "/a//b.m3u8", "/a/", "/a\\b", "/a\x00b", "/a\nb"} {
		_, err := o.Fetch(t.Context(), &Request{Path: p})
		wantError(t, err, 400, CodeBadPath)
	}
	if asked.Load() != 0 {
		t.Fatalf("a refused path was asked for")
	}
	// A decoded path is sent encoded (RFC 3986 §2.1), "%" included: it is
	// never decoded twice.
	for p, want := range map[string]string{
		"/%2e%2e/secret.m3u8": "/base/%252e%252e/secret.m3u8",
		"/a b.m3u8":           "/base/a%20b.m3u8",
		"/a?b.m3u8":           "/base/a%3Fb.m3u8",
	} {
		if _, err := o.Fetch(t.Context(), &Request{Path: p}); err != nil {
			t.Fatal(err)
		}
		if got := target.Load(); got != want {
			t.Errorf("%q went to %q, want %q", p, got, want)
		}
	}
}

// New refuses a base it could not use, saying why.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/f"
	if err := writeFile(file, "x"); err != nil {
		t.Fatal(err)
	}
	for base, words := range map[string]string{
		"":                        "neither",
		"srv/hls":                 "neither",
		"ftp://origin.example/":   "scheme ftp",
		"http://":                 "no host",
		"http:///path":            "no host",
		"http://u:p@origin/":      "userinfo",
		"http://origin/?a=b":      "query",
		"http://origin/#f":        "fragment",
		"http://origin:0/":        "port",
		"http://origin:99999/":    "port",
		"http://origin/a/../b":    "dot segment",
		"http://origin/a//b":      "empty segment",
		"http://[::1":             "does not read",
		dir + "/missing":          "missing",
		file:                      "not a directory",
		"file://host" + dir:       "names a host",
		"file://" + dir + "?x=1":  "query",
		"file:":                   "names no directory",
		"file:relative":           "names no directory",
		"file://" + dir + "/none": "none",
	} {
		_, err := New(base, Options{})
		if err == nil || !strings.Contains(err.Error(), words) {
			t.Errorf("New(%q): %v, want an error saying %q", base, err, words)
		}
	}
	for _, o := range []Options{{Timeout: -1}, {MaxBytes: -1}} {
		if _, err := New("http://origin", o); err == nil {
			t.Errorf("New with %+v: no error", o)
		}
	}
	for _, base := range []string{"http://origin", "https://origin:8443/a/b/", "http://[::1]:80", dir, dir + "/", "file://" + dir, "file://localhost" + dir} {
		if _, err := New(base, Options{}); err != nil {
			t.Errorf("New(%q): %v", base, err)
		}
	}
}
