package front

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// lockedBuffer is a log's buffer that handlers may write concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestWarnings (issue 28, "Pathways the content lacks", "Warnings"): the
// issue's two cases, clone_from = "." written as PATHWAY-ID="." into a
// playlist whose variants all declare other pathways, and
// defaultServiceLocation="." into an MPD with no such serviceLocation,
// each give a warning: logged once however many viewers open it, listed in
// the status with the pathways the content declares, found at start by
// Check before any viewer. A playlist that declares "." (a variant
// without PATHWAY-ID, §4.4.6.2's default) gives none.
func TestWarnings(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"live/other.m3u8": "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,PATHWAY-ID=\"cdn-a\"\na.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=1,PATHWAY-ID=\"cdn-b\"\nb.m3u8\n",
		"live/own.m3u8":   "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\na.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=1,PATHWAY-ID=\"cdn-b\"\nb.m3u8\n",
		"live/other.mpd":  `<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"><BaseURL serviceLocation="cdn-a">https://cdn-a.example/</BaseURL><Period/></MPD>`,
	}
	for name, b := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644)
	}
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &reloaded{}
	st.set(`#EXT-X-CONTENT-STEERING:SERVER-URI="/s",PATHWAY-ID="."`, `<ContentSteering defaultServiceLocation="." queryBeforeStart="false">/s</ContentSteering>`)
	var logs lockedBuffer
	fr, err := New(Config{Origin: og, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Playlists: []Playlist{
		{Path: "/live/other.m3u8", Steering: st}, {Path: "/live/own.m3u8", Steering: st}, {Path: "/live/other.mpd", Steering: st},
	}})
	if err != nil {
		t.Fatal(err)
	}
	fr.Check(context.Background())
	want := []Warning{
		{Path: "/live/other.m3u8", Format: "hls", Pathway: ".", Declared: []string{"cdn-a", "cdn-b"}, Steering: "reloaded"},
		{Path: "/live/other.mpd", Format: "dash", Pathway: ".", Declared: []string{"cdn-a"}, Steering: "reloaded"},
	}
	same := func(got []Warning) bool {
		return slices.EqualFunc(got, want, func(a, b Warning) bool {
			return a.Path == b.Path && a.Format == b.Format && a.Pathway == b.Pathway && slices.Equal(a.Declared, b.Declared) && a.Steering == b.Steering && !a.Since.IsZero()
		})
	}
	if got := fr.Warnings(); !same(got) {
		t.Fatalf("at start: %+v, want %+v", got, want)
	}
	for range 3 {
		for _, p := range []string{"/live/other.m3u8", "/live/own.m3u8", "/live/other.mpd"} {
			if w := serve(fr, "GET", p, http.Header{"User-Agent": {"Mozilla/5.0 Chrome/156.0.0.0"}}); w.Code != 200 {
				t.Fatalf("%s: %d", p, w.Code)
			}
		}
	}
	if got := fr.Opens().Warnings; !same(got) {
		t.Errorf("after serving: %+v, want %+v", got, want)
	}
	if n := strings.Count(logs.String(), "declares no pathway"); n != 2 {
		t.Errorf("%d warnings logged, want 2 (one per playlist and name):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "path=/live/other.m3u8") || !strings.Contains(logs.String(), "defaultServiceLocation=.") {
		t.Errorf("the log names neither the path nor the element:\n%s", logs.String())
	}
}
