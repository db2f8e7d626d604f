package room

import (
	"encoding/binary"
	"strings"

	"github.com/waisteer/waisteer/internal/sig"
)

// A hand-written CBOR writer, independent of the library the package uses,
// so that tests can state the exact bytes COMPANION §4 means and craft the
// encodings it forbids (non-shortest arguments, indefinite lengths, keys out
// of order or twice).

// hd is a head of major type major with argument n in its shortest form
// (RFC 8949 §4.2.1).
func hd(major byte, n uint64) []byte {
	switch {
	case n < 24:
		return hdw(major, n, 0)
	case n <= 0xff:
		return hdw(major, n, 1)
	case n <= 0xffff:
		return hdw(major, n, 2)
	case n <= 0xffffffff:
		return hdw(major, n, 4)
	}
	return hdw(major, n, 8)
}

// hdw is a head with its argument in w following bytes (0: in the head).
func hdw(major byte, n uint64, w int) []byte {
	m := major << 5
	switch w {
	case 0:
		return []byte{m | byte(n)}
	case 1:
		return []byte{m | 24, byte(n)}
	case 2:
		return binary.BigEndian.AppendUint16([]byte{m | 25}, uint16(n))
	case 4:
		return binary.BigEndian.AppendUint32([]byte{m | 26}, uint32(n))
	}
	return binary.BigEndian.AppendUint64([]byte{m | 27}, n)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u(n uint64) []byte           { return hd(0, n) }
func bs(b []byte) []byte          { return cat(hd(2, uint64(len(b))), b) }
func ts(s string) []byte          { return cat(hd(3, uint64(len(s))), []byte(s)) }
func ar(items ...[]byte) []byte   { return cat(hd(4, uint64(len(items))), cat(items...)) }
func mp(pairs ...[]byte) []byte   { return cat(hd(5, uint64(len(pairs)/2)), cat(pairs...)) }
func tsArr(s ...string) []byte    { return ar(mapStrings(s, ts)...) }
func boolean(v bool) []byte       { return []byte{map[bool]byte{false: 0xf4, true: 0xf5}[v]} }
func repeat(c byte, n int) []byte { return []byte(strings.Repeat(string(c), n)) }

func mapStrings(s []string, f func(string) []byte) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = f(s[i])
	}
	return out
}

// signed is [body, sig] with body signed by k in domain d.
func signed(k sig.PrivateKey, d sig.Domain, body []byte) []byte {
	s := k.Sign(d, body)
	return ar(bs(body), bs(s[:]))
}

// descBody is a descriptor body in the deterministic encoding; origin nil
// for none.
func descBody(authority, origin []byte, name string) []byte {
	pairs := [][]byte{u(1), u(1), u(2), bs(authority)}
	if origin != nil {
		pairs = append(pairs, u(3), bs(origin))
	}
	pairs = append(pairs, u(4), ts(name))
	return mp(pairs...)
}

// entry is one key log entry in the deterministic encoding.
func entry(key []byte, revoked bool, maySign ...string) []byte {
	return mp(u(1), bs(key), u(2), tsArr(maySign...), u(3), boolean(revoked))
}

// headBodyBytes is a key log head body in the deterministic encoding.
func headBodyBytes(origin []byte, seq uint64, entries ...[]byte) []byte {
	return mp(u(1), u(1), u(2), bs(origin), u(3), u(seq), u(4), ar(entries...))
}
