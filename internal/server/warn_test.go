package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
)

// TestRecordOffPolicy: a record of a hop the key log authorises but no
// pathway of the active policy names is stored (a later policy may name
// the hop), and its result says so in its own field, warning
// hop_not_in_policy, where a record of a policy's hop names its pathway
// (§3.2: a pathway's evidence is its hops' records); the status and a
// metric count it (issue 11).
func TestRecordOffPolicy(t *testing.T) {
	stray := room.TestKey("a hop in the key log and in no pathway")
	spec := scenario.Spec{Periods: 1, Entries: func(es []room.Entry) []room.Entry {
		return append(es, room.HopEntry(stray.Public(), evidence.ModelBased))
	}}
	e := newEnv(t, spec, false)
	rec := e.sc.Record(0, 0, 0, scenario.Period)
	rec.Hop = stray.Public()
	off := evidence.SignRecord(rec, stray)
	on := e.sc.Records[0] // pathway 0's first hop

	a := e.postRecords([][]byte{on, off}, http.StatusOK)
	if len(a.Results) != 2 {
		t.Fatalf("results %+v", a.Results)
	}
	if r := a.Results[0]; r.Outcome != "accepted" || r.Pathway != e.sc.Policy.Pathways[0].ID || r.Warning != "" {
		t.Errorf("a record of pathway 0's hop: %+v", r)
	}
	r := a.Results[1]
	if r.Outcome != "accepted" || r.Pathway != "" || r.Warning != "hop_not_in_policy" || r.Refused != "" ||
		!strings.Contains(r.Detail, stray.Public().String()) || !strings.Contains(r.Detail, e.sc.Policy.Digest().String()) {
		t.Errorf("a record of a hop in no pathway: %+v", r)
	}
	if _, err := e.mem.Record(t.Context(), evidence.NamedDigest(off)); err != nil {
		t.Errorf("the record of a hop in no pathway is not stored: %v", err)
	}
	// Sent again, it is a duplicate, and not counted twice.
	e.postRecords([][]byte{off}, http.StatusOK)
	if st := e.status(); st.Records.OffPolicy != 1 || st.Records.Accepted != 2 {
		t.Errorf("status records %+v, want off_policy 1 of 2 accepted", st.Records)
	}
	_, body := e.get("/metrics")
	if want := `waisteer_records_off_policy_total{room="` + e.room() + `"} 1` + "\n"; !strings.Contains(string(body), want) {
		t.Errorf("metrics lack %q", want)
	}
}

// TestPolicyPutWarnsHopGaps: a policy whose hops the key log does not let
// sign a figure is installed (nothing in §3.3 refuses it) with a warning in
// the answer for each such hop (COMPANION §4.2): one the key log does not
// list, one it lists with live/hop and no energy class. A policy whose hops
// are all authorised has none.
func TestPolicyPutWarnsHopGaps(t *testing.T) {
	unlisted := room.TestKey("a hop nobody listed")
	unmetered := room.TestKey("a hop listed for unmetered records")
	spec := scenario.Spec{Periods: 1, Entries: func(es []room.Entry) []room.Entry {
		return append(es, room.HopEntry(unmetered.Public()))
	}}
	e := newEnv(t, spec, false)
	next := resign(t, e.sc, e.sc.SteerKey, func(p *policy.Policy) {
		p.TTLs++
		p.Pathways[1].Hops = append(p.Pathways[1].Hops, policy.Hop{Key: unlisted.Public(), Place: policy.Interior})
		p.Pathways[2].Hops = append(p.Pathways[2].Hops, policy.Hop{Key: unmetered.Public(), Place: policy.Interior})
	})
	resp, b := e.put("policy", next)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %d %s", resp.StatusCode, b)
	}
	var ans roomsteer.ChangeAnswer
	if err := json.Unmarshal(b, &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Warnings) != 2 {
		t.Fatalf("warnings %q, want 2", ans.Warnings)
	}
	ids := e.sc.Policy.IDs()
	for i, w := range []struct{ key, pathway, says string }{
		{unlisted.Public().String(), ids[1], "hop_not_authorised"},
		{unmetered.Public().String(), ids[2], "only unmetered records"},
	} {
		got := ans.Warnings[i]
		if !strings.Contains(got, w.key) || !strings.Contains(got, `"`+w.pathway+`"`) || !strings.Contains(got, w.says) {
			t.Errorf("warning %d %q: want hop %s of %s, %q", i, got, w.key, w.pathway, w.says)
		}
	}
	// The scenario's own policy: every hop is listed with its class.
	resp, b = e.put("policy", e.sc.PolicyBytes)
	ans = roomsteer.ChangeAnswer{}
	if err := json.Unmarshal(b, &ans); err != nil || resp.StatusCode != http.StatusOK || len(ans.Warnings) != 0 {
		t.Errorf("PUT of the scenario's policy: %d %s", resp.StatusCode, b)
	}
}

// TestHopGaps: room.HopGaps by COMPANION §4.2's cases, hop by hop: no
// entry, revoked, no live/hop (records refused), live/hop alone (only
// unmetered records), live/hop and a class (no gap); and a room with no
// key log, which authorises no hop.
func TestHopGaps(t *testing.T) {
	k := func(l string) room.Entry { return room.Entry{Key: room.TestKey(l).Public()} }
	listed := []room.Entry{
		room.HopEntry(room.TestKey("metered").Public(), evidence.OnChipCounter),
		room.HopEntry(room.TestKey("unmetered").Public()),
		{Key: room.TestKey("steer only").Public(), MaySign: []string{room.LiveSteer}},
		func() room.Entry {
			e := room.HopEntry(room.TestKey("revoked").Public(), evidence.ModelBased)
			e.Revoked = true
			return e
		}(),
	}
	tr, err := room.NewTestRoom("gaps", listed...)
	if err != nil {
		t.Fatal(err)
	}
	hops := []string{"metered", "unmetered", "steer only", "revoked", "absent"}
	p := &policy.Policy{}
	for _, h := range hops {
		p.Pathways = append(p.Pathways, policy.Pathway{ID: h, Hops: []policy.Hop{{Key: k(h).Key, Place: policy.Edge}}})
	}
	got := map[string]string{}
	for _, g := range room.HopGaps(tr.Head(), p) {
		got[g.ID] = string(g.Refused)
		if g.Refused == "" {
			got[g.ID] = "unmetered only"
		}
	}
	want := map[string]string{"unmetered": "unmetered only", "steer only": "hop_not_authorised", "revoked": "hop_revoked", "absent": "hop_not_authorised"}
	if len(got) != len(want) {
		t.Errorf("gaps %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("hop %q: %q, want %q", id, got[id], w)
		}
	}
	if gs := room.HopGaps(nil, p); len(gs) != len(hops) || !slices.ContainsFunc(gs, func(g room.HopGap) bool { return g.Refused == "hop_not_authorised" }) {
		t.Errorf("no key log: %v", gs)
	}
}

// TestStartWarnsHopGaps: a server started on a policy with a hop its key
// log does not list logs a warning naming the hop (COMPANION §4.2), and
// steers all the same.
func TestStartWarnsHopGaps(t *testing.T) {
	unlisted := room.TestKey("a hop the key log never heard of")
	e := newEnv(t, scenario.Spec{Periods: 1}, false)
	p := resign(t, e.sc, e.sc.SteerKey, func(p *policy.Policy) {
		p.Pathways[0].Hops = append(p.Pathways[0].Hops, policy.Hop{Key: unlisted.Public(), Place: policy.Interior})
	})
	var log lockedLog
	e.stop()
	e.start(func(c *Config) {
		c.Rooms[0].Policy = p
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	text := log.String()
	if !strings.Contains(text, "level=WARN") || !strings.Contains(text, unlisted.Public().String()) || !strings.Contains(text, "hop_not_authorised") {
		t.Errorf("the start's log does not warn of hop %s:\n%s", unlisted.Public(), text)
	}
	if m := e.steer("/v1/steer", nil); m == nil {
		t.Errorf("no manifest")
	}
}

// lockedLog is a log the server writes from several goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
