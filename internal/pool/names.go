package pool

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Each xProblem function returns "" for a value that keeps its rule, and
// otherwise the rest of a sentence that begins with the value.

// idProblem: a pathway ID (and a pool's name) is letters, digits, ".", "-"
// and "_" (the station seed; RFC 8216bis PATHWAY-ID's characters).
func idProblem(s string) string {
	if s == "" || len(s) > maxIDLen {
		return "is not 1 to 64 bytes of letters, digits, ., - and _"
	}
	return badChar(s, ".-_", ": an ID is letters, digits, ., - and _")
}

// pathProblem: a pool's path is absolute, with no query, and no empty or
// dot segment (which the server refuses on every route). Its segments are
// unreserved characters, so that it is written in a URI as it is matched.
func pathProblem(s string) string {
	switch {
	case s == "":
		return "is not a path"
	case len(s) > maxPathLen:
		return "is longer than 256 bytes"
	case s[0] != '/':
		return "is not an absolute path (it starts with /)"
	case s == "/":
		return "is the root, which holds every route"
	}
	if r := badChar(s, "-._~/", ": a path is letters, digits, -, ., _, ~ and /"); r != "" {
		return r
	}
	for _, seg := range strings.Split(s[1:], "/") {
		switch seg {
		case "":
			return "has an empty segment"
		case ".", "..":
			return "has a dot segment"
		}
	}
	return ""
}

// hostProblem: a host is a host name of RFC 1123 labels, an IPv4 address,
// or an IPv6 address in brackets; never a scheme, userinfo, a path or a
// port, which players keep from the playlist (RFC 8216bis 7.3).
func hostProblem(s string) string {
	switch {
	case strings.Contains(s, "://"):
		return "has a scheme: players keep the playlist's scheme, and host is the name alone"
	case strings.ContainsRune(s, '@'):
		return "has userinfo: host is the name alone"
	case strings.ContainsAny(s, "/?#"):
		return "has a path: host is the name alone"
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "opens a bracket it does not close"
		}
		if end != len(s)-1 {
			if s[end+1] == ':' {
				return "has a port: players keep the playlist's port"
			}
			return "has bytes after its bracketed address"
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "is not an IPv6 address in brackets"
		}
		return ""
	case strings.Count(s, ":") == 1:
		return "has a port: players keep the playlist's port"
	case strings.ContainsRune(s, ':'):
		return "is an IPv6 address, which is written in brackets"
	}
	return hostNameProblem(s)
}

// hostNameProblem: an IPv4 address or an RFC 1123 host name, whose last
// label is not all digits (RFC 3696 §2), so that it is never mistaken for
// an address.
func hostNameProblem(s string) string {
	if s == "" {
		return "is not a host name"
	}
	if len(s) > 253 {
		return "is longer than the 253 bytes of a host name"
	}
	labels := strings.Split(s, ".")
	last := labels[len(labels)-1]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		if a, err := netip.ParseAddr(s); err != nil || !a.Is4() {
			return "is neither an IPv4 address nor a host name"
		}
		return ""
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "has a label that is not 1 to 63 bytes"
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "has a label that starts or ends with -"
		}
		for i := 0; i < len(l); i++ {
			if !isAlnum(l[i]) && l[i] != '-' {
				return "has " + quoteByte(l[i]) + ": a host name is letters, digits and -, in labels between dots"
			}
		}
	}
	return ""
}

// authorityProblem checks a URL's host and port: a host as hostProblem
// reads one, and a port of 1 to 65535 when there is one.
func authorityProblem(u *url.URL) string {
	if u.Host == "" {
		return "has no host"
	}
	h := u.Hostname()
	if strings.ContainsRune(h, ':') {
		h = "[" + h + "]"
	}
	if r := hostProblem(h); r != "" {
		return "has a host that " + r
	}
	if strings.HasSuffix(u.Host, ":") {
		return "has an empty port"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || p[0] == '0' {
			return "has a port that is not 1 to 65535"
		}
	}
	return ""
}

// checkURLProblem: a health check is a plain-HTTP GET (the station seed:
// "the control plane has no TLS client"), of an absolute URL with a host and
// no userinfo.
func checkURLProblem(s string) string {
	if r := uriCharsProblem(s); r != "" {
		return r
	}
	u, err := url.Parse(s)
	if err != nil {
		return "does not parse as a URL"
	}
	switch {
	case u.Scheme == "https":
		return "is https: health checks speak plain HTTP only, since the control plane has no TLS client; check the edge's plain-HTTP port"
	case u.Scheme != "http":
		return "is not a plain http:// URL"
	case u.Opaque != "":
		return "is not a plain http:// URL with a host"
	case u.User != nil:
		return "carries userinfo, which a check would send in the clear"
	case u.Fragment != "" || strings.HasSuffix(s, "#"):
		return "has a fragment, which a check does not send"
	}
	return authorityProblem(u)
}

// publicURLProblem: the base of the RELOAD-URI is a scheme and an
// authority, http or https, with nothing after them.
func publicURLProblem(s string) string {
	if r := uriCharsProblem(s); r != "" {
		return r
	}
	u, err := url.Parse(s)
	if err != nil {
		return "does not parse as a URL"
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "is not an http:// or https:// URL"
	case u.Opaque != "":
		return "is not scheme://host[:port]"
	case u.User != nil:
		return "carries userinfo, which a player would be sent"
	case u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#"):
		return "has more than scheme://host[:port]: the pool's path is its own setting"
	}
	return authorityProblem(u)
}

// headerNameProblem: a field name is an RFC 9110 token.
func headerNameProblem(s string) string {
	if s == "" || len(s) > maxIDLen {
		return "is not 1 to 64 bytes of a header name"
	}
	return badChar(s, "!#$%&'*+-.^_`|~", ", which a header name (an RFC 9110 token) cannot")
}

// cohortParamProblem: the cohort's query parameter is a plain name, and
// not one this package or a player already writes.
func cohortParamProblem(s string) string {
	l := strings.ToLower(s)
	switch {
	case l == "session" || l == "bucket":
		return "is a parameter the RELOAD-URI carries already"
	case strings.HasPrefix(l, "_hls_") || strings.HasPrefix(l, "_dash_") || strings.HasPrefix(l, "cmcd"):
		return "is a parameter players add to their steering requests"
	}
	return paramNameProblem(s)
}

// paramNameProblem: a query parameter's name, in PARAMS or cohort_param, is
// unreserved characters (RFC 3986 §2.3), written in a URI as it is; never
// _HLS_..., which RFC 8216bis reserves for players.
func paramNameProblem(s string) string {
	if s == "" || len(s) > maxIDLen {
		return "is not 1 to 64 bytes of letters, digits, -, ., _ and ~"
	}
	if r := badChar(s, "-._~", ": a parameter's name is letters, digits, -, ., _ and ~"); r != "" {
		return r
	}
	if strings.HasPrefix(strings.ToUpper(s), "_HLS_") {
		return "starts _HLS_, which RFC 8216bis reserves for players"
	}
	return ""
}

// paramValueChars are the bytes of a PARAMS value besides letters and
// digits: RFC 3986's query characters less those that end or escape a
// value ("&", "#", "%") and the quote. Players add a value to a URL either
// as it is (dash.js) or encoded (hls.js), and these read alike both ways.
const paramValueChars = "-._~!$()*+,;=:@/?"

func paramValueProblem(s string) string {
	if len(s) > maxParamValue {
		return "is longer than the 1024 bytes of a parameter's value"
	}
	return badChar(s, paramValueChars, ": a parameter's value is letters, digits and "+paramValueChars)
}

// stableIDProblem: STABLE-VARIANT-ID and STABLE-RENDITION-ID are letters,
// digits, "+", "/", "=", ".", "-" and "_" (RFC 8216bis 4.4.6.2).
func stableIDProblem(s string) string {
	if s == "" || len(s) > maxStableIDLen {
		return "is not 1 to 256 bytes of a stable ID"
	}
	return badChar(s, "+/=.-_", ": a stable ID is letters, digits, +, /, =, ., - and _")
}

// uriProblem: a per-variant or per-rendition URI is a URI reference (RFC
// 3986 §4.1, as RFC 8216bis allows, relative to the playlist or absolute);
// an absolute one is http or https with a host.
func uriProblem(s string) string {
	if s == "" {
		return "is not a URI"
	}
	if r := uriCharsProblem(s); r != "" {
		return r
	}
	u, err := url.Parse(s)
	if err != nil {
		return "does not parse as a URI"
	}
	if u.Scheme != "" {
		if u.Scheme != "http" && u.Scheme != "https" {
			return "is neither relative nor http:// or https://"
		}
		if u.Opaque != "" {
			return "has no host"
		}
		if r := authorityProblem(u); r != "" {
			return r
		}
	}
	return ""
}

// uriCharsProblem: a URI is RFC 3986's characters, each "%" starting two
// hexadecimal digits; nothing JSON would need to escape.
func uriCharsProblem(s string) string {
	if len(s) > maxURILen {
		return "is longer than 2048 bytes"
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case isUnreserved(b) || strings.ContainsRune(":/?#[]@!$&'()*+,;=", rune(b)):
		case b == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "has a % that does not start two hexadecimal digits"
			}
		default:
			return "has " + quoteByte(b) + ", which a URI cannot hold unescaped"
		}
	}
	return ""
}

// cohortProblem: a cohort value is 1 to 128 bytes of printable ASCII, with
// no space at either end (a header's value is read without them).
func cohortProblem(s string) string {
	if !validCohort(s) {
		return "is not 1 to 128 bytes of printable ASCII with no space at either end"
	}
	return ""
}

func validCohort[T string | []byte](s T) bool {
	if len(s) == 0 || len(s) > maxCohortLen || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// badChar is the problem of s's first byte that is neither a letter, a
// digit nor one of extra: "has" that byte, then tail; "" when there is none.
func badChar(s, extra, tail string) string {
	for i := range len(s) {
		if b := s[i]; !isAlnum(b) && strings.IndexByte(extra, b) < 0 {
			return "has " + quoteByte(b) + tail
		}
	}
	return ""
}

func isAlnum(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

func isUnreserved(b byte) bool {
	return isAlnum(b) || b == '-' || b == '.' || b == '_' || b == '~'
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// quoteByte writes a byte for a message: printable as itself in quotes,
// otherwise in hexadecimal.
func quoteByte(b byte) string {
	if b == ' ' {
		return "a space"
	}
	if b > 0x20 && b < 0x7f {
		return strconv.QuoteRune(rune(b))
	}
	return "the byte 0x" + strconv.FormatUint(uint64(b), 16)
}
