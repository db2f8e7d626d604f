package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// fuzzEnv is a server for a fuzz target over a fresh store, made again
// every so many inputs so that the store and the table of loads stay small.
type fuzzEnv struct {
	sc   *scenario.Scenario
	post bool
	mem  *store.Memory
	srv  *Server
	uses int
}

func newFuzzEnv(f testing.TB, post bool) *fuzzEnv {
	sc, err := scenario.Build(scenario.Spec{Periods: 6})
	if err != nil {
		f.Fatal(err)
	}
	fe := &fuzzEnv{sc: sc, post: post}
	f.Cleanup(fe.stop)
	return fe
}

func (fe *fuzzEnv) stop() {
	if fe.srv != nil {
		fe.srv.Close(context.Background())
		fe.srv = nil
	}
}

func (fe *fuzzEnv) room() string { return fe.sc.Room.ID().String() }

// get returns the server, made again after 2000 inputs.
func (fe *fuzzEnv) get(t *testing.T) *Server {
	if fe.srv != nil && fe.uses < 2000 {
		fe.uses++
		return fe.srv
	}
	fe.stop()
	fe.mem, fe.uses = store.NewMemory(), 1
	clock := newClock(t0)
	srv, err := New(context.Background(), Config{
		Rooms: []roomsteer.Config{{Descriptor: fe.sc.Room.DescriptorBytes, KeyLogHead: fe.sc.Room.HeadBytes,
			Policy: fe.sc.PolicyBytes, SteeringKey: fe.sc.SteerKey}},
		Pools:         []pool.Config{seedPool(nil, nil)}, // the station seed's, unchecked
		OperatorToken: testToken,
		Clock:         clock.Load,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, fe.mem, store.NewLoads())
	if err != nil {
		t.Fatal(err)
	}
	fe.srv = srv
	if fe.post {
		r := httptest.NewRequest("POST", "/v1/rooms/"+fe.room()+"/records", bytes.NewReader(bytes.Join(fe.sc.Records, nil)))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("posting the records: %d %s", w.Code, w.Body)
		}
	}
	return srv
}

// FuzzSteerRequest: whatever a steering request's query and CMCD-Request
// header hold, the server answers 200 (or 414 for a target over its
// limit), never 404, 410 or 429 (players.md); the manifest is the bytes
// §8.1 writes from the decision stored for it, which rebuilds from the
// store to its digest (§8.4); and the decision states the report §4 reads.
func FuzzSteerRequest(f *testing.F) {
	for _, s := range []struct{ q, h string }{
		{"", ""},
		{"_HLS_pathway=a&_HLS_throughput=5000000", ""},
		{`_DASH_pathway="c,a"&_DASH_throughput=700000,9000000`, ""},
		{"_HLS_pathway=c&CMCD=bl%3D1500%2Cmtp%3D20000", ""},
		{"_HLS_pathway=a", "bl=30000,mtp=8000"},
		{"wai_session=000102030405060708090a0b0c0d0e0f&_HLS_pathway=b", "bl=(1 2 3);x, mtp=:AAA:"},
		{"%zz&_HLS_pathway=%&_HLS_throughput=-1", "bl=-0"},
	} {
		f.Add(s.q, s.h)
	}
	fe := newFuzzEnv(f, true)
	f.Fuzz(func(t *testing.T, query, cmcd string) {
		srv := fe.get(t)
		target := "/v1/steer?" + query
		r := &http.Request{
			Method: "GET", URL: &url.URL{Path: "/v1/steer", RawQuery: query}, RequestURI: target,
			Header: http.Header{}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		}
		r = r.WithContext(context.Background())
		if cmcd != "" {
			r.Header.Set("CMCD-Request", cmcd)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if len(target) > answer.MaxTarget {
			if w.Code != http.StatusRequestURITooLong {
				t.Fatalf("a target of %d bytes: %d", len(target), w.Code)
			}
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		var m manifest
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatalf("manifest %s: %v", w.Body, err)
		}
		u, err := url.Parse(m.Decision)
		if err != nil {
			t.Fatal(err)
		}
		digest, aerr := web.Digest(u.Path[len("/v1/decisions/"):])
		if aerr != nil {
			t.Fatal(aerr)
		}
		raw, aerr := srv.audit.DecisionBytes(context.Background(), digest)
		if aerr != nil {
			t.Fatal(aerr)
		}
		d, err := decision.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := decision.Manifest(fe.sc.Policy, d, digest); !bytes.Equal(got, w.Body.Bytes()) {
			t.Fatalf("served %s, the stored decision writes %s", w.Body, got)
		}
		protocol, rep := report.Read(target, r.Header, fe.sc.Policy.IDs())
		if d.Protocol != protocol || d.Report != rep {
			t.Fatalf("decision states %d %+v, §4 reads %d %+v", d.Protocol, d.Report, protocol, rep)
		}
		if s, ok := report.SessionOf(target); ok && s != d.Session {
			t.Fatalf("session %s, the query's %s", d.Session, s)
		}
	})
}

// FuzzRecordsPost: whatever a hop posts, each record is answered; those
// answered accepted or duplicate are in the store with exactly the bytes
// posted, and those refused are not (issue 5 item 4).
func FuzzRecordsPost(f *testing.F) {
	fe := newFuzzEnv(f, false)
	sc := fe.sc
	f.Add(sc.Records[0])
	f.Add(bytes.Join(sc.Records[:3], nil))
	f.Add(bytes.Join([][]byte{sc.Records[0], sc.Records[0], sc.Records[1][:90]}, nil))
	forged := bytes.Clone(sc.Records[2])
	forged[100] ^= 0x40
	f.Add(append(forged, sc.Records[4]...))
	f.Add([]byte("WMH1\x02"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		srv := fe.get(t)
		r := httptest.NewRequest("POST", "/v1/rooms/"+fe.room()+"/records", bytes.NewReader(body))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if len(body) == 0 {
			if w.Code != http.StatusBadRequest {
				t.Fatalf("empty body: %d", w.Code)
			}
			return
		}
		if w.Code != http.StatusOK && w.Code != http.StatusUnprocessableEntity {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		var a api.RecordsAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		raws, splitErr := evidence.SplitRecords(body)
		want := len(raws)
		if splitErr != nil {
			want++
		}
		if len(a.Results) != want {
			t.Fatalf("%d results for %d records", len(a.Results), want)
		}
		refused := false
		for i, res := range a.Results {
			if res.Index != i {
				t.Fatalf("result %d has index %d", i, res.Index)
			}
			if i == len(raws) { // the bytes after the last whole record
				if res.Refused == "" {
					t.Fatalf("a tail that is no record accepted: %+v", res)
				}
				refused = true
				continue
			}
			got, err := fe.mem.Record(context.Background(), evidence.NamedDigest(raws[i]))
			switch res.Outcome {
			case "accepted", "duplicate":
				if err != nil || !bytes.Equal(got, raws[i]) || res.Digest != evidence.NamedDigest(raws[i]).String() {
					t.Fatalf("record %d answered %s is not stored as posted: %v", i, res.Outcome, err)
				}
			default:
				refused = true
				if res.Refused == "" {
					t.Fatalf("record %d: neither accepted nor refused: %+v", i, res)
				}
				if err == nil && bytes.Equal(got, raws[i]) {
					t.Fatalf("refused record %d is stored", i)
				}
			}
		}
		if refused != (w.Code == http.StatusUnprocessableEntity) {
			t.Fatalf("status %d with refused %v", w.Code, refused)
		}
	})
}

// FuzzAnyRequest: any method, path, query, body and header on any route is
// answered without a panic and without a 5xx; a refusal is JSON naming its
// reason; and a steering route answers 200, 405 or 414, never 404, 410 or
// 429 (players.md).
func FuzzAnyRequest(f *testing.F) {
	fe := newFuzzEnv(f, true)
	room := fe.room()
	policyDigest := fe.sc.Policy.Digest().String()
	for _, s := range []struct {
		method      uint8
		path, query string
		body        []byte
		auth        bool
	}{
		{0, "/v1/steer", "_HLS_pathway=a", nil, false},
		{0, "/v1/policies/" + policyDigest, "", nil, false},
		{0, "/v1/rooms/" + room + "/descriptor", "", nil, false},
		{0, "/v1/rooms/" + room + "/status", "", nil, true},
		{1, "/v1/rooms/" + room + "/records", "", fe.sc.Records[0], false},
		{2, "/v1/rooms/" + room + "/policy", "", fe.sc.PolicyBytes, true},
		{2, "/v1/rooms/" + room + "/keylog", "", fe.sc.Room.HeadBytes, true},
		{0, "/v1/decisions/" + policyDigest, "", nil, false},
		{3, "/v1/steer", "", nil, false},
		{0, "/metrics", "", nil, false},
		{0, "/v1/rooms//records", "x=%zz", []byte("WMH1"), true},
		{0, "/api/v1/steering", "session=00112233445566778899aabbccddeeff&_HLS_pathway=edge-1", nil, false},
		{0, "/api/v1/steering/edges", "", nil, true},
		{1, "/api/v1/steering/edges/edge-1/drain", "", nil, true},
		{5, "/api/v1/steering/edges/edge-1/drain", "", nil, true},
		{2, "/api/v1/steering/edges/edge-2/weight", "", []byte(`{"weight": 3}`), true},
		{2, "/api/v1/steering/edges/edge-2/weight", "", []byte(`{"weight": 1e99}`), true},
		// The log's routes (issue 16).
		{0, "/v1/rooms/" + room + "/log/checkpoint", "", nil, false},
		{0, "/v1/rooms/" + room + "/log/tile/0/000.p/1", "", nil, false},
		{0, "/v1/rooms/" + room + "/log/tile/entries/000.p/1", "", nil, false},
		{0, "/v1/rooms/" + room + "/log/tile/1/x001/000.p/9", "", nil, false},
		{0, "/v1/rooms/" + room + "/log/inclusion/" + policyDigest, "size=1", nil, false},
		{0, "/v1/rooms/" + room + "/log/consistency", "from=1&size=1", nil, false},
		{0, "/v1/rooms/" + room + "/log/epochs", "", nil, false},
		{0, "/v1/rooms/" + room + "/keylog/1", "", nil, false},
		// The dashboard (issue 18).
		{0, "/dashboard", "", nil, false},
		{0, "/dashboard/app.js", "", nil, false},
		{0, "/v1/dashboard", "", nil, true},
		{1, "/v1/dashboard/inspect", "", []byte(`{"input":"` + policyDigest + `"}`), true},
		{1, "/v1/dashboard/inspect", "", []byte(`{"input":"V1NEMQ=="}`), true},
	} {
		f.Add(s.method, s.path, s.query, s.body, s.auth)
	}
	methods := []string{"GET", "POST", "PUT", "OPTIONS", "HEAD", "DELETE", "PATCH"}
	f.Fuzz(func(t *testing.T, method uint8, p, query string, body []byte, auth bool) {
		srv := fe.get(t)
		u := &url.URL{Path: p, RawQuery: query}
		r := &http.Request{
			Method: methods[int(method)%len(methods)], URL: u, RequestURI: u.RequestURI(),
			Header: http.Header{}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		}
		r = r.WithContext(context.Background())
		if auth {
			r.Header.Set("Authorization", "Bearer "+testToken)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		// 503 operator_disabled is the station seed's answer on an
		// operator route while no token is set: not the server failing.
		if w.Code >= 500 && !(w.Code == http.StatusServiceUnavailable && strings.Contains(w.Body.String(), `"operator_disabled"`)) {
			t.Fatalf("%s %s: %d %s", r.Method, r.RequestURI, w.Code, w.Body)
		}
		_, steering, _ := srv.routes.Load().steerHub(u.EscapedPath(), query)
		if steering && w.Code != http.StatusOK && w.Code != http.StatusNoContent &&
			w.Code != http.StatusMethodNotAllowed && w.Code != http.StatusRequestURITooLong {
			t.Fatalf("steering %s %s: %d", r.Method, r.RequestURI, w.Code)
		}
		if w.Code >= 400 && r.Method != "HEAD" {
			var eb errorBody
			var ra api.RecordsAnswer // a hop's POST answers each record
			if json.Unmarshal(w.Body.Bytes(), &eb) != nil || eb.Error == "" &&
				(w.Code != http.StatusUnprocessableEntity || json.Unmarshal(w.Body.Bytes(), &ra) != nil || len(ra.Results) == 0) {
				t.Fatalf("%s %s: %d with body %q", r.Method, r.RequestURI, w.Code, w.Body)
			}
		}
	})
}

// FuzzReports: whatever a CMCD event report's body and headers hold (issue
// 17 item 3), the server answers 204, 200 with what it ignored and why,
// or a refusal with its code (400, 413, 415, 429), never 5xx; every line
// is either accepted or counted; and evaluating the aggregator after it
// never fails.
func FuzzReports(f *testing.F) {
	for _, s := range []struct {
		ct, cohort string
		body       []byte
	}{
		{"application/cmcd", "fra", []byte("sid=\"p1\",cdn=\"cdn-a\",e=ps,mtp=9000,bl=12000\nsid=\"p2\",cdn=cdn-b,mtp=9000\n")},
		{"application/cmcd; charset=utf-8", "", []byte("sid=\"p1\",cdn=\"cdn-a\",mtp=(1 2 3)\r\n")},
		{"application/cmcd", "par", []byte("sid=\"p1\",cdn=\"cdn-a\",mtp=18446744073709551616\nmtp=-1\n\x00")},
		{"text/plain", "", []byte("x")},
		{"application/cmcd", "", nil},
	} {
		f.Add(s.ct, s.cohort, s.body)
	}
	var srv *Server
	uses := 0
	f.Cleanup(func() {
		if srv != nil {
			srv.Close(context.Background())
		}
	})
	f.Fuzz(func(t *testing.T, ct, cohort string, body []byte) {
		if srv == nil || uses > 2000 {
			if srv != nil {
				srv.Close(context.Background())
			}
			var err error
			srv, err = New(context.Background(), Config{Pools: []pool.Config{qoePool()}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store.NewMemory(), store.NewLoads())
			if err != nil {
				t.Fatal(err)
			}
			uses = 0
		}
		uses++
		r := httptest.NewRequest("POST", pool.DefaultPath, bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		r.Header.Set("X-Region", cohort)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusNoContent:
		case http.StatusOK:
			var a ReportsAnswer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || len(a.Ignored) == 0 {
				t.Fatalf("200 %q: %v", w.Body, err)
			}
			evs, bad := report.ReadCMCDEvents(body)
			n := a.Accepted
			for _, c := range a.Ignored {
				n += c
			}
			if n != len(evs)+len(bad) {
				t.Fatalf("%d lines accepted or ignored, %d read: %s", n, len(evs)+len(bad), w.Body)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusTooManyRequests:
			var eb errorBody
			if json.Unmarshal(w.Body.Bytes(), &eb) != nil || eb.Error == "" {
				t.Fatalf("%d with body %q", w.Code, w.Body)
			}
		default:
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		srv.poolNamed("").Watch().Evaluate(srv.log, time.Now())
	})
}
