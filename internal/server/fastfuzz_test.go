package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/scenario"
)

// Fuzzing through the fasthttp engine (issue 26, "no input reaches a
// panic"): the report and steering routes served by FastHandler, on one
// RequestCtx reused and scribbled over after each answer (reusedConn), and
// the same input served by ServeHTTP on a server of its own; the answers
// must be proper ones and the same, and the state after the same.

// enginePair is a server behind each engine, made again every so many
// inputs so that what they hold stays small.
type enginePair struct {
	sc        *scenario.Scenario
	fast, std *routeEnv
	conn      *reusedConn
	uses      int
}

func newEnginePair(f *testing.F) *enginePair {
	sc, err := scenario.Build(scenario.Spec{Periods: 6})
	if err != nil {
		f.Fatal(err)
	}
	p := &enginePair{sc: sc}
	f.Cleanup(p.stop)
	return p
}

func (p *enginePair) stop() {
	for _, e := range []*routeEnv{p.fast, p.std} {
		if e != nil {
			e.srv.Close(context.Background())
		}
	}
	p.fast, p.std = nil, nil
}

// get returns the pair, made again after 500 inputs, each server with
// the scenario's records.
func (p *enginePair) get(t *testing.T) *enginePair {
	if p.fast != nil && p.uses < 500 {
		p.uses++
		return p
	}
	p.stop()
	p.uses = 1
	p.fast, p.std = newRouteServer(t, p.sc, ""), newRouteServer(t, p.sc, "")
	p.conn = newReusedConn(p.fast.srv.FastHandler())
	post := wire("POST", "/v1/rooms/"+p.sc.Room.ID().String()+"/records", bytes.Join(p.sc.Records, nil))
	for _, a := range []fastAnswer{must(p.conn.doScribbled(post)), must(stdDo(p.std.srv, post))} {
		if a.status != http.StatusOK {
			t.Fatalf("posting the records: %d %s", a.status, a.body)
		}
	}
	return p
}

func must(a fastAnswer, ok bool) fastAnswer {
	if !ok {
		panic("a request of the test's own does not read")
	}
	return a
}

// readsOnBoth reports whether both net/http and fasthttp read raw as one
// request: only such an input is served, so that both servers see the same
// requests.
func readsOnBoth(raw []byte) bool {
	br := bufio.NewReader(bytes.NewReader(raw))
	r, err := http.ReadRequest(br)
	if err != nil || br.Buffered() > 0 {
		return false
	}
	r.Body.Close()
	var req fasthttp.Request
	fr := bufio.NewReaderSize(bytes.NewReader(raw), 64<<10)
	return req.Read(fr) == nil && fr.Buffered() == 0
}

// serve serves raw behind both engines and returns the two answers.
func (p *enginePair) serve(raw []byte) (fast, std fastAnswer) {
	return must(p.conn.doScribbled(raw)), must(stdDo(p.std.srv, raw))
}

// qoeState is what both servers' QoE hold: the pool's and the room's
// cells and what each ignored, after the rule's evaluation at the servers'
// instant (which must not panic).
func (p *enginePair) qoeState(e *routeEnv) string {
	now := time.UnixMicro(int64(e.clock.Load()))
	pw, rw := e.srv.poolNamed("").Watch(), e.srv.sortedHubs()[0].QoE()
	pw.Evaluate(e.srv.log, now)
	rw.Evaluate(e.srv.log, now)
	return fmt.Sprintf("pool %v %v\nroom %v %v", cellsOf(pw), pw.Agg.Ignored(), cellsOf(rw), rw.Agg.Ignored())
}

// sameState fails t when the two servers' QoE differ.
func (p *enginePair) sameState(t *testing.T, raw []byte) {
	t.Helper()
	if f, s := p.qoeState(p.fast), p.qoeState(p.std); f != s {
		t.Fatalf("%.300q: the QoE after it:\nfasthttp\n%s\nnet/http\n%s", raw, f, s)
	}
}

// FuzzFastReports: whatever a CMCD v2 event report's body, media type and
// cohort header hold, posted to the pool's or the room's steering route,
// the server behind fasthttp answers it as the one behind net/http does,
// with a proper status (204, 200 with what it ignored, or a refusal 400,
// 413, 415, 429), neither panics, and their QoE holds the same cells and
// counts after.
func FuzzFastReports(f *testing.F) {
	for _, s := range []struct {
		room       bool
		ct, cohort string
		body       []byte
	}{
		{false, "application/cmcd", "wxyz", []byte("sid=\"p1\",cdn=\"cdn-a\",e=ps,mtp=2000,bl=9000\nsid=\"p2\",cdn=cdn-b,mtp=9000\n")},
		{false, "application/cmcd; charset=utf-8", "fra", []byte("sid=\"p1\",cdn=\"cdn-a\",mtp=(1 2 3)\r\n")},
		{false, "application/cmcd", "", []byte("sid=\"p1\",cdn=\"cdn-a\",mtp=18446744073709551616\nmtp=-1\n\x00")},
		{true, "application/cmcd", "par", []byte("sid=\"r1\",cdn=\"a\",mtp=6000\nsid=\"r2\",cdn=\"c\",bl=100\n")},
		{false, "text/plain", "wxyz", []byte("x")},
		{true, "application/cmcd", "", nil},
	} {
		f.Add(s.room, s.ct, s.cohort, s.body)
	}
	pair := newEnginePair(f)
	f.Fuzz(func(t *testing.T, room bool, ct, cohort string, body []byte) {
		target := pool.DefaultPath
		if room {
			target = "/v1/steer"
		}
		raw := wire("POST", target, body, "Content-Type", ct, "X-Region", cohort)
		if !readsOnBoth(raw) {
			return
		}
		p := pair.get(t)
		fa, sa := p.serve(raw)
		sameAnswer(t, raw, sa, fa)
		switch fa.status {
		case http.StatusNoContent:
		case http.StatusOK:
			var a ReportsAnswer
			if err := json.Unmarshal([]byte(fa.body), &a); err != nil || len(a.Ignored) == 0 {
				t.Fatalf("200 %q: %v", fa.body, err)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusTooManyRequests:
			var eb errorBody
			if json.Unmarshal([]byte(fa.body), &eb) != nil || eb.Error == "" {
				t.Fatalf("%d with body %q", fa.status, fa.body)
			}
		default:
			t.Fatalf("%.300q: %d %s", raw, fa.status, fa.body)
		}
		p.sameState(t, raw)
	})
}

// FuzzFastSteer: whatever a steering request's query, CMCD-Request header
// and cohort header hold, on the pool's route or the room's, the server
// behind fasthttp (serveFast) answers with the status and media type of
// the one behind net/http, 200 or 414 (or 400 bad_path), never 404, 410 or
// 429 (players.md); neither panics; and their QoE holds the same cells
// after.
func FuzzFastSteer(f *testing.F) {
	for _, s := range []struct {
		room                bool
		query, cmcd, cohort string
	}{
		{false, "_HLS_pathway=cdn-b&_HLS_throughput=9000000", "", "fra"},
		{false, `_DASH_pathway="cdn-a"&_DASH_throughput=700000`, "", "wxyz"},
		{false, "_HLS_pathway=cdn-a", "bl=30000,mtp=8000", "par"},
		{true, "_HLS_pathway=a&_HLS_throughput=5000000", "", ""},
		{true, "wai_session=000102030405060708090a0b0c0d0e0f&_HLS_pathway=b", "bl=(1 2 3);x, mtp=:AAA:", "x"},
		{true, "%zz&_HLS_pathway=%&_HLS_throughput=-1", "bl=-0", ""},
		{false, "session=00112233445566778899aabbccddeeff&_HLS_pathway=cdn-a&CMCD=mtp%3D1", "", "ams"},
	} {
		f.Add(s.room, s.query, s.cmcd, s.cohort)
	}
	pair := newEnginePair(f)
	f.Fuzz(func(t *testing.T, room bool, query, cmcd, cohort string) {
		target := pool.DefaultPath + "?" + query
		if room {
			target = "/v1/steer?" + query
		}
		var fields []string
		if cmcd != "" {
			fields = append(fields, "CMCD-Request", cmcd)
		}
		if cohort != "" {
			fields = append(fields, "X-Region", cohort)
		}
		raw := wire("GET", target, nil, fields...)
		if !readsOnBoth(raw) {
			return
		}
		p := pair.get(t)
		fa, sa := p.serve(raw)
		if fa.status != sa.status || fa.contentType != sa.contentType {
			t.Fatalf("%.300q: fasthttp %d %q %s, net/http %d %q %s", raw, fa.status, fa.contentType, fa.body, sa.status, sa.contentType, sa.body)
		}
		switch {
		case fa.status == http.StatusOK:
			if !strings.Contains(fa.body, "PATHWAY-PRIORITY") {
				t.Fatalf("%.300q: 200 %s", raw, fa.body)
			}
		case fa.status == http.StatusRequestURITooLong && len(target) > answer.MaxTarget:
		case fa.status == http.StatusBadRequest && strings.Contains(fa.body, `"bad_path"`):
		default:
			t.Fatalf("%.300q: %d %s", raw, fa.status, fa.body)
		}
		p.sameState(t, raw)
	})
}

// TestFastFuzzSeedsDiffer: the fuzz targets' comparison can fail: the
// same pair answers an input the two servers were not both given with
// other QoE (a check that sameState is not vacuous).
func TestFastFuzzSeedsDiffer(t *testing.T) {
	sc, err := scenario.Build(scenario.Spec{Periods: 6})
	if err != nil {
		t.Fatal(err)
	}
	p := &enginePair{sc: sc}
	defer p.stop()
	p.get(t)
	raw := wire("POST", pool.DefaultPath, []byte("sid=\"p1\",cdn=\"cdn-a\",mtp=2000\n"), "Content-Type", "application/cmcd", "X-Region", "wxyz")
	must(p.conn.doScribbled(raw))
	if f, s := p.qoeState(p.fast), p.qoeState(p.std); f == s || !strings.Contains(f, "cdn-a/wxyz 1 2000000") {
		t.Fatalf("a report given to one server only:\n%s\n%s", f, s)
	}
}
