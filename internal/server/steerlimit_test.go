package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/limit"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/poolsteer"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/store"
)

// fromAddress is a client whose connections leave from the loopback
// address ip (127.0.0.0/8: every one of them reaches the server on
// 127.0.0.1), so that a test can be many clients.
func fromAddress(t testing.TB, ip string) *http.Client {
	t.Helper()
	local := &net.TCPAddr{IP: net.ParseIP(ip)}
	if local.IP == nil {
		t.Fatalf("%q is no address", ip)
	}
	d := &net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// getWith sends a GET of target (a path and query, or an absolute URI) with
// client c to the server at base.
func getWith(t testing.TB, c *http.Client, base, target string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	if !strings.HasPrefix(target, "http") {
		target = base + target
	}
	req, err := http.NewRequest("GET", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// tiny is a rate that adds no token during a test: its budget is its
// burst.
func tiny(burst float64) limit.Rate { return limit.Rate{PerSecond: 1e-6, Burst: burst} }

// TestSteerBudgets (issue 26 item 5, "Limits on the steering route"): a
// room's steering route spends a budget of decisions and of new sessions
// per client address and per /24. Over a budget, a request whose session
// had its manifest less than min_ttl_s ago gets that manifest again, byte
// for byte, with nothing signed or stored; anything else gets 503
// over_budget with Retry-After min_ttl_s; never 404, 410 or 429
// (players.md). Each is counted by reason and answer in the status and in
// /metrics. The budgets here are bursts that do not refill (tiny), so the
// counts are by hand: A and B share 127.0.1.0/24, C is in 127.0.2.0/24.
func TestSteerBudgets(t *testing.T) {
	e := newEnv(t, holdSpec(), true)
	e.stop()
	e.start(func(c *Config) {
		c.Limits = SteerLimits{
			AddressSessions: tiny(3), AddressDecisions: tiny(6),
			NetworkSessions: tiny(100), NetworkDecisions: tiny(10),
		}
	})
	minTTL := e.sc.Policy.MinTTLs
	a, b, c := fromAddress(t, "127.0.1.1"), fromAddress(t, "127.0.1.2"), fromAddress(t, "127.0.2.1")
	stored := func() int64 { return e.st.decisions.Load() }
	steerOK := func(cl *http.Client, target, what string) *manifest {
		t.Helper()
		resp, body := getWith(t, cl, e.ts.URL, target, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d, want 200: %s", what, resp.StatusCode, body)
		}
		checkSteerHeaders(t, resp)
		m := &manifest{raw: body}
		if err := json.Unmarshal(body, m); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return m
	}
	refused := func(cl *http.Client, target, what string) {
		t.Helper()
		resp, body := getWith(t, cl, e.ts.URL, target, nil)
		wantError(t, what, resp, body, http.StatusServiceUnavailable, "over_budget")
		if got := resp.Header.Get("Retry-After"); got != strconv.Itoa(int(minTTL)) {
			t.Errorf("%s: Retry-After %q, want min_ttl_s %d", what, got, minTTL)
		}
	}
	server := path(t, e.sc.Policy.ServerURI)

	// A: three anonymous requests mint three sessions; the fourth is over
	// the address's sessions and has no manifest to fall back on.
	var first *manifest
	for i := range 3 {
		m := steerOK(a, server, "A's anonymous request "+strconv.Itoa(i))
		if i == 0 {
			first = m
		}
	}
	refused(a, server, "A's 4th anonymous request")
	// The first session asks again at once: three more decisions (6 in
	// A's budget), each signed and stored anew.
	reload := path(t, first.Reload)
	var last *manifest
	for i := range 3 {
		last = steerOK(a, reload, "A's session, decision "+strconv.Itoa(4+i))
	}
	if last.Decision == first.Decision {
		t.Fatal("a request within the budget is decided anew")
	}
	if n := stored(); n != 6 {
		t.Fatalf("%d decisions stored, want 6", n)
	}
	// Over A's decisions: the session's latest manifest again, as it was.
	resp, body := getWith(t, a, e.ts.URL, reload, nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, last.raw) {
		t.Fatalf("over budget, a session's request within min_ttl_s: %d %s, want its latest manifest %s", resp.StatusCode, body, last.raw)
	}
	checkSteerHeaders(t, resp)
	// Another session of A, which has had no manifest: 503.
	refused(a, reload[:strings.Index(reload, "wai_session=")]+"wai_session="+strings.Repeat("ab", 16), "A's unknown session")

	// B, in A's /24: its own address's budget, and what is left of the
	// network's 10 decisions: 4.
	mb := steerOK(b, server, "B's anonymous request")
	rb := path(t, mb.Reload)
	for i := range 3 {
		mb = steerOK(b, rb, "B's session, decision "+strconv.Itoa(2+i))
	}
	resp, body = getWith(t, b, e.ts.URL, rb, nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, mb.raw) {
		t.Fatalf("over the network's budget: %d %s, want B's latest manifest", resp.StatusCode, body)
	}
	// C, in another /24, is not held back by A's or B's flood.
	steerOK(c, server, "C's anonymous request")
	if n := stored(); n != 11 {
		t.Fatalf("%d decisions stored, want 6 + 4 + 1", n)
	}

	// Just over min_ttl_s later (no token added: tiny), A's session asks
	// later than its manifest's min_ttl_s: 503, which every player retries.
	e.clock.Add(uint64(minTTL)*1_000_000 + 1000)
	refused(a, reload, "A's session, min_ttl_s later, over budget")

	st := e.status()
	if st.Limited == nil {
		t.Fatal("the status counts no request over budget")
	}
	want := LimitedView{
		Replayed: map[string]uint64{"address_decisions": 1, "network_decisions": 1},
		Refused:  map[string]uint64{"address_sessions": 1, "address_decisions": 2},
	}
	if !sameCounts(st.Limited.Replayed, want.Replayed) || !sameCounts(st.Limited.Refused, want.Refused) {
		t.Errorf("status limited %+v, want %+v", *st.Limited, want)
	}
	if n := stored(); n != 11 {
		t.Errorf("%d decisions stored, want 11: a request over budget stores nothing", n)
	}
	_, metrics := e.get("/metrics")
	for _, line := range []string{
		`waisteer_steer_over_budget_total{room="` + e.room() + `",reason="address_decisions",answer="replayed"} 1`,
		`waisteer_steer_over_budget_total{room="` + e.room() + `",reason="address_decisions",answer="refused"} 2`,
		`waisteer_steer_over_budget_total{room="` + e.room() + `",reason="address_sessions",answer="refused"} 1`,
		`waisteer_steer_over_budget_total{room="` + e.room() + `",reason="network_decisions",answer="replayed"} 1`,
	} {
		if !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("/metrics has no line %s", line)
		}
	}
}

func sameCounts(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestSteerBudgetsOff: the zero SteerLimits limit nothing, and keep no
// manifest (the server's configuration for tests and benchmarks).
func TestSteerBudgetsOff(t *testing.T) {
	e := newEnv(t, holdSpec(), true)
	server := path(t, e.sc.Policy.ServerURI)
	for i := range 50 {
		resp, body := e.get(server)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if e.srv.limits != nil || e.status().Limited != nil {
		t.Fatal("no budget configured, and yet budgets")
	}
	if e.srv.hubs[e.sc.Room.ID()].Replayable() != 0 {
		t.Fatal("a manifest kept with no budget")
	}
}

// TestPoolBudgets (issue 26 item 5, on a pool): a pool's request over
// budget with a session the pool minted is answered the manifest the pool
// orders for it, its session not counted; without one, 503 over_budget
// with Retry-After the pool's TTL.
func TestPoolBudgets(t *testing.T) {
	loads := store.NewLoads()
	logs := &syncBuffer{}
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{seedPool(nil, nil)}, OperatorToken: testToken,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Limits: SteerLimits{AddressSessions: tiny(2), AddressDecisions: tiny(4)},
	}, store.NewMemory(), loads)
	if err != nil {
		t.Fatal(err)
	}
	ts := serveTest(t, srv)
	t.Cleanup(func() { ts.Close(); srv.Close(context.Background()) })
	e := &poolEnv{t: t, srv: srv, ts: ts, loads: loads, logs: logs}
	cl := fromAddress(t, "127.0.3.1")
	get := func(target string) (*http.Response, []byte) {
		return getWith(t, cl, ts.URL, strings.TrimPrefix(target, ts.URL), nil)
	}
	var ms []*poolManifest
	for i := range 2 {
		resp, body := get(pool.DefaultPath)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("anonymous request %d: %d %s", i, resp.StatusCode, body)
		}
		m := &poolManifest{raw: body}
		if err := json.Unmarshal(body, m); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	resp, body := get(pool.DefaultPath)
	wantError(t, "a third anonymous request", resp, body, http.StatusServiceUnavailable, "over_budget")
	if got := resp.Header.Get("Retry-After"); got != "300" {
		t.Errorf("Retry-After %q, want the pool's TTL, 300", got)
	}
	// Two decisions left of 4; then the session's manifest, not counted.
	for range 2 {
		if resp, body := get(ms[0].Reload); resp.StatusCode != http.StatusOK {
			t.Fatalf("a session's request within budget: %d %s", resp.StatusCode, body)
		}
	}
	sessions := loads.Sessions(poolsteer.LoadsID(""))
	for range 3 {
		resp, body := get(ms[1].Reload)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, ms[1].raw) {
			t.Fatalf("over budget, a session's request: %d %s, want its manifest %s", resp.StatusCode, body, ms[1].raw)
		}
	}
	if n := loads.Sessions(poolsteer.LoadsID("")); n != sessions {
		t.Errorf("%d sessions counted, %d before: a request over budget counts none", n, sessions)
	}
	v := e.view()
	if v.Limited == nil || v.Limited.Refused["address_sessions"] != 1 || v.Limited.Replayed["address_decisions"] != 3 {
		t.Errorf("pool view limited %+v, want refused address_sessions 1, replayed address_decisions 3", v.Limited)
	}
}

// TestSteerBudgetsBehindProxy: with trusted_proxies, the client is the
// rightmost address of X-Forwarded-For that is not a trusted proxy's, on
// both engines (the fasthttp path copies the header); an untrusted peer's
// header is not read. Issue 28 ("the client address read this way is the
// one issue 19's limits count"): Forwarded's for= (RFC 7239 §5.2, a port
// dropped, §6) names the client too, and wins over X-Forwarded-For; a
// Forwarded that does not read (a parameter twice, §4) is ignored, the
// request then the proxy's own.
func TestSteerBudgetsBehindProxy(t *testing.T) {
	e := newEnv(t, holdSpec(), true)
	e.stop()
	e.start(func(c *Config) {
		c.Limits = SteerLimits{AddressSessions: tiny(1),
			TrustedProxies: limit.Proxies{netip.MustParsePrefix("127.0.4.0/24")}}
	})
	server := path(t, e.sc.Policy.ServerURI)
	proxy, other := fromAddress(t, "127.0.4.1"), fromAddress(t, "127.0.5.1")
	xff := func(v string) http.Header { return http.Header{"X-Forwarded-For": {v}} }
	steps := []struct {
		cl     *http.Client
		h      http.Header
		status int
		what   string
	}{
		{proxy, xff("198.51.100.1"), 200, "client 198.51.100.1 through the proxy"},
		{proxy, xff("198.51.100.2"), 200, "client 198.51.100.2 through the proxy"},
		{proxy, xff("203.0.113.9, 198.51.100.1"), 503, "198.51.100.1 again, whatever it wrote before"},
		{proxy, xff("198.51.100.2, 127.0.4.7"), 503, "198.51.100.2 again, through two proxies"},
		{other, xff("198.51.100.3"), 200, "an untrusted peer: itself"},
		{other, xff("198.51.100.4"), 503, "the untrusted peer again, whatever its header says"},
		{proxy, http.Header{"Forwarded": {`for=198.51.100.5;proto=https`}, "X-Forwarded-For": {"198.51.100.6"}}, 200, "Forwarded's client 198.51.100.5, over X-Forwarded-For's"},
		{proxy, xff("198.51.100.6"), 200, "198.51.100.6 was not counted: Forwarded won"},
		{proxy, http.Header{"Forwarded": {`for="198.51.100.5:4711"`}}, 503, "198.51.100.5 again, with a port"},
		{proxy, http.Header{"Forwarded": {`for=198.51.100.7, for=127.0.4.9`}}, 200, "198.51.100.7 through two proxies"},
		{proxy, http.Header{"Forwarded": {`for=198.51.100.8;for=198.51.100.9`}}, 200, "a Forwarded that does not read: the proxy's own request"},
		{proxy, http.Header{"Forwarded": {`for=198.51.100.10;for=198.51.100.11`}}, 503, "the proxy again"},
	}
	for _, s := range steps {
		resp, body := getWith(t, s.cl, e.ts.URL, server, s.h)
		if resp.StatusCode != s.status {
			t.Errorf("%s: %d, want %d: %s", s.what, resp.StatusCode, s.status, body)
		}
	}
}

// BenchmarkSteerBudgets is BenchmarkSteer's request with budgets: "on",
// budgets it never reaches (the cost of spending them and of keeping the
// manifest); "replayed", over budget with a fresh manifest; "refused",
// over budget without a session.
func BenchmarkSteerBudgets(b *testing.B) {
	huge := limit.Rate{PerSecond: 1e9, Burst: 1e9}
	for _, c := range []struct {
		name   string
		limits SteerLimits
		target string
		status int
	}{
		{"off", SteerLimits{}, "/v1/steer?wai_session=000102030405060708090a0b0c0d0e0f&_HLS_pathway=p01", 200},
		{"on", SteerLimits{AddressDecisions: huge, AddressSessions: huge, NetworkDecisions: huge, NetworkSessions: huge},
			"/v1/steer?wai_session=000102030405060708090a0b0c0d0e0f&_HLS_pathway=p01", 200},
		{"replayed", SteerLimits{AddressDecisions: tiny(1)}, "/v1/steer?wai_session=000102030405060708090a0b0c0d0e0f&_HLS_pathway=p01", 200},
		{"refused", SteerLimits{AddressSessions: tiny(1)}, "/v1/steer?_HLS_pathway=p01", 503},
	} {
		b.Run(c.name, func(b *testing.B) {
			sc, err := scenario.Build(benchSpec(3))
			if err != nil {
				b.Fatal(err)
			}
			srv, err := New(context.Background(), Config{
				Rooms: []roomsteer.Config{{Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes, Policy: sc.PolicyBytes, SteeringKey: sc.SteerKey}},
				Clock: newClock(t0).Load, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Limits: c.limits,
			}, store.NewMemory(), store.NewLoads())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { srv.Close(context.Background()) })
			req := httptest.NewRequest("GET", c.target, nil)
			srv.ServeHTTP(httptest.NewRecorder(), req) // the first: decided, and spends a tiny budget
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != c.status {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
