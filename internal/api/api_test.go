package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestErrorRoundTrip: what the server writes for a refusal, a client reads
// back as the same error: its code, its detail and the status StatusOf
// gives the code (the one mapping, STYLE.md habit 5).
func TestErrorRoundTrip(t *testing.T) {
	for _, c := range []struct {
		code   Code
		status int
	}{
		{NotFound, 404}, {BadPath, 400}, {Code("truncated"), 400}, {Code("bad_signature"), 403},
		{TokenMissing, 401}, {MethodNotAllowed, 405}, {BodyTooLarge, 413}, {TargetTooLong, 414},
		{MediaType, 415}, {RouteConflict, 409}, {StoreUnavailable, 503}, {Internal, 500},
		{Code("policy_invalid"), 422}, {Code("wrong_room"), 422},
	} {
		w := httptest.NewRecorder()
		WriteError(w, Errorf(c.code, "why: %d", 7))
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d", c.code, w.Code, c.status)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.code, ct)
		}
		want := `{"error":"` + string(c.code) + `","detail":"why: 7"}` + "\n"
		if w.Body.String() != want {
			t.Errorf("%s: body %q, want %q", c.code, w.Body.String(), want)
		}
		e := Read(w.Code, w.Header().Get("Content-Type"), w.Body.Bytes())
		if e.Code != c.code || e.Detail != "why: 7" || e.Status != c.status {
			t.Errorf("%s: read back %+v", c.code, e)
		}
	}
}

// TestReadNotOurs: an answer that is not the server's JSON (a proxy's page,
// Go's plain 404) is an error of its status, with the start of its body.
func TestReadNotOurs(t *testing.T) {
	e := Read(http.StatusNotFound, "text/plain; charset=utf-8", []byte("404 page not found\n"))
	if e.Code != "http_404" || e.Detail != "404 page not found" || e.Status != 404 || !IsNotFound(e) {
		t.Errorf("%+v", e)
	}
	e = Read(http.StatusBadGateway, "application/json", []byte(`{"message":"upstream"}`))
	if e.Code != "http_502" || e.Status != 502 {
		t.Errorf("JSON that is not a refusal: %+v", e)
	}
	e = Read(http.StatusServiceUnavailable, "", nil)
	if e.Code != "http_503" || e.Detail != "Service Unavailable" {
		t.Errorf("an empty body: %+v", e)
	}
	long := strings.Repeat("x", 1000)
	if e := Read(500, "text/html", []byte(long)); len(e.Detail) > 210 {
		t.Errorf("a long body is kept whole: %d bytes", len(e.Detail))
	}
}

// FuzzRead: no answer makes the client's reader panic, and what it reads
// always has a code and the status it was given.
func FuzzRead(f *testing.F) {
	f.Add(404, "application/json", []byte(`{"error":"not_found","detail":"no decision"}`))
	f.Add(500, "text/plain", []byte("boom"))
	f.Add(422, "application/json", []byte(`{"error":""}`))
	f.Add(400, "application/json; charset=utf-8", []byte(`{"error":"x","detail":1}`))
	f.Fuzz(func(t *testing.T, status int, ct string, body []byte) {
		e := Read(status, ct, body)
		if e == nil || e.Code == "" || e.Status != status {
			t.Fatalf("Read(%d, %q, %q) = %+v", status, ct, body, e)
		}
		if !strings.HasPrefix(ct, "application/json") && !utf8.ValidString(string(body)) && e.Detail == "" {
			t.Fatalf("no detail")
		}
	})
}
