package pool

import (
	"encoding/hex"
	"strings"
)

// query is what a steering request's query says to a pool: the first
// session, bucket and cohort parameters, each as sent. Every other part
// (players' _HLS_ and _DASH_ parameters, CMCD, anything unknown) is
// ignored; the server's report reader reads those.
type query struct {
	session, bucket, cohort          string
	hasSession, hasBucket, hasCohort bool
}

// readQuery splits a raw query (without "?") into its "&"-separated parts
// and keeps the first of each key it reads; a key is percent-decoded before
// it is compared. It reads outside bytes: it never fails, and a value it
// cannot read is left to the reader of that value.
func readQuery(raw, cohortParam string) query {
	var q query
	for raw != "" && !(q.hasSession && q.hasBucket && (q.hasCohort || cohortParam == "")) {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		key, value, _ := strings.Cut(part, "=")
		var buf [maxIDLen]byte
		k, ok := unescape(buf[:0], key)
		if !ok {
			continue
		}
		switch {
		case string(k) == "session":
			if !q.hasSession {
				q.session, q.hasSession = value, true
			}
		case string(k) == "bucket":
			if !q.hasBucket {
				q.bucket, q.hasBucket = value, true
			}
		case cohortParam != "" && string(k) == cohortParam:
			if !q.hasCohort {
				q.cohort, q.hasCohort = value, true
			}
		}
	}
	return q
}

// unescape appends s, percent-decoded and with "+" read as a space (the
// form encoding players' URLs use), to dst, up to dst's capacity; false
// when s has a bad escape or does not fit.
func unescape(dst []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if len(dst) == cap(dst) {
			return dst, false
		}
		switch b := s[i]; b {
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return dst, false
			}
			dst = append(dst, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		case '+':
			dst = append(dst, ' ')
		default:
			dst = append(dst, b)
		}
	}
	return dst, true
}

func unhex(b byte) byte {
	switch {
	case b <= '9':
		return b - '0'
	case b <= 'F':
		return b - 'A' + 10
	default:
		return b - 'a' + 10
	}
}

// readSession reads a session parameter's value: 32 hexadecimal digits,
// percent-encoded or not, in either case (the same 16 bytes).
func readSession(v string) (Session, bool) {
	var s Session
	var buf [2 * len(Session{})]byte
	d, ok := unescape(buf[:0], v)
	if !ok || len(d) != len(buf) {
		return s, false
	}
	if _, err := hex.Decode(s[:], d); err != nil {
		return Session{}, false
	}
	return s, true
}

// readBucket reads a bucket parameter's value: a decimal number from 1,
// without a sign or a leading zero, as the RELOAD-URI writes it.
func readBucket(v string) (int, bool) {
	var buf [5]byte
	d, ok := unescape(buf[:0], v)
	if !ok || len(d) == 0 || d[0] == '0' {
		return 0, false
	}
	n := 0
	for _, b := range d {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = 10*n + int(b-'0')
	}
	return n, true
}

// appendQueryEscaped appends v to dst as a query value: unreserved bytes as
// they are, a space as "+" and every other byte percent-encoded, which
// unescape reads back to v. Nothing it writes needs JSON escaping.
func appendQueryEscaped(dst, v []byte) []byte {
	const digits = "0123456789ABCDEF"
	for _, b := range v {
		switch {
		case isUnreserved(b):
			dst = append(dst, b)
		case b == ' ':
			dst = append(dst, '+')
		default:
			dst = append(dst, '%', digits[b>>4], digits[b&15])
		}
	}
	return dst
}
