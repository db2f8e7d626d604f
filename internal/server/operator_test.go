package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

var operatorHeader = http.Header{"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/octet-stream"}}

// resign returns the scenario's policy edited and signed by k.
func resign(t testing.TB, sc *scenario.Scenario, k sig.PrivateKey, edit func(*policy.Policy)) []byte {
	t.Helper()
	p, err := policy.Parse(sc.PolicyBytes)
	if err != nil {
		t.Fatal(err)
	}
	edit(p)
	b, err := policy.Sign(p, k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// head signs a key log head of the scenario's room with its entries
// edited by edit.
func head(t testing.TB, sc *scenario.Scenario, seq uint64, edit func([]room.Entry) []room.Entry) []byte {
	t.Helper()
	entries := slices.Clone(sc.Room.Head().Entries)
	for i := range entries {
		entries[i].MaySign = slices.Clone(entries[i].MaySign)
	}
	if edit != nil {
		entries = edit(entries)
	}
	b, err := room.NewKeyLogHead(sc.Room.OriginKey, seq, entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) put(what string, body []byte) (*http.Response, []byte) {
	return e.do("PUT", "/v1/rooms/"+e.room()+"/"+what, body, operatorHeader)
}

// TestPolicyReplaced: the operator's new policy is checked (§3.3, §3.5,
// §9.1 step 2) before it is used; it is stored, steers the next request,
// and the earlier one stays available by digest, so that a decision made
// under it still verifies (§9.1).
func TestPolicyReplaced(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	old := e.steer("/v1/steer", nil)
	if got := statusLoads(e.status()); !slices.Equal(got, []uint32{0, 1, 0}) {
		t.Fatalf("loads %v", got)
	}

	other, err := scenario.Build(scenario.Spec{Name: "another room"})
	if err != nil {
		t.Fatal(err)
	}
	stranger := room.TestKey("not in the key log")
	refusals := []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"another room's", other.PolicyBytes, 422, "wrong_room"},
		{"signed by a stranger", resign(t, e.sc, stranger, func(*policy.Policy) {}), 403, "signer_not_authorised"},
		{"forged", func() []byte { b := bytes.Clone(e.sc.PolicyBytes); b[len(b)-1] ^= 1; return b }(), 403, "bad_signature"},
		{"invalid", func() []byte { b := bytes.Clone(e.sc.PolicyBytes); clear(b[5+32+32 : 5+32+32+8]); return b }(), 422, "policy_invalid"}, // period_us 0
		{"on the server's own path", resign(t, e.sc, e.sc.SteerKey, func(p *policy.Policy) { p.ServerURI = "https://steer.example/metrics" }), 409, "route_conflict"},
		{"with a relative URI", resign(t, e.sc, e.sc.SteerKey, func(p *policy.Policy) { p.ReloadURI = "steer" }), 409, "route_unusable"},
	}
	for _, r := range refusals {
		resp, b := e.put("policy", r.body)
		wantError(t, r.name, resp, b, r.status, r.code)
	}
	if st := e.status(); st.Policy.Digest != e.sc.Policy.Digest().String() {
		t.Fatalf("a refused policy is active: %s", st.Policy.Digest)
	}

	next := resign(t, e.sc, e.sc.SteerKey, func(p *policy.Policy) {
		p.TTLs = 120
		p.ServerURI = "https://steer.example/v2/steer"
		p.ReloadURI = "https://steer.example/v2/steer"
		p.DecisionURI = "https://steer.example/audit/"
	})
	resp, b := e.put("policy", next)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT policy: %d %s", resp.StatusCode, b)
	}
	nextDigest := sig.Digest(next[:len(next)-64])
	var ans roomsteer.ChangeAnswer
	if err := json.Unmarshal(b, &ans); err != nil || ans.Policy != nextDigest.String() || ans.Previous != e.sc.Policy.Digest().String() {
		t.Errorf("answer %s", b)
	}
	st := e.status()
	if st.Policy.Digest != nextDigest.String() {
		t.Errorf("active %s", st.Policy.Digest)
	}
	// The new policy has the same pathways in the same order, so the
	// session steered before still counts where it did (§6: a load is the
	// sessions steered to the pathway first); TestPolicyNewPathwaysResetLoads
	// changes them.
	if got := statusLoads(st); !slices.Equal(got, []uint32{0, 1, 0}) {
		t.Errorf("loads after a new policy of the same pathways: %v, want the session kept", got)
	}
	m := e.steer("/v2/steer", nil)
	if m.TTL != 120 || !strings.HasPrefix(m.Decision, "https://steer.example/audit/") ||
		!strings.HasPrefix(m.Reload, "https://steer.example/v2/steer?wai_session=") {
		t.Errorf("under the new policy: %s", m.raw)
	}
	// A player still polling the earlier RELOAD-URI is answered under
	// the new policy, never 404 (players.md: dash.js would stop).
	if m := e.steer(path(t, old.Reload)+"&_HLS_pathway=b", nil); m.TTL != 120 {
		t.Errorf("at the earlier RELOAD-URI: %s", m.raw)
	}
	if d, _ := e.audit(m); d.Policy != nextDigest {
		t.Errorf("decided under %s", d.Policy)
	}
	// The earlier decision, at its own URI, still verifies with the
	// earlier policy, fetched by its digest.
	if d, _ := e.audit(old); d.Policy != e.sc.Policy.Digest() {
		t.Errorf("old decision under %s", d.Policy)
	}
	if got := e.fetch("/v1/policies/" + e.sc.Policy.Digest().String()); !bytes.Equal(got, e.sc.PolicyBytes) {
		t.Error("the earlier policy's bytes changed")
	}
	// The same policy again changes nothing.
	resp, b = e.put("policy", next)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"unchanged":true`) {
		t.Errorf("again: %d %s", resp.StatusCode, b)
	}

	// A restart with the configuration's (older) policy keeps the one the
	// operator installed after it.
	e.stop()
	e.start(nil)
	if st := e.status(); st.Policy.Digest != nextDigest.String() {
		t.Errorf("after a restart: active %s, want the operator's %s", st.Policy.Digest, nextDigest)
	}
	e.audit(old)
	if m := e.steer(path(t, old.Reload), nil); m.TTL != 120 {
		t.Errorf("after a restart, at the configured policy's RELOAD-URI: %s", m.raw)
	}
}

// TestKeyLogReplaced: a newer head (COMPANION §4) is installed only when
// its seq grows and the steering key and the policy's signer are still
// allowed (§3.5); a hop it revokes no longer gives evidence (COMPANION
// §4.2: hop_revoked).
func TestKeyLogReplaced(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	steer := e.sc.SteerKey.Public()
	hopB := e.sc.HopKeys[1][0].Public()
	entry := func(es []room.Entry, k sig.PublicKey) *room.Entry {
		for i := range es {
			if es[i].Key == k {
				return &es[i]
			}
		}
		t.Fatalf("no entry for %s", k)
		return nil
	}
	stranger := room.TestKey("another origin")
	foreign, err := room.NewKeyLogHead(stranger, 9, e.sc.Room.Head().Entries)
	if err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"an older seq", head(t, e.sc, 0, nil), 409, "key_log_stale"},
		{"the same seq", head(t, e.sc, 1, func(es []room.Entry) []room.Entry { entry(es, hopB).Revoked = true; return es }), 409, "key_log_stale"},
		{"another origin's", foreign, 422, "key_log_invalid"},
		{"revoking the policy's signer", head(t, e.sc, 2, func(es []room.Entry) []room.Entry {
			entry(es, steer).Revoked = true
			return es
		}), 409, "policy_signer_not_authorised"},
		{"taking ModelBased from the steering key", head(t, e.sc, 2, func(es []room.Entry) []room.Entry {
			entry(es, steer).MaySign = []string{room.LiveSteer}
			return es
		}), 409, "steering_key_not_authorised"},
	}
	for _, r := range refusals {
		resp, b := e.put("keylog", r.body)
		wantError(t, r.name, resp, b, r.status, r.code)
	}
	if got := e.fetch("/v1/rooms/" + e.room() + "/keylog"); !bytes.Equal(got, e.sc.Room.HeadBytes) {
		t.Fatal("a refused head is served")
	}
	if resp, b := e.put("keylog", e.sc.Room.HeadBytes); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"unchanged":true`) {
		t.Errorf("the current head again: %d %s", resp.StatusCode, b)
	}

	revoked := head(t, e.sc, 2, func(es []room.Entry) []room.Entry { entry(es, hopB).Revoked = true; return es })
	resp, b := e.put("keylog", revoked)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT keylog: %d %s", resp.StatusCode, b)
	}
	if got := e.fetch("/v1/rooms/" + e.room() + "/keylog"); !bytes.Equal(got, revoked) {
		t.Error("the new head is not served")
	}
	st := e.status()
	if st.KeyLogSeq == nil || *st.KeyLogSeq != 2 {
		t.Errorf("key_log_seq %v", st.KeyLogSeq)
	}
	// b's edge hop is revoked: its records leave the evidence, b is stale.
	m := e.steer("/v1/steer", nil)
	d, _ := e.audit(m)
	if d.Pathways[1].Status != evidence.StatusStale || m.Priority[0] != "a" {
		t.Errorf("after revoking b's hop: %s, b %s", m.raw, d.Pathways[1].Status)
	}
	// And a record it signs now is refused.
	rec, err := e.sc.AddRecord(1, 0, 6*scenario.Period, 7*scenario.Period, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := e.postRecords([][]byte{rec}, http.StatusUnprocessableEntity)
	if a.Results[0].Refused != "hop_revoked" {
		t.Errorf("record of a revoked hop: %+v", a.Results[0])
	}

	// A restart with the configuration's seq 1 keeps seq 2.
	e.stop()
	e.start(nil)
	if st := e.status(); st.KeyLogSeq == nil || *st.KeyLogSeq != 2 {
		t.Errorf("after a restart: key_log_seq %v", st.KeyLogSeq)
	}
}

// TestRoomWithoutOrigin: a room with no origin has no key log (COMPANION
// §4): its authority signs the policy and, with no figure, the decisions;
// there is no key log to fetch or replace.
func TestRoomWithoutOrigin(t *testing.T) {
	sc, err := scenario.Build(scenario.Spec{NoOrigin: true, Periods: 6})
	if err != nil {
		t.Fatal(err)
	}
	pb := resign(t, sc, sc.Room.AuthorityKey, func(*policy.Policy) {})
	e := &env{t: t, sc: sc, mem: store.NewMemory(), loads: store.NewLoads(), clock: newClock(t0)}
	e.st = &failStore{Store: e.mem}
	e.start(func(c *Config) { c.Rooms[0].Policy = pb; c.Rooms[0].SteeringKey = sc.Room.AuthorityKey })
	a := e.postRecords(sc.Records[:1], http.StatusUnprocessableEntity)
	if a.Results[0].Refused != "hop_not_authorised" {
		t.Errorf("record: %+v", a.Results[0])
	}
	m := e.steer("/v1/steer", nil)
	e.audit(m)
	resp, b := e.get("/v1/rooms/" + e.room() + "/keylog")
	wantError(t, "GET keylog", resp, b, 404, "no_key_log")
	resp, b = e.put("keylog", sc.Room.DescriptorBytes)
	wantError(t, "PUT keylog", resp, b, 409, "no_origin")
}

// TestOperatorDisabled: with no operator token the operator routes are
// refused whatever is sent.
func TestOperatorDisabled(t *testing.T) {
	e := newEnv(t, scenario.Spec{}, false)
	e.stop()
	e.start(func(c *Config) { c.OperatorToken = "" })
	for _, r := range []struct{ method, what string }{{"GET", "status"}, {"PUT", "policy"}, {"PUT", "keylog"}} {
		resp, b := e.do(r.method, "/v1/rooms/"+e.room()+"/"+r.what, []byte("x"), http.Header{"Authorization": {"Bearer "}})
		wantError(t, r.what, resp, b, 503, "operator_disabled") // the station seed: 503 while no key is set
	}
}

// TestRestartRebuildsEvidence: a server started over a store that holds a
// room's records rebuilds its evidence from them, and serves the decisions
// made before.
func TestRestartRebuildsEvidence(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	m := e.steer("/v1/steer", nil)
	e.stop()
	e.start(nil)
	e.audit(m)
	st := e.status()
	for _, p := range st.Pathways {
		if p.Status != "figure" || p.Records != 10 {
			t.Errorf("after a restart, %s: %s with %d records", p.ID, p.Status, p.Records)
		}
	}
	if m2 := e.steer("/v1/steer", nil); m2.Priority[0] != "b" {
		t.Errorf("after a restart: %s", m2.raw)
	}
}

// TestNewRefuses: a configuration that could only make decisions an
// auditor refuses, or whose routes collide, is refused at start.
func TestNewRefuses(t *testing.T) {
	sc, err := scenario.Build(scenario.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	sc2, err := scenario.Build(scenario.Spec{Name: "second room"})
	if err != nil {
		t.Fatal(err)
	}
	rc := func(s *scenario.Scenario) roomsteer.Config {
		return roomsteer.Config{Descriptor: s.Room.DescriptorBytes, KeyLogHead: s.Room.HeadBytes, Policy: s.PolicyBytes, SteeringKey: s.SteerKey}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name  string
		rooms []roomsteer.Config
		want  string
	}{
		{"no steering key", []roomsteer.Config{func() roomsteer.Config { r := rc(sc); r.SteeringKey = sig.PrivateKey{}; return r }()}, "no steering key"},
		{"a steering key the key log does not list", []roomsteer.Config{func() roomsteer.Config { r := rc(sc); r.SteeringKey = room.TestKey("stranger"); return r }()}, "steering_key_not_authorised"},
		{"another room's policy", []roomsteer.Config{func() roomsteer.Config { r := rc(sc); r.Policy = sc2.PolicyBytes; return r }()}, "wrong_room"},
		{"no key log head", []roomsteer.Config{func() roomsteer.Config { r := rc(sc); r.KeyLogHead = nil; return r }()}, "key_log_missing"},
		{"two rooms at one steering URI", []roomsteer.Config{rc(sc), rc(sc2)}, "route_conflict"},
		{"one room twice", []roomsteer.Config{rc(sc), rc(sc)}, "configured twice"},
		{"no policy anywhere", []roomsteer.Config{func() roomsteer.Config { r := rc(sc); r.Policy = nil; return r }()}, "no policy"},
	}
	for _, c := range cases {
		_, err := New(context.Background(), Config{Rooms: c.rooms, Logger: quiet}, store.NewMemory(), store.NewLoads())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// TestTwoRoomsOnePath: rooms whose steering URIs share a path and differ
// in their query are told apart by it.
func TestTwoRoomsOnePath(t *testing.T) {
	build := func(name, q string) *scenario.Scenario {
		sc, err := scenario.Build(withPolicy(scenario.Spec{Name: name, Periods: 6}, func(p *policy.Policy) {
			p.ServerURI = "https://steer.example/steer?room=" + q
			p.ReloadURI = p.ServerURI
		}))
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	s1, s2 := build("one", "1"), build("two", "2")
	e := &env{t: t, sc: s1, mem: store.NewMemory(), loads: store.NewLoads(), clock: newClock(t0)}
	e.st = &failStore{Store: e.mem}
	e.start(func(c *Config) {
		c.Rooms = append(c.Rooms, roomsteer.Config{Descriptor: s2.Room.DescriptorBytes, KeyLogHead: s2.Room.HeadBytes, Policy: s2.PolicyBytes, SteeringKey: s2.SteerKey})
	})
	for _, c := range []struct {
		q    string
		room sig.Hash
	}{{"1", s1.Room.ID()}, {"2", s2.Room.ID()}} {
		m := e.steer("/steer?room="+c.q+"&_HLS_pathway=a", nil)
		if d, _ := e.audit(m); d.Room != c.room {
			t.Errorf("room=%s decided for %s", c.q, d.Room)
		}
	}
	// Issue 29: a room no route names is not found.
	resp, b := e.get("/steer?room=3")
	wantError(t, "no room", resp, b, 404, "room_not_found")
}

// TestMetrics: /metrics is Prometheus text with the counters issue 5
// asks for.
func TestMetrics(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	e.steer("/v1/steer", nil)
	e.steer("/v1/steer?_HLS_pathway=c&CMCD=bl%3D10", nil)
	e.postRecords([][]byte{[]byte("WMH1\x01")}, http.StatusUnprocessableEntity)
	runtime.GC() // the live heap is 0 until a collection
	resp, b := e.get("/metrics")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text := string(b)
	r := e.room()
	for _, want := range []string{
		`waisteer_http_requests_total{route="steer",code="200"} 2`,
		`waisteer_http_requests_total{route="records_post",code="200"} 1`,
		`waisteer_http_requests_total{route="records_post",code="422"} 1`,
		`waisteer_decisions_total{room="` + r + `",reason="rank",first="b"} 1`,
		`waisteer_decisions_total{room="` + r + `",reason="buffer",first="c"} 1`,
		`waisteer_load{room="` + r + `",pathway="b"} 1`,
		`waisteer_load{room="` + r + `",pathway="c"} 1`,
		`waisteer_evidence_status{room="` + r + `",pathway="a",status="figure"} 1`,
		`waisteer_records_total{room="` + r + `",outcome="accepted"} 36`,
		`waisteer_records_refused_total{room="` + r + `",code="truncated"} 1`,
		`waisteer_http_request_duration_seconds_count{route="steer"} 2`,
		`waisteer_commit_group_size_count 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no line %q", want)
		}
	}
	line := regexp.MustCompile(`^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.e+-]+$`)
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(l, "#") && !line.MatchString(l) {
			t.Errorf("not a sample line: %q", l)
		}
	}
	// The runtime's memory (internal/procmem): a process holds at least
	// its live heap, and its heap's goal is no less than it.
	gauge := func(name string) uint64 {
		for _, l := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Errorf("%s %q", name, v)
				}
				return n
			}
		}
		t.Errorf("no %s", name)
		return 0
	}
	live, goal, held := gauge("waisteer_go_heap_live_bytes"), gauge("waisteer_go_heap_goal_bytes"), gauge("waisteer_go_memory_held_bytes")
	if live == 0 || goal < live || held < live {
		t.Errorf("the runtime's memory: live %d, goal %d, held %d", live, goal, held)
	}
	if resp, _ := e.get("/healthz"); resp.StatusCode != 200 {
		t.Errorf("healthz %d", resp.StatusCode)
	}
}

// TestArchivedRoom: a room the store holds and the configuration no longer
// steers keeps its descriptor and key log served, so that its decisions
// still verify (§9.1 step 1).
func TestArchivedRoom(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	m := e.steer("/v1/steer", nil)
	other, err := scenario.Build(scenario.Spec{Name: "the configured one"})
	if err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.start(func(c *Config) {
		c.Rooms = []roomsteer.Config{{Descriptor: other.Room.DescriptorBytes, KeyLogHead: other.Room.HeadBytes, Policy: other.PolicyBytes, SteeringKey: other.SteerKey}}
		c.KeepForeignRooms = true // the operator retired the room (issue 26 item 6)
	})
	e.audit(m)
	resp, b := e.do("POST", "/v1/rooms/"+e.room()+"/records", e.sc.Records[0], nil)
	wantError(t, "records for an archived room", resp, b, 404, "room_not_found")
}

// TestDecisionNotRebuilt: a stored row whose bytes do not rebuild to its
// digest (§7.3) is never served.
func TestDecisionNotRebuilt(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	m := e.steer("/v1/steer", nil)
	d, _ := e.audit(m)
	row, err := e.mem.Decision(context.Background(), d.Digest())
	if err != nil {
		t.Fatal(err)
	}
	row.Digest[0] ^= 1 // a row stored under a digest its bytes do not have
	row.T++
	if err := e.mem.PutDecisions(context.Background(), nil, []store.Decision{row}); err != nil {
		t.Fatal(err)
	}
	resp, b := e.get("/v1/decisions/" + row.Digest.String())
	wantError(t, "a row that does not rebuild", resp, b, 500, "internal")
}

// TestPolicyNewPathwaysResetLoads: a policy whose pathways differ from the
// active one's starts the loads again, since a session's first pathway is
// an index into the policy it was decided under (§6).
func TestPolicyNewPathwaysResetLoads(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	e.steer("/v1/steer", nil)
	if got := statusLoads(e.status()); !slices.Equal(got, []uint32{0, 1, 0}) {
		t.Fatalf("loads %v", got)
	}
	next := resign(t, e.sc, e.sc.SteerKey, func(p *policy.Policy) { p.Pathways[2].ID = "renamed" })
	if resp, b := e.put("policy", next); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT policy: %d %s", resp.StatusCode, b)
	}
	if got := statusLoads(e.status()); !slices.Equal(got, []uint32{0, 0, 0}) {
		t.Errorf("loads after a policy of other pathways: %v, want none", got)
	}
}
