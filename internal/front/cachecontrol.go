package front

// The origin's caching fields as the cache reads them (cache.go; RFC 9111
// §4.2, §5.1, §5.2, §5.3).

import (
	"net/http"
	"strings"
	"time"
)

// Freshness values that are not a number of seconds.
const (
	absent  = -1 // the directive is not there
	invalid = -2 // given twice, or not delta-seconds: stale (§4.2.1)
)

// maxDelta is what a delta-seconds larger than it is taken as (§1.2.2).
const maxDelta = 1 << 31

// cacheControl is what the cache needs of a response's Cache-Control.
type cacheControl struct {
	noStore, noCache, private bool
	maxAge, sMaxAge           int64 // seconds, or absent or invalid
}

// parseCacheControl reads the field's lines, joined as one list (RFC 9110
// §5.3):
//
//	Cache-Control   = #cache-directive
//	cache-directive = token [ "=" ( token / quoted-string ) ]
//
// names compared case-insensitively, the quoted form accepted for every
// argument (§5.2). False when the field does not read.
func parseCacheControl(lines []string) (cacheControl, bool) {
	cc := cacheControl{maxAge: absent, sMaxAge: absent}
	s := strings.Join(lines, ",")
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++ // empty list elements are allowed (RFC 9110 §5.6.1.2)
		}
		if i == len(s) {
			return cc, true
		}
		j := i
		for j < len(s) && isTchar(s[j]) {
			j++
		}
		if j == i {
			return cacheControl{}, false
		}
		name := strings.ToLower(s[i:j])
		arg, hasArg := "", false
		i = j
		if i < len(s) && s[i] == '=' {
			hasArg = true
			i++
			switch {
			case i < len(s) && s[i] == '"':
				v, n, ok := quotedString(s[i:])
				if !ok {
					return cacheControl{}, false
				}
				arg, i = v, i+n
			default:
				j = i
				for j < len(s) && isTchar(s[j]) {
					j++
				}
				if j == i {
					return cacheControl{}, false
				}
				arg, i = s[i:j], j
			}
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i < len(s) && s[i] != ',' {
			return cacheControl{}, false
		}
		switch name {
		case "no-store":
			cc.noStore = true
		case "no-cache":
			cc.noCache = true // qualified or not: never reused unvalidated
		case "private":
			cc.private = true // likewise: the front is a shared cache
		case "max-age":
			cc.maxAge = deltaSeconds(cc.maxAge, arg, hasArg)
		case "s-maxage":
			cc.sMaxAge = deltaSeconds(cc.sMaxAge, arg, hasArg)
		}
	}
}

// deltaSeconds reads a freshness directive's argument (§1.2.2):
// 1*DIGIT, capped at 2^31; invalid when it is not, or when the directive
// was already given (prev not absent).
func deltaSeconds(prev int64, arg string, hasArg bool) int64 {
	if prev != absent || !hasArg || arg == "" {
		return invalid
	}
	var n int64
	for i := 0; i < len(arg); i++ {
		c := arg[i]
		if c < '0' || c > '9' {
			return invalid
		}
		if n < maxDelta {
			n = n*10 + int64(c-'0')
		}
	}
	return min(n, maxDelta)
}

// quotedString reads a quoted-string at the head of s (RFC 9110 §5.6.4):
// its value with quoted-pairs undone, and its length in s.
func quotedString(s string) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return b.String(), i + 1, true
		case c == '\\':
			i++
			if i == len(s) || (s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f {
				return "", 0, false
			}
			b.WriteByte(s[i])
		case c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e) || c >= 0x80:
			b.WriteByte(c)
		default:
			return "", 0, false
		}
	}
	return "", 0, false
}

// isTchar: RFC 9110 §5.6.2.
func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// freshness reads an answer's caching fields h, asked for at asked and
// received at received: its freshness lifetime and corrected initial age
// (§4.2.1, §4.2.3); false when it may not be stored (cache.go says when).
func freshness(h http.Header, asked, received time.Time) (lifetime, initAge time.Duration, ok bool) {
	cc, ok := parseCacheControl(h.Values("Cache-Control"))
	if !ok || cc.noStore || cc.noCache || cc.private {
		return 0, 0, false
	}
	for _, v := range h.Values("Vary") {
		for part := range strings.SplitSeq(v, ",") {
			if strings.Trim(part, " \t") == "*" {
				return 0, 0, false // matches no request (§4.1)
			}
		}
	}
	stale := false
	switch {
	case cc.sMaxAge != absent: // a shared cache's, over max-age (§5.2.2.10)
		lifetime, stale = time.Duration(cc.sMaxAge)*time.Second, cc.sMaxAge == invalid
	case cc.maxAge != absent:
		lifetime, stale = time.Duration(cc.maxAge)*time.Second, cc.maxAge == invalid
	default:
		if vs := h.Values("Expires"); len(vs) > 0 {
			t, err := http.ParseTime(vs[0])
			if len(vs) == 1 && err == nil {
				lifetime = t.Sub(received) // no Date: the time received (§4.2.1)
			} else {
				stale = true // "0" and any invalid date are in the past (§5.3)
			}
		}
	}
	var age time.Duration
	switch vs := h.Values("Age"); {
	case len(vs) == 1:
		n := deltaSeconds(absent, vs[0], true)
		if n == invalid {
			stale = true
		}
		age = time.Duration(max(n, 0)) * time.Second
	case len(vs) > 1:
		stale = true
	}
	if stale || lifetime < 0 {
		lifetime = 0
	}
	// corrected_initial_age = corrected_age_value: no Date, so no
	// apparent_age to compare it with.
	return lifetime, age + received.Sub(asked), true
}
