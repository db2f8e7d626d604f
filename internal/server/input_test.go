package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// TestRecordsRefused: each record of a hop's POST is judged on its own
// (COMPANION §5, §4.2); a refused one is answered with its code and never
// stored; the accepted ones are stored and answered by digest.
func TestRecordsRefused(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 1}, false)
	good := e.sc.Records[0]

	forged := bytes.Clone(e.sc.Records[1])
	forged[len(forged)-1] ^= 1 // the signature no longer verifies

	other, err := scenario.Build(scenario.Spec{Name: "another room", Periods: 1})
	if err != nil {
		t.Fatal(err)
	}
	wrongRoom := other.Records[2]

	// A hop the key log does not list signs a record of the room.
	stranger := room.TestKey("a hop nobody listed")
	rec := e.sc.Record(0, 0, 0, scenario.Period)
	rec.Hop = stranger.Public()
	unlisted := evidence.SignRecord(rec, stranger)

	// A record that reads but breaks a rule (end ≤ start), signed.
	bad := e.sc.Record(1, 0, 0, scenario.Period)
	bad.End = bad.Start
	invalid := evidence.AppendRecordBody(nil, bad)
	sigb := e.sc.HopKeys[1][0].Sign(sig.DomainRecord, invalid)
	invalid = append(invalid, sigb[:]...)

	truncated := e.sc.Records[3][:100]

	body := [][]byte{good, forged, wrongRoom, unlisted, invalid, good, truncated}
	a := e.postRecords(body, http.StatusUnprocessableEntity)
	want := []struct{ outcome, refused string }{
		{"accepted", ""},
		{"", "bad_signature"},
		{"", "wrong_room"},
		{"", "hop_not_authorised"},
		{"", "record_invalid"},
		{"duplicate", ""},
		{"", "truncated"},
	}
	if len(a.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(a.Results), len(want), a.Results)
	}
	for i, w := range want {
		r := a.Results[i]
		if r.Index != i || r.Outcome != w.outcome || string(r.Refused) != w.refused {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
		if w.refused != "" && r.Detail == "" {
			t.Errorf("record %d: refused with no detail", i)
		}
	}
	if a.Results[0].Digest != evidence.NamedDigest(good).String() {
		t.Errorf("digest %s", a.Results[0].Digest)
	}
	// Nothing refused is stored; the accepted one is, byte for byte.
	for _, raw := range [][]byte{forged, wrongRoom, unlisted, invalid} {
		if _, err := e.mem.Record(context.Background(), evidence.NamedDigest(raw)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a refused record is in the store: %v", err)
		}
	}
	if got, err := e.mem.Record(context.Background(), evidence.NamedDigest(good)); err != nil || !bytes.Equal(got, good) {
		t.Errorf("the accepted record: %v", err)
	}
	// Posted again, it is a duplicate, and all-accepted is 200.
	a = e.postRecords([][]byte{good}, http.StatusOK)
	if a.Results[0].Outcome != "duplicate" {
		t.Errorf("again: %+v", a.Results[0])
	}
	st := e.status()
	if st.Records.Accepted != 1 || st.Records.Duplicate != 1 || st.Records.Refused["bad_signature"] != 1 || st.Records.Refused["truncated"] != 1 {
		t.Errorf("records status %+v", st.Records)
	}
}

// TestBadInput: bad input on every route is refused with a 4xx whose body
// names the reason.
func TestBadInput(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 1}, false)
	room := e.room()
	octet := http.Header{"Content-Type": {"application/octet-stream"}}
	auth := http.Header{"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/octet-stream"}}
	unknown := strings.Repeat("ab", 32)
	cases := []struct {
		name, method, target string
		body                 []byte
		header               http.Header
		status               int
		code                 string
	}{
		{"unknown route", "GET", "/nowhere", nil, nil, 404, "not_found"},
		{"steer POST", "POST", "/v1/steer", []byte("x"), nil, 405, "method_not_allowed"},
		{"steer HEAD", "HEAD", "/v1/steer", nil, nil, 405, ""},
		{"steer target too long", "GET", "/v1/steer?x=" + strings.Repeat("a", answer.MaxTarget), nil, nil, 414, "target_too_long"},
		{"records unknown room", "POST", "/v1/rooms/" + unknown + "/records", e.sc.Records[0], octet, 404, "room_not_found"},
		// Issue 29: a segment that is no digest is a room's name, matched
		// exactly; no room has these.
		{"records bad room", "POST", "/v1/rooms/xyz/records", e.sc.Records[0], octet, 404, "room_not_found"},
		{"records upper-case room", "POST", "/v1/rooms/" + strings.ToUpper(room) + "/records", e.sc.Records[0], octet, 404, "room_not_found"},
		{"records GET", "GET", "/v1/rooms/" + room + "/records", nil, nil, 405, "method_not_allowed"},
		{"records query", "POST", "/v1/rooms/" + room + "/records?x=1", e.sc.Records[0], octet, 400, "query_not_allowed"},
		{"records JSON", "POST", "/v1/rooms/" + room + "/records", e.sc.Records[0], http.Header{"Content-Type": {"application/json"}}, 415, "unsupported_media_type"},
		{"records garbage type", "POST", "/v1/rooms/" + room + "/records", e.sc.Records[0], http.Header{"Content-Type": {";;;"}}, 415, "unsupported_media_type"},
		{"records gzip", "POST", "/v1/rooms/" + room + "/records", e.sc.Records[0], http.Header{"Content-Encoding": {"gzip"}}, 415, "unsupported_media_type"},
		{"records empty", "POST", "/v1/rooms/" + room + "/records", []byte{}, octet, 400, "empty_body"},
		{"records oversized", "POST", "/v1/rooms/" + room + "/records", make([]byte, maxRecordsBody+1), octet, 413, "body_too_large"},
		{"policy bad digest", "GET", "/v1/policies/1234", nil, nil, 400, "bad_digest"},
		{"policy unknown", "GET", "/v1/policies/" + unknown, nil, nil, 404, "not_found"},
		{"policy POST", "POST", "/v1/policies/" + unknown, []byte("x"), nil, 405, "method_not_allowed"},
		{"policy query", "GET", "/v1/policies/" + e.sc.Policy.Digest().String() + "?v=1", nil, nil, 400, "query_not_allowed"},
		{"record unknown", "GET", "/v1/records/" + unknown, nil, nil, 404, "not_found"},
		{"record bad digest", "GET", "/v1/records/" + strings.Repeat("g", 64), nil, nil, 400, "bad_digest"},
		{"decision unknown", "GET", "/v1/decisions/" + unknown, nil, nil, 404, "not_found"},
		{"decision bad digest", "GET", "/v1/decisions/abc", nil, nil, 400, "bad_digest"},
		{"decision POST", "POST", "/v1/decisions/" + unknown, nil, nil, 405, "method_not_allowed"},
		{"descriptor unknown room", "GET", "/v1/rooms/" + unknown + "/descriptor", nil, nil, 404, "room_not_found"},
		{"keylog unknown room", "GET", "/v1/rooms/" + unknown + "/keylog", nil, nil, 404, "room_not_found"},
		{"status no token", "GET", "/v1/rooms/" + room + "/status", nil, nil, 401, "token_missing"},
		{"status wrong token", "GET", "/v1/rooms/" + room + "/status", nil, http.Header{"Authorization": {"Bearer nope"}}, 401, "token_invalid"},
		{"status basic auth", "GET", "/v1/rooms/" + room + "/status", nil, http.Header{"Authorization": {"Basic b3A6b3A="}}, 401, "token_missing"},
		{"status unknown room", "GET", "/v1/rooms/" + unknown + "/status", nil, auth, 404, "room_not_found"},
		{"policy PUT no token", "PUT", "/v1/rooms/" + room + "/policy", e.sc.PolicyBytes, octet, 401, "token_missing"},
		{"policy PUT wrong token", "PUT", "/v1/rooms/" + room + "/policy", e.sc.PolicyBytes, http.Header{"Authorization": {"Bearer " + testToken + "x"}}, 401, "token_invalid"},
		{"policy PUT garbage", "PUT", "/v1/rooms/" + room + "/policy", []byte("WSP1"), auth, 400, "truncated"},
		{"policy PUT not a policy", "PUT", "/v1/rooms/" + room + "/policy", []byte("hello, world"), auth, 400, "malformed"},
		{"policy PUT empty", "PUT", "/v1/rooms/" + room + "/policy", []byte{}, auth, 400, "empty_body"},
		{"policy PUT oversized", "PUT", "/v1/rooms/" + room + "/policy", make([]byte, maxPolicyBody+1), auth, 413, "body_too_large"},
		{"policy GET", "GET", "/v1/rooms/" + room + "/policy", nil, auth, 405, "method_not_allowed"},
		{"keylog PUT garbage", "PUT", "/v1/rooms/" + room + "/keylog", []byte{0x82, 0x40}, auth, 422, "key_log_invalid"},
		{"keylog PUT no token", "PUT", "/v1/rooms/" + room + "/keylog", e.sc.Room.HeadBytes, octet, 401, "token_missing"},
		{"healthz query", "GET", "/healthz?x", nil, nil, 400, "query_not_allowed"},
		{"metrics POST", "POST", "/metrics", nil, nil, 405, "method_not_allowed"},
	}
	for _, c := range cases {
		resp, b := e.do(c.method, c.target, c.body, c.header)
		if c.method == "HEAD" {
			if resp.StatusCode != c.status {
				t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
			}
			continue
		}
		wantError(t, c.name, resp, b, c.status, c.code)
	}
	// Nothing of all that reached the store.
	n := 0
	e.mem.Records(context.Background(), e.sc.Room.ID(), 0, func(store.Record) error { n++; return nil })
	if n != 0 {
		t.Errorf("%d records stored by refused requests", n)
	}
}

// TestSteeringNeverRefusesGarbage: a steering request's query and headers
// are read as §4 reads them (a value that does not read is absent, never an
// error): garbage in either is decided and answered 200, never 404, 410 or
// 429, which stop players (players.md).
func TestSteeringNeverRefusesGarbage(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	for _, target := range []string{
		"/v1/steer?%zz&_HLS_pathway=%&_HLS_throughput=-1",
		"/v1/steer?wai_session=xyz&_DASH_pathway=\"\"&_DASH_throughput=,,,",
		"/v1/steer?CMCD=bl%3D%3F%3F&wai_session=" + strings.Repeat("0", 31),
		"/v1/steer?&&&==&_HLS_pathway=zzz",
	} {
		m := e.steer(target, http.Header{"Cmcd-Request": {"bl=:notbase64:, mtp=(1 2"}})
		d, _ := e.audit(m)
		// Nothing in these reads (§4.1 to §4.4): the report is empty,
		// and no value is a session (COMPANION §6), so one is minted.
		if d.Report != (report.Report{}) {
			t.Errorf("%s: report %+v, want none", target, d.Report)
		}
		if strings.Contains(target, "wai_session="+d.Session.String()) {
			t.Errorf("%s: the session was read", target)
		}
	}
}

// TestPreflight: a browser player sending CMCD headers (CTA-5004-B header
// mode) preflights the steering URI; the answer lets it, and lets a player
// post its CMCD v2 event reports there (issue 17 item 3).
func TestPreflight(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 1}, false)
	resp, _ := e.do("OPTIONS", "/v1/steer", nil, http.Header{
		"Origin": {"https://player.example"}, "Access-Control-Request-Method": {"GET"},
		"Access-Control-Request-Headers": {"cmcd-request"},
	})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "GET, POST, OPTIONS",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if ah := resp.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(ah, "CMCD-Request") || !strings.Contains(ah, "Content-Type") {
		t.Errorf("Allow-Headers %q", resp.Header.Get("Access-Control-Allow-Headers"))
	}
}

// TestStoreFails: when the store cannot take a decision, the steering
// route answers 503 with Retry-After min_ttl_s and the reason, and no
// manifest (§8.4: a manifest names a decision that must be fetchable);
// when it cannot take records, none is answered accepted.
func TestStoreFails(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	e.st.failDecisions.Store(true)
	resp, b := e.get("/v1/steer?_HLS_pathway=a")
	wantError(t, "steer", resp, b, http.StatusServiceUnavailable, "store_unavailable")
	if ra := resp.Header.Get("Retry-After"); ra != "30" {
		t.Errorf("Retry-After %q, want min_ttl_s 30", ra)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", resp.Header)
	}
	resp, b = e.get("/readyz")
	wantError(t, "readyz", resp, b, http.StatusServiceUnavailable, "store_unavailable")

	e.st.failDecisions.Store(false)
	e.audit(e.steer("/v1/steer", nil))
	if resp, _ := e.get("/readyz"); resp.StatusCode != http.StatusOK {
		t.Errorf("readyz after recovery: %d", resp.StatusCode)
	}

	fresh, err := e.sc.AddRecord(0, 0, 6*scenario.Period, 7*scenario.Period, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.st.failRecords.Store(true)
	resp, b = e.do("POST", "/v1/rooms/"+e.room()+"/records", fresh, nil)
	wantError(t, "records", resp, b, http.StatusServiceUnavailable, "store_unavailable")
	if _, err := e.mem.Record(context.Background(), evidence.NamedDigest(fresh)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the record is stored: %v", err)
	}
	e.st.failRecords.Store(false)
	if a := e.postRecords([][]byte{fresh}, http.StatusOK); a.Results[0].Outcome != "accepted" {
		t.Errorf("after recovery: %+v", a.Results[0])
	}
}
