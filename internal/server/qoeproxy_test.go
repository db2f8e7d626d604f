package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/limit"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/store"
)

// TestQoEBehindTrustedProxy (issue 26 item 2): behind a proxy the server
// trusts (trusted_proxies), a QoE cell weighs each client the proxy names
// in X-Forwarded-For, in steering requests and in CMCD v2 event reports
// alike, as the steering budgets do; from a peer it does not trust, the
// header is not read and every report is the peer's, one household of at
// most qoe.PerClient sessions.
func TestQoEBehindTrustedProxy(t *testing.T) {
	for _, trusted := range []bool{true, false} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			noPanics(t)
			var proxies limit.Proxies
			if trusted {
				proxies = limit.Proxies{netip.MustParsePrefix("127.0.9.1/32")}
			}
			srv, err := New(context.Background(), Config{
				Pools: []pool.Config{qoePool()}, OperatorToken: testToken,
				Logger: slog.New(slog.DiscardHandler),
				Limits: SteerLimits{TrustedProxies: proxies},
			}, store.NewMemory(), store.NewLoads())
			if err != nil {
				t.Fatal(err)
			}
			ts := serveTest(t, srv)
			t.Cleanup(func() { ts.Close(); srv.Close(context.Background()) })
			src := newLoopbackSources(t, ts)
			const proxy = "127.0.9.1"
			// Six viewers of cdn-a in "fra" through the proxy, each its own
			// client: three by their steering requests, three by CMCD v2
			// lines (one sid each).
			for i := range 3 {
				h := http.Header{"X-Region": {"fra"}, "X-Forwarded-For": {fmt.Sprintf("198.51.100.%d", i+1)}}
				if resp, b := src.do(t, proxy, "GET", pool.DefaultPath+"?_HLS_pathway=cdn-a&_HLS_throughput=2000000", "", h); resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				h = http.Header{"X-Region": {"fra"}, "X-Forwarded-For": {fmt.Sprintf("203.0.113.%d", i+1)}, "Content-Type": {"application/cmcd"}}
				line := fmt.Sprintf("sid=\"v%d\",cdn=\"cdn-a\",e=ps,mtp=2000\n", i)
				if resp, b := src.do(t, proxy, "POST", pool.DefaultPath, line, h); resp.StatusCode != http.StatusNoContent {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
			}
			w := srv.poolNamed("").Watch()
			w.Evaluate(srv.log, time.Now())
			wantSessions, wantClients := 6, 6 // six clients, one session each
			if !trusted {
				wantSessions, wantClients = 4, 1 // the proxy's address: one household (qoe.PerClient)
			}
			found := false
			for _, f := range w.Agg.Figures() {
				if f.Pathway == "cdn-a" && f.Cohort == "fra" {
					found = true
					if f.Sessions != wantSessions || f.Clients != wantClients {
						t.Errorf("cdn-a/fra: %d sessions of %d clients, want %d of %d", f.Sessions, f.Clients, wantSessions, wantClients)
					}
				}
			}
			if !found {
				t.Errorf("no cell cdn-a/fra: %+v", w.Agg.Figures())
			}
		})
	}
}
