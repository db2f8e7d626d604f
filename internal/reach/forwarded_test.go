package reach

import (
	"net/netip"
	"reflect"
	"testing"
)

func addr(s string) Node { return Node{Kind: KindAddr, Addr: netip.MustParseAddr(s)} }

// TestParseForwardedRFC7239: the examples of RFC 7239 §4 and §7.1 and §7.4,
// and the grammar's corners, read as the text says, by hand.
func TestParseForwardedRFC7239(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  []Element
	}{
		// §4's four examples.
		{[]string{`for="_gazonk"`}, []Element{{For: Node{Kind: KindObfuscated}}}},
		{[]string{`For="[2001:db8:cafe::17]:4711"`}, []Element{{For: addr("2001:db8:cafe::17")}}},
		{[]string{`for=192.0.2.60;proto=http;by=203.0.113.43`}, []Element{{For: addr("192.0.2.60"), Proto: "http", By: addr("203.0.113.43")}}},
		{[]string{`for=192.0.2.43, for=198.51.100.17`}, []Element{{For: addr("192.0.2.43")}, {For: addr("198.51.100.17")}}},
		// §7.1: one list, with or without spaces, or over two field lines.
		{[]string{`for=192.0.2.43,for="[2001:db8:cafe::17]",for=unknown`}, []Element{{For: addr("192.0.2.43")}, {For: addr("2001:db8:cafe::17")}, {For: Node{Kind: KindUnknown}}}},
		{[]string{`for=192.0.2.43, for="[2001:db8:cafe::17]", for=unknown`}, []Element{{For: addr("192.0.2.43")}, {For: addr("2001:db8:cafe::17")}, {For: Node{Kind: KindUnknown}}}},
		{[]string{`for=192.0.2.43`, `for="[2001:db8:cafe::17]", for=unknown`}, []Element{{For: addr("192.0.2.43")}, {For: addr("2001:db8:cafe::17")}, {For: Node{Kind: KindUnknown}}}},
		// §7.4: X-Forwarded-For's "192.0.2.43, 2001:db8:cafe::17" in Forwarded.
		{[]string{`for=192.0.2.43, for="[2001:db8:cafe::17]"`}, []Element{{For: addr("192.0.2.43")}, {For: addr("2001:db8:cafe::17")}}},
		// §5.3, §5.4: host and proto; a scheme is case-insensitive (RFC 3986 §3.1).
		{[]string{`for=198.51.100.7;host="viewers.example:8443";proto=HTTPS`}, []Element{{For: addr("198.51.100.7"), Host: "viewers.example:8443", Proto: "https"}}},
		{[]string{`host="[2001:db8::1]:443"`}, []Element{{Host: "[2001:db8::1]:443"}}},
		// A quoted-string's quoted-pair (RFC 9110 §5.6.4) is unescaped.
		{[]string{`for="\_h\idden";host="a\.example"`}, []Element{{For: Node{Kind: KindObfuscated}, Host: "a.example"}}},
		// §6: a port, an obfuscated port, an IPv4-mapped address unmapped.
		{[]string{`for="192.0.2.1:_p0rt";by="[::ffff:192.0.2.9]:80"`}, []Element{{For: addr("192.0.2.1"), By: addr("192.0.2.9")}}},
		// Empty list elements and empty pairs (RFC 9110 §5.6.1; §4's [ pair ]).
		{[]string{` , for=192.0.2.1;;proto=https; ,,`}, []Element{{For: addr("192.0.2.1"), Proto: "https"}}},
		// Another parameter is skipped, a quoted-string with a comma inside it too.
		{[]string{`ext="a, b";for=192.0.2.1`}, []Element{{For: addr("192.0.2.1")}}},
	} {
		got, why := ParseForwarded(c.lines)
		if why != "" || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v %q, want %+v", c.lines, got, why, c.want)
		}
	}
}

// TestParseForwardedRefused: what is not §4's grammar, §6's node, an
// http(s) proto or a host[:port] is refused with its reason.
func TestParseForwardedRefused(t *testing.T) {
	for _, c := range []struct {
		line, why string
	}{
		{``, ReasonEmpty},
		{` , ,`, ReasonEmpty},
		{`for`, ReasonSyntax},
		{`for=`, ReasonSyntax},
		{`=192.0.2.1`, ReasonSyntax},
		{`for=192.0.2.1 ;proto=http`, ReasonSyntax}, // no whitespace around ";" in §4
		{`for=192.0.2.1; proto=http`, ReasonSyntax},
		{`for=192.0.2.1 for=192.0.2.2`, ReasonSyntax},
		{`for="192.0.2.1`, ReasonSyntax}, // no closing quote
		{`for="192.0.2.1\`, ReasonSyntax},
		{"for=\"a\x01\"", ReasonSyntax},
		{`for=[2001:db8::1]`, ReasonSyntax}, // "[" and ":" are no tchar: §6 quotes them
		{`for=2001:db8::1`, ReasonNode},     // the token ends at ":": "2001" is no node
		{`for="2001:db8::1"`, ReasonNode},   // an IPv6 address in brackets only (§6)
		{`for="[2001:db8::1%eth0]"`, ReasonNode},
		{`for="[192.0.2.1]"`, ReasonNode},
		{`for=192.0.2.1:123456`, ReasonSyntax}, // ":" is no tchar: a port is quoted
		{`host=a.example:443`, ReasonSyntax},
		{`for="192.0.2.1:123456"`, ReasonNode},
		{`for="192.0.2.1:"`, ReasonNode},
		{`for=_`, ReasonNode},
		{`for="_a b"`, ReasonNode},
		{`for=192.0.2.01`, ReasonNode},
		{`for=example.com`, ReasonNode},
		{`for=192.0.2.1;For=192.0.2.2`, ReasonDuplicate}, // §4: at most once per element
		{`proto=http;PROTO=https`, ReasonDuplicate},
		{`proto=ftp`, ReasonProto},
		{`proto=ws`, ReasonProto},
		{`host="a.example/path"`, ReasonHost},
		{`host="user@a.example"`, ReasonHost},
		{`host="a .example"`, ReasonHost},
		{`host="a.example:99999"`, ReasonHost},
		{`host="a.example:"`, ReasonHost},
		{`host="a%2eexample"`, ReasonHost},
		{`host="[::1"`, ReasonHost},
		{`host="[::1]x"`, ReasonHost},
		{`host=""`, ReasonHost},
	} {
		if got, why := ParseForwarded([]string{c.line}); why != c.why || got != nil {
			t.Errorf("%q: %+v %q, want %q", c.line, got, why, c.why)
		}
	}
	many := ""
	for i := range maxElements + 1 {
		if i > 0 {
			many += ","
		}
		many += "for=unknown"
	}
	if _, why := ParseForwarded([]string{many}); why != ReasonElements {
		t.Errorf("%d elements: %q", maxElements+1, why)
	}
	if els, why := ParseForwarded([]string{many[len("for=unknown,"):]}); why != "" || len(els) != maxElements {
		t.Errorf("%d elements: %d %q", maxElements, len(els), why)
	}
}

// TestAuthority: host[:port] as a URL carries it (RFC 3986 §3.2.2, §3.2.3).
func TestAuthority(t *testing.T) {
	for s, want := range map[string]bool{
		"viewers.example": true, "viewers.example:443": true, "viewers.example.": true, "192.0.2.1:8080": true,
		"[2001:db8::1]": true, "[2001:db8::1]:0": true, "xn--bcher-kva.example": true, "a_b.example": true,
		"": false, ":443": false, "a.example:": false, "a.example:65536": false, "a.example:+80": false,
		"a..example": false, ".a.example": false, "a.example/": false, "u@a.example": false, "a example": false,
		"2001:db8::1": false, "[2001:db8::1": false, "[fe80::1%25eth0]": false, "[192.0.2.1]": false,
		"a.example?x": false, "a.example#f": false, "bücher.example": false,
	} {
		if got := Authority(s); got != want {
			t.Errorf("Authority(%q) = %v", s, got)
		}
	}
}
