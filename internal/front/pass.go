package front

// Pass-through (issue 28, "Every pathway plays"). A viewer on the
// playlist's own pathway (variants with no PATHWAY-ID, or the pathway
// clone_from names) resolves its media playlists, segments, keys and init
// segments against the front's URL, so the front answers them: what is not
// a playlist it steers goes through from the origin as the origin has it.
// The front does not instead write the variants' URIs absolute on the
// origin: a directory origin has no URL, and an HTTP origin's address is
// internal (the origin package's details never name it either).
//
// Which paths pass: every path of the front's prefixes but those it
// steers, which are the exact paths configured and the paths ending in
// ".m3u8", ".m3u" or ".mpd" (any case); and a path that passes but whose
// answer the origin types as a playlist (an HTTP origin's Content-Type
// application/vnd.apple.mpegurl, application/x-mpegurl, audio/mpegurl or
// application/dash+xml) is served as a playlist after all, so that an
// extensionless multivariant playlist still gets its steering line.
//
// A pass-through is streamed (origin.Open): the origin's status (200, 206,
// 304, 416), its length, range and validators, copied with a buffer of
// passBuffer bytes, never a whole segment in memory. At most MaxStreams
// run at once; one more is answered 503 front_busy with Retry-After. An
// engine that would buffer the answer (fasthttp's net/http adaptor) is
// made to stream it by a flush once the head is written.

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/front/origin"
)

// DefaultMaxStreams is the cap on pass-through streams at once when
// Config.MaxStreams is 0.
const DefaultMaxStreams = 512

// passBuffer is the size of a pass-through's copy buffer.
const passBuffer = 32 << 10

var passBuffers = sync.Pool{New: func() any { b := make([]byte, passBuffer); return &b }}

// Steers reports whether the front serves path as a playlist it may
// rewrite (the package doc of pass.go); any other path of the front passes
// through.
func (f *Front) Steers(p string) bool {
	if _, ok := f.exact[p]; ok {
		return true
	}
	switch strings.ToLower(path.Ext(p)) {
	case ".m3u8", ".m3u", ".mpd":
		return true
	}
	return false
}

// playlistType reports whether a Content-Type is that of a playlist or an
// MPD (RFC 8216 §4; ISO/IEC 23009-1 Annex C).
func playlistType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch mt {
	case "application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl", "application/dash+xml":
		return true
	}
	return false
}

// Pass is an open pass-through: the status and header to answer with, and
// the body to copy (nil when none). Close it once written.
type Pass struct {
	Status int
	Header http.Header
	Body   io.Reader
	close  func()
}

// Close ends the stream: the origin's body closed, its place among
// MaxStreams given back.
func (p *Pass) Close() {
	if p.close != nil {
		p.close()
		p.close = nil
	}
}

// codeBusy refuses a pass-through over MaxStreams: 503, Retry-After.
const codeBusy api.Code = "front_busy"

// OpenPass opens the pass-through of r's path (Steers false). A refusal is
// an *api.Error to answer with: the origin's (not_found, origin_…), or
// front_busy when MaxStreams are running. It returns (nil, nil) when the
// origin's answer is a playlist to serve as one (Serve).
func (f *Front) OpenPass(r *http.Request) (*Pass, *api.Error) {
	select {
	case f.streams <- struct{}{}:
	default:
		f.passBusy.Add(1)
		return nil, &api.Error{Code: codeBusy, Detail: "the front is passing through as many streams as it may; retry", Status: http.StatusServiceUnavailable}
	}
	release := func() { <-f.streams }
	query, _ := stripMode(r.URL.RawQuery)
	s, err := f.origin.Open(r.Context(), &origin.Request{Path: r.URL.Path, RawQuery: query,
		IfNoneMatch: strings.Join(r.Header.Values("If-None-Match"), ", "), IfModifiedSince: r.Header.Get("If-Modified-Since"),
		Header: r.Header})
	if err != nil {
		release()
		var oe *origin.Error
		if errors.As(err, &oe) {
			return nil, &api.Error{Code: api.Code(oe.Code), Detail: oe.Detail, Status: oe.Status}
		}
		return nil, &api.Error{Code: "origin_unreachable", Detail: "the origin cannot be reached", Status: http.StatusBadGateway}
	}
	if s.Body != nil && playlistType(s.Header.Get("Content-Type")) {
		s.Body.Close()
		release()
		return nil, nil
	}
	f.passed.Add(1)
	f.passActive.Add(1)
	p := &Pass{Status: s.Status, Header: s.Header}
	if s.Body != nil {
		p.Body = s.Body
	}
	p.close = func() {
		if s.Body != nil {
			s.Body.Close()
		}
		f.passActive.Add(-1)
		release()
	}
	return p, nil
}

// pass answers a path that passes through (Serve), or reports false when
// the origin's answer is a playlist after all.
func (f *Front) pass(w http.ResponseWriter, r *http.Request) bool {
	p, aerr := f.OpenPass(r)
	if aerr != nil {
		f.WritePassRefusal(w, aerr)
		return true
	}
	if p == nil {
		return false
	}
	defer p.Close()
	h := w.Header()
	for k, vs := range p.Header {
		h[k] = vs
	}
	w.WriteHeader(p.Status)
	if p.Body == nil || r.Method == http.MethodHead {
		return true
	}
	// An engine that buffers a handler's answer until it returns streams
	// it once flushed; net/http sends the head now, as it would anyway.
	http.NewResponseController(w).Flush()
	buf := passBuffers.Get().(*[]byte)
	defer passBuffers.Put(buf)
	// A copy that fails (the player gone, the origin cut short) ends
	// here: the deferred Close ends the origin's side.
	io.CopyBuffer(onlyWriter{w}, p.Body, *buf)
	return true
}

// WritePassRefusal answers a pass-through OpenPass refused, and counts
// it: front_busy 503 with Retry-After, the origin's refusals as a
// playlist's.
func (f *Front) WritePassRefusal(w http.ResponseWriter, aerr *api.Error) {
	f.failQuiet(aerr)
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if aerr.Code == codeBusy {
		// A code of the front's own, which api.StatusOf does not map: its
		// status written here.
		w.Header().Set("Retry-After", "1")
		api.WriteJSON(w, http.StatusServiceUnavailable, aerr)
		return
	}
	api.WriteError(w, aerr)
}

// onlyWriter hides a ResponseWriter's ReadFrom, so that CopyBuffer uses
// the small buffer it is given.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(b []byte) (int, error) { return o.w.Write(b) }

// failQuiet counts a pass-through's refusal as fail does; a segment the
// origin lacks is a player's affair, logged at debug level only.
func (f *Front) failQuiet(e *api.Error) {
	if e.Status >= 500 && e.Code != codeBusy {
		f.fail(e)
		return
	}
	v, ok := f.failures.Load(string(e.Code))
	if !ok {
		v, _ = f.failures.LoadOrStore(string(e.Code), new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
	f.log.Debug("a pass-through was refused", "code", string(e.Code), "detail", e.Detail)
}
