package front

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// TestModeParamUnknown (issue 29, CLI: "unknown waisteer_mode answered
// 400"): a waisteer_mode the front has no class of is refused with
// bad_query naming the value, where it was served as if no mode were
// given; the three it has force their class, and its first value counts.
func TestModeParamUnknown(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "live.m3u8"), []byte("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n"), 0o644)
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := New(Config{Origin: og, Playlists: []Playlist{{Path: "/", Steering: fixed{}}},
		Bases: map[string]string{"a": "http://a.example", "b": "http://b.example"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query  string
		status int
		body   string
	}{
		{"waisteer_mode=bogus", 400, `waisteer_mode=\"bogus\" is none of redirect, backup or steer`},
		{"waisteer_mode=", 400, `waisteer_mode=\"\" is none of`},
		{"waisteer_mode", 400, `waisteer_mode=\"\" is none of`},
		{"waisteer_mode=Redirect", 400, `\"Redirect\"`},
		{"x=1&waisteer_mode=bogus&waisteer_mode=steer", 400, `\"bogus\"`},
		{"waisteer_mode=redirect", 302, ""},
		{"waisteer_mode=steer&waisteer_mode=bogus", 200, "#EXT-X-CONTENT-STEERING"},
		{"waisteer_mode=backup", 200, "#EXTM3U"},
		{"", 200, "#EXT-X-CONTENT-STEERING"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/live.m3u8?"+c.query, nil)
		r.Header.Set("User-Agent", "Mozilla/5.0 Chrome/131")
		w := httptest.NewRecorder()
		fr.ServeHTTP(w, r)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("?%s: %d %q, want %d with %q", c.query, w.Code, w.Body, c.status, c.body)
		}
		if c.status == 400 && !strings.Contains(w.Body.String(), `"bad_query"`) {
			t.Errorf("?%s: %q, want the code bad_query", c.query, w.Body)
		}
	}
}
