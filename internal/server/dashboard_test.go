package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

// dashGet is an operator GET of the dashboard's state.
func (e *env) dashboard() DashboardState {
	e.t.Helper()
	resp, b := e.do("GET", "/v1/dashboard", nil, http.Header{"Authorization": {"Bearer " + testToken}})
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /v1/dashboard: %d %s", resp.StatusCode, b)
	}
	var st DashboardState
	if err := json.Unmarshal(b, &st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// inspect posts the inspector's input and reads its answer.
func (e *env) inspect(input string) (int, Inspection, string) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]string{"input": input})
	resp, b := e.do("POST", "/v1/dashboard/inspect", body, http.Header{"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/json"}})
	var in Inspection
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &in); err != nil {
			e.t.Fatal(err)
		}
	}
	return resp.StatusCode, in, string(b)
}

// TestDashboardState (issue 18 item 2): the page's one poll holds the
// room's status (its pathways, the order a new session gets, decisions by
// reason), each hop's records over the window with the gaps between them,
// which together cover the window exactly, and the history, which ends
// with the state as polled.
func TestDashboardState(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	for range 5 {
		e.steer("/v1/steer", nil)
	}
	if resp, _ := e.do("GET", "/v1/dashboard", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d", resp.StatusCode)
	}
	if resp, _ := e.do("GET", "/v1/dashboard", nil, http.Header{"Authorization": {"Bearer nope"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d", resp.StatusCode)
	}
	st := e.dashboard()
	if len(st.Rooms) != 1 || st.RefreshS <= 0 {
		t.Fatalf("rooms %d, refresh %v", len(st.Rooms), st.RefreshS)
	}
	rd := st.Rooms[0]
	ids := e.sc.Policy.IDs()
	if len(rd.Status.Pathways) != len(ids) || len(rd.Status.Order) != len(ids) || rd.Status.Decisions.Total != 5 {
		t.Errorf("status: %d pathways, order %v, %d decisions", len(rd.Status.Pathways), rd.Status.Order, rd.Status.Decisions.Total)
	}
	hops := 0
	for _, pw := range e.sc.Policy.Pathways {
		hops += len(pw.Hops)
	}
	if len(rd.Hops) != hops {
		t.Fatalf("%d hops, the policy has %d", len(rd.Hops), hops)
	}
	a, b := rd.Status.Window[0], rd.Status.Window[1]
	for _, h := range rd.Hops {
		// Records and gaps, in order, tile [a, b) (records may reach
		// past its ends).
		at := a
		ri, gi := 0, 0
		for at < b {
			switch {
			case gi < len(h.Gaps) && h.Gaps[gi][0] == at:
				at = h.Gaps[gi][1]
				gi++
			case ri < len(h.Records) && h.Records[ri].Start <= at && h.Records[ri].End > at:
				at = h.Records[ri].End
				ri++
			case ri < len(h.Records) && h.Records[ri].End <= at:
				ri++ // overlapped by the one before
			default:
				t.Fatalf("hop %s: nothing covers %d of [%d, %d): records %v gaps %v", h.Hop, at, a, b, h.Records, h.Gaps)
			}
		}
		if len(h.Records) == 0 || h.Records[0].Class == "" {
			t.Errorf("hop %s: records %v", h.Hop, h.Records)
		}
	}
	if n := len(rd.History); n == 0 || rd.History[n-1].ByReason == nil {
		t.Fatalf("history %v", rd.History)
	}
	var first uint64
	for _, v := range rd.History[len(rd.History)-1].First {
		first += v
	}
	if first != 5 {
		t.Errorf("the last sample's decisions by first pathway sum to %d, want 5", first)
	}
	// The page itself, public, with its policy.
	resp, page := e.do("GET", "/dashboard", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") || !strings.Contains(string(page), "<html") {
		t.Errorf("GET /dashboard: %d %v", resp.StatusCode, resp.Header)
	}
	// An unknown asset is refused as every route refuses: JSON naming its
	// reason (FuzzAnyRequest found the text answer it had).
	if resp, body := e.do("GET", "/dashboard/nothing.js", nil, nil); resp.StatusCode != http.StatusNotFound ||
		resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), `"error":"not_found"`) {
		t.Errorf("an unknown asset: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// TestInspector (issue 18 item 3): a decision's digest, or its URL, is
// verified by §9.1's seven steps, each passed, and placed in the log; the
// same bytes with one byte of the body changed are refused at step 3
// (bad_signature) with the later steps not reached; an unknown digest, a
// URL that names none and input that is nothing are refused with a clear
// reason.
func TestInspector(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 6}, true)
	m := e.steer("/v1/steer", nil)
	digest := m.Decision[len(m.Decision)-2*sig.HashSize:]
	for _, input := range []string{digest, m.Decision, "  " + strings.ToUpper(digest) + "\n"} {
		code, in, b := e.inspect(input)
		if code != 200 || in.Verdict != "accepted" || in.Digest != digest || len(in.Steps) != 7 || in.Log == nil || in.Facts == nil {
			t.Fatalf("%q: %d %s", input, code, b)
		}
		for _, st := range in.Steps {
			if st.Outcome != "passed" {
				t.Errorf("%q: step %d %s", input, st.Step, st.Outcome)
			}
		}
		if in.Decision == nil || len(in.Decision.Pathways) != len(e.sc.Policy.Pathways) || in.Facts.Priority[0] != m.Priority[0] {
			t.Errorf("%q: decoded %+v", input, in.Decision)
		}
		found := 0
		for _, r := range in.Records {
			if r.Found {
				found++
			}
		}
		if found == 0 || found != len(in.Records) {
			t.Errorf("%q: %d of %d records found", input, found, len(in.Records))
		}
	}

	raw := e.fetch("/v1/decisions/" + digest)
	bad := append([]byte(nil), raw...)
	bad[len(bad)/2] ^= 1 // a byte of the signed body
	code, in, b := e.inspect(base64.StdEncoding.EncodeToString(bad))
	if code != 200 || in.Verdict != "refused" || in.Log != nil {
		t.Fatalf("tampered: %d %s", code, b)
	}
	refused := -1
	for i, st := range in.Steps {
		if st.Outcome == "refused" {
			refused = i
		}
	}
	if refused < 0 || in.Steps[refused].Code == "" || in.Steps[refused].Detail == "" {
		t.Fatalf("tampered: steps %+v", in.Steps)
	}
	for i, st := range in.Steps {
		want := "passed"
		switch {
		case i == refused:
			want = "refused"
		case i > refused:
			want = "not reached"
		}
		if st.Outcome != want {
			t.Errorf("tampered: step %d %s, want %s", st.Step, st.Outcome, want)
		}
	}
	// The untampered bytes, pasted, verify.
	if code, in, b := e.inspect(base64.StdEncoding.EncodeToString(raw)); code != 200 || in.Verdict != "accepted" {
		t.Errorf("the bytes pasted: %d %s", code, b)
	}

	for _, tc := range []struct {
		input string
		code  int
		want  string
	}{
		{strings.Repeat("ab", 32), 404, "no decision"},
		{"http://steer.example/v1/decisions/xyz", 400, "does not end in a decision's digest"},
		{"ftp://steer.example/" + digest, 400, "not an http or https URL"},
		{"hello", 400, "neither a decision's digest"},
		{"", 400, "nothing to inspect"},
	} {
		code, _, b := e.inspect(tc.input)
		if code != tc.code || !strings.Contains(b, tc.want) {
			t.Errorf("%q: %d %s, want %d with %q", tc.input, code, b, tc.code, tc.want)
		}
	}
	if resp, b := e.do("POST", "/v1/dashboard/inspect", []byte(`{"input": 1}`), http.Header{"Authorization": {"Bearer " + testToken}}); resp.StatusCode != 400 || !strings.Contains(string(b), "inspect_unreadable") {
		t.Errorf("a body that is no request: %d %s", resp.StatusCode, b)
	}
	if resp, _ := e.do("POST", "/v1/dashboard/inspect", []byte(`{"input":"`+digest+`"}`), nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d", resp.StatusCode)
	}
}

// BenchmarkDashboardState is the page's poll on a room of the scenario's
// pathways with its records, beside the room's status route alone (the
// baseline it builds on): the hops' timelines and the history are the
// difference.
func BenchmarkDashboardState(b *testing.B) {
	e := newEnv(b, scenario.Spec{Periods: 6}, true)
	for range 50 {
		e.steer("/v1/steer", nil)
	}
	e.srv.sample(context.Background())
	h := e.srv.sortedHubs()[0]
	b.Run("status", func(b *testing.B) {
		for b.Loop() {
			if _, aerr := h.Status(context.Background(), e.srv.clock()); aerr != nil {
				b.Fatal(aerr)
			}
		}
	})
	b.Run("dashboard", func(b *testing.B) {
		for b.Loop() {
			st := e.srv.dashboardState(context.Background())
			if len(st.Rooms) != 1 {
				b.Fatal(len(st.Rooms))
			}
		}
	})
}
