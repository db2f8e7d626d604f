package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/internal/web"
)

// FastHandler serves the routes of Handler on fasthttp, for a plain HTTP/1.1
// listener: a GET on a steering route, the request every player sends every
// TTL, is answered on fasthttp's own request without net/http's machinery
// around it (about half of net/http's CPU a request, measured by `waisteer
// bench`); every other request goes to Handler through fasthttpadaptor.
// Both run the same code, so the answers are the same: the steering request
// is handed to the same handler as a pooled net/http request holding what
// that handler reads (the method, the target, the CMCD-Request lines).
func (s *Server) FastHandler() fasthttp.RequestHandler {
	other := fasthttpadaptor.NewFastHTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, err := ownRequest(r)
		if err != nil { // the adaptor parsed the same target: not reached
			web.Refuse(w, api.Errorf(api.BadPath, "the request target does not read: %v", err))
			return
		}
		s.ServeHTTP(w, o)
	}))
	return func(c *fasthttp.RequestCtx) {
		defer func() {
			// fasthttp recovers no panic: one in serveFast is logged
			// and counted here, one in ServeHTTP was (recoverRequest),
			// and the adaptor ends that request as aborted. Either way
			// the connection is closed with no answer, as net/http
			// does, and the server goes on.
			if v := recover(); v != nil {
				guard.Recovered(s.log, "request", v)
				c.Response.Reset()
				c.HijackSetNoResponse(true)
				c.Hijack(func(net.Conn) {})
			}
		}()
		if !s.serveFast(c) {
			other(c)
		}
	}
}

// ownRequest is r, as fasthttpadaptor made it, with every string it holds
// copied: the adaptor's method, target, URL, Host, protocol and header
// keys and values are strings over fasthttp's buffers (b2s), which the
// connection's next request overwrites once the handler has returned, and
// a route that keeps one (a report's cohort as the QoE aggregator's key,
// issue 26 item 1) would find it changed under it. The body is left as
// it is: it is read through an io.Reader, which copies what it reads.
//
// The context is a new one: fasthttp's RequestCtx is reused too, and it
// cancels a request when its server starts shutting down, where net/http
// lets the requests in flight finish (a hop's POST in flight is still
// stored during a graceful shutdown). No route reads a value of it.
func ownRequest(r *http.Request) (*http.Request, error) {
	o := r.WithContext(context.Background()) // a shallow copy
	o.Method = strings.Clone(r.Method)
	o.Proto = strings.Clone(r.Proto)
	o.Host = strings.Clone(r.Host)
	o.RemoteAddr = strings.Clone(r.RemoteAddr)
	o.RequestURI = strings.Clone(r.RequestURI)
	u, err := url.ParseRequestURI(o.RequestURI)
	if err != nil {
		return nil, err
	}
	o.URL = u
	o.Header = ownHeader(r.Header)
	o.Trailer = ownHeader(r.Trailer)
	if r.TransferEncoding != nil {
		o.TransferEncoding = make([]string, len(r.TransferEncoding))
		for i, v := range r.TransferEncoding {
			o.TransferEncoding[i] = strings.Clone(v)
		}
	}
	return o, nil
}

// ownHeader is a copy of h whose keys and values are copied too, its
// values in one backing array.
func ownHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	all := make([]string, 0, n)
	o := make(http.Header, len(h))
	for k, vs := range h {
		for _, v := range vs {
			all = append(all, strings.Clone(v))
		}
		o[strings.Clone(k)] = all[len(all)-len(vs) : len(all) : len(all)]
	}
	return o
}

// FastLimits are the limits of the HTTP server FastServer makes.
type FastLimits struct {
	// ReadHeaderTimeout bounds reading a request's line and header fields,
	// ReadTimeout the whole request (as net/http's fields of those names).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and header fields; fasthttp
	// reads them into a buffer of this size on each connection that is
	// reading a request.
	MaxHeaderBytes int
	Logger         *slog.Logger
}

// FastServer returns a fasthttp server of FastHandler with limits l. A body
// over the largest a route reads is refused as ServeHTTP refuses it, 413
// body_too_large, before it is read to its end. A connection between
// requests holds no buffer (ReduceMemoryUsage): players poll once a TTL and
// keep their connections open meanwhile, and a buffer of MaxHeaderBytes on
// each would cost 64 KiB a player; the pooled buffers cost about 4 % more
// CPU a steering request (waisteer bench).
func (s *Server) FastServer(l FastLimits) *fasthttp.Server {
	return &fasthttp.Server{
		Handler: s.FastHandler(),
		// fasthttp's ReadTimeout runs from a request's first byte; once
		// its header is read, its body gets what is left of ReadTimeout.
		ReadTimeout: l.ReadHeaderTimeout,
		HeaderReceived: func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			if h.ContentLength() == 0 { // no body: a steering GET
				return fasthttp.RequestConfig{}
			}
			return fasthttp.RequestConfig{ReadTimeout: max(l.ReadTimeout-l.ReadHeaderTimeout, time.Millisecond)}
		},
		WriteTimeout:          l.WriteTimeout,
		IdleTimeout:           l.IdleTimeout,
		ReadBufferSize:        l.MaxHeaderBytes,
		MaxRequestBodySize:    maxBody,
		NoDefaultServerHeader: true,
		ReduceMemoryUsage:     true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		Logger:                fastLogger{l.Logger},
		ErrorHandler: func(c *fasthttp.RequestCtx, err error) {
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				w := &fastWriter{c: c, h: make(http.Header, 4)}
				web.Refuse(w, api.Errorf(api.BodyTooLarge, "the body is over the %d bytes any route reads", maxBody))
				c.SetConnectionClose()
				drainBody(c.Conn())
				return
			}
			// The statuses net/http answers these with.
			var timeout interface{ Timeout() bool }
			switch {
			case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
				c.Error("431 Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
			case errors.As(err, &timeout) && timeout.Timeout():
				c.Error("408 Request Timeout", http.StatusRequestTimeout)
			default:
				c.Error("400 Bad Request", http.StatusBadRequest)
			}
			c.SetConnectionClose()
		},
	}
}

// drainBody reads and drops what a client still sends of a body refused
// for its size, before the connection is closed: closing a socket with
// unread bytes resets the connection, and the client, still sending, would
// lose the answer that says why. It reads until the client pauses for
// drainPause, or after drainMax bytes (net/http's MaxBytesReader lets a
// client read its 413 the same way).
func drainBody(conn net.Conn) {
	buf := make([]byte, 32<<10)
	for n := 0; n < drainMax; {
		conn.SetReadDeadline(time.Now().Add(drainPause))
		k, err := conn.Read(buf)
		n += k
		if err != nil {
			return
		}
	}
}

const (
	drainPause = 200 * time.Millisecond
	drainMax   = 2 * maxBody
)

// fastLogger writes fasthttp's own messages (connections it could not
// serve) as warnings.
type fastLogger struct{ l *slog.Logger }

func (f fastLogger) Printf(format string, args ...any) {
	if f.l != nil {
		f.l.Warn(fmt.Sprintf(format, args...), "from", "fasthttp")
	}
}

// serveFast answers c when it is a GET on a steering route whose target
// net/http would read the same way (plainPath), and reports whether it did.
// Every string it hands the handler is a copy of fasthttp's bytes (the
// target, and the path and query cut from it, the CMCD-Request values, the
// Host, the cohort header), since a pool's QoE keeps the cohort beyond
// the request (issue 26 item 1); the pooled request, header map and
// slices are the handler's only until it returns.
func (s *Server) serveFast(c *fasthttp.RequestCtx) bool {
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
	if len(s.proxies) > 0 {
		// A trusted proxy names the client (clientAddr).
		for _, v := range c.Request.Header.PeekAll(budget.ForwardedFor) {
			x.r.Header[budget.ForwardedFor] = append(x.r.Header[budget.ForwardedFor], string(v))
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
	x.w.c = c
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
	w    fastWriter
}

var fastRequests = sync.Pool{New: func() any {
	x := &fastRequest{}
	x.r.URL = &x.u
	x.r.Header = make(http.Header, 1)
	x.r.Proto, x.r.ProtoMajor, x.r.ProtoMinor = "HTTP/1.1", 1, 1
	x.w.h = make(http.Header, 8)
	return x
}}

func (x *fastRequest) release() {
	clear(x.r.Header)
	clear(x.w.h)
	clear(x.cmcd)
	x.r.RequestURI, x.u.Path, x.u.RawQuery, x.r.Host, x.r.TLS, x.r.RemoteAddr = "", "", "", "", nil, ""
	x.w.c, x.w.wrote = nil, false
	fastRequests.Put(x)
}

// fastWriter is an http.ResponseWriter onto a fasthttp response: the
// header map is copied into it when the status is written.
type fastWriter struct {
	c     *fasthttp.RequestCtx
	h     http.Header
	wrote bool
}

func (w *fastWriter) Header() http.Header { return w.h }

func (w *fastWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	rh := &w.c.Response.Header
	for k, vs := range w.h {
		for _, v := range vs {
			rh.Add(k, v)
		}
	}
	w.c.SetStatusCode(status)
}

func (w *fastWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.c.Write(b)
}
