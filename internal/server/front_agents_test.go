package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/store"
)

// newFrontEnvAgents is newFrontEnv's server with the operator's player
// lists in [front].
func newFrontEnvAgents(t *testing.T, c pool.Config, redirect, backup, steer []string) *frontEnv {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hls"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hls", "live.m3u8"), []byte(frontMultivariant), 0o644); err != nil {
		t.Fatal(err)
	}
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &poolEnv{t: t, loads: store.NewLoads(), logs: &syncBuffer{}}
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{c}, OperatorToken: testToken,
		Front: &FrontConfig{Origin: og, Playlists: []FrontPlaylist{{Path: "/hls/"}},
			RedirectAgents: redirect, BackupAgents: backup, SteerAgents: steer},
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}, store.NewMemory(), e.loads)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = serveTest(t, srv)
	t.Cleanup(func() { e.ts.Close(); srv.Close(context.Background()) })
	return &frontEnv{poolEnv: e, dir: dir}
}

// User-Agents of Samsung's "Retrieving Platform Information" and LG's
// webOS TV "Web API and Web Engine" pages, as internal/front's
// agents_test.go cites them.
const (
	tizen2024UA = "Mozilla/5.0 (SMART-TV; LINUX; Tizen 8.0) AppleWebKit/537.36 (KHTML, like Gecko) 108.0.5359.1/8.0 TV Safari/537.36"
	tizen2016UA = "Mozilla/5.0 (SMART-TV; Linux; Tizen 2.4.0) AppleWebKit/538.1 (KHTML, like Gecko) Version/2.4.0 TV Safari/538.1"
	webOS24UA   = "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/108.0.5359.211 Safari/537.36 WebAppManager"
	webOS4UA    = "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/53.0.2785.34 Safari/537.36 WebAppManager"
)

// TestFrontTVClasses (issue 28, Player classes): a Tizen 2024 and a webOS
// TV 24 player get the steering line (on bd4ceba, backups); a Tizen 2016
// and a webOS TV 4 player keep their backups unless the operator's
// steer_agents names them; the front's status and metrics count each
// class by the rule that decided it.
func TestFrontTVClasses(t *testing.T) {
	steered := func(b []byte) bool { return strings.Contains(string(b), "#EXT-X-CONTENT-STEERING:") }
	backups := func(resp *http.Response, b []byte) bool {
		return resp.Header.Get("Cache-Control") == "private, no-store" && !steered(b) && strings.Contains(string(b), "edges.example")
	}
	e := newFrontEnvAgents(t, seedPool(nil, nil), nil, nil, nil)
	for _, ua := range []string{tizen2024UA, webOS24UA} {
		if resp, b := e.get("/hls/live.m3u8", ua); resp.StatusCode != 200 || !steered(b) {
			t.Errorf("%q: %d, not the steering line:\n%s", ua, resp.StatusCode, b)
		}
	}
	for _, ua := range []string{tizen2016UA, webOS4UA} {
		if resp, b := e.get("/hls/live.m3u8", ua); resp.StatusCode != 200 || !backups(resp, b) {
			t.Errorf("%q: %d %q, not its backups:\n%s", ua, resp.StatusCode, resp.Header.Get("Cache-Control"), b)
		}
	}
	e.get("/hls/live.m3u8?waisteer_mode=backup", chrome)
	st := frontStatusOf(t, e)
	want := map[string]map[string]uint64{
		"steers":   {"builtin_current_tv": 2},
		"backup":   {"builtin_old_tv": 2, "waisteer_mode": 1},
		"redirect": {},
	}
	if !sameRuleCounts(st.ByRule, want) {
		t.Errorf("by_rule %v, want %v", st.ByRule, want)
	}
	_, mb := e.do("GET", "/metrics", "", nil)
	for _, line := range []string{`waisteer_front_class_rules_total{class="steers",rule="builtin_current_tv"} 2`,
		`waisteer_front_class_rules_total{class="backup",rule="builtin_old_tv"} 2`,
		`waisteer_front_class_rules_total{class="backup",rule="waisteer_mode"} 1`} {
		if !strings.Contains(string(mb), line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}

	// The operator puts the old TVs back to steering, and sends one of
	// the current ones backups: its lists win over the built-in classes.
	e = newFrontEnvAgents(t, seedPool(nil, nil), nil, []string{"Chrome/108."}, []string{"tizen 2.4", "web0s"})
	for _, c := range []struct {
		ua    string
		steer bool
	}{{tizen2016UA, true}, {webOS4UA, true}, {webOS24UA, false}, {tizen2024UA, true}} {
		resp, b := e.get("/hls/live.m3u8", c.ua)
		if c.steer != steered(b) || (!c.steer && !backups(resp, b)) {
			t.Errorf("%q with the operator's lists: steered %v, want %v:\n%s", c.ua, steered(b), c.steer, b)
		}
	}
	st = frontStatusOf(t, e)
	want = map[string]map[string]uint64{
		"steers":   {"steer_agents": 2, "builtin_current_tv": 1},
		"backup":   {"backup_agents": 1},
		"redirect": {},
	}
	if !sameRuleCounts(st.ByRule, want) {
		t.Errorf("by_rule with the operator's lists %v, want %v", st.ByRule, want)
	}
}

func frontStatusOf(t *testing.T, e *frontEnv) FrontStatus {
	t.Helper()
	var st FrontStatus
	resp, b := e.do("GET", "/v1/front/status", "", http.Header{"Authorization": {"Bearer " + testToken}})
	if resp.StatusCode != 200 || json.Unmarshal(b, &st) != nil {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	return st
}

func sameRuleCounts(got, want map[string]map[string]uint64) bool {
	if len(got) != len(want) {
		return false
	}
	for c, rules := range want {
		if len(got[c]) != len(rules) {
			return false
		}
		for r, n := range rules {
			if got[c][r] != n {
				return false
			}
		}
	}
	return true
}
