package front

import (
	"slices"
	"strings"
)

// URLs as players resolve them (issue 28, "URLs as players resolve
// them"). The front writes a URI on another pathway for a redirect and for
// a backup variant; a player that steers writes the same URI itself when it
// moves to a clone, so the two must agree:
//
//   - A clone (RFC 8216bis §7.3, PATHWAY-CLONES) is its BASE-ID pathway's
//     URI with the host replaced by URI-REPLACEMENT's HOST: the scheme, the
//     port, the path and the query are the base pathway's (hls.js sets
//     URL.host, which keeps the port when HOST names none). The base
//     pathway's URI is on its configured base (Config.Bases) when it has
//     one, else it is the URI as the viewer resolves it against the
//     playlist's URL.
//   - PARAMS are then added to the query, each replacing a parameter of
//     the same name, in the order of their names, each name and value
//     written as the URL standard's application/x-www-form-urlencoded
//     serializer writes it (hls.js: URL.searchParams.set, keys sorted).
//     The rest of the query is kept byte for byte (a signed token is never
//     re-encoded), where a browser would re-encode it: the same parameters
//     to the server either way.
//   - A base configured for a pathway, a clone included, wins over its
//     HOST: the scheme and authority are the base's, the path is the base's
//     path followed by the URI's. A clone's PARAMS are added there too.
//   - The path is kept as written, its escapes included ("%2F" stays
//     "%2F"): a URI is resolved (RFC 3986 §5.2) on its parts as strings,
//     never decoded. A URI with a scheme other than http or https (an
//     opaque "a0:0", a "data:" URI) is left where it is: the front places
//     only what a pathway could serve.

// rawURL is an http or https URL in its parts as written (RFC 3986 §3):
// nothing in it is decoded.
type rawURL struct {
	scheme, authority, path string
	query                   string
	hasQuery                bool
	fragment                string
	hasFragment             bool
}

func (u rawURL) String() string {
	var b strings.Builder
	b.Grow(len(u.scheme) + 3 + len(u.authority) + len(u.path) + len(u.query) + len(u.fragment) + 2)
	b.WriteString(u.scheme)
	b.WriteString("://")
	b.WriteString(u.authority)
	b.WriteString(u.path)
	if u.hasQuery {
		b.WriteByte('?')
		b.WriteString(u.query)
	}
	if u.hasFragment {
		b.WriteByte('#')
		b.WriteString(u.fragment)
	}
	return b.String()
}

// ref is a URI reference split as RFC 3986 Appendix B splits it.
type ref struct {
	scheme, authority, path, query, fragment   string
	hasScheme, hasAuthority, hasQuery, hasFrag bool
}

func splitRef(s string) ref {
	var r ref
	if i := strings.IndexByte(s, '#'); i >= 0 {
		r.fragment, r.hasFrag, s = s[i+1:], true, s[:i]
	}
	if i := strings.IndexByte(s, '?'); i >= 0 {
		r.query, r.hasQuery, s = s[i+1:], true, s[:i]
	}
	// A scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) before the first
	// ':' that comes before any '/'.
	if i := strings.IndexByte(s, ':'); i > 0 && !strings.Contains(s[:i], "/") && isScheme(s[:i]) {
		r.scheme, r.hasScheme, s = s[:i], true, s[i+1:]
	}
	if strings.HasPrefix(s, "//") {
		s = s[2:]
		i := strings.IndexByte(s, '/')
		if i < 0 {
			i = len(s)
		}
		r.authority, r.hasAuthority, s = s[:i], true, s[i:]
	}
	r.path = s
	return r
}

func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// parseHTTP reads an absolute http or https URL; false for any other.
func parseHTTP(s string) (rawURL, bool) {
	r := splitRef(s)
	scheme := strings.ToLower(r.scheme)
	if (scheme != "http" && scheme != "https") || !r.hasAuthority || r.authority == "" {
		return rawURL{}, false
	}
	return rawURL{scheme: scheme, authority: r.authority, path: r.path, query: r.query, hasQuery: r.hasQuery,
		fragment: r.fragment, hasFragment: r.hasFrag}, true
}

// resolve is the reference s resolved against base (RFC 3986 §5.2.2, its
// strict form), on the parts as written; false when the result is not an
// http or https URL.
func resolve(base rawURL, s string) (rawURL, bool) {
	r := splitRef(s)
	var u rawURL
	switch {
	case r.hasScheme:
		scheme := strings.ToLower(r.scheme)
		if scheme != "http" && scheme != "https" || !r.hasAuthority || r.authority == "" {
			return rawURL{}, false // opaque, or another scheme: left where it is
		}
		u = rawURL{scheme: scheme, authority: r.authority, path: removeDots(r.path), query: r.query, hasQuery: r.hasQuery}
	case r.hasAuthority:
		if r.authority == "" {
			return rawURL{}, false
		}
		u = rawURL{scheme: base.scheme, authority: r.authority, path: removeDots(r.path), query: r.query, hasQuery: r.hasQuery}
	default:
		u = rawURL{scheme: base.scheme, authority: base.authority}
		switch {
		case r.path == "":
			u.path = base.path
			u.query, u.hasQuery = base.query, base.hasQuery
			if r.hasQuery {
				u.query, u.hasQuery = r.query, true
			}
		case r.path[0] == '/':
			u.path, u.query, u.hasQuery = removeDots(r.path), r.query, r.hasQuery
		default:
			// §5.2.3, merge: the base's path up to its last '/', or "/" for a
			// base with an authority and an empty path.
			dir := "/"
			if i := strings.LastIndexByte(base.path, '/'); i >= 0 {
				dir = base.path[:i+1]
			}
			u.path, u.query, u.hasQuery = removeDots(dir+r.path), r.query, r.hasQuery
		}
	}
	if u.path == "" {
		u.path = "/"
	}
	u.fragment, u.hasFragment = r.fragment, r.hasFrag
	return u, true
}

// removeDots removes the "." and ".." segments of a path (RFC 3986
// §5.2.4); an escaped dot ("%2E") is a name, as the path is never decoded.
func removeDots(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	in := p
	var out []string // each a segment with its leading '/', or the first without
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			i := strings.IndexByte(in[1:], '/')
			if i < 0 {
				out, in = append(out, in), ""
			} else {
				out, in = append(out, in[:i+1]), in[i+1:]
			}
		}
	}
	return strings.Join(out, "")
}

// withHost is authority with its host replaced by host (a clone's HOST):
// its port kept when host names none, as URL.host's setter keeps it; its
// userinfo kept.
func withHost(authority, host string) string {
	user := ""
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		user, authority = authority[:i+1], authority[i+1:]
	}
	if hasPort(host) {
		return user + host
	}
	port := ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		port = authority[i:]
	}
	return user + host + port
}

// hasPort reports whether a host[:port] names a port.
func hasPort(h string) bool {
	i := strings.LastIndexByte(h, ':')
	return i >= 0 && !strings.Contains(h[i:], "]")
}

// withParams is a query with a clone's PARAMS added (RFC 8216bis §7.3):
// a parameter of the query named as one of them is removed, the others
// kept byte for byte, then each is appended in the order of its name,
// written by formEncode.
func withParams(query string, hasQuery bool, params [][2]string) (string, bool) {
	if len(params) == 0 {
		return query, hasQuery
	}
	ps := slices.Clone(params)
	slices.SortStableFunc(ps, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	named := func(part string) bool {
		k, _, _ := strings.Cut(part, "=")
		k = formDecode(k)
		for _, p := range ps {
			if p[0] == k {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	if query != "" {
		for part := range strings.SplitSeq(query, "&") {
			if part == "" || named(part) {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(part)
		}
	}
	for i, p := range ps {
		if i > 0 && ps[i-1][0] == p[0] {
			continue // a name twice: set once, as searchParams.set leaves one
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(formEncode(p[0]))
		b.WriteByte('=')
		b.WriteString(formEncode(p[1]))
	}
	return b.String(), true
}

// formEncode writes s as the URL standard's application/x-www-form-
// urlencoded serializer does: ASCII letters, digits, '*', '-', '.' and '_'
// as they are, a space as '+', every other byte of its UTF-8 as %XX.
func formEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '*' || c == '-' || c == '.' || c == '_':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// formDecode reads a name as the form parser does ('+' a space, %XX a
// byte; a '%' not followed by two hexadecimal digits kept).
func formDecode(s string) string {
	if !strings.ContainsAny(s, "+%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
