package report

import (
	"crypto/rand"
	"encoding/hex"
	"io"
)

// SessionOf reads the client's session from a request target: the first
// part named wai_session (§4.1's rules), whose value, percent-decoded, is
// exactly 32 hexadecimal digits (COMPANION §6 "Session"). false means no
// session: the request is a first request, for which the server mints one.
func SessionOf(target string) (Session, bool) {
	q := ParseQuery(target)
	return q.Session()
}

// Session reads the query's wai_session part (COMPANION §6 "Session").
// Hexadecimal digits are read in either case, as RFC 4648 §8 and RFC 3986
// §2.1 read them: the text says "lowercase" where it writes the session
// (§8.1) and not where it reads it, and both spellings name the same 16
// bytes. The value is not unquoted: only pathway values are.
func (q *Query) Session() (Session, bool) {
	var s Session
	if q.has&hasSession == 0 || decodedLen(q.session) != 2*len(s) {
		return s, false
	}
	var arr [32]byte
	v := appendDecoded(arr[:0], q.session)
	if _, err := hex.Decode(s[:], v); err != nil {
		return Session{}, false
	}
	return s, true
}

// NewSession mints a session: 16 bytes from rand, or from crypto/rand when
// rand is nil (§6).
func NewSession(r io.Reader) (Session, error) {
	if r == nil {
		r = rand.Reader
	}
	var s Session
	if _, err := io.ReadFull(r, s[:]); err != nil {
		return Session{}, err
	}
	return s, nil
}

// String is the session as the manifest writes it: 32 lowercase
// hexadecimal digits (§8.1).
func (s Session) String() string {
	return hex.EncodeToString(s[:])
}
