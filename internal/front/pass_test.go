package front

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// segmentBytes is a segment of n bytes, each its offset mod 251 (a prime,
// so that no two ranges of the same length at other offsets look alike).
func segmentBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// bigSegment is larger than any buffer on the way: the origin's playlist
// limit (1 MiB), the pass-through's copy buffer (32 KiB), net/http's and
// fasthttp's.
const bigSegment = 3<<20 + 17

func dirFront(t *testing.T, files map[string][]byte, maxStreams int) *Front {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := New(Config{Origin: og, Playlists: []Playlist{{Path: "/live/", Steering: fixed{}}}, MaxStreams: maxStreams})
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

func serve(fr *Front, method, target string, h http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://front.example"+target, nil)
	for k, vs := range h {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	fr.ServeHTTP(w, r)
	return w
}

// TestPassDirectory (issue 28, "Every pathway plays"; RFC 9110 §14 and
// §13): from a directory origin, a segment larger than any buffer goes
// through whole with its length and type; a byte range is 206 with its
// Content-Range and exactly those bytes (offsets by hand: 100-199, the
// last 10, from 3 MiB to the end); a range past the end 416 with
// "bytes */size"; If-Range with another tag gives the whole file; the
// ETag in If-None-Match gives 304; HEAD the head without the body. On the
// old front every one of these was 502 origin_too_large or
// origin_not_playlist.
func TestPassDirectory(t *testing.T) {
	seg := segmentBytes(bigSegment)
	fr := dirFront(t, map[string][]byte{"live/720p/seg1.ts": seg, "live/key.bin": []byte("0123456789abcdef")}, 0)

	w := serve(fr, "GET", "/live/720p/seg1.ts", nil)
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), seg) {
		t.Fatalf("GET: %d, %d bytes, want 200 and %d", w.Code, w.Body.Len(), len(seg))
	}
	if cl, ct := w.Header().Get("Content-Length"), w.Header().Get("Content-Type"); cl != "3145745" || ct != "video/mp2t" {
		t.Errorf("GET: Content-Length %q, Content-Type %q", cl, ct)
	}
	etag := w.Header().Get("ETag")
	if etag == "" || w.Header().Get("Accept-Ranges") != "bytes" {
		t.Errorf("GET: ETag %q, Accept-Ranges %q", etag, w.Header().Get("Accept-Ranges"))
	}
	for _, c := range []struct {
		rg, cr string
		first  int
		n      int
	}{
		{"bytes=100-199", "bytes 100-199/3145745", 100, 100},
		{"bytes=-10", "bytes 3145735-3145744/3145745", 3145735, 10},
		{"bytes=3145728-", "bytes 3145728-3145744/3145745", 3145728, 17},
		{"bytes=3145740-9999999", "bytes 3145740-3145744/3145745", 3145740, 5},
	} {
		w := serve(fr, "GET", "/live/720p/seg1.ts", http.Header{"Range": {c.rg}})
		if w.Code != 206 || w.Header().Get("Content-Range") != c.cr || !bytes.Equal(w.Body.Bytes(), seg[c.first:c.first+c.n]) ||
			w.Header().Get("Content-Length") != strconv.Itoa(c.n) {
			t.Errorf("%s: %d %q, %d bytes", c.rg, w.Code, w.Header().Get("Content-Range"), w.Body.Len())
		}
	}
	if w := serve(fr, "GET", "/live/720p/seg1.ts", http.Header{"Range": {"bytes=3145745-"}}); w.Code != 416 || w.Header().Get("Content-Range") != "bytes */3145745" || w.Body.Len() != 0 {
		t.Errorf("past the end: %d %q %q", w.Code, w.Header().Get("Content-Range"), w.Body)
	}
	if w := serve(fr, "GET", "/live/720p/seg1.ts", http.Header{"Range": {"bytes=0-9"}, "If-Range": {`"other"`}}); w.Code != 200 || w.Body.Len() != len(seg) {
		t.Errorf("If-Range of another tag: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := serve(fr, "GET", "/live/720p/seg1.ts", http.Header{"Range": {"bytes=0-9"}, "If-Range": {etag}}); w.Code != 206 || w.Body.Len() != 10 {
		t.Errorf("If-Range of its tag: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := serve(fr, "GET", "/live/720p/seg1.ts", http.Header{"If-None-Match": {etag}}); w.Code != 304 || w.Body.Len() != 0 || w.Header().Get("ETag") != etag {
		t.Errorf("If-None-Match: %d, %d bytes, ETag %q", w.Code, w.Body.Len(), w.Header().Get("ETag"))
	}
	if w := serve(fr, "HEAD", "/live/720p/seg1.ts", nil); w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "3145745" {
		t.Errorf("HEAD: %d, %d bytes, Content-Length %q", w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
	}
	if w := serve(fr, "GET", "/live/key.bin", nil); w.Code != 200 || w.Body.String() != "0123456789abcdef" || w.Header().Get("Content-Type") != "application/octet-stream" {
		t.Errorf("key: %d %q %q", w.Code, w.Body, w.Header().Get("Content-Type"))
	}
	if w := serve(fr, "GET", "/live/720p/seg2.ts", nil); w.Code != 404 {
		t.Errorf("a segment the origin lacks: %d", w.Code)
	}
	if got := fr.Opens().PassThrough; got.Active != 0 || got.Streams == 0 {
		t.Errorf("counts %+v: none running, some opened", got)
	}
}

// TestPassHTTPOrigin (issue 28, "Every pathway plays"): from an HTTP
// origin, the player's Range goes to the origin and the origin's 206,
// Content-Range and validators come back with exactly its bytes; none of
// the origin's own fields (Server, Set-Cookie, a header naming its
// address) and nothing naming its address reach the player; the origin's
// 416 passes; an extensionless path the origin types as a playlist is
// served as one, with the steering line.
func TestPassHTTPOrigin(t *testing.T) {
	seg := segmentBytes(bigSegment)
	var sawRange []string
	og := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "internal-origin/1.0")
		w.Header().Set("Set-Cookie", "origin=1")
		w.Header().Set("X-Served-By", r.Host)
		w.Header().Set("Content-Location", "http://"+r.Host+r.URL.Path)
		switch r.URL.Path {
		case "/live/master":
			w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
			io.WriteString(w, "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n")
		case "/live/seg1.m4s":
			sawRange = append(sawRange, r.Header.Get("Range"))
			w.Header().Set("ETag", `"s1"`)
			w.Header().Set("Content-Type", "video/iso.segment")
			w.Header().Set("Accept-Ranges", "bytes")
			switch r.Header.Get("Range") {
			case "":
				w.Header().Set("Content-Length", strconv.Itoa(len(seg)))
				w.Write(seg)
			case "bytes=10-19":
				w.Header().Set("Content-Range", "bytes 10-19/"+strconv.Itoa(len(seg)))
				w.Header().Set("Content-Length", "10")
				w.WriteHeader(206)
				w.Write(seg[10:20])
			default:
				w.Header().Set("Content-Range", "bytes */"+strconv.Itoa(len(seg)))
				w.WriteHeader(416)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer og.Close()
	originHost := strings.TrimPrefix(og.URL, "http://")
	o, err := origin.New(og.URL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := New(Config{Origin: o, Playlists: []Playlist{{Path: "/live/", Steering: fixed{}}}})
	if err != nil {
		t.Fatal(err)
	}
	leaks := func(what string, w *httptest.ResponseRecorder) {
		t.Helper()
		for k, vs := range w.Header() {
			for _, v := range vs {
				if strings.Contains(v, originHost) || strings.Contains(v, "127.0.0.1") {
					t.Errorf("%s: %s: %q names the origin", what, k, v)
				}
			}
		}
		for _, k := range []string{"Server", "Set-Cookie", "X-Served-By", "Content-Location"} {
			if v := w.Header().Get(k); v != "" {
				t.Errorf("%s: the origin's %s %q passed", what, k, v)
			}
		}
	}
	w := serve(fr, "GET", "/live/seg1.m4s", nil)
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), seg) || w.Header().Get("Content-Length") != strconv.Itoa(len(seg)) ||
		w.Header().Get("ETag") != `"s1"` || w.Header().Get("Content-Type") != "video/iso.segment" {
		t.Errorf("GET: %d, %d bytes, %v", w.Code, w.Body.Len(), w.Header())
	}
	leaks("GET", w)
	w = serve(fr, "GET", "/live/seg1.m4s", http.Header{"Range": {"bytes=10-19"}})
	if w.Code != 206 || !bytes.Equal(w.Body.Bytes(), seg[10:20]) || w.Header().Get("Content-Range") != "bytes 10-19/3145745" {
		t.Errorf("Range: %d %q %v", w.Code, w.Body.Bytes(), w.Header())
	}
	leaks("Range", w)
	w = serve(fr, "GET", "/live/seg1.m4s", http.Header{"Range": {"bytes=9999999-"}})
	if w.Code != 416 || w.Header().Get("Content-Range") != "bytes */3145745" {
		t.Errorf("416: %d %v", w.Code, w.Header())
	}
	if want := []string{"", "bytes=10-19", "bytes=9999999-"}; strings.Join(sawRange, "|") != strings.Join(want, "|") {
		t.Errorf("the origin saw Range %q, want %q", sawRange, want)
	}
	w = serve(fr, "GET", "/live/master", http.Header{"User-Agent": {"Mozilla/5.0 Chrome/156"}})
	if want := "#EXTM3U\n#EXT-X-CONTENT-STEERING:SERVER-URI=\"/s\",PATHWAY-ID=\".\"\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n"; w.Code != 200 || w.Body.String() != want {
		t.Errorf("an extensionless playlist: %d\n%s\nwant\n%s", w.Code, w.Body, want)
	}
	leaks("playlist", w)
}

// TestPassBusy (issue 28, "bounded"): with MaxStreams 1 and one stream
// running (its origin holding the body), the next pass-through is 503
// front_busy with Retry-After, and once the first ends the next passes.
func TestPassBusy(t *testing.T) {
	hold := make(chan struct{})
	started := make(chan struct{}, 1)
	og := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "20")
		w.Write([]byte("0123456789"))
		w.(http.Flusher).Flush()
		select {
		case started <- struct{}{}:
		default:
		}
		<-hold
		w.Write([]byte("0123456789"))
	}))
	defer og.Close()
	o, _ := origin.New(og.URL, origin.Options{})
	fr, err := New(Config{Origin: o, Playlists: []Playlist{{Path: "/live/", Steering: fixed{}}}, MaxStreams: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- serve(fr, "GET", "/live/a.ts", nil) }()
	<-started
	deadline := time.Now().Add(5 * time.Second)
	for fr.Opens().PassThrough.Active != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w := serve(fr, "GET", "/live/b.ts", nil)
	if w.Code != 503 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "front_busy") {
		t.Errorf("the second: %d %q %v", w.Code, w.Body, w.Header())
	}
	close(hold)
	if first := <-done; first.Code != 200 || first.Body.String() != "01234567890123456789" {
		t.Errorf("the first: %d %q", first.Code, first.Body)
	}
	if w := serve(fr, "GET", "/live/c.ts", nil); w.Code != 200 {
		t.Errorf("after: %d", w.Code)
	}
	if got := fr.Opens().PassThrough; got.Busy != 1 || got.Active != 0 {
		t.Errorf("counts %+v", got)
	}
}
