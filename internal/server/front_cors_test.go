package server

import (
	"net/http"
	"testing"
)

// TestFrontPreflight (issue 28: "The front answers no CORS preflight"): an
// OPTIONS of a front path, as a browser sends it before a GET with CMCD
// headers, a Range or a validator, is answered 204 with no body, any
// origin, the front's methods and those headers (the Fetch standard's
// CORS protocol), whether or not the origin has the playlist (the origin
// is not asked); a path outside the front's is still not found, and a
// method the front does not take is 405 naming OPTIONS too. On bd4ceba the
// preflight got 405.
func TestFrontPreflight(t *testing.T) {
	e := newFrontEnv(t, seedPool(nil, nil))
	pre := http.Header{"Origin": {"https://player.example"}, "Access-Control-Request-Method": {"GET"},
		"Access-Control-Request-Headers": {"cmcd-request,cmcd-session,if-none-match,range"}}
	want := map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
		"Access-Control-Allow-Headers": "CMCD-Request, CMCD-Object, CMCD-Session, CMCD-Status, Range, If-Range, If-None-Match, If-Modified-Since",
	}
	for _, path := range []string{"/hls/live.m3u8", "/hls/missing.m3u8", "/dash/live.mpd"} {
		resp, b := e.do("OPTIONS", path, "", pre)
		if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
			t.Errorf("OPTIONS %s: %d %q, want 204 and no body", path, resp.StatusCode, b)
		}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("OPTIONS %s: %s %q, want %q", path, k, got, v)
			}
		}
	}
	// The pool's steering route answers its own (answer.Preflight).
	if resp, _ := e.do("OPTIONS", "/api/v1/steering", "", pre); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("OPTIONS of the steering route: %d", resp.StatusCode)
	}
	if resp, _ := e.do("OPTIONS", "/other/live.m3u8", "", pre); resp.StatusCode != http.StatusNotFound {
		t.Errorf("OPTIONS of a path outside the front's: %d, want 404", resp.StatusCode)
	}
	if resp, _ := e.do("DELETE", "/hls/live.m3u8", "", nil); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD, OPTIONS" {
		t.Errorf("DELETE of a front path: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	// The GET that follows the preflight is readable from another origin.
	if resp, _ := e.do("GET", "/hls/live.m3u8", "", http.Header{"Origin": {"https://player.example"}, "Cmcd-Request": {"bl=21300"}}); resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET after the preflight: %d, ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}
