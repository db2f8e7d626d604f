// Package origin fetches the playlists and MPDs the front serves (issue 13,
// item 1): from an HTTP origin or from a local directory, bounded in time
// and size, with conditional requests and caching headers passed through,
// and every failure an *Error naming why, which the front answers with
// (never a playlist without variants).
//
// # An HTTP origin
//
// A fetch of Request{Path: "/hls/live.m3u8", RawQuery: "token=a%2Fb"} from
// the base "http://origin.example:8080/live" is one GET
//
//	GET /live/hls/live.m3u8?token=a%2Fb HTTP/1.1
//	Host: origin.example:8080
//	User-Agent: waisteer-front
//	Accept-Encoding: gzip
//	If-None-Match: "abc"                        (the player's, when it sent one)
//	If-Modified-Since: Tue, 01 Dec 2026 ...     (likewise)
//	Authorization: ...                          (the fields passed on, below)
//
// The query is sent byte for byte as the player wrote it (signed tokens are
// never re-encoded); the path is the base's followed by the request's.
// Timeout bounds the whole exchange, from the dial to the last byte of the
// body; connections are kept for the next fetch; no proxy from the
// environment is used, since the operator names the origin itself.
//
// Of the player's other request fields only these are passed on: Accept,
// Accept-Language, Authorization, Cookie and Referer (what token-protected
// origins and CDNs check: the origin is the operator's own, and the front
// answers for it), and the CMCD-Object, CMCD-Request, CMCD-Session and
// CMCD-Status fields (CTA-5004, for the origin's logs); any of them the
// request's Connection field names is hop-by-hop and dropped (RFC 9110
// §7.6.1). Never passed: User-Agent (the origin sees the front's), Host,
// hop-by-hop fields, Accept-Encoding (the front's own), Range and If-Range
// (the front needs the whole playlist), If-Match and If-Unmodified-Since,
// Cache-Control and Pragma (the front is no cache to instruct), and
// Forwarded or X-Forwarded-* (a player's are not to be trusted).
//
// The answer:
//
//   - 200 or 203: the body, read to its end, at most MaxBytes of it as sent
//     and at most MaxBytes once decompressed (a gzip body is decompressed;
//     any other coding, which was not asked for, is refused). A body over
//     either bound is origin_too_large, never cut to fit; an empty body is
//     origin_empty.
//   - 304 to a conditional request: Status 304 with the caching headers.
//   - 404 or 410: not_found, which the front answers 404.
//   - Any 3xx but 304 is origin_redirect: redirects are never followed,
//     since the player resolves the playlist's relative URIs against the
//     front's path, not the one the origin redirected to.
//   - Any other status: origin_status ("the origin answered 503").
//
// A refused connection, a name that does not resolve or a connection reset
// before an answer is origin_unreachable; no answer within Timeout is
// origin_timeout; an answer that is not HTTP, or a body cut short or
// undecodable, is origin_bad_answer. The details say why without naming
// the origin's host or URL, which the front's players need not learn.
//
// # A directory origin
//
// The request's path names a file under the directory, read through an
// os.Root opened for each fetch, so that a directory replaced in place is
// seen at once and nothing outside it is ever read: a symbolic link is
// followed only when it is relative and stays within the directory (an
// absolute one, or one leading out, is not_found). The file must be a
// regular file of at most MaxBytes and not empty. Its Content-Type comes
// from its extension: .m3u8 application/vnd.apple.mpegurl, .mpd
// application/dash+xml, any other "". The query and the other request
// fields are not read.
//
// The file's ETag is strong: the first 16 bytes of the SHA-256 of its
// bytes, in lowercase hexadecimal, in double quotes. A size and a
// modification time would be cheaper, but a live playlist rewritten within
// the same second with the same length would keep its tag, and the bytes
// are read anyway. Its Last-Modified is its modification time rounded up
// to the second, sent only once that second is past; If-Modified-Since is
// answered 304 only when the file was modified at or before the date
// given, to the nanosecond. A player's copy fetched at time s carries a
// date no later than s, and any write after s leaves the file a later
// time, so a 304 never hides a change. If-None-Match is evaluated first,
// by the weak comparison, and when present If-Modified-Since is ignored
// (RFC 9110 §13.1.3, §13.2.2); a date later than now is ignored, and a
// field that does not read is taken as matching nothing.
//
// # Paths
//
// Request.Path is an absolute, percent-decoded path (the front's
// r.URL.Path). Either origin refuses, as bad_path, a path with an empty,
// "." or ".." segment, a backslash or a control character: nothing is ever
// decoded a second time, so "%2e%2e" is a name, not a step up.
package origin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Origin is where the front's playlists come from. It is safe for
// concurrent use.
type Origin struct {
	timeout  time.Duration
	maxBytes int64

	// An HTTP origin: base with its path's trailing "/" removed.
	base   *url.URL
	client *http.Client

	// A directory origin.
	dir string
}

type Options struct {
	Timeout  time.Duration // the whole fetch (dial to last body byte); 0: 5 s
	MaxBytes int64         // the largest playlist or MPD read, as sent and decompressed; 0: 1 MiB
	// Client is used for an HTTP origin; nil: the package's own, whose
	// transport keeps connections. Redirects are never followed, whichever
	// client: a copy of Client is used, with its own CheckRedirect.
	Client *http.Client
}

const (
	defaultTimeout  = 5 * time.Second
	defaultMaxBytes = 1 << 20
)

// New makes an origin of base: "http://host[:port][/prefix]" or "https://…"
// (an HTTP origin; the request path is appended to its path), or a local
// directory ("/srv/hls", or "file:///srv/hls"; an absolute path that must
// exist and be a directory). A bad base is an error naming why.
func New(base string, o Options) (*Origin, error) {
	if o.Timeout < 0 {
		return nil, fmt.Errorf("origin: the timeout %v is negative", o.Timeout)
	}
	if o.MaxBytes < 0 {
		return nil, fmt.Errorf("origin: the size limit %d is negative", o.MaxBytes)
	}
	or := &Origin{timeout: o.Timeout, maxBytes: o.MaxBytes}
	if or.timeout == 0 {
		or.timeout = defaultTimeout
	}
	if or.maxBytes == 0 {
		or.maxBytes = defaultMaxBytes
	}
	if strings.HasPrefix(base, "/") {
		return or, or.setDir(base)
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("origin: %q does not read as a URL: %v", base, err)
	}
	switch u.Scheme {
	case "http", "https":
		return or, or.setHTTP(base, u, o.Client)
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("origin: %q names a host; a directory origin is local", base)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			return nil, fmt.Errorf("origin: %q has a query or a fragment", base)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("origin: %q names no directory", base)
		}
		return or, or.setDir(u.Path)
	case "":
		return nil, fmt.Errorf("origin: %q is neither an http:// or https:// URL nor an absolute directory", base)
	default:
		return nil, fmt.Errorf("origin: %q: the scheme %s is not http, https or file", base, u.Scheme)
	}
}

func (o *Origin) setDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("origin: the directory %q is not absolute", dir)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("origin: the directory %s: %v", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("origin: %s is not a directory", dir)
	}
	o.dir = filepath.Clean(dir)
	return nil
}

func (o *Origin) setHTTP(base string, u *url.URL, c *http.Client) error {
	switch {
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("origin: %q has no host", base)
	case u.User != nil:
		return fmt.Errorf("origin: %q carries userinfo; credentials do not belong in the base URL", base)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fmt.Errorf("origin: %q has a query or a fragment; the request's query is appended as it is", base)
	}
	if p := u.Port(); p != "" {
		n := 0
		for _, c := range p {
			n = n*10 + int(c-'0')
			if n > 65535 {
				break
			}
		}
		if n < 1 || n > 65535 {
			return fmt.Errorf("origin: %q has no valid port", base)
		}
	}
	prefix := strings.TrimSuffix(u.Path, "/")
	if prefix != "" {
		if err := checkPath(prefix); err != nil {
			return fmt.Errorf("origin: %q: its path %s", base, err.Detail)
		}
	}
	o.base = &url.URL{Scheme: u.Scheme, Host: u.Host, Path: prefix}
	if c == nil {
		o.client = &http.Client{Transport: newTransport(o.timeout)}
	} else {
		cc := *c
		o.client = &cc
	}
	o.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return nil
}

// Request is what the front passes on from the player's request.
type Request struct {
	Path     string // the request's path, already matched to a configured playlist path
	RawQuery string // passed on to an HTTP origin as is (signed tokens: never re-encode)
	// The player's If-None-Match and If-Modified-Since, passed on (their
	// lines joined with ", " when there were several, RFC 9110 §5.3).
	IfNoneMatch     string
	IfModifiedSince string
	// Header holds other request fields to pass on to an HTTP origin: only
	// those the package doc lists are, so the front may hand over the
	// player's whole header. User-Agent is never passed.
	Header http.Header
}

// Response is what the origin answered.
type Response struct {
	Status      int    // 200, or 304 (Not Modified: Body empty)
	Body        []byte // 1 to MaxBytes bytes with 200
	ContentType string // the origin's, or by extension from a directory; may be ""
	// Header holds the origin's caching headers the front passes through:
	// ETag, Last-Modified, Cache-Control, CDN-Cache-Control (RFC 9213),
	// Expires, Age and Vary, as the origin sent them. Never hop-by-hop
	// fields, never Content-Length or Content-Encoding, which the front
	// recomputes.
	Header http.Header
}

// The codes of an *Error.
const (
	CodeNotFound    = "not_found"          // 404: the origin has no such playlist
	CodeBadPath     = "bad_path"           // 400: a dot or empty segment, a backslash, a control character
	CodeBadQuery    = "bad_query"          // 400: a query byte no request target may hold
	CodeStatus      = "origin_status"      // 502: a status other than 200, 203, 304, 404, 410 or a redirect
	CodeRedirect    = "origin_redirect"    // 502: a redirect, which is never followed
	CodeUnreachable = "origin_unreachable" // 502: refused, unresolved, reset; a directory that cannot be opened
	CodeTimeout     = "origin_timeout"     // 502: no whole answer within Timeout
	CodeTooLarge    = "origin_too_large"   // 502: over MaxBytes, as sent or decompressed
	CodeBadAnswer   = "origin_bad_answer"  // 502: not HTTP, cut short, an encoding not asked for, a 304 not asked for
	CodeEmpty       = "origin_empty"       // 502: an empty body or file, never a playlist
	CodeUnreadable  = "origin_unreadable"  // 502: a file that is not regular, or cannot be read
	CodeCanceled    = "canceled"           // 502: the caller's context was cancelled (its player left)
)

// statusOf is the one mapping from codes to the status the front answers.
func statusOf(code string) int {
	switch code {
	case CodeNotFound:
		return http.StatusNotFound
	case CodeBadPath, CodeBadQuery:
		return http.StatusBadRequest
	}
	// The origin failed: the front, a gateway, answers 502 (RFC 9110
	// §15.6.3), a timeout included, as the issue asks.
	return http.StatusBadGateway
}

// Error is a fetch that failed, with the status the front answers and a
// code and detail for its JSON refusal ({"error": code, "detail": ...}, as
// internal/api writes them).
type Error struct {
	Status       int
	Code, Detail string
	cause        error // for the front's log: the error underneath, if any
}

func (e *Error) Error() string { return "origin: " + e.Code + ": " + e.Detail }

// Unwrap gives the error underneath, for the front's log; it may name the
// origin's host, which Detail does not.
func (e *Error) Unwrap() error { return e.cause }

func fail(code string, cause error, format string, args ...any) *Error {
	return &Error{Status: statusOf(code), Code: code, Detail: fmt.Sprintf(format, args...), cause: cause}
}

// Fetch gets one playlist or MPD. ctx bounds it too. The error is an
// *Error.
func (o *Origin) Fetch(ctx context.Context, r *Request) (*Response, error) {
	if err := checkPath(r.Path); err != nil {
		return nil, err
	}
	var resp *Response
	var err *Error
	if o.base != nil {
		resp, err = o.fetchHTTP(ctx, r)
	} else {
		resp, err = o.fetchDir(ctx, r)
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// checkPath refuses a path that could mean another than it says.
func checkPath(p string) *Error {
	if !strings.HasPrefix(p, "/") {
		return fail(CodeBadPath, nil, "the path %q is not absolute", p)
	}
	for _, c := range []byte(p) {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return fail(CodeBadPath, nil, "the path holds a control character or a backslash")
		}
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		switch seg {
		case "":
			return fail(CodeBadPath, nil, "the path has an empty segment")
		case ".", "..":
			return fail(CodeBadPath, nil, "the path has a dot segment")
		}
	}
	return nil
}
