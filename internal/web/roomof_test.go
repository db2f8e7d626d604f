package web

import (
	"testing"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
)

// Issue 29: a {room} segment is a room's id or its name, exactly; a name no
// room has is 404 room_not_found, one two rooms share 400 room_not_identified.
func TestRoomOf(t *testing.T) {
	a, b, c := sig.Digest([]byte("a")), sig.Digest([]byte("b")), sig.Digest([]byte("c"))
	rooms := []RoomName{{a, "live1"}, {b, "twin"}, {c, "twin"}}
	for _, tc := range []struct {
		seg  string
		want sig.Hash
		code api.Code
	}{
		{"live1", a, ""},
		{a.String(), a, ""},
		// A digest is returned as read: whether a room has it is the caller's.
		{sig.Digest([]byte("z")).String(), sig.Digest([]byte("z")), ""},
		{"livee1", sig.Hash{}, api.RoomNotFound},
		{"Live1", sig.Hash{}, api.RoomNotFound},
		{"live1 ", sig.Hash{}, api.RoomNotFound},
		{"", sig.Hash{}, api.RoomNotFound},
		{"twin", sig.Hash{}, api.RoomAmbiguous},
	} {
		id, aerr := RoomOf(tc.seg, rooms)
		var code api.Code
		if aerr != nil {
			code = aerr.Code
		}
		if id != tc.want || code != tc.code {
			t.Errorf("RoomOf(%q) = %s, %v; want %s, %q", tc.seg, id, aerr, tc.want, tc.code)
		}
	}
	if s := api.StatusOf(api.RoomNotFound); s != 404 {
		t.Errorf("room_not_found is %d, not 404", s)
	}
}
