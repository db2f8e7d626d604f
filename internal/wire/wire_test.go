package wire

import (
	"testing"

	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
)

// TestOpen runs COMPANION §1's checks 1 to 3 in their order.
func TestOpen(t *testing.T) {
	for _, c := range []struct {
		in   string
		want reason.Code
	}{
		{"", reason.Truncated},
		{"WSP", reason.Truncated},
		{"WSPX", reason.Malformed},
		{"WSPX\x02", reason.Malformed}, // check 2 before check 3
		{"WSP1", reason.Truncated},
		{"WSP1\x00", reason.UnknownVersion},
		{"WSP1\x02rest", reason.UnknownVersion},
		{"WSP1\x01", ""},
	} {
		_, err := Open([]byte(c.in), "WSP1")
		if reason.Of(err) != c.want {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}

// TestReaderFinish: a read past the end is truncated (check 4), bytes left
// over are malformed (check 5), and a read past the end stays sticky.
func TestReaderFinish(t *testing.T) {
	b := AppendU128(AppendU64(AppendU32(AppendU16([]byte{7}, 0x0102), 0x03040506), 1<<60), num.U128{Lo: 9, Hi: 10})
	r := NewReader(b)
	if r.U8() != 7 || r.U16() != 0x0102 || r.U32() != 0x03040506 || r.U64() != 1<<60 || r.U128() != (num.U128{Lo: 9, Hi: 10}) {
		t.Fatal("values do not round-trip little-endian")
	}
	if err := r.Finish("x"); err != nil {
		t.Fatal(err)
	}
	r = NewReader(b)
	r.Bytes(len(b) - 1)
	if reason.Of(r.Finish("x")) != reason.Malformed {
		t.Error("a byte left over is not malformed")
	}
	r = NewReader(b)
	r.Bytes(len(b) + 1)
	if r.U8() != 0 || !r.Short() || reason.Of(r.Finish("x")) != reason.Truncated {
		t.Error("a read past the end is not sticky and truncated")
	}
}
