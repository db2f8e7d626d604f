package report

import (
	"math/bits"
	"strings"
)

// The names of the query parts the server reads. Names are compared after
// percent-decoding, bytewise (§4.1).
const (
	nameHLSPathway     = "_HLS_pathway"     // §4.2
	nameHLSThroughput  = "_HLS_throughput"  // §4.2
	nameDASHPathway    = "_DASH_pathway"    // §4.3
	nameDASHThroughput = "_DASH_throughput" // §4.3
	nameCMCD           = "CMCD"             // §4.4
	nameSession        = "wai_session"      // COMPANION §6 "Session", §8.1
)

// Bits of Query.has: the query has a (non-skipped) part with that name.
const (
	hasHLSPathway = 1 << iota
	hasHLSThroughput
	hasDASHPathway
	hasDASHThroughput
	hasCMCD
	hasSession
)

// Query is a steering request's query read once (§4.1): for each name the
// server reads, the value of the first part with that name, still as sent
// (percent-encoded). It holds substrings of the target and copies nothing,
// so that a server reads the report and the session from one pass.
type Query struct {
	hlsPathway, hlsThroughput   string
	dashPathway, dashThroughput string
	cmcd, session               string
	has                         uint8
}

// ParseQuery reads the query of a request target (the path and query as
// sent). It never fails: a query the server cannot use is one without the
// parts it reads.
func ParseQuery(target string) Query {
	var q Query
	raw, ok := queryOf(target)
	if !ok {
		return q
	}
	for {
		part, rest, more := strings.Cut(raw, "&") // §4.1: cut at each &
		if name, value, ok := splitPart(part); ok {
			q.note(name, value)
		}
		if !more {
			return q
		}
		raw = rest
	}
}

// note keeps value when name is one the server reads and no earlier part had
// it: of the parts with a name, the first is read (§4.1).
func (q *Query) note(name, value string) {
	var arr [16]byte // longer than every name read: a longer name is none of them
	if decodedLen(name) > len(arr) {
		return
	}
	var bit uint8
	var dst *string
	switch string(appendDecoded(arr[:0], name)) {
	case nameHLSPathway:
		bit, dst = hasHLSPathway, &q.hlsPathway
	case nameHLSThroughput:
		bit, dst = hasHLSThroughput, &q.hlsThroughput
	case nameDASHPathway:
		bit, dst = hasDASHPathway, &q.dashPathway
	case nameDASHThroughput:
		bit, dst = hasDASHThroughput, &q.dashThroughput
	case nameCMCD:
		bit, dst = hasCMCD, &q.cmcd
	case nameSession:
		bit, dst = hasSession, &q.session
	default:
		return
	}
	if q.has&bit == 0 {
		q.has |= bit
		*dst = value
	}
}

// queryOf returns the query of a target: its bytes after the first ? and
// before any # (§4.1); a # before the first ? means there is no query
// (COMPANION §6 "The query").
func queryOf(target string) (string, bool) {
	i := strings.IndexByte(target, '?')
	if i < 0 || strings.IndexByte(target[:i], '#') >= 0 {
		return "", false
	}
	q := target[i+1:]
	if j := strings.IndexByte(q, '#'); j >= 0 {
		q = q[:j]
	}
	return q, true
}

// splitPart cuts a part at its first = into a name and a value (no = gives
// an empty value), both still percent-encoded, and reports false for a part
// with a % not followed by two hexadecimal digits: such a part is skipped,
// and is no part at all (§4.1, COMPANION §6 "The query").
func splitPart(part string) (name, value string, ok bool) {
	if !wellEncoded(part) {
		return "", "", false
	}
	name, value, _ = strings.Cut(part, "=")
	return name, value, true
}

// wellEncoded reports whether every % of s begins a percent-encoding of two
// hexadecimal digits (RFC 3986 §2.1: either case).
func wellEncoded(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		i += 2
	}
	return true
}

// decodedLen is the length of s percent-decoded, for a well-encoded s.
func decodedLen(s string) int {
	return len(s) - 2*strings.Count(s, "%")
}

// appendDecoded appends s percent-decoded (RFC 3986 §2.1) to dst. Only a %
// decodes: + is not a space (§4.1). s is well encoded; were it not, a bad %
// is copied as it is rather than read past the end.
func appendDecoded(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
		}
		dst = append(dst, c)
	}
	return dst
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// unquote removes one " at each end of a value of at least two bytes that
// both begins and ends with one (§4.1; COMPANION §6 "Unquoting": a lone "
// stays). Only pathway values are unquoted.
func unquote(v []byte) []byte {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// integer reads §4.1's integer: 1 to 20 ASCII digits whose value is at most
// 2^64 − 1. Leading zeros are digits like any other.
func integer(v []byte) (uint64, bool) {
	if len(v) == 0 || len(v) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		hi, lo := bits.Mul64(n, 10)
		lo, carry := bits.Add64(lo, uint64(c-'0'), 0)
		if hi != 0 || carry != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// QueryNames gives the names of the parts of a target's query, in order and
// percent-decoded, as §4.1 reads them: a part with a bad % is skipped, and
// is no part at all. A policy's checks use it to see which names a URI
// would make every request carry before the player's own.
func QueryNames(target string) []string {
	raw, ok := queryOf(target)
	if !ok {
		return nil
	}
	var names []string
	for part := range strings.SplitSeq(raw, "&") {
		if name, _, ok := splitPart(part); ok {
			names = append(names, string(appendDecoded(nil, name)))
		}
	}
	return names
}
