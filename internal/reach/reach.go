package reach

import (
	"context"
	"net/http"
	"net/netip"
	"strings"

	"github.com/waisteer/waisteer/internal/limit"
)

// The headers Read reads from a trusted peer, as net/http and fasthttp
// spell their names. An engine that hands the server a request of its own
// making copies each of them (Headers).
const (
	Forwarded      = "Forwarded"
	ForwardedFor   = "X-Forwarded-For"
	ForwardedProto = "X-Forwarded-Proto"
	ForwardedHost  = "X-Forwarded-Host"
)

const nHeaders = 4

// Headers are the headers Read reads, in the order the metrics name them.
var Headers = [nHeaders]string{Forwarded, ForwardedFor, ForwardedProto, ForwardedHost}

// Request is what Read reads of a request.
type Request struct {
	Peer   netip.Addr  // the address of the connection's other end
	TLS    bool        // the request came over TLS
	Host   string      // its Host (net/http's Request.Host)
	Header http.Header // its header fields, canonical names
}

// Reached is the scheme and host a viewer reached and its address.
type Reached struct {
	Scheme string     // "http" or "https"
	Host   string     // host[:port]; "" when the request named none (HTTP/1.0)
	Client netip.Addr // the viewer's address; the zero Addr when the peer's does not read
	// Ignored are the headers a trusted peer sent that did not read, each
	// with its reason; nil for none.
	Ignored []Ignored
}

// Ignored is a header Read ignored and why (a Reason… constant).
type Ignored struct {
	Header string
	Reason string
}

// Base is "scheme://host", what a URL the server writes for the viewer
// starts with; "" when the request named no host.
func (r Reached) Base() string {
	if r.Host == "" {
		return ""
	}
	return r.Scheme + "://" + r.Host
}

// Read reads q through the trusted proxies p (package doc).
func Read(p limit.Proxies, q Request) Reached {
	out := Reached{Scheme: "http", Host: q.Host, Client: q.Peer}
	if q.TLS {
		out.Scheme = "https"
	}
	if len(p) == 0 || !p.Trusts(q.Peer) {
		return out
	}
	if lines := q.Header[Forwarded]; len(lines) > 0 {
		els, why := ParseForwarded(lines)
		if why != "" {
			out.Ignored = append(out.Ignored, Ignored{Forwarded, why})
			return out
		}
		walk(p, els, &out)
		return out
	}
	if lines := q.Header[ForwardedFor]; len(lines) > 0 {
		c, ok := p.Walk(q.Peer, lines)
		out.Client = c
		if !ok {
			out.Ignored = append(out.Ignored, Ignored{ForwardedFor, ReasonAddress})
		}
	}
	if v, ok := rightmost(q.Header[ForwardedProto]); ok {
		if proto, ok := Proto(v); ok {
			out.Scheme = proto
		} else {
			out.Ignored = append(out.Ignored, Ignored{ForwardedProto, ReasonProto})
		}
	}
	if v, ok := rightmost(q.Header[ForwardedHost]); ok {
		if Authority(v) {
			out.Host = v
		} else {
			out.Ignored = append(out.Ignored, Ignored{ForwardedHost, ReasonHost})
		}
	}
	return out
}

// walk reads Forwarded's elements from the right (package doc), the peer
// having written the last.
func walk(p limit.Proxies, els []Element, out *Reached) {
	at := out.Client
	for i := len(els) - 1; i >= 0; i-- {
		e := els[i]
		if e.Proto != "" {
			out.Scheme = e.Proto
		}
		if e.Host != "" {
			out.Host = e.Host
		}
		if e.For.Kind == KindAddr && p.Trusts(e.For.Addr) {
			at = e.For.Addr
			continue
		}
		if e.For.Kind == KindAddr {
			at = e.For.Addr
		}
		break
	}
	out.Client = at
}

// rightmost is the last non-empty comma-separated value of a header's
// lines, trimmed of whitespace.
func rightmost(lines []string) (string, bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		field := lines[i]
		for field != "" {
			var v string
			if j := strings.LastIndexByte(field, ','); j >= 0 {
				field, v = field[:j], field[j+1:]
			} else {
				field, v = "", field
			}
			if v = strings.Trim(v, " \t"); v != "" {
				return v, true
			}
		}
	}
	return "", false
}

// FromRequest is what Read reads of r: its peer (RemoteAddr), TLS, Host
// and header.
func FromRequest(r *http.Request) Request {
	peer, _ := limit.ParseRemote(r.RemoteAddr)
	return Request{Peer: peer, TLS: r.TLS != nil, Host: r.Host, Header: r.Header}
}

type ctxKey struct{}

// With is ctx carrying v, for the routes below the one that read it
// (Of, BaseOf).
func With(ctx context.Context, v Reached) context.Context {
	return context.WithValue(ctx, ctxKey{}, v)
}

// FromContext is the Reached ctx carries (With).
func FromContext(ctx context.Context) (Reached, bool) {
	v, ok := ctx.Value(ctxKey{}).(Reached)
	return v, ok
}

// BaseOf is "scheme://host", the base of the URLs written for r's viewer:
// the one the server put in r's context (With), or, with none there, r's
// own scheme and Host (no proxy trusted). Unlike Base, a request of no
// Host has "scheme://", so that a URL on another host can still be made
// from it.
func BaseOf(r *http.Request) string {
	v, ok := FromContext(r.Context())
	if !ok {
		v = Read(nil, FromRequest(r))
	}
	return v.Scheme + "://" + v.Host
}
