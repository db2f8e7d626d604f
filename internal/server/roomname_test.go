package server

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
)

// TestRoomsByName: issue 29, rooms by name or digest on every route. Each
// {room} route answers for the room's descriptor name as for its digest
// (the operator routes took only the digest: `400 bad_digest: "live1" is
// not 64 lowercase hexadecimal digits`); a name matches exactly, and one
// no room has is 404 room_not_found on every route; a steering request
// whose query names another room than the one at its path (`?room=livee1`
// for live1's `?room=live1`) is 404 room_not_found, not steered by it.
// TestMain runs it behind both engines.
func TestRoomsByName(t *testing.T) {
	spec := withPolicy(scenario.Spec{Name: "live1", Periods: 6}, func(p *policy.Policy) {
		p.ServerURI = "https://steer.example/v1/steer?room=live1"
		p.ReloadURI = p.ServerURI
	})
	e := newEnv(t, spec, false)
	op := http.Header{"Authorization": {"Bearer " + testToken}}
	id := e.room()

	// Records, by name.
	resp, b := e.do("POST", "/v1/rooms/live1/records", e.sc.Records[0], http.Header{"Content-Type": {"application/octet-stream"}})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("records by name: %d %s", resp.StatusCode, b)
	}
	e.postRecords(e.sc.Records[1:], http.StatusOK)

	// The same answer by name as by digest.
	for _, c := range []struct {
		path string
		h    http.Header
	}{
		{"/descriptor", nil},
		{"/keylog", nil},
		{"/keylog/1", nil},
		{"/status", op},
	} {
		r1, b1 := e.do("GET", "/v1/rooms/"+id+c.path, nil, c.h)
		r2, b2 := e.do("GET", "/v1/rooms/live1"+c.path, nil, c.h)
		if r1.StatusCode != http.StatusOK || r2.StatusCode != http.StatusOK || !bytes.Equal(b1, b2) {
			t.Errorf("%s: by digest %d, by name %d (%.80s)", c.path, r1.StatusCode, r2.StatusCode, b2)
		}
	}
	if resp, b := e.do("GET", "/v1/rooms/live1/log/checkpoint", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("checkpoint by name: %d %s", resp.StatusCode, b)
	}

	// Steering: the room's query by name, and one that names no room.
	m := e.steer("/v1/steer?room=live1&_HLS_pathway=a", nil)
	if d, _ := e.audit(m); d.Room != e.sc.Room.ID() {
		t.Errorf("room=live1 decided for %s", d.Room)
	}
	for _, q := range []string{"room=livee1", "room=live", "room=LIVE1", ""} {
		resp, b := e.get("/v1/steer?" + q)
		wantError(t, "steering "+q, resp, b, 404, "room_not_found")
	}

	// A name no room has, nearly one, in another case or cut short: 404
	// room_not_found on every route, operator, records and audit.
	for _, name := range []string{"livee1", "Live1", "live", "live1 ", strings.ToUpper(id), id[:63]} {
		for _, c := range []struct {
			method, path string
			h            http.Header
		}{
			{"GET", "/status", op},
			{"PUT", "/policy", op},
			{"PUT", "/keylog", op},
			{"POST", "/records", nil},
			{"GET", "/descriptor", nil},
			{"GET", "/keylog", nil},
			{"GET", "/keylog/1", nil},
			{"GET", "/log/checkpoint", nil},
			{"GET", "/log/epochs", nil},
		} {
			resp, b := e.do(c.method, "/v1/rooms/"+strings.ReplaceAll(name, " ", "%20")+c.path, []byte("x"), c.h)
			wantError(t, c.method+" "+name+c.path, resp, b, 404, "room_not_found")
		}
	}
}

// TestArchivedRoomByName: issue 29: a room the store holds and the
// configuration no longer steers is found by its name on the audit's
// routes, as by its digest.
func TestArchivedRoomByName(t *testing.T) {
	e := newEnv(t, scenario.Spec{Name: "retired", Periods: 6}, false)
	other, err := scenario.Build(scenario.Spec{Name: "the configured one"})
	if err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.start(func(c *Config) {
		c.Rooms = []roomsteer.Config{{Descriptor: other.Room.DescriptorBytes, KeyLogHead: other.Room.HeadBytes, Policy: other.PolicyBytes, SteeringKey: other.SteerKey}}
		c.KeepForeignRooms = true
	})
	resp, b := e.get("/v1/rooms/retired/descriptor")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, e.sc.Room.DescriptorBytes) {
		t.Errorf("an archived room's descriptor by name: %d %.80s", resp.StatusCode, b)
	}
	resp, b = e.get("/v1/rooms/the%20configured%20one/descriptor")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, other.Room.DescriptorBytes) {
		t.Errorf("a steered room's descriptor by a name with spaces: %d %.80s", resp.StatusCode, b)
	}
	// Records are for the rooms steered: an archived one is not found.
	resp, b = e.do("POST", "/v1/rooms/retired/records", e.sc.Records[0], nil)
	wantError(t, "records for an archived room by name", resp, b, 404, "room_not_found")
}
