package serve_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/store"
)

// frontDoc is a serve.toml of one pool and a front over origin.
func frontDoc(origin string) string {
	return "listen = \"127.0.0.1:0\"\n[steering]\n[[steering.edges]]\npathway = \"a\"\n" +
		"[front]\norigin = \"" + origin + "\"\n[[front.playlists]]\npath = \"/hls/\"\n"
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFrontRelativeOrigin (issue 28, Configuration): `origin = "media"`,
// which the README calls "a directory (relative to the file)", is the
// directory media beside the file, whether the file is named from its own
// directory ("serve.toml", as `waisteer serve -c serve.toml` names it) or
// from another ("conf/serve.toml", where ./media is another directory);
// the front serves that directory's playlist. On bd4ceba Load refused both
// ("neither an http:// or https:// URL nor an absolute directory").
func TestFrontRelativeOrigin(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	// Two directories named media, told apart by their playlists' variants.
	writeFile(t, filepath.Join(dir, "media", "hls", "live.m3u8"), "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nbeside-cwd.m3u8\n")
	writeFile(t, filepath.Join(dir, "conf", "media", "hls", "live.m3u8"), "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nbeside-conf.m3u8\n")
	writeFile(t, filepath.Join(dir, "serve.toml"), frontDoc("media"))
	writeFile(t, filepath.Join(dir, "conf", "serve.toml"), frontDoc("media"))
	for _, c := range []struct{ file, want string }{
		{"serve.toml", "beside-cwd.m3u8"},
		{filepath.Join("conf", "serve.toml"), "beside-conf.m3u8"},
	} {
		cfg, err := serve.Load(c.file, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		body := getFront(t, cfg, "/hls/live.m3u8")
		if !strings.Contains(body, c.want) || !strings.Contains(body, "#EXT-X-CONTENT-STEERING:") {
			t.Errorf("%s: the front served\n%s\nwant the playlist with %s and the steering line", c.file, body, c.want)
		}
	}
}

// TestFrontOriginNotDirectory: an origin that names no directory is refused
// with the file's line, the key, and the path it was resolved to (relative
// to the file): a missing one, and a file.
func TestFrontOriginNotDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "playlist.m3u8"), "#EXTM3U\n")
	name := filepath.Join(dir, "serve.toml")
	for _, c := range []struct{ origin, want string }{
		{"missing", filepath.Join(dir, "missing") + " does not exist"},
		{"playlist.m3u8", filepath.Join(dir, "playlist.m3u8") + " is not a directory"},
		{"../" + filepath.Base(dir) + "/playlist.m3u8", filepath.Join(dir, "playlist.m3u8") + " is not a directory"},
	} {
		writeFile(t, name, frontDoc(c.origin))
		_, err := serve.Load(name, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "serve.toml:6: front.origin") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("origin %q: %v\nwant line 6, front.origin and %q", c.origin, err, c.want)
		}
	}
}

// getFront serves cfg and GETs path from it.
func getFront(t *testing.T, cfg *serve.Config, path string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Server.Logger = logger
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve.Serve(ctx, nil, logger, ln, cfg, store.NewMemory(), store.NewLoads(), func(u string) { urls <- u })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	resp, err := http.Get(<-urls + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// TestFrontAgentLists (issue 28, Player classes): steer_agents reads beside
// redirect_agents and backup_agents; an empty pattern, which would name
// every player, is refused with its line and key.
func TestFrontAgentLists(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "serve.toml")
	doc := strings.Replace(frontDoc("."), "[[front.playlists]]", "redirect_agents = [\"MyBox/\"]\nbackup_agents = [\"OldTV/\"]\nsteer_agents = [\"Tizen 5.5\", \"Web0S\"]\n[[front.playlists]]", 1)
	writeFile(t, name, doc)
	cfg, err := serve.Load(name, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	fc := cfg.Server.Front
	if strings.Join(fc.SteerAgents, "|") != "Tizen 5.5|Web0S" || strings.Join(fc.RedirectAgents, "|") != "MyBox/" || strings.Join(fc.BackupAgents, "|") != "OldTV/" {
		t.Errorf("read %q %q %q", fc.RedirectAgents, fc.BackupAgents, fc.SteerAgents)
	}
	writeFile(t, name, strings.Replace(doc, "\"Web0S\"", "\" \"", 1))
	if _, err := serve.Load(name, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "serve.toml:9: front.steer_agents[1]") {
		t.Errorf("an empty steer_agents pattern: %v", err)
	}
}

// TestFrontCacheMS (issue 28, "An origin cache"): [front] cache_ms caps how
// long the front keeps an origin's answer: 1000 ms when not given (a
// second, within any live playlist's target duration), 0 for no cache,
// up to 60000; other values are refused with the file's line.
func TestFrontCacheMS(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "serve.toml")
	for _, c := range []struct {
		line string
		want time.Duration
		err  string
	}{
		{"", time.Second, ""},
		{"cache_ms = 0\n", 0, ""},
		{"cache_ms = 250\n", 250 * time.Millisecond, ""},
		{"cache_ms = 60000\n", time.Minute, ""},
		{"cache_ms = -1\n", 0, "serve.toml:6: front.cache_ms"},
		{"cache_ms = 60001\n", 0, "serve.toml:6: front.cache_ms"},
	} {
		writeFile(t, name, strings.Replace(frontDoc("http://127.0.0.1:9"), "[front]\n", "[front]\n"+c.line, 1))
		cfg, err := serve.Load(name, func(string) string { return "" })
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.line, err, c.err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.line, err)
		case cfg.Server.Front.CacheTTL != c.want:
			t.Errorf("%q: CacheTTL %v, want %v", c.line, cfg.Server.Front.CacheTTL, c.want)
		}
	}
}

// TestFrontMaxStreams (issue 28, "Every pathway plays"): [front]
// max_streams bounds the segments the front passes through at once; left
// out, the front's own default (0 here); 0, negatives and more than 2^20
// are refused with the file's line.
func TestFrontMaxStreams(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "serve.toml")
	for _, c := range []struct {
		line string
		want int
		err  string
	}{
		{"", 0, ""},
		{"max_streams = 1\n", 1, ""},
		{"max_streams = 2048\n", 2048, ""},
		{"max_streams = 1048576\n", 1048576, ""},
		{"max_streams = 0\n", 0, "serve.toml:6: front.max_streams"},
		{"max_streams = -3\n", 0, "serve.toml:6: front.max_streams"},
		{"max_streams = 1048577\n", 0, "serve.toml:6: front.max_streams"},
	} {
		writeFile(t, name, strings.Replace(frontDoc("http://127.0.0.1:9"), "[front]\n", "[front]\n"+c.line, 1))
		cfg, err := serve.Load(name, func(string) string { return "" })
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.line, err, c.err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.line, err)
		case cfg.Server.Front.MaxStreams != c.want:
			t.Errorf("%q: MaxStreams %d, want %d", c.line, cfg.Server.Front.MaxStreams, c.want)
		}
	}
}
