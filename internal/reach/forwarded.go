package reach

import (
	"net/netip"
	"strings"
)

// Element is one forwarded-element of a Forwarded field (RFC 7239 §4): what
// one proxy says of the request it received. A parameter left out is "".
type Element struct {
	For   Node   // the node the proxy received the request from (§5.2)
	By    Node   // the proxy's own interface (§5.1)
	Proto string // the scheme it was reached by, lowercase: "http" or "https" (§5.4)
	Host  string // the Host it was reached with, as written (§5.3)
}

// Node is a node of §6: an address, "unknown", or an obfuscated name.
type Node struct {
	Kind NodeKind
	Addr netip.Addr // for KindAddr, an IPv4-mapped IPv6 address unmapped
}

// NodeKind says what a node names.
type NodeKind uint8

const (
	KindNone       NodeKind = iota // the parameter was left out
	KindAddr                       // an IPv4 or IPv6 address (§6)
	KindUnknown                    // "unknown" (§6.2)
	KindObfuscated                 // "_" and a name the proxy made up (§6.3)
)

// The reasons a header is ignored.
const (
	ReasonSyntax    = "syntax"        // not §4's grammar: a bad token, quoted-string or separator
	ReasonDuplicate = "duplicate"     // a parameter twice in one element (§4)
	ReasonNode      = "node"          // a for= or by= that is no node of §6
	ReasonProto     = "proto"         // a proto that is not http or https
	ReasonHost      = "host"          // a host that is no host[:port]
	ReasonAddress   = "address"       // an X-Forwarded-For value that is no address
	ReasonElements  = "too_many_hops" // more elements than maxElements
	ReasonEmpty     = "empty"         // a field of no element (§4: 1#forwarded-element)
)

// maxElements bounds the proxies a Forwarded field may name: far more than
// any chain of proxies, and a bound on the work of a request.
const maxElements = 64

// ParseForwarded reads the field lines of Forwarded (in order) as §4 writes
// them, and returns their elements, left to right, or the reason they do
// not read. Parameters other than for, by, proto and host are checked for
// syntax and skipped.
func ParseForwarded(lines []string) ([]Element, string) {
	var els []Element
	any := false
	for _, line := range lines {
		p := parser{s: line}
		for {
			p.ows()
			if p.done() {
				break
			}
			if p.peek() == ',' { // an empty list element (RFC 9110 §5.6.1)
				p.i++
				continue
			}
			if len(els) == maxElements {
				return nil, ReasonElements
			}
			e, why := p.element()
			if why != "" {
				return nil, why
			}
			els = append(els, e)
			any = true
			p.ows()
			if p.done() {
				break
			}
			if p.peek() != ',' {
				return nil, ReasonSyntax
			}
			p.i++
		}
	}
	if !any {
		return nil, ReasonEmpty
	}
	return els, ""
}

// parser reads one field line.
type parser struct {
	s string
	i int
}

func (p *parser) done() bool { return p.i >= len(p.s) }
func (p *parser) peek() byte { return p.s[p.i] }

// ows skips optional whitespace (SP / HTAB).
func (p *parser) ows() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// element reads a forwarded-element, up to the "," or the end that ends it.
func (p *parser) element() (Element, string) {
	var e Element
	var seen [4]bool // for, by, proto, host
	for {
		if !p.done() && p.peek() != ';' && p.peek() != ',' && p.peek() != ' ' && p.peek() != '\t' {
			name := p.token()
			if name == "" || p.done() || p.peek() != '=' {
				return e, ReasonSyntax
			}
			p.i++
			v, ok := p.value()
			if !ok {
				return e, ReasonSyntax
			}
			k := -1
			switch {
			case strings.EqualFold(name, "for"):
				k = 0
			case strings.EqualFold(name, "by"):
				k = 1
			case strings.EqualFold(name, "proto"):
				k = 2
			case strings.EqualFold(name, "host"):
				k = 3
			}
			if k >= 0 {
				if seen[k] {
					return e, ReasonDuplicate
				}
				seen[k] = true
			}
			switch k {
			case 0, 1:
				n, ok := ParseNode(v)
				if !ok {
					return e, ReasonNode
				}
				if k == 0 {
					e.For = n
				} else {
					e.By = n
				}
			case 2:
				proto, ok := Proto(v)
				if !ok {
					return e, ReasonProto
				}
				e.Proto = proto
			case 3:
				if !Authority(v) {
					return e, ReasonHost
				}
				e.Host = v
			}
		}
		if p.done() || p.peek() != ';' {
			return e, ""
		}
		p.i++ // ";" then another pair, or none
	}
}

// token reads an RFC 9110 token (§5.6.2), "" for none.
func (p *parser) token() string {
	j := p.i
	for p.i < len(p.s) && tchar[p.s[p.i]] {
		p.i++
	}
	return p.s[j:p.i]
}

// value reads a token or a quoted-string (RFC 9110 §5.6.4), unescaped.
func (p *parser) value() (string, bool) {
	if p.done() {
		return "", false
	}
	if p.peek() != '"' {
		v := p.token()
		return v, v != ""
	}
	p.i++
	j := p.i
	plain := true // no quoted-pair: the value is a substring
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			v := p.s[j:p.i]
			p.i++
			if !plain {
				v = unquote(v)
			}
			return v, true
		case c == '\\':
			if p.i+1 >= len(p.s) || !quotedPairChar(p.s[p.i+1]) {
				return "", false
			}
			plain = false
			p.i += 2
		case qdtext(c):
			p.i++
		default:
			return "", false
		}
	}
	return "", false // no closing quote
}

// unquote removes the backslashes of quoted-pairs from a quoted-string's
// inside, which value has checked.
func unquote(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// qdtext: HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text (RFC 9110 §5.6.4).
func qdtext(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E) || c >= 0x80
}

// quotedPairChar: HTAB / SP / VCHAR / obs-text.
func quotedPairChar(c byte) bool {
	return c == '\t' || c == ' ' || (c >= 0x21 && c <= 0x7E) || c >= 0x80
}

// tchar: RFC 9110 §5.6.2.
var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// ParseNode reads a node of RFC 7239 §6: nodename [ ":" node-port ], the
// port (1*5DIGIT or an obfuscated one) checked and dropped.
func ParseNode(s string) (Node, bool) {
	name, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Node{}, false
		}
		name, port = s[:end+1], s[end+1:]
		if port != "" {
			if port[0] != ':' {
				return Node{}, false
			}
			port = port[1:]
			if !nodePort(port) {
				return Node{}, false
			}
		}
		a, err := netip.ParseAddr(name[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return Node{}, false
		}
		return Node{Kind: KindAddr, Addr: a.Unmap()}, true
	}
	if i := strings.IndexByte(s, ':'); i >= 0 {
		name, port = s[:i], s[i+1:]
		if !nodePort(port) {
			return Node{}, false
		}
	}
	switch {
	case strings.EqualFold(name, "unknown"):
		return Node{Kind: KindUnknown}, true
	case obfuscated(name):
		return Node{Kind: KindObfuscated}, true
	}
	a, err := netip.ParseAddr(name)
	if err != nil || !a.Is4() {
		return Node{}, false // an IPv6 address must be in brackets (§6)
	}
	return Node{Kind: KindAddr, Addr: a}, true
}

// nodePort: port = 1*5DIGIT, or obfport = "_" 1*(ALPHA / DIGIT / "." / "_" / "-").
func nodePort(s string) bool {
	if obfuscated(s) {
		return true
	}
	if len(s) < 1 || len(s) > 5 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// obfuscated: "_" 1*(ALPHA / DIGIT / "." / "_" / "-") (§6.3).
func obfuscated(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Proto reads a proto value (§5.4, a URI scheme, case-insensitive as RFC
// 3986 §3.1 says): "http" or "https" in lowercase; false for any other.
func Proto(s string) (string, bool) {
	switch {
	case strings.EqualFold(s, "http"):
		return "http", true
	case strings.EqualFold(s, "https"):
		return "https", true
	}
	return "", false
}

// maxAuthority bounds a host[:port]: a DNS name's 253 bytes, ":" and a port.
const maxAuthority = 253 + 6

// Authority reports whether s is a host[:port] a URL can be written on
// (RFC 3986 §3.2.2, §3.2.3), with nothing else: a DNS name (letters,
// digits, "-", "_", "." in labels), an IPv4 address or a bracketed IPv6
// address without a zone, and an optional port of 0 to 65535 in decimal.
// No userinfo, path, query, spaces or percent-encoding.
func Authority(s string) bool {
	if s == "" || len(s) > maxAuthority {
		return false
	}
	host, port := s, ""
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return false
		}
		host, port = "", s[end+1:]
		if port != "" {
			if port[0] != ':' {
				return false
			}
			return decimalPort(port[1:])
		}
		return true
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i+1:]
		if !decimalPort(port) {
			return false
		}
	}
	return dnsName(host)
}

// decimalPort: 1 to 5 digits, at most 65535.
func decimalPort(s string) bool {
	if len(s) < 1 || len(s) > 5 {
		return false
	}
	n := 0
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n <= 65535
}

// dnsName: labels of letters, digits, "-" and "_", 1 to 63 bytes each,
// joined by "."; a final "." (the root) is allowed. An IPv4 address is one.
func dnsName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := range len(label) {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
