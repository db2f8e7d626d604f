package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/limit"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/reach"
	"github.com/waisteer/waisteer/store"
)

// FuzzFastForwarded (issue 28, "Trusted proxies"): whatever a trusted
// proxy's Forwarded, X-Forwarded-For, -Proto and -Host hold, a pool's
// steering request behind fasthttp (serveFast, which copies each header
// reach reads off a RequestCtx that is then scribbled over) is answered
// as the one behind net/http: 200, the same RELOAD-URI base, which is
// http or https on a host[:port] (the request's own, steer.example, when
// nothing reads); neither panics.
func FuzzFastForwarded(f *testing.F) {
	for _, s := range [][4]string{
		{`for=198.51.100.7;proto=https;host="viewers.example:8443"`, "", "", ""},
		{`for="[2001:db8::7]:4711";proto=http, for=127.0.0.7`, "198.51.100.1", "https", "x.example"},
		{"", "198.51.100.1, 127.0.0.7", "https", "viewers.example"},
		{"", "junk", "gopher", "a b/c"},
		{`for=a;for=b`, "", "https", ""},
		{`host="a.example:99999"`, "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	trustAll := limit.Proxies{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	mk := func() *Server {
		srv, err := New(context.Background(), Config{Pools: []pool.Config{seedPool(nil, nil)}, Limits: SteerLimits{TrustedProxies: trustAll},
			Logger: slog.New(slog.DiscardHandler)}, store.NewMemory(), store.NewLoads())
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { srv.Close(context.Background()) })
		return srv
	}
	fast, std := mk(), mk()
	conn := newReusedConn(fast.FastHandler())
	base := func(a fastAnswer) string {
		var m struct {
			Reload string `json:"RELOAD-URI"`
		}
		if json.Unmarshal([]byte(a.body), &m) != nil {
			return "(no manifest)"
		}
		b, _, _ := strings.Cut(m.Reload, pool.DefaultPath+"?")
		return b
	}
	f.Fuzz(func(t *testing.T, fwd, xff, xfp, xfh string) {
		var fields []string
		for i, v := range []string{fwd, xff, xfp, xfh} {
			if v != "" {
				fields = append(fields, reach.Headers[i], v)
			}
		}
		raw := wire("GET", pool.DefaultPath, nil, fields...)
		if !readsOnBoth(raw) {
			return
		}
		fa, ok := conn.doScribbled(raw)
		sa, ok2 := stdDo(std, raw)
		if !ok || !ok2 {
			return
		}
		if fa.status != http.StatusOK || sa.status != http.StatusOK {
			t.Fatalf("%.300q: fasthttp %d %s, net/http %d %s", raw, fa.status, fa.body, sa.status, sa.body)
		}
		fb, sb := base(fa), base(sa)
		if fb != sb {
			t.Fatalf("%.300q: RELOAD-URI on %q behind fasthttp, %q behind net/http", raw, fb, sb)
		}
		scheme, host, ok := strings.Cut(fb, "://")
		if !ok || (scheme != "http" && scheme != "https") || !reach.Authority(host) {
			t.Fatalf("%.300q: RELOAD-URI on %q", raw, fb)
		}
	})
}
