package fastserve

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/web"
)

// Fast answers a request on fasthttp's own request, without net/http's
// machinery around it, and reports whether it did; a request it leaves
// goes to the http.Handler. It keeps nothing of c's bytes without a copy.
type Fast func(c *fasthttp.RequestCtx) bool

// Handler serves h on fasthttp: a request fast answers (when fast is not
// nil) is answered so, and every other goes to h through fasthttpadaptor,
// as a request whose strings are copies of fasthttp's bytes (ownRequest).
// A panic is logged to log and counted (guard, "request").
func Handler(h http.Handler, fast Fast, log *slog.Logger) fasthttp.RequestHandler {
	other := fasthttpadaptor.NewFastHTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, err := ownRequest(r)
		if err != nil { // the adaptor parsed the same target: not reached
			web.Refuse(w, api.Errorf(api.BadPath, "the request target does not read: %v", err))
			return
		}
		h.ServeHTTP(w, o)
	}))
	return func(c *fasthttp.RequestCtx) {
		defer func() {
			// fasthttp recovers no panic: one in fast is logged and
			// counted here, one in h was by h (the server's
			// recoverRequest), and the adaptor ends that request as
			// aborted. Either way the connection is closed with no
			// answer, as net/http does, and the server goes on.
			if v := recover(); v != nil {
				guard.Recovered(log, "request", v)
				c.Response.Reset()
				c.HijackSetNoResponse(true)
				c.Hijack(func(net.Conn) {})
			}
		}()
		if fast == nil || !fast(c) {
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
