package report

import (
	"strings"
	"testing"
)

// TestReadCMCDEvents (issue 17 item 3): a CMCD v2 event report, one RFC
// 9651 Dictionary a line; sid a String, cdn a String or Token, bl and mtp
// as §4.4 reads them; every line that does not read refused with why, the
// others kept.
func TestReadCMCDEvents(t *testing.T) {
	body := strings.Join([]string{
		`e=t,sid="6e2fb550",cdn="cdn-a",bl=21000,mtp=18000,ts=1733068800000`,
		`sid="6e2fb550",cdn=cdn-b,bl=(100 200);ot=v,v=2`,
		``,
		`sid="only"`,
		"sid=\"crlf\",mtp=6000\r",
		`sid=token,cdn="a"`,
		`cdn="cdn-a",bl=1`,
		`sid="x",mtp=-1`,
		`sid="x",mtp="fast"`,
		`sid="x",bl=1.5`,
		`sid="x",mtp=1000000000000000`,
		`sid="x",e="t"`,
		`sid="x",cdn=""`,
		`sid="` + strings.Repeat("a", 257) + `"`,
		`not a dictionary ,,`,
		`sid="x", cdn="y"`, // OWS after the comma: a Dictionary
	}, "\n") + "\n"
	evs, errs := ReadCMCDEvents([]byte(body))
	want := []CMCDEvent{
		{Session: "6e2fb550", CDN: "cdn-a", Event: "t", Buffer: 21000, Throughput: 18_000_000, HasBuffer: true, HasThroughput: true},
		{Session: "6e2fb550", CDN: "cdn-b", Buffer: 100, HasBuffer: true},
		{Session: "only"},
		{Session: "crlf", Throughput: 6_000_000, HasThroughput: true},
		{Session: "x", CDN: "y"},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %+v (%v)", len(evs), len(want), evs, errs)
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, evs[i], want[i])
		}
	}
	wantErrs := map[int]string{
		6: "sid is a Token", 7: "no sid", 8: "mtp is not an Integer", 9: "mtp is not an Integer",
		10: "bl is not an Integer", 11: "not an RFC 9651 Dictionary", 12: "e is not a Token",
		13: "cdn of 0 bytes", 14: "sid of 257 bytes", 15: "not an RFC 9651 Dictionary",
	}
	if len(errs) != len(wantErrs) {
		t.Fatalf("%d refusals, want %d: %v", len(errs), len(wantErrs), errs)
	}
	for _, e := range errs {
		if w, ok := wantErrs[e.Line]; !ok || !strings.Contains(e.Reason, w) {
			t.Errorf("line %d refused %q, want %q", e.Line, e.Reason, w)
		}
	}
	// A flood in one body: the first MaxCMCDLines read, the rest refused
	// as one.
	flood := strings.Repeat("sid=\"f\",mtp=1\n", MaxCMCDLines+5)
	evs, errs = ReadCMCDEvents([]byte(flood))
	if len(evs) != MaxCMCDLines || len(errs) != 1 || !strings.Contains(errs[0].Reason, "more than 1000") {
		t.Errorf("a flood: %d events, %v", len(evs), errs)
	}
	if _, errs := ReadCMCDEvents([]byte(`sid="x",v="` + strings.Repeat("a", MaxCMCDLineSize) + `"`)); len(errs) != 1 || !strings.Contains(errs[0].Reason, "more than") {
		t.Errorf("an oversized line: %v", errs)
	}
	for _, ct := range []string{"application/cmcd", "Application/CMCD; charset=utf-8"} {
		if !IsCMCDMediaType(ct) {
			t.Errorf("%q is not application/cmcd", ct)
		}
	}
	if IsCMCDMediaType("text/plain") {
		t.Error("text/plain taken for application/cmcd")
	}
}

// FuzzCMCDEvents: no body panics; each line is an event or a refusal, or
// empty.
func FuzzCMCDEvents(f *testing.F) {
	f.Add([]byte("e=t,sid=\"a\",cdn=\"b\",bl=1,mtp=2\n"))
	f.Add([]byte("sid=\"a\",bl=(1 2);x\r\n\nsid=b"))
	f.Add([]byte(":AAA=:,sid=\"\\\"\""))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, errs := ReadCMCDEvents(body)
		lines := strings.Count(string(body), "\n") + 1
		if len(evs)+len(errs) > lines {
			t.Fatalf("%d events and %d refusals from %d lines", len(evs), len(errs), lines)
		}
		for _, e := range evs {
			if e.Session == "" || len(e.Session) > maxCMCDString || len(e.CDN) > maxCMCDString {
				t.Fatalf("event %+v", e)
			}
		}
		for _, e := range errs {
			if e.Reason == "" || e.Line < 1 || e.Line > lines {
				t.Fatalf("refusal %+v", e)
			}
		}
	})
}
