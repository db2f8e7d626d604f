package origin

// Streams: what the front passes through without reading it (issue 28,
// "Every pathway plays"): segments, keys, init segments, and anything else
// under a front path that is not a playlist the front steers. Open never
// reads a body into memory: the caller copies Body with a small buffer.
//
// From an HTTP origin, one GET as Fetch sends it, with the player's Range
// and If-Range passed on as well as its validators, and no
// Accept-Encoding (the bytes go to the player as the origin stored them).
// Timeout bounds the wait for the answer's head and then each read of the
// body: a body that makes no progress for Timeout ends the stream, one
// that keeps flowing is never cut. 200, 203 (as 200), 206, 304 (to a
// conditional request) and 416 are passed on; the rest are the *Error
// Fetch gives for them. Of the answer's fields only those that describe
// the bytes are passed: Content-Type, Content-Length, Content-Range,
// Accept-Ranges and the caching fields Fetch passes. Never a Location,
// Content-Location, Server or Set-Cookie: nothing names the origin.
//
// From a directory, the file the path names (through os.Root, as Fetch
// reads it), of any size, with its validators: a strong ETag of its size
// and modification time to the nanosecond (a segment is written once;
// hashing it at every request would read it twice), its Last-Modified,
// and a single byte range (RFC 9110 §14): "bytes=first-last",
// "bytes=first-" or "bytes=-suffix", as 206 with Content-Range; a range
// that starts past the end as 416 with "Content-Range: bytes */size"; a
// list of several ranges, or one that does not read, answered whole (a
// server may ignore Range, §14.2). If-Range (§13.1.5) applies the range
// only when it is the file's ETag (strong comparison) or its exact
// Last-Modified. If-None-Match (weak comparison), else If-Modified-Since,
// answers 304 as Fetch does.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Stream is what the origin answered to Open.
type Stream struct {
	Status int         // 200, 206, 304 or 416
	Header http.Header // the fields the package doc lists, Content-Length among them when known
	// Body is the bytes to copy to the player (nil with 304 and 416); the
	// caller closes it.
	Body io.ReadCloser
}

// streamed are the answer's fields a stream passes on.
var streamed = []string{"Content-Type", "Content-Length", "Content-Range", "Accept-Ranges",
	"Etag", "Last-Modified", "Cache-Control", "Cdn-Cache-Control", "Expires", "Age", "Vary"}

// Open opens the bytes at r.Path for a pass-through. The player's Range and
// If-Range come in r.Header. ctx bounds it and the body's reads. The error
// is an *Error.
func (o *Origin) Open(ctx context.Context, r *Request) (*Stream, error) {
	if err := checkPath(r.Path); err != nil {
		return nil, err
	}
	var s *Stream
	var err *Error
	if o.base != nil {
		s, err = o.openHTTP(ctx, r)
	} else {
		s, err = o.openDir(ctx, r)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (o *Origin) openHTTP(parent context.Context, r *Request) (*Stream, *Error) {
	if err := checkQuery(r.RawQuery); err != nil {
		return nil, err
	}
	u := *o.base
	u.Path += r.Path
	u.RawQuery = r.RawQuery
	ctx, cancel := context.WithCancel(parent)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.base.String(), nil)
	if err != nil {
		cancel()
		return nil, fail(CodeBadPath, err, "the request does not make a URL")
	}
	req.URL = &u
	h := req.Header
	for name, values := range r.Header {
		name = http.CanonicalHeaderKey(name)
		if !passed[name] && name != "Range" && name != "If-Range" || connectionNames(r.Header, name) {
			continue
		}
		for _, v := range values {
			if fieldValue(v) {
				h.Add(name, v)
			}
		}
	}
	h.Set("User-Agent", userAgent)
	conditional := false
	if v := r.IfNoneMatch; v != "" && fieldValue(v) {
		h.Set("If-None-Match", v)
		conditional = true
	}
	if v := r.IfModifiedSince; v != "" && fieldValue(v) {
		h.Set("If-Modified-Since", v)
		conditional = true
	}
	// The head within Timeout; then each read within Timeout (idle).
	idle := time.AfterFunc(o.timeout, cancel)
	resp, err := o.client.Do(req)
	idle.Stop()
	if err != nil {
		cancel()
		return nil, failed(parent, ctx, err, o.timeout, "")
	}
	out := &Stream{Header: http.Header{}}
	for _, name := range streamed {
		if vs := resp.Header.Values(name); len(vs) > 0 && !connectionNames(resp.Header, name) {
			out.Header[name] = append([]string(nil), vs...)
		}
	}
	if resp.ContentLength >= 0 {
		out.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	} else {
		out.Header.Del("Content-Length")
	}
	closeAll := func() { idle.Stop(); cancel(); resp.Body.Close() }
	switch s := resp.StatusCode; {
	case s == http.StatusOK || s == http.StatusNonAuthoritativeInfo || s == http.StatusPartialContent:
		if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
			closeAll()
			return nil, fail(CodeBadAnswer, nil, "the origin answered in the coding %q, which was not asked for", ce)
		}
		out.Status = http.StatusOK
		if s == http.StatusPartialContent {
			out.Status = s
		}
		out.Body = &idleBody{r: resp.Body, idle: idle, timeout: o.timeout, cancel: cancel}
		return out, nil
	case s == http.StatusNotModified && conditional, s == http.StatusRequestedRangeNotSatisfiable:
		drain(resp.Body)
		closeAll()
		out.Status = s
		out.Header.Del("Content-Length")
		return out, nil
	case s == http.StatusNotModified:
		closeAll()
		return nil, fail(CodeBadAnswer, nil, "the origin answered 304 to a request that was not conditional")
	case s == http.StatusNotFound || s == http.StatusGone:
		drain(resp.Body)
		closeAll()
		return nil, fail(CodeNotFound, nil, "the origin has no such file (it answered %d)", s)
	case s >= 300 && s < 400:
		drain(resp.Body)
		closeAll()
		return nil, fail(CodeRedirect, nil, "the origin answered %d, a redirect, which the front does not follow", s)
	default:
		drain(resp.Body)
		closeAll()
		return nil, fail(CodeStatus, nil, "the origin answered %d", s)
	}
}

// idleBody is an HTTP origin's body whose every read must make progress
// within timeout: the timer, running only while a read waits, cancels the
// exchange.
type idleBody struct {
	r       io.ReadCloser
	idle    *time.Timer
	timeout time.Duration
	cancel  context.CancelFunc
	once    sync.Once
}

// Read waits at most timeout on the origin. Only the wait in Read is
// timed: a player slow to take the bytes (the caller blocked writing to
// it between two reads) does not end the stream.
func (b *idleBody) Read(p []byte) (int, error) {
	b.idle.Reset(b.timeout)
	n, err := b.r.Read(p)
	b.idle.Stop()
	return n, err
}

func (b *idleBody) Close() error {
	b.once.Do(func() { b.idle.Stop(); b.cancel() })
	return b.r.Close()
}

// segmentTypes are the types by extension of what passes through a
// directory origin (RFC 8216 §3, ISO/IEC 23009-1, RFC 4337, W3C WebVTT);
// any other is application/octet-stream, never sniffed.
var segmentTypes = map[string]string{
	".ts": "video/mp2t", ".m4s": "video/iso.segment", ".mp4": "video/mp4", ".m4v": "video/mp4",
	".m4a": "audio/mp4", ".cmfv": "video/mp4", ".cmfa": "audio/mp4", ".aac": "audio/aac",
	".mp3": "audio/mpeg", ".ac3": "audio/ac3", ".ec3": "audio/eac3", ".vtt": "text/vtt",
	".webvtt": "text/vtt", ".ttml": "application/ttml+xml", ".key": "application/octet-stream",
	".m3u8": "application/vnd.apple.mpegurl", ".mpd": "application/dash+xml",
	".jpg": "image/jpeg", ".png": "image/png",
}

func (o *Origin) openDir(ctx context.Context, r *Request) (*Stream, *Error) {
	if err := ctx.Err(); err != nil {
		return nil, fail(CodeCanceled, err, "the request was cancelled before the file was opened")
	}
	root, err := os.OpenRoot(o.dir)
	if err != nil {
		return nil, fail(CodeUnreachable, err, "the origin's directory cannot be opened: %v", errors.Unwrap(err))
	}
	defer root.Close()
	f, err := root.OpenFile(r.Path[1:], os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(err)
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, fail(CodeUnreadable, err, "the file cannot be read: %v", errors.Unwrap(err))
	case st.IsDir():
		f.Close()
		return nil, fail(CodeNotFound, nil, "the path names a directory, not a file")
	case !st.Mode().IsRegular():
		f.Close()
		return nil, fail(CodeUnreadable, nil, "the path names something that is not a regular file")
	}
	size, mtime, now := st.Size(), st.ModTime(), time.Now()
	etag := `"` + strconv.FormatInt(size, 16) + "-" + strconv.FormatInt(mtime.UnixNano(), 16) + `"`
	ct := segmentTypes[strings.ToLower(path.Ext(r.Path))]
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := http.Header{"Etag": {etag}, "Accept-Ranges": {"bytes"}, "Content-Type": {ct}}
	lm := mtime.Truncate(time.Second)
	if lm.Before(mtime) {
		lm = lm.Add(time.Second)
	}
	lastModified := ""
	if !lm.After(now.Truncate(time.Second)) {
		lastModified = lm.UTC().Format(http.TimeFormat)
		h.Set("Last-Modified", lastModified)
	}
	if notModified(r, etag, mtime, now) {
		f.Close()
		h.Del("Content-Type")
		h.Del("Accept-Ranges")
		return &Stream{Status: http.StatusNotModified, Header: h}, nil
	}
	first, n, status := int64(0), size, http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" && ifRange(r.Header.Get("If-Range"), etag, lastModified) {
		switch a, b, ok := byteRange(rg, size); {
		case ok && a < 0:
			f.Close()
			return &Stream{Status: http.StatusRequestedRangeNotSatisfiable,
				Header: http.Header{"Content-Range": {"bytes */" + strconv.FormatInt(size, 10)}, "Accept-Ranges": {"bytes"}}}, nil
		case ok:
			first, n, status = a, b-a+1, http.StatusPartialContent
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, size))
		}
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	return &Stream{Status: status, Header: h, Body: &fileBody{Reader: io.NewSectionReader(f, first, n), f: f}}, nil
}

// fileBody is a section of an open file, closed with it.
type fileBody struct {
	io.Reader
	f *os.File
}

func (b *fileBody) Close() error { return b.f.Close() }

// ifRange reports whether a Range applies under an If-Range value v
// (RFC 9110 §13.1.5): none, the strong ETag itself, or the exact
// Last-Modified date.
func ifRange(v, etag, lastModified string) bool {
	v = trimOWS(v)
	switch {
	case v == "":
		return true
	case strings.HasPrefix(v, `"`):
		return v == etag
	}
	return lastModified != "" && v == lastModified
}

// byteRange reads a Range value for a file of size bytes (RFC 9110 §14.1.2):
// ok with the first and last byte of one satisfiable range; ok with
// first −1 when the one range starts past the end (416); not ok for any
// other value, which is ignored (the whole file).
//
//	Range = "bytes=" ( first "-" [ last ] / "-" suffix )
func byteRange(v string, size int64) (first, last int64, ok bool) {
	spec, found := strings.CutPrefix(trimOWS(v), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(trimOWS(spec), "-")
	if !found {
		return 0, 0, false
	}
	num := func(s string) (int64, bool) {
		if s == "" || len(s) > 18 || strings.Trim(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	if a == "" {
		suffix, ok := num(b)
		if !ok {
			return 0, 0, false
		}
		if suffix == 0 || size == 0 {
			return -1, 0, true
		}
		return max(size-suffix, 0), size - 1, true
	}
	first, ok = num(a)
	if !ok {
		return 0, 0, false
	}
	last = size - 1
	if b != "" {
		if last, ok = num(b); !ok || last < first {
			return 0, 0, false
		}
		last = min(last, size-1)
	}
	if first >= size {
		return -1, 0, true
	}
	return first, last, true
}
