package front

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// benchPlaylist is a multivariant playlist of eight variants on one
// pathway, with an audio group: what a live channel's origin serves.
func benchPlaylist() []byte {
	var b strings.Builder
	b.WriteString("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n")
	b.WriteString(`#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="en",DEFAULT=YES,URI="audio/en.m3u8"` + "\n")
	for i := range 8 {
		fmt.Fprintf(&b, "#EXT-X-STREAM-INF:BANDWIDTH=%d,RESOLUTION=%dx%d,CODECS=\"avc1.64001f,mp4a.40.2\",AUDIO=\"aud\"\nvideo/%d/index.m3u8\n",
			(i+1)*800_000, 320*(i+1), 180*(i+1), i)
	}
	return []byte(b.String())
}

// benchFront is a front over an HTTP origin that serves benchPlaylist with
// max-age=60 and a cache kept an hour, so that every request of the
// benchmark is served from the cache: what is measured is the front's own
// work for a playlist (issue 28, "the front's CPU per playlist").
func benchFront(b *testing.B) (*Front, []byte) {
	body := benchPlaylist()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("ETag", `"v1"`)
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	og, err := origin.New(srv.URL, origin.Options{})
	if err != nil {
		b.Fatal(err)
	}
	st := &reloaded{}
	st.set(`#EXT-X-CONTENT-STEERING:SERVER-URI="/api/v1/steering",PATHWAY-ID="."`, "")
	f, err := New(Config{Origin: og, Playlists: []Playlist{{Path: "/live/", Steering: st}}, CacheTTL: time.Hour,
		Bases: map[string]string{"a": "https://a.example", "b": "https://b.example", "c": "https://c.example"}})
	if err != nil {
		b.Fatal(err)
	}
	return f, body
}

func benchServe(b *testing.B, f *Front, target, agent string, want int) {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Header.Set("User-Agent", agent)
	w := httptest.NewRecorder()
	f.ServeHTTP(w, r) // fills the cache
	if w.Code != want {
		b.Fatalf("%s: %d, want %d: %s", target, w.Code, want, w.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		if w.Code != want {
			b.Fatalf("%d", w.Code)
		}
	}
}

const benchBrowser = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"

// BenchmarkFrontSteer is a playlist with the steering line added, for a
// player that steers.
func BenchmarkFrontSteer(b *testing.B) {
	f, _ := benchFront(b)
	benchServe(b, f, "/live/master.m3u8", benchBrowser, http.StatusOK)
}

// BenchmarkFrontBackup is a viewer's own playlist of backup variants.
func BenchmarkFrontBackup(b *testing.B) {
	f, _ := benchFront(b)
	benchServe(b, f, "/live/master.m3u8?"+ModeParam+"=backup", benchBrowser, http.StatusOK)
}

// BenchmarkFrontRedirect is a redirect on opening.
func BenchmarkFrontRedirect(b *testing.B) {
	f, _ := benchFront(b)
	benchServe(b, f, "/live/master.m3u8", "VLC/3.0.21 LibVLC/3.0.21", http.StatusFound)
}

// BenchmarkFrontBaseline is the floor the three above are read against:
// the same bytes served by net/http's ServeContent, as a plain file server
// would, into the same recorder.
func BenchmarkFrontBaseline(b *testing.B) {
	_, body := benchFront(b)
	r := httptest.NewRequest(http.MethodGet, "/live/master.m3u8", nil)
	mod := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		http.ServeContent(w, r, "master.m3u8", mod, bytes.NewReader(body))
		if w.Code != http.StatusOK {
			b.Fatalf("%d", w.Code)
		}
	}
}
