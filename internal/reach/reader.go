package reach

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/waisteer/waisteer/internal/limit"
)

// Reader is the server's reader of requests: the trusted proxies, the
// public_url that overrides what viewers reached, and the count of the
// headers ignored. A nil Reader trusts no proxy and has no public_url.
type Reader struct {
	proxies limit.Proxies
	public  PublicURL
	log     *slog.Logger

	mu      sync.Mutex
	ignored map[Ignored]uint64
}

// PublicURL is a scheme://host[:port] every URL written for a viewer is
// built on, whatever the request reached; the zero PublicURL is none.
type PublicURL struct {
	Scheme, Host string
}

// String is "scheme://host[:port]", "" for none.
func (u PublicURL) String() string {
	if u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// ParsePublicURL reads a public_url: http or https, an authority
// (Authority), and nothing after it (no path, not even "/", no query, no
// fragment); "" is none.
func ParsePublicURL(s string) (PublicURL, error) {
	if s == "" {
		return PublicURL{}, nil
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return PublicURL{}, fmt.Errorf("%q is not scheme://host[:port]", s)
	}
	proto, ok := Proto(scheme)
	if !ok || proto != scheme {
		return PublicURL{}, fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	if strings.ContainsAny(rest, "/?#") {
		return PublicURL{}, fmt.Errorf("%q has more than scheme://host[:port]: a pool's path is its own", s)
	}
	if strings.Contains(rest, "@") {
		return PublicURL{}, fmt.Errorf("%q carries userinfo, which viewers would be sent", s)
	}
	if !Authority(rest) {
		return PublicURL{}, fmt.Errorf("%q: %q is not host[:port] (a DNS name, an IPv4 address or a bracketed IPv6 address; a port of 0 to 65535)", s, rest)
	}
	if _, err := url.Parse(s); err != nil {
		return PublicURL{}, fmt.Errorf("%q does not parse as a URL", s)
	}
	return PublicURL{Scheme: scheme, Host: rest}, nil
}

// NewReader is the reader of p and public; log (nil: slog.Default) has a
// debug line for each header ignored.
func NewReader(p limit.Proxies, public PublicURL, log *slog.Logger) *Reader {
	if log == nil {
		log = slog.Default()
	}
	return &Reader{proxies: p, public: public, log: log, ignored: map[Ignored]uint64{}}
}

// Trusts reports whether the reader trusts any proxy: an engine copies
// the headers Read reads only then.
func (rd *Reader) Trusts() bool { return rd != nil && len(rd.proxies) > 0 }

// Public is the public_url, the zero PublicURL for none.
func (rd *Reader) Public() PublicURL {
	if rd == nil {
		return PublicURL{}
	}
	return rd.public
}

// Of is what r's viewer reached, with public_url in place of the scheme
// and host when there is one: the value r's context carries (With), or
// else r read through the trusted proxies, each header ignored counted.
func (rd *Reader) Of(r *http.Request) Reached {
	if v, ok := FromContext(r.Context()); ok {
		return v
	}
	if rd == nil {
		return Read(nil, FromRequest(r))
	}
	v := Read(rd.proxies, FromRequest(r))
	if len(v.Ignored) > 0 {
		rd.mu.Lock()
		for _, ig := range v.Ignored {
			if len(rd.ignored) < maxIgnoredKeys || rd.ignored[ig] > 0 {
				rd.ignored[ig]++
			}
		}
		rd.mu.Unlock()
		for _, ig := range v.Ignored {
			rd.log.Debug("a trusted proxy's header is ignored", "header", ig.Header, "reason", ig.Reason, "peer", r.RemoteAddr)
		}
	}
	if rd.public.Host != "" {
		v.Scheme, v.Host = rd.public.Scheme, rd.public.Host
	}
	return v
}

// maxIgnoredKeys bounds the table of counts; its keys are the headers and
// reasons of this package, fewer than this.
const maxIgnoredKeys = 64

// Ignored is the count of headers ignored, by header and reason.
func (rd *Reader) Ignored() map[Ignored]uint64 {
	out := map[Ignored]uint64{}
	if rd == nil {
		return out
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for k, n := range rd.ignored {
		out[k] = n
	}
	return out
}

// MetricsHelp heads the metric WriteMetrics writes.
const MetricsHelp = "# HELP waisteer_proxy_headers_ignored_total Headers of trusted proxies (Forwarded, X-Forwarded-*) ignored because they did not read, by header and reason.\n# TYPE waisteer_proxy_headers_ignored_total counter\n"

// WriteMetrics writes the counts of headers ignored, one line for each
// header and reason; nothing when the reader trusts no proxy.
func (rd *Reader) WriteMetrics(b *bytes.Buffer) {
	if !rd.Trusts() {
		return
	}
	counts := rd.Ignored()
	b.WriteString(MetricsHelp)
	for _, h := range Headers {
		for _, why := range reasons {
			if n := counts[Ignored{h, why}]; n > 0 {
				fmt.Fprintf(b, "waisteer_proxy_headers_ignored_total{header=%q,reason=%q} %d\n", h, why, n)
			}
		}
	}
}

var reasons = []string{ReasonSyntax, ReasonDuplicate, ReasonNode, ReasonProto, ReasonHost, ReasonAddress, ReasonElements, ReasonEmpty}
