package reach

import (
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// appendElement writes e as §4 writes a forwarded-element, every value
// quoted (an obfuscated node as "_x", its name being lost on reading),
// one of no parameter read as ";".
func appendElement(b []byte, e Element) []byte {
	node := func(n Node) string {
		switch n.Kind {
		case KindAddr:
			if n.Addr.Is6() {
				return "[" + n.Addr.String() + "]"
			}
			return n.Addr.String()
		case KindUnknown:
			return "unknown"
		}
		return "_x"
	}
	var pairs []string
	if e.For.Kind != KindNone {
		pairs = append(pairs, `for="`+node(e.For)+`"`)
	}
	if e.By.Kind != KindNone {
		pairs = append(pairs, `by="`+node(e.By)+`"`)
	}
	if e.Proto != "" {
		pairs = append(pairs, "proto="+e.Proto)
	}
	if e.Host != "" {
		pairs = append(pairs, `host="`+e.Host+`"`)
	}
	if len(pairs) == 0 {
		return append(b, ';') // an element of empty pairs, not an empty list element
	}
	return append(b, strings.Join(pairs, ";")...)
}

// FuzzForwarded: a Forwarded field is outside bytes. Whatever it holds,
// ParseForwarded and Read never panic; what reads has only http or https,
// hosts that are host[:port], and reads back the same once written again
// (round trip); Read's client is the peer, an address the field names, or
// none other, and its scheme http or https.
func FuzzForwarded(f *testing.F) {
	for _, s := range []string{
		`for="_gazonk"`, `For="[2001:db8:cafe::17]:4711"`, `for=192.0.2.60;proto=http;by=203.0.113.43`,
		`for=192.0.2.43, for=198.51.100.17`, `for=192.0.2.43,for="[2001:db8:cafe::17]",for=unknown`,
		`for=198.51.100.7;proto=https;host="viewers.example:8443", for=10.0.0.2`, `for="\_h\idden";host="a\.example"`,
		` , for=192.0.2.1;;proto=https; ,,`, `ext="a, b";for=192.0.2.1`, `for="[::ffff:10.0.0.1]";host="[2001:db8::1]:0"`,
		`for=192.0.2.1;For=192.0.2.2`, `for="192.0.2.1`, "for=\"\xff\"",
	} {
		f.Add(s, "X-Forwarded-For-ish, 10.0.0.3", "https")
	}
	p := trusted
	peer := netip.MustParseAddr("10.0.0.2")
	f.Fuzz(func(t *testing.T, fwd, xff, xfp string) {
		els, why := ParseForwarded([]string{fwd})
		if (why == "") != (els != nil) {
			t.Fatalf("%q: %v elements, reason %q", fwd, len(els), why)
		}
		names := map[netip.Addr]bool{peer: true}
		for _, e := range els {
			if e.Proto != "" && e.Proto != "http" && e.Proto != "https" {
				t.Fatalf("%q: proto %q", fwd, e.Proto)
			}
			if e.Host != "" && !Authority(e.Host) {
				t.Fatalf("%q: host %q", fwd, e.Host)
			}
			names[e.For.Addr] = true
		}
		if why == "" {
			var b []byte
			for i, e := range els {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = appendElement(b, e)
			}
			again, why := ParseForwarded([]string{string(b)})
			if why != "" || !reflect.DeepEqual(again, els) {
				t.Fatalf("%q read as %+v, written %q, read again %+v %q", fwd, els, b, again, why)
			}
		}
		got := Read(p, Request{Peer: peer, Host: "h.example", Header: http.Header{Forwarded: {fwd}}})
		if got.Scheme != "http" && got.Scheme != "https" {
			t.Fatalf("%q: scheme %q", fwd, got.Scheme)
		}
		if !names[got.Client] {
			t.Fatalf("%q: client %v named nowhere", fwd, got.Client)
		}
		if (why != "") != (len(got.Ignored) == 1) {
			t.Fatalf("%q: reason %q, ignored %+v", fwd, why, got.Ignored)
		}
		x := Read(p, Request{Peer: peer, Header: http.Header{ForwardedFor: {xff}, ForwardedProto: {xfp}, ForwardedHost: {fwd}}})
		if x.Scheme != "http" && x.Scheme != "https" || (x.Host != "" && !Authority(x.Host)) || !x.Client.IsValid() {
			t.Fatalf("%q %q %q: %+v", xff, xfp, fwd, x)
		}
	})
}
