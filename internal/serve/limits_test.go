package serve_test

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/limit"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/server"
)

// withLimits is a configuration with the station seed's pool and the
// given [limits] table.
func withLimits(t *testing.T, limits string) (*serve.Config, error) {
	t.Helper()
	doc := `[steering]
ttl_s = 300
[[steering.edges]]
pathway = "edge-1"
host = "edge-1.edges.example"
` + limits
	return serve.Parse(filepath.Join(t.TempDir(), "serve.toml"), []byte(doc), func(string) string { return "" })
}

// TestLimitsConfig (issue 26 item 5): the [limits] table's keys, each
// budget's default where left out, a rate of 0 for none, and the trusted
// proxies' networks.
func TestLimitsConfig(t *testing.T) {
	cfg, err := withLimits(t, "")
	if err != nil {
		t.Fatal(err)
	}
	def := server.SteerLimits{
		AddressDecisions: limit.Rate{PerSecond: 500, Burst: 5000}, AddressSessions: limit.Rate{PerSecond: 100, Burst: 5000},
		NetworkDecisions: limit.Rate{PerSecond: 2000, Burst: 20000}, NetworkSessions: limit.Rate{PerSecond: 400, Burst: 20000},
	}
	if !reflect.DeepEqual(cfg.Server.Limits, def) || !reflect.DeepEqual(serve.DefaultBudgets(), def) {
		t.Fatalf("no [limits]: %+v, want the defaults %+v", cfg.Server.Limits, def)
	}
	cfg, err = withLimits(t, `[limits]
address_decisions_per_s = 2.5
address_decisions_burst = 10
address_sessions_per_s = 0
network_sessions_burst = 7
trusted_proxies = ["10.0.0.0/8", "2001:db8:1::/48", "192.0.2.7"]
`)
	if err != nil {
		t.Fatal(err)
	}
	want := def
	want.AddressDecisions = limit.Rate{PerSecond: 2.5, Burst: 10}
	want.AddressSessions = limit.Rate{PerSecond: 0, Burst: 5000}
	want.NetworkSessions.Burst = 7
	want.TrustedProxies = limit.Proxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:1::/48"), netip.MustParsePrefix("192.0.2.7/32")}
	if !reflect.DeepEqual(cfg.Server.Limits, want) {
		t.Fatalf("read %+v, want %+v", cfg.Server.Limits, want)
	}
	if !cfg.Server.Limits.AddressSessions.Off() {
		t.Fatal("a rate of 0 is no budget")
	}
}

// TestLimitsConfigErrors: each mistake is placed at its file, line and key.
func TestLimitsConfigErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"[limits]\naddress_decisions_per_s = -1\n", "serve.toml:7: limits.address_decisions_per_s: -1 is not 0 (no budget) to 1e+09 a second"},
		{"[limits]\nnetwork_decisions_burst = 0.5\n", "serve.toml:7: limits.network_decisions_burst: 0.5 is not 1 to 1e+09 requests"},
		{"[limits]\naddress_sessions_per_s = 0\naddress_sessions_burst = 10\n", "serve.toml:8: limits.address_sessions_burst: is a burst of a budget that is off"},
		{"[limits]\ntrusted_proxies = [\"10.0.0.0/8\", \"proxy.example\"]\n", "serve.toml:7: limits.trusted_proxies[1]: \"proxy.example\" is not a network"},
		{"[limits]\ntrusted_proxies = [\"10.1.2.3/8\"]\n", "serve.toml:7: limits.trusted_proxies[0]: \"10.1.2.3/8\" has bits set past its /8: write \"10.0.0.0/8\""},
		{"[limits]\ndecisions_per_s = 5\n", "serve.toml:7: limits.decisions_per_s: unknown key"},
		{"[limits]\naddress_decisions_per_s = \"fast\"\n", "serve.toml:7"},
	} {
		_, err := withLimits(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.doc, err, c.want)
		}
	}
}
