package origin

// The fetch from an HTTP origin (the package doc says what is sent and how
// each answer is read).

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userAgent is what the origin sees instead of the player's.
const userAgent = "waisteer-front"

// newTransport is the package's own transport: connections kept (many
// players ask for the same few playlists), no proxy from the environment,
// no transparent decompression (the fetch asks for gzip itself and bounds
// what it decompresses), and a bounded header section.
func newTransport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    32,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    timeout,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
}

// passed are the request fields passed on to the origin (the package doc
// says why these), in canonical form.
var passed = map[string]bool{
	"Accept":          true,
	"Accept-Language": true,
	"Authorization":   true,
	"Cookie":          true,
	"Referer":         true,
	"Cmcd-Object":     true,
	"Cmcd-Request":    true,
	"Cmcd-Session":    true,
	"Cmcd-Status":     true,
}

// caching are the answer's fields passed through to the player.
var caching = []string{"Etag", "Last-Modified", "Cache-Control", "Cdn-Cache-Control", "Expires", "Age", "Vary"}

// drainLimit is how much of a body not used is read so that its
// connection may be kept; a longer one drops the connection.
const drainLimit = 64 << 10

func (o *Origin) fetchHTTP(parent context.Context, r *Request) (*Response, *Error) {
	if err := checkQuery(r.RawQuery); err != nil {
		return nil, err
	}
	u := *o.base
	u.Path += r.Path
	u.RawQuery = r.RawQuery // sent as it is: RequestURI writes RawQuery verbatim

	ctx, cancel := context.WithTimeout(parent, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.base.String(), nil)
	if err != nil {
		return nil, fail(CodeBadPath, err, "the request does not make a URL")
	}
	req.URL = &u
	h := req.Header
	for name, values := range r.Header {
		name = http.CanonicalHeaderKey(name)
		if !passed[name] || connectionNames(r.Header, name) {
			continue
		}
		for _, v := range values {
			if fieldValue(v) {
				h.Add(name, v)
			}
		}
	}
	h.Set("User-Agent", userAgent)
	h.Set("Accept-Encoding", "gzip")
	conditional := false
	if v := r.IfNoneMatch; v != "" && fieldValue(v) {
		h.Set("If-None-Match", v)
		conditional = true
	}
	if v := r.IfModifiedSince; v != "" && fieldValue(v) {
		h.Set("If-Modified-Since", v)
		conditional = true
	}

	limit := o.timeout
	if d, ok := parent.Deadline(); ok && time.Until(d) < limit {
		limit = max(time.Until(d), 0).Round(time.Millisecond)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, failed(parent, ctx, err, limit, "")
	}
	defer resp.Body.Close()

	switch s := resp.StatusCode; {
	case s == http.StatusOK || s == http.StatusNonAuthoritativeInfo:
		body, err := o.readBody(resp)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil, e
			}
			return nil, failed(parent, ctx, err, limit, bodyName(resp))
		}
		return &Response{
			Status:      http.StatusOK,
			Body:        body,
			ContentType: resp.Header.Get("Content-Type"),
			Header:      cachingHeader(resp.Header),
		}, nil
	case s == http.StatusNotModified:
		if !conditional {
			// RFC 9110 §15.4.5: a 304 answers a conditional request only;
			// the front has no copy to send the player in its place.
			return nil, fail(CodeBadAnswer, nil, "the origin answered 304 to a request that was not conditional")
		}
		return &Response{Status: http.StatusNotModified, Header: cachingHeader(resp.Header)}, nil
	case s == http.StatusNotFound || s == http.StatusGone:
		drain(resp.Body)
		return nil, fail(CodeNotFound, nil, "the origin has no such playlist (it answered %d)", s)
	case s >= 300 && s < 400:
		drain(resp.Body)
		return nil, fail(CodeRedirect, nil,
			"the origin answered %d, a redirect, which the front does not follow", s)
	default:
		drain(resp.Body)
		return nil, fail(CodeStatus, nil, "the origin answered %d", s)
	}
}

// readBody reads a 200's body within maxBytes as sent and as
// decompressed. An error that is not an *Error is one of reading, for
// failed to judge.
func (o *Origin) readBody(resp *http.Response) ([]byte, error) {
	codings := strings.ToLower(strings.Join(resp.Header.Values("Content-Encoding"), ","))
	gz := false
	switch strings.Trim(codings, " \t") {
	case "", "identity":
	case "gzip", "x-gzip": // x-gzip: RFC 9110 §8.4.1.3
		gz = true
	default:
		return nil, fail(CodeBadAnswer, nil, "the origin answered in the coding %q, which was not asked for", codings)
	}
	if resp.ContentLength > o.maxBytes {
		return nil, fail(CodeTooLarge, nil, "the origin's body is %d bytes, over the limit of %d", resp.ContentLength, o.maxBytes)
	}
	sent := &counter{r: io.LimitReader(resp.Body, o.maxBytes+1)}
	var body io.Reader = sent
	var err error
	var b []byte
	if gz {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(sent); err == nil {
			b, err = io.ReadAll(io.LimitReader(zr, o.maxBytes+1))
		}
	} else {
		b, err = io.ReadAll(body)
	}
	switch {
	case int64(len(b)) > o.maxBytes:
		return nil, fail(CodeTooLarge, nil, "the origin's body is over the limit of %d bytes once decompressed", o.maxBytes)
	case sent.n > o.maxBytes:
		return nil, fail(CodeTooLarge, nil, "the origin's body is over the limit of %d bytes as sent", o.maxBytes)
	case errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum):
		return nil, fail(CodeBadAnswer, err, "the origin's gzip body does not read: %v", err)
	case err != nil:
		return nil, err
	case len(b) == 0:
		return nil, fail(CodeEmpty, nil, "the origin answered an empty body, which is no playlist")
	}
	return b, nil
}

// bodyName is what a body not read to its end is called in a detail.
func bodyName(resp *http.Response) string {
	if strings.Contains(strings.ToLower(resp.Header.Get("Content-Encoding")), "gzip") {
		return "the origin's gzip body"
	}
	return "the origin's body"
}

// failed judges an exchange that failed, before the answer's head, or
// while body (its name in a detail) was read.
func failed(parent, ctx context.Context, err error, limit time.Duration, body string) *Error {
	inBody := body != ""
	var dns *net.DNSError
	var op *net.OpError
	var ne net.Error
	var cert *tls.CertificateVerificationError
	var rec tls.RecordHeaderError
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		return fail(CodeCanceled, err, "the request was cancelled before the origin's answer ended")
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		if inBody {
			return fail(CodeTimeout, err, "%s did not end within %v", body, limit)
		}
		return fail(CodeTimeout, err, "no answer from the origin within %v", limit)
	case inBody && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return fail(CodeBadAnswer, err, "%s was cut short", body)
	case inBody && errors.Is(err, syscall.ECONNRESET):
		return fail(CodeBadAnswer, err, "%s was cut short by a reset", body)
	case inBody:
		return fail(CodeBadAnswer, err, "%s does not read: %s", body, short(err))
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return fail(CodeUnreachable, err, "the origin's host name does not resolve")
		}
		return fail(CodeUnreachable, err, "the origin's host name does not resolve: %s", dns.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fail(CodeUnreachable, err, "the origin refused the connection")
	case errors.Is(err, syscall.ECONNRESET):
		return fail(CodeUnreachable, err, "the origin reset the connection before answering")
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fail(CodeUnreachable, err, "the origin closed the connection before answering")
	case errors.As(err, &cert):
		return fail(CodeUnreachable, err, "the origin's TLS certificate does not verify: %s", short(cert.Err))
	case errors.As(err, &rec):
		return fail(CodeUnreachable, err, "the origin did not answer in TLS")
	case errors.As(err, &op) && op.Op == "dial":
		return fail(CodeUnreachable, err, "the origin cannot be reached: %s", short(op.Err))
	default:
		// A malformed answer, a bad header, a TLS alert: the transport's
		// words, without the URL it wraps them in.
		return fail(CodeBadAnswer, err, "the origin's answer does not read: %s", short(err))
	}
}

// short is an error's words without the URL net/http wraps them in
// (which may hold the origin's host and the player's query), bounded for
// a JSON detail.
func short(err error) string {
	for {
		ue, ok := err.(*url.Error)
		if !ok {
			break
		}
		err = ue.Err
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// drain reads what is left of a body not used, so that its connection
// may be kept.
func drain(body io.Reader) { io.CopyN(io.Discard, body, drainLimit) }

// cachingHeader copies the caching fields of h, less any its Connection
// field names (RFC 9110 §7.6.1).
func cachingHeader(h http.Header) http.Header {
	out := http.Header{}
	for _, name := range caching {
		if vs := h.Values(name); len(vs) > 0 && !connectionNames(h, name) {
			out[name] = append([]string(nil), vs...)
		}
	}
	return out
}

// connectionNames reports whether h's Connection field lists name.
func connectionNames(h http.Header, name string) bool {
	for _, v := range h.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.Trim(tok, " \t"), name) {
				return true
			}
		}
	}
	return false
}

// fieldValue reports whether v may be sent as a field value: no control
// character but the tab (RFC 9110 §5.5).
func fieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// checkQuery refuses a query byte that no request target may hold (RFC
// 9112 §3.2: no white space, control or "#"; RFC 3986 §3.4) and that could
// therefore not be sent as it is.
func checkQuery(q string) *Error {
	for i := 0; i < len(q); i++ {
		if c := q[i]; c <= 0x20 || c >= 0x7f || c == '#' {
			return fail(CodeBadQuery, nil, "the query holds the byte 0x%s, which no request may carry", strconv.FormatUint(uint64(c), 16))
		}
	}
	return nil
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
