package room

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

var (
	authKey   = TestKey("descriptor test authority")
	originKey = TestKey("descriptor test origin")
	authPub   = authKey.Public()
	originPub = originKey.Public()
	zeroSig   = make([]byte, 64)
)

// COMPANION §4: NewDescriptor writes exactly the deterministic encoding of
// the shape, signed by the authority in wai:room-descriptor, and the room id
// is SHA-256 of the body.
func TestNewDescriptorBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		origin *sig.PublicKey
		want   []byte
	}{
		{"with origin", &originPub, descBody(authPub[:], originPub[:], "with origin")},
		{"r", nil, descBody(authPub[:], nil, "r")},
		{strings.Repeat("é", 32), nil, descBody(authPub[:], nil, strings.Repeat("é", 32))},
	} {
		got, err := NewDescriptor(authKey, tc.origin, tc.name)
		if err != nil {
			t.Fatalf("%q: %v", tc.name, err)
		}
		if want := signed(authKey, sig.DomainRoom, tc.want); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %x\nwant %x", tc.name, got, want)
		}
		d, err := ParseDescriptor(got)
		if err != nil {
			t.Fatalf("%q: does not read back: %v", tc.name, err)
		}
		if d.ID() != sha256.Sum256(tc.want) || !bytes.Equal(d.Body, tc.want) {
			t.Errorf("%q: id %s is not SHA-256 of the body", tc.name, d.ID())
		}
		if d.Authority != authPub || d.Name != tc.name || (d.Origin == nil) != (tc.origin == nil) ||
			(d.Origin != nil && *d.Origin != *tc.origin) {
			t.Errorf("%q: read back as %+v", tc.name, d)
		}
		if err := d.Verify(); err != nil {
			t.Errorf("%q: %v", tc.name, err)
		}
	}
}

// The package doc's example (no origin, name "r") is 41 bytes of body.
func TestDocExample(t *testing.T) {
	b, err := NewDescriptor(authKey, nil, "r")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x82, 0x58, 0x29, 0xa3, 0x01, 0x01, 0x02, 0x58, 0x20}) ||
		!bytes.Equal(b[3+41-3:3+41], []byte{0x04, 0x61, 'r'}) || !bytes.Equal(b[3+41:3+41+2], []byte{0x58, 0x40}) || len(b) != 3+41+2+64 {
		t.Errorf("descriptor %x is not the doc's example", b)
	}
}

// COMPANION §4: the name is 1 to 64 bytes of text; NewDescriptor refuses
// what would not read.
func TestNewDescriptorRefuses(t *testing.T) {
	for _, name := range []string{"", strings.Repeat("n", 65), "\xff"} {
		if _, err := NewDescriptor(authKey, nil, name); err == nil {
			t.Errorf("name %q: no error", name)
		}
	}
	if _, err := NewDescriptor(sig.PrivateKey{}, nil, "r"); err == nil {
		t.Error("no key: no error")
	}
	for _, name := range []string{"r", strings.Repeat("n", 64)} {
		if _, err := NewDescriptor(authKey, nil, name); err != nil {
			t.Errorf("name of %d bytes: %v", len(name), err)
		}
	}
}

// COMPANION §4.1 step 1: a descriptor whose bytes are not exactly the
// deterministic encoding of §4's shape is room_invalid. Each case is a
// control of one defect against a valid encoding (checked first).
func TestParseDescriptorRoomInvalid(t *testing.T) {
	A, O := authPub[:], originPub[:]
	valid := descBody(A, O, "r")
	for _, ok := range [][]byte{
		ar(bs(valid), bs(zeroSig)),
		ar(bs(descBody(A, nil, "r")), bs(zeroSig)),
		ar(bs(descBody(A, O, strings.Repeat("n", 64))), bs(zeroSig)),
	} {
		if _, err := ParseDescriptor(ok); err != nil {
			t.Fatalf("control %x does not read: %v", ok, err)
		}
	}
	bodies := []struct {
		name string
		body []byte
	}{
		{"extra key 5", mp(u(1), u(1), u(2), bs(A), u(3), bs(O), u(4), ts("r"), u(5), u(0))},
		{"extra key 0", mp(u(0), u(0), u(1), u(1), u(2), bs(A), u(4), ts("r"))},
		{"text key", mp(u(1), u(1), u(2), bs(A), u(4), ts("r"), ts("x"), u(0))},
		{"key 1 as text", mp(ts("1"), u(1), u(2), bs(A), u(4), ts("r"))},
		{"version as text", mp(u(1), ts("1"), u(2), bs(A), u(4), ts("r"))},
		{"version negative", mp(u(1), hd(1, 0), u(2), bs(A), u(4), ts("r"))},
		{"version as float", mp(u(1), []byte{0xf9, 0x3c, 0x00}, u(2), bs(A), u(4), ts("r"))},
		{"version as bool", mp(u(1), boolean(true), u(2), bs(A), u(4), ts("r"))},
		{"authority as text", mp(u(1), u(1), u(2), ts(strings.Repeat("a", 32)), u(4), ts("r"))},
		{"authority as array", mp(u(1), u(1), u(2), ar(u(1)), u(4), ts("r"))},
		{"name as bytes", mp(u(1), u(1), u(2), bs(A), u(4), bs([]byte("r")))},
		{"name as integer", mp(u(1), u(1), u(2), bs(A), u(4), u(7))},
		{"origin null", mp(u(1), u(1), u(2), bs(A), u(3), []byte{0xf6}, u(4), ts("r"))},
		{"origin empty", mp(u(1), u(1), u(2), bs(A), u(3), bs(nil), u(4), ts("r"))},
		{"out-of-order key 2 before 1", mp(u(2), bs(A), u(1), u(1), u(3), bs(O), u(4), ts("r"))},
		{"out-of-order key 3 after 4", mp(u(1), u(1), u(2), bs(A), u(4), ts("r"), u(3), bs(O))},
		{"duplicate key 1", mp(u(1), u(1), u(1), u(1), u(2), bs(A), u(4), ts("r"))},
		{"duplicate key 4", mp(u(1), u(1), u(2), bs(A), u(4), ts("r"), u(4), ts("r"))},
		{"non-shortest version", mp(u(1), hdw(0, 1, 1), u(2), bs(A), u(4), ts("r"))},
		{"non-shortest version 8 bytes", mp(u(1), hdw(0, 1, 8), u(2), bs(A), u(4), ts("r"))},
		{"non-shortest map key", mp(hdw(0, 1, 1), u(1), u(2), bs(A), u(4), ts("r"))},
		{"non-shortest key length", mp(u(1), u(1), u(2), cat(hdw(2, 32, 2), A), u(4), ts("r"))},
		{"non-shortest name length", mp(u(1), u(1), u(2), bs(A), u(4), cat(hdw(3, 1, 1), []byte("r")))},
		{"non-shortest map length", cat(hdw(5, 3, 1), u(1), u(1), u(2), bs(A), u(4), ts("r"))},
		{"indefinite map", cat([]byte{0xbf}, u(1), u(1), u(2), bs(A), u(4), ts("r"), []byte{0xff})},
		{"indefinite key bytes", mp(u(1), u(1), u(2), cat([]byte{0x5f}, bs(A), []byte{0xff}), u(4), ts("r"))},
		{"indefinite name", mp(u(1), u(1), u(2), bs(A), u(4), cat([]byte{0x7f}, ts("r"), []byte{0xff}))},
		{"short authority", descBody(A[:31], nil, "r")},
		{"long authority", descBody(append(A[:32:32], 0), nil, "r")},
		{"short origin", descBody(A, O[:31], "r")},
		{"long origin", descBody(A, append(O[:32:32], 0), "r")},
		{"name of 0 bytes", descBody(A, nil, "")},
		{"name of 65 bytes", descBody(A, nil, strings.Repeat("n", 65))},
		{"name not UTF-8", mp(u(1), u(1), u(2), bs(A), u(4), cat(hd(3, 1), []byte{0xff}))},
		{"version 0", mp(u(1), u(0), u(2), bs(A), u(4), ts("r"))},
		{"version 2", mp(u(1), u(2), u(2), bs(A), u(4), ts("r"))},
		{"no version", mp(u(2), bs(A), u(4), ts("r"))},
		{"no authority", mp(u(1), u(1), u(4), ts("r"))},
		{"no name", mp(u(1), u(1), u(2), bs(A))},
		{"tagged version", mp(u(1), cat([]byte{0xc1}, u(1)), u(2), bs(A), u(4), ts("r"))},
		{"body an array", ar(u(1), bs(A), ts("r"))},
		{"body trailing byte", cat(valid, []byte{0x00})},
		{"body empty", nil},
		{"body two maps", cat(valid, valid)},
	}
	for _, tc := range bodies {
		check(t, tc.name, ar(bs(tc.body), bs(zeroSig)), ParseDescriptorErr, reason.RoomInvalid)
	}
	outers := []struct {
		name string
		b    []byte
	}{
		{"nothing", nil},
		{"trailing byte after the array", cat(ar(bs(valid), bs(zeroSig)), []byte{0x00})},
		{"trailing array after the array", cat(ar(bs(valid), bs(zeroSig)), ar(bs(valid), bs(zeroSig)))},
		{"short sig", ar(bs(valid), bs(zeroSig[:63]))},
		{"long sig", ar(bs(valid), bs(append(zeroSig[:64:64], 0)))},
		{"array of 1", ar(bs(valid))},
		{"array of 3", ar(bs(valid), bs(zeroSig), bs(nil))},
		{"a map", mp(u(0), bs(valid), u(1), bs(zeroSig))},
		{"body as text", ar(ts("body"), bs(zeroSig))},
		{"body as the map itself", ar(valid, bs(zeroSig))},
		{"sig as text", ar(bs(valid), ts(strings.Repeat("s", 64)))},
		{"non-shortest array length", cat(hdw(4, 2, 1), bs(valid), bs(zeroSig))},
		{"non-shortest body length", cat(hd(4, 2), cat(hdw(2, uint64(len(valid)), 2), valid), bs(zeroSig))},
		{"non-shortest sig length", cat(hd(4, 2), bs(valid), cat(hdw(2, 64, 2), zeroSig))},
		{"indefinite array", cat([]byte{0x9f}, bs(valid), bs(zeroSig), []byte{0xff})},
		{"indefinite body", ar(cat([]byte{0x5f}, bs(valid), []byte{0xff}), bs(zeroSig))},
		{"tag 24 around the array", cat([]byte{0xd8, 0x18}, ar(bs(valid), bs(zeroSig)))},
		{"truncated", ar(bs(valid), bs(zeroSig))[:50]},
	}
	for _, tc := range outers {
		check(t, tc.name, tc.b, ParseDescriptorErr, reason.RoomInvalid)
	}
}

// ParseDescriptorErr adapts ParseDescriptor for check.
func ParseDescriptorErr(b []byte) error { _, err := ParseDescriptor(b); return err }

// check requires that read refuses b with code.
func check(t *testing.T, name string, b []byte, read func([]byte) error, code reason.Code) {
	t.Helper()
	err := read(b)
	if reason.Of(err) != code {
		t.Errorf("%s: %x: got %v, want %s", name, b, err, code)
	}
}
