package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/room"
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
	for _, q := range []string{"room=livee1", "room=live", "room=LIVE1", "room=", "_HLS_pathway=a&room=live2"} {
		resp, b := e.get("/v1/steer?" + q)
		wantError(t, "steering "+q, resp, b, 404, "room_not_found")
	}
	// A query that names no room is the only room's at the path, as before.
	for _, q := range []string{"", "_HLS_pathway=a", "rooms=live2"} {
		if resp, b := e.get("/v1/steer?" + q); resp.StatusCode != http.StatusOK {
			t.Errorf("steering %q: %d %s", q, resp.StatusCode, b)
		}
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

// TestRestartOlderKeyLogFileWarns: issue 29, "a restart that keeps a newer
// stored key log head than the file logs both seqs". The operator installs
// seq 2 (PUT keylog); the configuration still names the seq 1 file; the
// restart steers by seq 2, as before, and now warns with both seqs. A
// restart whose file is the store's head says nothing of it.
func TestRestartOlderKeyLogFileWarns(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, false)
	if resp, b := e.put("keylog", head(t, e.sc, 2, func(es []room.Entry) []room.Entry { return es })); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT keylog: %d %s", resp.StatusCode, b)
	}
	restart := func(file []byte) string {
		var logs syncBuffer
		e.stop()
		e.start(func(c *Config) {
			c.Rooms[0].KeyLogHead = file
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		return logs.String()
	}
	logs := restart(e.sc.Room.HeadBytes)
	if st := e.status(); st.KeyLogSeq == nil || *st.KeyLogSeq != 2 {
		t.Errorf("after a restart: key_log_seq %v, want the store's 2", st.KeyLogSeq)
	}
	var line string
	for l := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(l, "key log file is older") {
			line = l
		}
	}
	for _, want := range []string{"level=WARN", "room=" + e.room(), "file_seq=1", "stored_seq=2"} {
		if !strings.Contains(line, want) {
			t.Errorf("the warning %q lacks %s; the log:\n%s", line, want, logs)
		}
	}
	// The file brought up to the store's head: no warning.
	if logs := restart(head(t, e.sc, 2, func(es []room.Entry) []room.Entry { return es })); strings.Contains(logs, "older") {
		t.Errorf("a file at the store's head warned:\n%s", logs)
	}
}
