package server

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/fastserve"
	"github.com/waisteer/waisteer/internal/front"
)

// serveFastPass answers, on fasthttp's own response, a GET or HEAD of a
// front path that passes through (issue 28, "Every pathway plays";
// internal/front pass.go), and reports whether it did. fasthttpadaptor
// holds a handler's whole answer in memory until the handler returns (or,
// once flushed, streams it without its length); here the origin's body is
// handed to fasthttp as a body stream of the origin's length, which
// fasthttp copies to the player with its small buffer and closes when it
// is done or the player is gone (the origin's exchange ends with it).
// A target that net/http would read otherwise (plainPath), a path the
// front steers, and an answer that turns out to be a playlist go to
// Handler as before.
func (s *Server) serveFastPass(c *fasthttp.RequestCtx) bool {
	if s.front == nil || !(c.IsGet() || c.IsHead()) {
		return false
	}
	raw := c.Request.Header.RequestURI()
	rawPath, rawQuery, _ := cutQuery(raw)
	if !plainPath(rawPath) {
		return false
	}
	p := string(rawPath)
	if _, ok := s.front.Match(p); !ok || s.front.Steers(p) {
		return false
	}
	start := time.Now()
	// The request as the front reads it: every string a copy, since the
	// origin's request may outlive fasthttp's buffers.
	r := &http.Request{Method: string(c.Method()), URL: &url.URL{Path: p, RawQuery: string(rawQuery)},
		Host: string(c.Host()), Header: make(http.Header, 8), RemoteAddr: c.RemoteAddr().String(), RequestURI: string(raw)}
	r = r.WithContext(context.Background())
	for k, v := range c.Request.Header.All() {
		name := http.CanonicalHeaderKey(string(k))
		r.Header[name] = append(r.Header[name], string(v))
	}
	pass, aerr := s.front.OpenPass(r)
	if pass == nil && aerr == nil {
		return false // a playlist after all: the front serves it through Handler
	}
	if aerr != nil {
		w := fastserve.NewWriter(c)
		s.front.WritePassRefusal(w, aerr)
		s.metrics.requests[routeFront].Add(c.Response.StatusCode())
		s.metrics.latency[routeFront].ObserveDuration(time.Since(start))
		return true
	}
	h := &c.Response.Header
	h.Set("Access-Control-Allow-Origin", "*")
	length := int64(-1)
	for k, vs := range pass.Header {
		if k == "Content-Length" {
			if n, err := strconv.ParseInt(vs[0], 10, 64); err == nil && n >= 0 {
				length = n
			}
			continue
		}
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if pass.Header.Get("Content-Type") == "" {
		h.SetNoDefaultContentType(true)
	}
	c.SetStatusCode(pass.Status)
	switch {
	case pass.Body == nil:
		pass.Close()
	case c.IsHead():
		if length >= 0 {
			h.SetContentLength(int(length))
		}
		pass.Close()
	default:
		c.Response.SetBodyStream(passBody{pass}, int(length))
	}
	s.metrics.requests[routeFront].Add(pass.Status)
	s.metrics.latency[routeFront].ObserveDuration(time.Since(start))
	return true
}

// passBody is a pass-through as fasthttp's body stream: fasthttp closes
// it once written or once the player is gone.
type passBody struct{ p *front.Pass }

func (b passBody) Read(p []byte) (int, error) { return b.p.Body.Read(p) }
func (b passBody) Close() error               { b.p.Close(); return nil }

// cutQuery splits a request target at its first '?'.
func cutQuery(raw []byte) (path, query []byte, ok bool) {
	for i, c := range raw {
		if c == '?' {
			return raw[:i], raw[i+1:], true
		}
	}
	return raw, nil, false
}
