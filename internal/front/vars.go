package front

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Variable references. A URI line of a multivariant playlist may hold
// references to the variables EXT-X-DEFINE declares, "{$name}" with a name
// of [A-Za-z0-9_-] (rfc8216bis-22 §4.3, Variable Substitution; §4.4.2.3,
// EXT-X-DEFINE), which the player replaces by their values before it
// resolves the URI. net/url would write "{" and "}" as "%7B" and "%7D",
// and a player substitutes no "%7B$name%7D": the front keeps every
// reference byte for byte by masking it while the URI is resolved and put
// on a pathway.

// varRefs are the variable references of uri, in order.
func varRefs(uri string) []string {
	var out []string
	for i := 0; i < len(uri); {
		j := strings.Index(uri[i:], "{$")
		if j < 0 {
			break
		}
		start := i + j
		k := start + 2
		for k < len(uri) && isVarNameByte(uri[k]) {
			k++
		}
		if k > start+2 && k < len(uri) && uri[k] == '}' {
			out = append(out, uri[start:k+1])
			i = k + 1
			continue
		}
		i = start + 2
	}
	return out
}

func isVarNameByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// onPathwayVars is onPathway with uri's variable references kept verbatim.
// A URI whose scheme or authority holds a reference, or a relative one
// that begins with a reference (its value may be a scheme, a host or an
// absolute path), cannot be put on a pathway before the player substitutes
// it: "", as for a pathway with no host or base.
func (f *Front) onPathwayVars(base rawURL, uri, pathway string, st Steering) string {
	refs := varRefs(uri)
	if len(refs) == 0 {
		return f.onPathway(base, uri, pathway, st)
	}
	if strings.HasPrefix(uri, "{$") {
		return ""
	}
	// A mask of lower-case letters and digits, which url neither escapes
	// nor changes in any part (a scheme is lower-cased), and which uri
	// does not hold already.
	mask := "wvar"
	for strings.Contains(strings.ToLower(uri), mask) {
		mask += "q"
	}
	token := func(i int) string { return mask + strconv.Itoa(i) + "z" }
	masked := uri
	for i, r := range refs {
		masked = strings.Replace(masked, r, token(i), 1)
	}
	ref, err := url.Parse(masked)
	if err != nil || strings.Contains(ref.Scheme, mask) || strings.Contains(ref.Host, mask) || strings.Contains(ref.User.String(), mask) {
		return ""
	}
	out := f.onPathway(base, masked, pathway, st)
	if out == "" {
		return ""
	}
	for i, r := range refs {
		if strings.Count(out, token(i)) != 1 {
			return "" // not written as it came: refuse rather than lose it
		}
		out = strings.Replace(out, token(i), r, 1)
	}
	return out
}

// dropTargeted removes from the header of an answer made for one viewer
// the fields by which a cache other than the player's is told how long to
// keep it: CDN-Cache-Control (RFC 9213 §3), any other targeted field (RFC
// 9213 §2: "<Name>-CDN-Cache-Control", and by the same convention any name
// ending in "-Cache-Control", such as Akamai-Cache-Control), and the older
// Surrogate-Control and Edge-Control. A cache that obeys a targeted field
// ignores Cache-Control (RFC 9213 §2.2), so the origin's field, passed on,
// would have one viewer's playlist served to the next despite
// "private, no-store". Cache-Control itself stays.
func dropTargeted(h http.Header) {
	for name := range h {
		switch n := strings.ToLower(name); {
		case n == "surrogate-control", n == "edge-control", strings.HasSuffix(n, "-cache-control"):
			delete(h, name)
		}
	}
}
