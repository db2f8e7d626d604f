package reach

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/limit"
)

// The proxies of the tests: a TLS terminator in 10.0.0.0/8 and a CDN's
// edges in 2001:db8:ff::/48.
var trusted = limit.Proxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ff::/48")}

// TestRead (issue 28, "Trusted proxies"): what a viewer reached and its
// address, from a request's peer, TLS, Host and header, each expectation
// by hand from RFC 7239 §4, §5 and §6 and the package doc's walk.
func TestRead(t *testing.T) {
	lb, cdn := netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("2001:db8:ff::9")
	viewer := netip.MustParseAddr("198.51.100.7")
	for _, c := range []struct {
		name   string
		p      limit.Proxies
		q      Request
		want   Reached
		ignore []Ignored
	}{
		{"no proxy trusted: the peer's own", nil,
			Request{Peer: lb, Host: "steer.internal:8080", Header: http.Header{Forwarded: {`for=198.51.100.7;proto=https;host=viewers.example`}}},
			Reached{Scheme: "http", Host: "steer.internal:8080", Client: lb}, nil},
		{"an untrusted peer's headers are not read", trusted,
			Request{Peer: viewer, TLS: true, Host: "viewers.example", Header: http.Header{Forwarded: {`for=192.0.2.1;proto=http;host=evil.example`},
				ForwardedFor: {"192.0.2.1"}, ForwardedProto: {"http"}, ForwardedHost: {"evil.example"}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: viewer}, nil},
		{"a trusted terminator's Forwarded", trusted,
			Request{Peer: lb, Host: "steer.internal:8080", Header: http.Header{Forwarded: {`for=198.51.100.7;proto=https;host=viewers.example`}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: viewer}, nil},
		{"a quoted host with a port", trusted,
			Request{Peer: lb, Host: "steer.internal", Header: http.Header{Forwarded: {`for="[2001:db8:1::7]:51000";proto=https;host="viewers.example:8443"`}}},
			Reached{Scheme: "https", Host: "viewers.example:8443", Client: netip.MustParseAddr("2001:db8:1::7")}, nil},
		// A CDN edge then the terminator: the terminator wrote the last
		// element (for= the CDN edge, trusted; its own proto and host),
		// the CDN the one before (the viewer; what the viewer reached).
		{"two trusted hops: the outer one's proto and host", trusted,
			Request{Peer: lb, Host: "steer.internal", Header: http.Header{Forwarded: {`for=198.51.100.7;proto=https;host=viewers.example`, `for="[2001:db8:ff::9]";proto=http;host=steer.internal`}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: viewer}, nil},
		{"a forged element left of the client is not read", trusted,
			Request{Peer: lb, Host: "steer.internal", Header: http.Header{Forwarded: {`for=10.0.0.1;host=evil.example, for=198.51.100.7;proto=https;host=viewers.example`}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: viewer}, nil},
		{"the outer hop says no proto: the inner one's stands", trusted,
			Request{Peer: lb, Host: "steer.internal", Header: http.Header{Forwarded: {`for=198.51.100.7, for="[2001:db8:ff::9]";proto=https;host=viewers.example`}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: viewer}, nil},
		{"for=unknown: the proxy that wrote it is the client", trusted,
			Request{Peer: lb, Host: "steer.internal", Header: http.Header{Forwarded: {`for=unknown;proto=https;host=viewers.example`}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: lb}, nil},
		{"obfuscated behind a trusted CDN: the CDN is the client", trusted,
			Request{Peer: lb, Header: http.Header{Forwarded: {`for=_v1ewer;proto=https;host=viewers.example, for="[2001:db8:ff::9]"`}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: cdn}, nil},
		{"no for=: the writer is the client", trusted,
			Request{Peer: lb, Header: http.Header{Forwarded: {`proto=https;host=viewers.example`}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: lb}, nil},
		{"every hop trusted: the leftmost", trusted,
			Request{Peer: lb, Header: http.Header{Forwarded: {`for=10.1.1.1;proto=https;host=viewers.example, for=10.0.0.2`}}},
			Reached{Scheme: "https", Host: "viewers.example", Client: netip.MustParseAddr("10.1.1.1")}, nil},
		{"a malformed Forwarded: the peer's own, X-Forwarded-* not read either", trusted,
			Request{Peer: lb, Host: "steer.internal", Header: http.Header{Forwarded: {`for=198.51.100.7;proto=https;proto=http`}, ForwardedProto: {"https"}, ForwardedFor: {"198.51.100.7"}}},
			Reached{Scheme: "http", Host: "steer.internal", Client: lb}, []Ignored{{Forwarded, ReasonDuplicate}}},
		{"X-Forwarded-*: the rightmost proto and host, the walk's client", trusted,
			Request{Peer: lb, Host: "steer.internal", Header: http.Header{ForwardedFor: {"192.0.2.1, 198.51.100.7", "10.0.0.3"},
				ForwardedProto: {"http, HTTPS"}, ForwardedHost: {"evil.example", "viewers.example:8443"}}},
			Reached{Scheme: "https", Host: "viewers.example:8443", Client: viewer}, nil},
		{"X-Forwarded-Proto of no http(s) and a bad X-Forwarded-Host are ignored, each alone", trusted,
			Request{Peer: lb, TLS: true, Host: "steer.internal", Header: http.Header{ForwardedFor: {"198.51.100.7"},
				ForwardedProto: {"ftp"}, ForwardedHost: {"viewers.example/x"}}},
			Reached{Scheme: "https", Host: "steer.internal", Client: viewer}, []Ignored{{ForwardedProto, ReasonProto}, {ForwardedHost, ReasonHost}}},
		{"an X-Forwarded-For value of no address stops at the proxy", trusted,
			Request{Peer: lb, Header: http.Header{ForwardedFor: {"198.51.100.7, junk, 10.0.0.9"}, ForwardedProto: {"https"}}},
			Reached{Scheme: "https", Client: netip.MustParseAddr("10.0.0.9")}, []Ignored{{ForwardedFor, ReasonAddress}}},
	} {
		got := Read(c.p, c.q)
		c.want.Ignored = c.ignore
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// TestReaderOf: the reader counts what it ignored, puts public_url in
// place of the scheme and host (never of the client), and a value put in
// the context is the one read.
func TestReaderOf(t *testing.T) {
	var logs bytes.Buffer
	rd := NewReader(limit.Proxies{netip.MustParsePrefix("192.0.2.0/24")}, PublicURL{}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	r := httptest.NewRequest("GET", "/api/v1/steering", nil) // RemoteAddr 192.0.2.1:1234, Host example.com
	r.Header.Set(Forwarded, `for=198.51.100.7;proto=gopher`)
	r.Header.Set(ForwardedProto, "https")
	if got := rd.Of(r); got.Base() != "http://example.com" || got.Client != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("a bad Forwarded: %+v", got)
	}
	rd.Of(r)
	var b bytes.Buffer
	rd.WriteMetrics(&b)
	if want := `waisteer_proxy_headers_ignored_total{header="Forwarded",reason="proto"} 2`; !strings.Contains(b.String(), want) {
		t.Errorf("metrics:\n%s\nlack %s", b.String(), want)
	}
	if !strings.Contains(logs.String(), "reason=proto") {
		t.Errorf("no log line: %s", logs.String())
	}

	pub, err := ParsePublicURL("https://viewers.example:8443")
	if err != nil {
		t.Fatal(err)
	}
	rd = NewReader(limit.Proxies{netip.MustParsePrefix("192.0.2.0/24")}, pub, nil)
	r.Header.Set(Forwarded, `for=198.51.100.7;proto=http;host=other.example`)
	if got := rd.Of(r); got.Base() != "https://viewers.example:8443" || got.Client != netip.MustParseAddr("198.51.100.7") {
		t.Errorf("public_url: %+v", got)
	}
	r.TLS = &tls.ConnectionState{}
	if got := BaseOf(r); got != "https://example.com" {
		t.Errorf("BaseOf with no value in the context: %q", got)
	}
	r = r.WithContext(With(context.Background(), rd.Of(r)))
	if got := BaseOf(r); got != "https://viewers.example:8443" {
		t.Errorf("BaseOf with the reader's value in the context: %q", got)
	}
	var nilReader *Reader
	if got := nilReader.Of(httptest.NewRequest("GET", "/", nil)); got.Base() != "http://example.com" || nilReader.Trusts() {
		t.Errorf("a nil reader: %+v", got)
	}
}

// TestParsePublicURL: scheme://host[:port], http or https, nothing else.
func TestParsePublicURL(t *testing.T) {
	for s, want := range map[string]PublicURL{
		"https://viewers.example":      {"https", "viewers.example"},
		"http://192.0.2.1:8080":        {"http", "192.0.2.1:8080"},
		"https://[2001:db8::1]:443":    {"https", "[2001:db8::1]:443"},
		"":                             {},
		"https://viewers.example/":     {"x", ""},
		"https://viewers.example/live": {"x", ""},
		"https://u@viewers.example":    {"x", ""},
		"HTTPS://viewers.example":      {"x", ""},
		"ftp://viewers.example":        {"x", ""},
		"viewers.example":              {"x", ""},
		"https://viewers.example?x=1":  {"x", ""},
		"https://viewers.example:0x50": {"x", ""},
		"https://":                     {"x", ""},
	} {
		got, err := ParsePublicURL(s)
		if want.Scheme == "x" {
			if err == nil {
				t.Errorf("%q: %+v, want an error", s, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", s, got, err, want)
		}
		if got.String() != s {
			t.Errorf("%q: String %q", s, got.String())
		}
	}
}
