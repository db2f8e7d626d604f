package server

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/fastserve"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/internal/reach"
)

// FastHandler serves the routes of Handler on fasthttp, for a plain HTTP/1.1
// listener: a GET on a steering route, the request every player sends every
// TTL, is answered on fasthttp's own request without net/http's machinery
// around it (about half of net/http's CPU a request, measured by `waisteer
// bench`); every other request goes to Handler through fasthttpadaptor
// (fastserve.Handler). Both run the same code, so the answers are the same:
// the steering request is handed to the same handler as a pooled net/http
// request holding what that handler reads (the method, the target, the
// CMCD-Request lines).
func (s *Server) FastHandler() fasthttp.RequestHandler {
	return fastserve.Handler(s, s.serveFast, s.log)
}

// FastLimits are the limits of the HTTP server FastServer makes.
type FastLimits = fastserve.Limits

// FastServer returns a fasthttp server of FastHandler with limits l
// (fastserve.NewServer). A body over the largest a route reads is refused
// as ServeHTTP refuses it, 413 body_too_large, before it is read to its
// end.
func (s *Server) FastServer(l FastLimits) *fasthttp.Server {
	return fastserve.NewServer(s.FastHandler(), maxBody, l)
}

// serveFast answers c when it is a GET on a steering route whose target
// net/http would read the same way (plainPath), and reports whether it did.
// Every string it hands the handler is a copy of fasthttp's bytes (the
// target, and the path and query cut from it, the CMCD-Request values, the
// Host, the cohort header), since a pool's QoE keeps the cohort beyond
// the request (issue 26 item 1); the pooled request, header map and
// slices are the handler's only until it returns.
func (s *Server) serveFast(c *fasthttp.RequestCtx) bool {
	if s.serveFastPass(c) {
		return true
	}
	if c.IsPost() {
		return s.serveFastRecords(c)
	}
	if !c.IsGet() {
		return false
	}
	raw := c.Request.Header.RequestURI()
	rawPath, _, _ := bytes.Cut(raw, []byte{'?'})
	if !plainPath(rawPath) {
		return false
	}
	target := string(raw)
	path, query, _ := strings.Cut(target, "?")
	h, ok, aerr := s.routes.Load().steerHub(path, query)
	if !ok {
		return false
	}
	x := fastRequests.Get().(*fastRequest)
	x.u.Path, x.u.RawQuery = path, query
	x.r.Method, x.r.RequestURI = http.MethodGet, target
	x.r.RemoteAddr = c.RemoteAddr().String() // a new string: QoE weighs reports by their address (issue 26 item 2)
	x.cmcd = x.cmcd[:0]
	for _, v := range c.Request.Header.PeekAll(cmcdRequest) {
		x.cmcd = append(x.cmcd, string(v))
	}
	if len(x.cmcd) > 0 {
		x.r.Header[cmcdRequest] = x.cmcd
	}
	if s.reach.Trusts() {
		// A trusted proxy names the client and what it reached
		// (reach.Read): every header that reads, each value copied.
		for _, name := range reach.Headers {
			for _, v := range c.Request.Header.PeekAll(name) {
				x.r.Header[name] = append(x.r.Header[name], string(v))
			}
		}
	}
	if ph, ok := h.(*poolsteer.Steerer); ok {
		// A pool writes its RELOAD-URI under the Host the request
		// reached, and may read a cohort from a header.
		x.r.Host = string(c.Host())
		if c.IsTLS() {
			x.r.TLS = &fastTLS
		}
		if name := ph.CohortHeader(); name != "" {
			if v := c.Request.Header.Peek(name); v != nil {
				x.r.Header[name] = []string{string(v)}
			}
		}
	}
	x.w.Reset(c)
	s.steerRoute(&x.w, &x.r, h, aerr)
	x.release()
	return true
}

// fastTLS marks a request that came over TLS: a pool reads only whether
// it did.
var fastTLS tls.ConnectionState

// cmcdRequest is the header CMCD's request keys come in (CTA-5004-B), as
// net/http and fasthttp spell header names.
const cmcdRequest = "Cmcd-Request"

// plainPath reports whether p is an absolute path of characters that
// net/http's URL.EscapedPath gives back as they are (RFC 3986 unreserved
// characters, sub-delims, ":", "@" and "/", no percent-encoding), so that
// the route found for it is the one ServeHTTP finds. Any other target goes
// to ServeHTTP itself.
func plainPath[P string | []byte](p P) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for i := range len(p) {
		if !pathChar[p[i]] {
			return false
		}
	}
	return true
}

var pathChar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "-._~!$&'()*+,;=:@/" {
		t[c] = true
	}
	return t
}()

// fastRequest is a steering request on fasthttp, as the handler reads it.
// It is reused: the handler keeps nothing of a request once it has
// answered.
type fastRequest struct {
	r    http.Request
	u    url.URL
	cmcd []string
	w    fastserve.Writer
}

var fastRequests = sync.Pool{New: func() any {
	x := &fastRequest{}
	x.r.URL = &x.u
	x.r.Header = make(http.Header, 1)
	x.r.Proto, x.r.ProtoMajor, x.r.ProtoMinor = "HTTP/1.1", 1, 1
	x.w.Reset(nil)
	return x
}}

func (x *fastRequest) release() {
	clear(x.r.Header)
	clear(x.cmcd)
	x.r.RequestURI, x.u.Path, x.u.RawQuery, x.r.Host, x.r.TLS, x.r.RemoteAddr = "", "", "", "", nil, ""
	x.w.Reset(nil)
	fastRequests.Put(x)
}

// serveFastRecords answers a hop's POST of records (POST
// /v1/rooms/{room}/records, the request every hop sends every period) on
// fasthttp's own request, as serveFast answers a steering GET, and reports
// whether it did. Through the adaptor each POST cost a goroutine of its
// own, a copy of the request, and that goroutine's stack grown while
// checking the record: about a tenth of a record's CPU at a thousand POSTs
// a second of one record each (issue 30). The route's handler runs as the
// mux runs it (count, serveRecords), on a request holding what it reads:
// the method, the target, the room, the Content-Type and
// Content-Encoding lines, and the body. A target with a query, or a path
// that net/http or cleanPath would read otherwise (plainPath, a dot
// segment), goes to Handler.
func (s *Server) serveFastRecords(c *fasthttp.RequestCtx) bool {
	raw := c.Request.Header.RequestURI()
	if !plainPath(raw) { // no query either: plainPath takes no '?'
		return false
	}
	room, ok := recordsRoom(raw)
	if !ok {
		return false
	}
	target := string(raw)
	body := c.Request.Body() // read whole by fasthttp, within FastServer's maxBody
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: target}, RequestURI: target,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, 2), Host: string(c.Host()), RemoteAddr: c.RemoteAddr().String(),
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
	}
	// ReadBody copies the body: nothing of fasthttp's buffer outlives
	// the request.
	for _, name := range []string{"Content-Type", "Content-Encoding"} {
		for _, v := range c.Request.Header.PeekAll(name) {
			r.Header[name] = append(r.Header[name], string(v))
		}
	}
	r.SetPathValue("room", string(room))
	s.count(routeRecordsPost, fastserve.NewWriter(c), r, s.serveRecords)
	return true
}

// recordsRoom is the room segment of a records route's path,
// /v1/rooms/{room}/records, as ServeMux would match it and cleanPath pass
// it: one segment, not empty, not a dot segment.
func recordsRoom(p []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("/v1/rooms/"))
	if !ok {
		return nil, false
	}
	room, ok := bytes.CutSuffix(rest, []byte("/records"))
	if !ok || len(room) == 0 || bytes.IndexByte(room, '/') >= 0 || string(room) == "." || string(room) == ".." {
		return nil, false
	}
	return room, true
}
