// Package wire reads and writes the little-endian binary records of the
// extension (WSP1, WSD1) and of live-metering (WMH1) the way COMPANION §1
// requires: exactly the bytes given, field by field, in layout order.
//
// A Reader is sticky: once a field runs past the end every later read returns
// zero and Finish reports truncated. This keeps a parser a straight chain of
// reads with one check at the end, and makes "the bytes end before a field is
// complete" and "bytes remain after sig" the only two outcomes to test.
package wire

import (
	"encoding/binary"

	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
)

// Reader reads fields from a byte slice in order.
type Reader struct {
	b     []byte
	short bool
}

// Open runs COMPANION §1 checks 1 to 3 on b for the 4-byte magic and returns a
// reader positioned after the version byte.
func Open(b []byte, magic string) (*Reader, error) {
	if len(b) < 4 {
		return nil, reason.New(reason.Truncated, "%d bytes, fewer than the 4 of %s", len(b), magic)
	}
	if string(b[:4]) != magic {
		return nil, reason.New(reason.Malformed, "magic is %q, not %s", b[:4], magic)
	}
	if len(b) < 5 {
		return nil, reason.New(reason.Truncated, "%s has no version byte", magic)
	}
	if b[4] != 1 {
		return nil, reason.New(reason.UnknownVersion, "%s version %d, not 1", magic, b[4])
	}
	return &Reader{b: b[5:]}, nil
}

// NewReader reads b from its first byte, with no header.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

func (r *Reader) take(n int) []byte {
	if r.short || len(r.b) < n {
		r.short = true
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// U8 reads one byte.
func (r *Reader) U8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

// U16 reads a little-endian u16.
func (r *Reader) U16() uint16 {
	if v := r.take(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

// U32 reads a little-endian u32.
func (r *Reader) U32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

// U64 reads a little-endian u64.
func (r *Reader) U64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// U128 reads a little-endian u128.
func (r *Reader) U128() num.U128 {
	if v := r.take(16); v != nil {
		return num.U128{Lo: binary.LittleEndian.Uint64(v), Hi: binary.LittleEndian.Uint64(v[8:])}
	}
	return num.U128{}
}

// Bytes reads n bytes. The result aliases the input; copy it to keep it.
func (r *Reader) Bytes(n int) []byte {
	return r.take(n)
}

// Copy reads len(dst) bytes into dst.
func (r *Reader) Copy(dst []byte) {
	copy(dst, r.take(len(dst)))
}

// Short reports whether a read has run past the end.
func (r *Reader) Short() bool { return r.short }

// Len is the number of bytes left.
func (r *Reader) Len() int { return len(r.b) }

// Finish ends a read whose layout is complete: truncated when a field ran
// past the end (check 4), malformed when bytes remain (check 5).
func (r *Reader) Finish(what string) error {
	if r.short {
		return reason.New(reason.Truncated, "%s ends before its last field is complete", what)
	}
	if len(r.b) != 0 {
		return reason.New(reason.Malformed, "%d bytes remain after the %s's sig", len(r.b), what)
	}
	return nil
}

// AppendU16 appends a little-endian u16.
func AppendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }

// AppendU32 appends a little-endian u32.
func AppendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

// AppendU64 appends a little-endian u64.
func AppendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// AppendU128 appends a little-endian u128.
func AppendU128(b []byte, v num.U128) []byte {
	b = binary.LittleEndian.AppendUint64(b, v.Lo)
	return binary.LittleEndian.AppendUint64(b, v.Hi)
}
