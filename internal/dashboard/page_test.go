package dashboard

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestPage: every script and stylesheet the page names is served, with its
// type; and the sign-in names the configuration's keys for the token
// (issue 29: operator_token_file and operator_token_env, not
// operator_token, which no configuration has).
func TestPage(t *testing.T) {
	get := func(path string) (*httptest.ResponseRecorder, string) {
		w := httptest.NewRecorder()
		Serve(w, httptest.NewRequest("GET", path, nil))
		return w, w.Body.String()
	}
	w, page := get("/dashboard")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /dashboard: %d", w.Code)
	}
	refs := regexp.MustCompile(`(?:src|href)="(/dashboard/[^"]+)"`).FindAllStringSubmatch(page, -1)
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	if len(refs) != 3 {
		t.Errorf("the page names %d files, want lib.js, app.js and style.css: %v", len(refs), refs)
	}
	for _, m := range refs {
		w, body := get(m[1])
		ext := m[1][strings.LastIndexByte(m[1], '.'):]
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != types[ext] || len(body) < 100 {
			t.Errorf("GET %s: %d %q, %d bytes", m[1], w.Code, w.Header().Get("Content-Type"), len(body))
		}
	}
	if !strings.Contains(page, "<code>operator_token_file</code>") || !strings.Contains(page, "<code>operator_token_env</code>") || strings.Contains(page, "<code>operator_token</code>") {
		t.Errorf("the sign-in does not name the token's keys operator_token_file and operator_token_env alone")
	}
}
