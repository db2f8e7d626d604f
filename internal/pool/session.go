package pool

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
)

// Session is the 16 bytes a pool mints at a player's first request and
// reads back from its RELOAD-URI: AES-128 under the server's key of 8
// random bytes, the bucket (u16, big-endian) and 6 zero bytes.
type Session [16]byte

// String is the session as the RELOAD-URI carries it: 32 lowercase
// hexadecimal digits.
func (s Session) String() string { return hex.EncodeToString(s[:]) }

// sessionZeros is where a session's plaintext holds its zero bytes: a
// session that decrypts to anything else there was not minted under the
// key (a forgery passes with odds of 2⁻⁴⁸).
const sessionZeros = 10

// mint makes a session for bucket. scratch is 32 bytes the caller owns:
// crypto/cipher's Block is an interface, through which a buffer on the
// stack would escape to the heap on every call.
func mint(b cipher.Block, bucket uint16, scratch []byte) Session {
	plain, out := scratch[:16], scratch[16:32]
	// crypto/rand.Read never fails (Go 1.24 and later: it crashes the
	// program rather than return an error).
	rand.Read(plain[:8])
	binary.BigEndian.PutUint16(plain[8:sessionZeros], bucket)
	clear(plain[sessionZeros:])
	b.Encrypt(out, plain)
	return Session(out)
}

// open reads a session's bucket back; false when the session was not
// minted under the key.
func open(b cipher.Block, s *Session, scratch []byte) (bucket uint16, ok bool) {
	in, plain := scratch[:16], scratch[16:32]
	copy(in, s[:])
	b.Decrypt(plain, in)
	for _, z := range plain[sessionZeros:] {
		if z != 0 {
			return 0, false
		}
	}
	return binary.BigEndian.Uint16(plain[8:sessionZeros]), true
}
