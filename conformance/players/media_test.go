package players

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The stream: a test pattern, small so that four players in one browser on
// two cores play it easily, cut into segments short enough that a move
// between pathways shows within a second or two.
const (
	segDur     = time.Second
	segCount   = 300 // five minutes, longer than the test plays
	liveWindow = 6   // segments in the HLS media playlist
	width      = 160
	height     = 90
	fps        = 10
)

// Pacing of a segment: chunks of 4 KiB, 8 ms apart, about 4 Mbit/s.
const (
	paceChunk = 4 << 10
	paceGap   = 8 * time.Millisecond
)

// media is the stream on disk and its live timeline: segment n (from 0)
// holds media time [n, n+1) s and is complete at epoch + (n+1) s, which is
// the HLS playlist's sliding window and the MPD's availabilityStartTime.
type media struct {
	dir       string
	epoch     time.Time
	codecs    string // the RFC 6381 codecs of the video, from its avcC
	bandwidth int    // bit/s: the largest segment's
	average   int    // bit/s: the mean segment's
}

// makeMedia encodes the stream with ffmpeg into fMP4 segments (one init
// segment and segCount media segments) that both the HLS media playlists
// and the DASH SegmentTemplate name. No B-frames and a key frame every
// segment keep each segment's decode time its number of seconds.
func makeMedia(t *testing.T, ffmpeg string) *media {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "media")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin",
		"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=%d", width, height, fps),
		"-t", strconv.Itoa(segCount),
		"-c:v", "libx264", "-profile:v", "baseline", "-level", "1.3", "-pix_fmt", "yuv420p",
		"-bf", "0", "-g", strconv.Itoa(fps), "-keyint_min", strconv.Itoa(fps), "-sc_threshold", "0",
		"-b:v", "120k", "-maxrate", "150k", "-bufsize", "150k",
		"-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod",
		"-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4",
		"-hls_segment_filename", filepath.Join(dir, "seg_%d.m4s"), "-start_number", "0",
		filepath.Join(dir, "ffmpeg.m3u8"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg could not make the stream: %v\n%s", err, out)
	}
	m := &media{dir: dir}
	init, err := os.ReadFile(filepath.Join(dir, "init.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	// avcC: version, profile, compatibility, level (ISO/IEC 14496-15).
	i := bytes.Index(init, []byte("avcC"))
	if i < 0 || len(init) < i+8 {
		t.Fatalf("ffmpeg's init segment holds no avcC box")
	}
	m.codecs = fmt.Sprintf("avc1.%02x%02x%02x", init[i+5], init[i+6], init[i+7])
	total := 0
	for n := range segCount {
		st, err := os.Stat(filepath.Join(dir, fmt.Sprintf("seg_%d.m4s", n)))
		if err != nil {
			t.Fatalf("ffmpeg made no segment %d: %v", n, err)
		}
		bits := int(st.Size()) * 8
		m.bandwidth = max(m.bandwidth, bits)
		total += bits
	}
	m.average = total / segCount
	return m
}

// live returns the numbers of the segments complete at now, oldest first,
// at most liveWindow of them.
func (m *media) live(now time.Time) (first, last int) {
	last = min(int(now.Sub(m.epoch)/segDur)-1, segCount-1)
	first = max(0, last-liveWindow+1)
	return first, last
}

// mediaPlaylist is the HLS media playlist of the live window at now, the
// same for every pathway: its URIs are relative, so a clone's host serves
// its own segments.
func (m *media) mediaPlaylist(now time.Time) []byte {
	first, last := m.live(now)
	var b strings.Builder
	fmt.Fprintf(&b, "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:%d\n#EXT-X-MEDIA-SEQUENCE:%d\n#EXT-X-MAP:URI=\"init.mp4\"\n",
		int(segDur/time.Second), first)
	for n := first; n <= last; n++ {
		fmt.Fprintf(&b, "#EXTINF:%.3f,\nseg_%d.m4s\n", segDur.Seconds(), n)
	}
	if last == segCount-1 {
		b.WriteString("#EXT-X-ENDLIST\n")
	}
	return []byte(b.String())
}

// pathwaySpec is one pathway of the test's policies and the loopback
// address its server listens on. Every pathway server listens on port 80:
// a clone differs from its base only by HOST, and dash.js writes a clone's
// URL as scheme://HOST/path, dropping any port (README.md).
type pathwaySpec struct {
	id   string
	ip   string
	base string // the id of the pathway it clones; "" when none
}

// The pathways: two of the content description and a clone of the second
// on a third address, with PARAMS, to show which players apply them.
var pathways = []pathwaySpec{
	{id: "cdn-a", ip: "127.0.0.2"},
	{id: "cdn-b", ip: "127.0.0.3"},
	{id: "cdn-b-clone", ip: "127.0.0.4", base: "cdn-b"},
}

const (
	pathwayPort = "80"
	cloneParam  = "via"
	cloneValue  = "clone"
)

// authority is the host and port of the pathway's URIs: the address
// alone on HTTP's default port.
func (p pathwaySpec) authority() string {
	if pathwayPort == "80" {
		return p.ip
	}
	return p.ip + ":" + pathwayPort
}

func pathwayByID(id string) pathwaySpec {
	for _, p := range pathways {
		if p.id == id {
			return p
		}
	}
	panic("no pathway " + id)
}

// multivariant is the HLS multivariant playlist of one page's room: the
// steering tag waisteer writes for its policy (§8.2) and a variant stream
// per pathway of the content description, each naming its PATHWAY-ID.
func (m *media) multivariant(page, tag string) []byte {
	return m.multivariantOf(page, tag, pathways)
}

// multivariantOf is the multivariant playlist of a page whose pathways are
// pws.
func (m *media) multivariantOf(page, tag string, pws []pathwaySpec) []byte {
	var b strings.Builder
	b.WriteString("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n")
	b.WriteString(tag + "\n")
	for _, p := range pws {
		if p.base != "" {
			continue
		}
		fmt.Fprintf(&b, "#EXT-X-STREAM-INF:BANDWIDTH=%d,AVERAGE-BANDWIDTH=%d,CODECS=\"%s\",RESOLUTION=%dx%d,FRAME-RATE=%d.000,PATHWAY-ID=\"%s\",STABLE-VARIANT-ID=\"video\"\n",
			m.bandwidth, m.average, m.codecs, width, height, fps, p.id)
		fmt.Fprintf(&b, "http://%s/%s/hls/%s/media.m3u8\n", p.authority(), page, p.id)
	}
	return []byte(b.String())
}

// mpd is the dynamic MPD of one page's room: a BaseURL per pathway of the
// content description with its serviceLocation, and the ContentSteering
// element waisteer writes for its policy (§8.3). UTCTiming gives the time
// directly, so that no player asks a time server.
func (m *media) mpd(page, element string, now time.Time) []byte {
	return m.mpdOf(page, element, now, pathways)
}

// mpdOf is the MPD of a page whose pathways are pws.
func (m *media) mpdOf(page, element string, now time.Time, pws []pathwaySpec) []byte {
	const iso = "2006-01-02T15:04:05.000Z"
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="dynamic" availabilityStartTime="%s" publishTime="%s" minBufferTime="PT2S" timeShiftBufferDepth="PT30S" suggestedPresentationDelay="PT4S" maxSegmentDuration="PT1S">
`, m.epoch.UTC().Format(iso), now.UTC().Format(iso))
	for _, p := range pws {
		if p.base != "" {
			continue
		}
		fmt.Fprintf(&b, "  <BaseURL serviceLocation=\"%s\">http://%s/%s/dash/</BaseURL>\n", p.id, p.authority(), page)
	}
	fmt.Fprintf(&b, `  %s
  <Period id="live" start="PT0S">
    <AdaptationSet id="0" contentType="video" mimeType="video/mp4" segmentAlignment="true" startWithSAP="1">
      <SegmentTemplate timescale="1000" duration="%d" startNumber="0" initialization="init.mp4" media="seg_$Number$.m4s"/>
      <Representation id="video" codecs="%s" bandwidth="%d" width="%d" height="%d" frameRate="%d"/>
    </AdaptationSet>
  </Period>
  <UTCTiming schemeIdUri="urn:mpeg:dash:utc:direct:2014" value="%s"/>
</MPD>
`, element, segDur.Milliseconds(), m.codecs, m.bandwidth, width, height, fps, now.UTC().Format(iso))
	return []byte(b.String())
}

// A hit is one request a server of the test answered.
type hit struct {
	Server string // a pathway's id, "steer" or "origin"
	Host   string
	Method string
	Path   string
	Query  string // raw, as sent
	CMCD   string // the CMCD-Request header, when sent
	Status int
	Bytes  int64 // of the body, as written to the connection
	Start  time.Time
	End    time.Time
	Body   []byte // kept for the steering server's answers
	TLS    bool   // it came over TLS
}

// hitLog is every request of every server, in the order they ended.
type hitLog struct {
	mu   sync.Mutex
	hits []hit
	// delay, when set, is how long a request to server waits before it
	// is answered (hlsjs_first_test.go slows chosen requests so that a
	// race falls the same way every run); it is logged from its arrival.
	delay func(server, path, rawQuery string) time.Duration
}

func (l *hitLog) all() []hit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hit(nil), l.hits...)
}

type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	body   *bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body != nil {
		r.body.Write(b)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// logged logs every request h answers as a hit of server.
func (l *hitLog) logged(server string, keepBody bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		if keepBody {
			rec.body = new(bytes.Buffer)
		}
		start := time.Now()
		if l.delay != nil {
			time.Sleep(l.delay(server, r.URL.Path, r.URL.RawQuery))
		}
		h.ServeHTTP(rec, r)
		ht := hit{
			Server: server, Host: r.Host, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			CMCD: r.Header.Get("CMCD-Request"), Status: rec.status, Bytes: rec.bytes, Start: start, End: time.Now(), TLS: r.TLS != nil,
		}
		if rec.body != nil {
			ht.Body = rec.body.Bytes()
		}
		l.mu.Lock()
		l.hits = append(l.hits, ht)
		l.mu.Unlock()
	})
}

var mediaFile = regexp.MustCompile(`^(init\.mp4|seg_[0-9]+\.m4s)$`)

// pathwayHandler serves one pathway: the HLS media playlist and the
// segments for HLS, and the segments for DASH, under each page's prefix so
// that the log tells the players apart. Every pathway serves the same
// stream; only its address differs.
//
// Like a CDN that serves players on other origins, it sends
// Timing-Allow-Origin, so that a player may time segments with the
// page's Resource Timing (dash.js does, README.md).
func (m *media) pathwayHandler() http.Handler {
	mux := http.NewServeMux()
	file := func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if !mediaFile.MatchString(name) {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile(filepath.Join(m.dir, name))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		// A segment arrives over some milliseconds, as over a link of a
		// few Mbit/s, not all at once as loopback would give it: a
		// player times each segment (dash.js discards one that took no
		// measurable time), and reports the throughput it measured.
		rc := http.NewResponseController(w)
		for len(b) > 0 {
			n := min(len(b), paceChunk)
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
			if len(b) > 0 {
				rc.Flush()
				time.Sleep(paceGap)
			}
		}
	}
	mux.HandleFunc("GET /{page}/hls/{pathway}/media.m3u8", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(m.mediaPlaylist(time.Now()))
	})
	mux.HandleFunc("GET /{page}/hls/{pathway}/{file}", file)
	mux.HandleFunc("GET /{page}/dash/{file}", file)
	return cors(mux)
}

// cors lets the players' pages, on the origin server, read every answer
// and its timing.
func cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Timing-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "*")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// httpServer is one server of the test on a loopback address.
type httpServer struct {
	srv  *http.Server
	addr string
	done chan struct{}
	once sync.Once
}

// serve listens on addr (loopback only) and serves h until stop or the
// end of the test.
func serve(t *testing.T, addr string, h http.Handler) *httpServer {
	t.Helper()
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("the test serves on loopback addresses only, not %q", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v (pathway servers need port 80 on their 127.0.0.* addresses: run as root, with nothing else on port 80)", addr, err)
	}
	return serveOn(t, ln, h)
}

// serveOn serves h on ln until stop or the end of the test.
func serveOn(t *testing.T, ln net.Listener, h http.Handler) *httpServer {
	t.Helper()
	s := &httpServer{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("server on %s: %v", s.addr, err)
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// stop closes the listener and every connection at once, as a pathway
// that fails does: the players' next requests to it are refused.
func (s *httpServer) stop() {
	s.once.Do(func() {
		s.srv.Close()
		<-s.done
	})
}

// shutdown waits briefly for requests in flight, then stops.
func (s *httpServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	s.stop()
}
