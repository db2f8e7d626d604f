package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/scenario"
)

// TestPlainPath: serveFast takes a target only when its path is one that
// net/http's EscapedPath gives back unchanged, so that both find the same
// route for it.
func TestPlainPath(t *testing.T) {
	for _, p := range []string{"/", "/v1/steer", "/a-b_c.d~e/!$&'()*+,;=:@", "/UPPER/09"} {
		if !plainPath([]byte(p)) {
			t.Errorf("%q is not plain", p)
		}
		u, err := url.ParseRequestURI(p)
		if err != nil || u.EscapedPath() != p {
			t.Errorf("%q: net/http's escaped path is %q (%v)", p, u.EscapedPath(), err)
		}
	}
	for _, p := range []string{"", "v1/steer", "/v1/st%65er", "/a b", "/a\"b", "/a#b", "/é", "/a\\b", "*", "http://host/v1/steer", "/a^b", "/a|b"} {
		if plainPath([]byte(p)) {
			t.Errorf("%q is plain", p)
		}
	}
}

// fastAnswer is an answer as a client sees it.
type fastAnswer struct {
	status            int
	contentType, body string
	header            http.Header
}

// answerStd serves raw, an HTTP/1.1 request, through Handler; ok is false
// when net/http does not read it.
func answerStd(srv *Server, raw []byte) (a fastAnswer, ok bool) {
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return a, false
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return fastAnswer{w.Code, w.Header().Get("Content-Type"), w.Body.String(), w.Header()}, true
}

// answerFast serves raw through FastHandler; ok is false when fasthttp does
// not read it.
func answerFast(h fasthttp.RequestHandler, raw []byte) (a fastAnswer, ok bool) {
	var req fasthttp.Request
	// The reader's buffer is the largest request head FastServer reads.
	if err := req.Read(bufio.NewReaderSize(bytes.NewReader(raw), 64<<10)); err != nil {
		return a, false
	}
	var c fasthttp.RequestCtx
	c.Init(&req, nil, nil)
	c.Response.Header.SetNoDefaultContentType(true) // as FastServer's connections have it
	h(&c)
	hd := http.Header{}
	for k, v := range c.Response.Header.All() {
		hd.Add(string(k), string(v))
	}
	return fastAnswer{c.Response.StatusCode(), string(c.Response.Header.ContentType()), string(c.Response.Body()), hd}, true
}

// rawRequest writes an HTTP/1.1 request.
func rawRequest(method, target, cmcd string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: steer.example\r\n", method, target)
	if cmcd != "" {
		fmt.Fprintf(&b, "CMCD-Request: %s\r\n", cmcd)
	}
	if body != nil {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\nContent-Length: %d\r\n", testToken, len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// sameAnswer compares the answers of the two engines to one request. A
// steering manifest names a session and a decision of its own server, and
// the metrics count requests and their times: those are compared by their
// status, media type and shape; every other answer byte for byte.
func sameAnswer(t *testing.T, whole []byte, std, fast fastAnswer) {
	t.Helper()
	raw := whole[:min(len(whole), 300)]
	if std.status != fast.status || std.contentType != fast.contentType {
		t.Fatalf("%q:\nnet/http %d %q %s\nfasthttp %d %q %s", raw, std.status, std.contentType, std.body, fast.status, fast.contentType, fast.body)
	}
	for _, k := range []string{"Cache-Control", "Access-Control-Allow-Origin", "Allow", "Retry-After", "X-Content-Type-Options"} {
		if std.header.Get(k) != fast.header.Get(k) {
			t.Fatalf("%q: %s: net/http %q, fasthttp %q", raw, k, std.header.Get(k), fast.header.Get(k))
		}
	}
	switch {
	case std.contentType == ManifestType:
		var a, b manifest
		if json.Unmarshal([]byte(std.body), &a) != nil || json.Unmarshal([]byte(fast.body), &b) != nil || a.Version != b.Version || a.TTL != b.TTL {
			t.Fatalf("%q: manifests\n%s\n%s", raw, std.body, fast.body)
		}
	case strings.HasPrefix(std.contentType, "text/plain; version=0.0.4"): // metrics
	case std.body != fast.body:
		t.Fatalf("%q: net/http answers\n%s\nfasthttp\n%s", raw, std.body, fast.body)
	}
}

// TestFastSameAnswers: FastHandler answers as Handler does, on the steering
// route (served by serveFast) and on every other (served through the
// adaptor), requests that differ in method, path, query, CMCD header and
// body.
func TestFastSameAnswers(t *testing.T) {
	std, fast := newFuzzEnv(t, true), newFuzzEnv(t, true)
	room, pd := std.room(), std.sc.Policy.Digest().String()
	for _, c := range []fastCase{
		{"GET", "/v1/steer", "", nil},
		{"GET", "/v1/steer?_HLS_pathway=a&_HLS_throughput=5000000", "", nil},
		{"GET", "/v1/steer?_HLS_pathway=a", "bl=30000,mtp=8000", nil},
		{"GET", "/v1/steer?%zz&_HLS_pathway=%", "bl=(1 2", nil},
		{"GET", "/v1/steer?x=" + strings.Repeat("a", answer.MaxTarget), "", nil},
		{"GET", "/v1/st%65er", "", nil},
		{"GET", "/v1//steer", "", nil},
		{"HEAD", "/v1/steer", "", nil},
		{"POST", "/v1/steer", "", []byte("x")},
		{"OPTIONS", "/v1/steer", "", nil},
		{"GET", "/v1/policies/" + pd, "", nil},
		{"GET", "/v1/policies/" + pd + "?v=1", "", nil},
		{"GET", "/v1/decisions/" + pd, "", nil},
		{"GET", "/v1/rooms/" + room + "/descriptor", "", nil},
		{"GET", "/v1/rooms/" + room + "/keylog", "", nil},
		{"POST", "/v1/rooms/" + room + "/records", "", std.sc.Records[0]},
		{"POST", "/v1/rooms/" + room + "/records", "", []byte("WMH1")},
		{"PUT", "/v1/rooms/" + room + "/policy", "", []byte("WSP1")},
		{"GET", "/healthz", "", nil},
		{"GET", "/nowhere", "", nil},
	} {
		raw := rawRequest(c.method, c.target, c.cmcd, c.body)
		if !answerBoth(t, std, fast, raw) {
			t.Fatalf("%.300q does not read on both", raw)
		}
	}
}

// fastCase is a request of TestFastSameAnswers and of FuzzFastFront's seeds.
type fastCase struct {
	method, target, cmcd string
	body                 []byte
}

// answerBoth serves raw behind each engine, std's server behind net/http
// and fast's behind fasthttp, and compares the answers (sameAnswer); it
// reports false when one of the two does not read raw.
func answerBoth(t *testing.T, std, fast *fuzzEnv, raw []byte) bool {
	t.Helper()
	s, ok1 := answerStd(std.get(t), raw)
	f, ok2 := answerFast(fast.get(t).FastHandler(), raw)
	if ok1 && ok2 {
		sameAnswer(t, raw, s, f)
	}
	return ok1 && ok2
}

// FuzzFastFront: whatever request both net/http and fasthttp read, the
// server behind each answers it the same way (sameAnswer), and neither
// panics.
func FuzzFastFront(f *testing.F) {
	std, fast := newFuzzEnv(f, true), newFuzzEnv(f, true)
	room := std.room()
	for _, s := range []fastCase{
		{"GET", "/v1/steer?_HLS_pathway=a", "", nil},
		{"GET", "/v1/steer?_DASH_pathway=%22c,a%22", "bl=1500, mtp=20000", nil},
		{"GET", "/v1/st%65er", "", nil},
		{"OPTIONS", "/v1/steer", "", nil},
		{"POST", "/v1/rooms/" + room + "/records", "", std.sc.Records[1]},
		{"GET", "/v1/rooms/" + room + "/status", "", nil},
	} {
		f.Add(s.method, s.target, s.cmcd, s.body)
	}
	f.Fuzz(func(t *testing.T, method, target, cmcd string, body []byte) {
		answerBoth(t, std, fast, rawRequest(method, target, cmcd, body))
	})
}

// TestRecordsPostFraming: a hop's POST is read whatever its framing, behind
// either engine (TestMain): a chunked body of unknown length, and a body
// sent only after the server's 100 Continue (as curl sends one over 1 KiB).
func TestRecordsPostFraming(t *testing.T) {
	e := newEnv(t, scenario.Spec{Periods: 1}, false)
	url := e.ts.URL + "/v1/rooms/" + e.room() + "/records"
	body := bytes.Join(e.sc.Records[:4], nil)

	req, err := http.NewRequest("POST", url, io.MultiReader(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{ExpectContinueTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	check := func(what string, req *http.Request, records int) {
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer resp.Body.Close()
		var a api.RecordsAnswer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || len(a.Results) != records {
			t.Fatalf("%s: %s, %d results (%v)", what, resp.Status, len(a.Results), err)
		}
		for _, r := range a.Results {
			if r.Outcome != "accepted" {
				t.Errorf("%s: %+v", what, r)
			}
		}
	}
	req.ContentLength = -1 // unknown: net/http's client sends it chunked
	check("chunked", req, 4)

	body = bytes.Join(e.sc.Records[4:], nil)
	req, err = http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Expect", "100-continue")
	check("100-continue", req, len(e.sc.Records)-4)
}

// TestFastRecordsSameAnswers: a hop's POST of records, which serveFast
// answers on fasthttp's own request (serveFastRecords, issue 30), is
// answered as Handler answers it, whatever its records, media type,
// encoding, room and target; a target serveFast leaves (a query, a dot or
// empty segment, another path) goes through the adaptor, with the same
// answer.
func TestFastRecordsSameAnswers(t *testing.T) {
	std, fast := newFuzzEnv(t, false), newFuzzEnv(t, false)
	room := std.room()
	at := "/v1/rooms/" + room + "/records"
	recs := std.sc.Records
	both := bytes.Join(recs[1:3], nil)
	octet := "Content-Type: application/octet-stream\r\n"
	for _, c := range []struct {
		target, header string
		body           []byte
	}{
		{at, octet, recs[0]},
		{at, octet, recs[0]}, // held already: a duplicate
		{at, "", both},
		{at, octet, append(slices.Clone(recs[3]), "WMH1"...)},
		{at, octet, []byte{}},
		{at, "Content-Type: application/octet-stream; x=1\r\n", recs[4]},
		{at, "Content-Type: application/json\r\n", recs[5]},
		// Two Content-Type lines are left out: fasthttp keeps the last,
		// net/http reads the first, through the adaptor as on this path.
		{at, "Content-Encoding: gzip\r\n", recs[5]},
		{at, "Content-Encoding: identity\r\n", recs[6]},
		{at + "?x=1", octet, recs[7]},
		{"/v1/rooms/" + std.sc.Policy.Digest().String() + "/records", octet, recs[7]},
		{"/v1/rooms/./records", octet, recs[7]},
		{"/v1/rooms/../records", octet, recs[7]},
		{"/v1/rooms//records", octet, recs[7]},
		{at + "/", octet, recs[7]},
		{"/v1/rooms/" + room + "/x/records", octet, recs[7]},
	} {
		var b bytes.Buffer
		fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: steer.example\r\n%sContent-Length: %d\r\n\r\n", c.target, c.header, len(c.body))
		b.Write(c.body)
		if !answerBoth(t, std, fast, b.Bytes()) {
			t.Fatalf("%.300q does not read on both", b.Bytes())
		}
	}
}

// TestRecordsRoom: the paths serveFastRecords takes are those ServeMux
// matches to POST /v1/rooms/{room}/records and cleanPath passes.
func TestRecordsRoom(t *testing.T) {
	for _, c := range []struct {
		path, room string
		ok         bool
	}{
		{"/v1/rooms/abc/records", "abc", true},
		{"/v1/rooms/a.b/records", "a.b", true},
		{"/v1/rooms/.../records", "...", true},
		{"/v1/rooms/./records", "", false},
		{"/v1/rooms/../records", "", false},
		{"/v1/rooms//records", "", false},
		{"/v1/rooms/a/b/records", "", false},
		{"/v1/rooms/a/records/", "", false},
		{"/v1/rooms/records", "", false},
		{"/v1/room/a/records", "", false},
		{"/x/v1/rooms/a/records", "", false},
	} {
		room, ok := recordsRoom([]byte(c.path))
		if ok != c.ok || string(room) != c.room {
			t.Errorf("%q: %q, %t; want %q, %t", c.path, room, ok, c.room, c.ok)
		}
	}
}
