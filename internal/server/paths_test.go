package server

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/web"
)

// rawGet sends one request line as written (no client cleans or resolves
// its path) and reads the answer.
func rawGet(t *testing.T, e *env, method, target string) (*http.Response, []byte) {
	t.Helper()
	u, err := url.Parse(e.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(method + " " + target + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, []byte(b.String())
}

// TestNoRedirects: a path with a dot segment or an empty segment is
// answered 400 bad_path on every route, the server's own, a steering path
// and a decision prefix alike, and no path is ever answered with a redirect
// (Go's ServeMux would redirect "/v1/records/../../etc/passwd" to
// "/etc/passwd"; issue 11).
func TestNoRedirects(t *testing.T) {
	e := newEnv(t, scenario.Spec{Name: "paths", Pathways: scenario.DefaultPathways(), Periods: 7}, true)
	room := e.room()
	digest := strings.Repeat("ab", 32)
	bad := []string{
		"/v1/records/../../../../etc/passwd",
		"/v1/policies/../rooms/" + room + "/keylog",
		"/v1/rooms/" + room + "/./descriptor",
		"/v1/rooms//descriptor",
		"/v1/rooms/" + room + "/%2e%2e/" + room + "/keylog",
		"/v1/records/%2E/" + digest,
		"//healthz",
		"/healthz/..",
		"/metrics/.",
		"/v1/steer/../steer",
		"/v1//steer",
		"/v1/decisions/../decisions/" + digest,
		"/v1/decisions//" + digest,
		"/x/../v1/steer",
	}
	for _, target := range bad {
		for _, method := range []string{"GET", "POST", "PUT", "HEAD"} {
			resp, body := rawGet(t, e, method, target)
			if resp.StatusCode/100 == 3 || resp.Header.Get("Location") != "" {
				t.Errorf("%s %s: answered %s with Location %q", method, target, resp.Status, resp.Header.Get("Location"))
				continue
			}
			if method == "HEAD" {
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("HEAD %s: %s, want 400", target, resp.Status)
				}
				continue
			}
			wantError(t, method+" "+target, resp, body, http.StatusBadRequest, "bad_path")
		}
	}
	// Paths that are clean are not refused for their shape.
	for _, target := range []string{"/healthz", "/v1/steer", "/v1/rooms/" + room + "/descriptor", "/v1/decisions/" + digest, "/v1/..x/y", "/v1/.well/z"} {
		resp, body := rawGet(t, e, "GET", target)
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "bad_path") {
			t.Errorf("GET %s: refused bad_path: %s", target, body)
		}
	}
}

// TestMethods: each of the server's own routes takes its methods (a GET
// route takes HEAD too) and answers any other 405 with Allow and the JSON
// refusal, never a redirect.
func TestMethods(t *testing.T) {
	e := newEnv(t, scenario.Spec{Name: "methods", Pathways: scenario.DefaultPathways(), Periods: 7}, true)
	room := e.room()
	d := strings.Repeat("ab", 32)
	for _, c := range []struct {
		path, allow string
		refused     []string
	}{
		{"/v1/policies/" + d, "GET, HEAD", []string{"POST", "PUT", "DELETE", "PATCH"}},
		{"/v1/records/" + d, "GET, HEAD", []string{"POST", "PUT", "DELETE"}},
		{"/v1/rooms/" + room + "/descriptor", "GET, HEAD", []string{"POST", "PUT"}},
		{"/v1/rooms/" + room + "/keylog", "GET, HEAD, PUT", []string{"POST", "DELETE"}},
		{"/v1/rooms/" + room + "/records", "POST", []string{"GET", "PUT", "DELETE"}},
		{"/v1/rooms/" + room + "/policy", "PUT", []string{"GET", "POST"}},
		{"/v1/rooms/" + room + "/status", "GET, HEAD", []string{"POST", "PUT"}},
		{"/healthz", "GET, HEAD", []string{"POST", "PUT"}},
		{"/readyz", "GET, HEAD", []string{"POST", "DELETE"}},
		{"/metrics", "GET, HEAD", []string{"POST", "PUT"}},
	} {
		for _, m := range c.refused {
			resp, body := rawGet(t, e, m, c.path)
			wantError(t, m+" "+c.path, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
			if got := resp.Header.Get("Allow"); got != c.allow {
				t.Errorf("%s %s: Allow %q, want %q", m, c.path, got, c.allow)
			}
		}
	}
	if resp, _ := rawGet(t, e, "HEAD", "/healthz"); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /healthz: %s", resp.Status)
	}
}

// TestPathDefect: RFC 3986 §5.2.4's dot segments, "." and "..", however
// their dots are written (%2e decodes to "."), and empty segments; other
// segments with dots are names like any other.
func TestPathDefect(t *testing.T) {
	for _, c := range []struct {
		path string
		bad  bool
	}{
		{"/", false}, {"/a", false}, {"/a/", false}, {"/a/b", false},
		{"/.", true}, {"/..", true}, {"/%2e", true}, {"/%2E%2e", true}, {"/.%2E", true}, {"/a/./b", true}, {"/a/..", true},
		{"/...", false}, {"/%2e%2e%2e", false}, {"/a.", false}, {"/.a", false}, {"/%2", false}, {"/%2f", false}, {"/.well-known/x", false},
		{"//", true}, {"/a//b", true}, {"/a//", true}, {"", true}, {"a/b", true},
	} {
		if got := web.PathDefect(c.path) != ""; got != c.bad {
			t.Errorf("web.PathDefect(%q) = %q, want a defect: %v", c.path, web.PathDefect(c.path), c.bad)
		}
	}
}
