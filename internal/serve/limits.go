package serve

import (
	"math"
	"net/netip"
	"strconv"

	"github.com/waisteer/waisteer/internal/limit"
	"github.com/waisteer/waisteer/internal/server"
)

// DefaultBudgets are the steering routes' budgets (issue 26 item 5;
// server.SteerLimits) where the [limits] table leaves them out. They are set so that an honest
// audience never reaches them: players ask once a TTL (4 to 300 s as
// rooms and pools are configured; 10 s below) and mint a session once a
// playback.
//
//   - A client address (an IPv4 address, an IPv6 /64) may front a whole
//     audience: a carrier's NAT gives one address to many subscribers, a
//     company's egress to every viewer of its all-hands. 5 000 players
//     behind one address at a 10 s TTL ask 500 times a second, all at once
//     when they started together: 500 a second, a burst of 5 000.
//   - New sessions: 5 000 players pressing play within the same second
//     (a scheduled start), and then a turnover of 100 a second, the whole
//     audience replaced every 50 s, more churn than any audience has.
//   - A network (an IPv4 /24, an IPv6 /48) of a carrier's NAT holds
//     hundreds of addresses: 20 000 players at a 10 s TTL, 2 000 a second
//     with a burst of 20 000; 400 new sessions a second, a burst of
//     20 000.
//
// One address's flood of requests without a session is then held to 100
// decisions a second once its burst is spent, about 28 kB a second of
// bbolt store at 280 bytes a decision, against 2.8 MB a second unlimited
// (issue 26 item 5).
func DefaultBudgets() server.SteerLimits {
	return server.SteerLimits{
		AddressDecisions: limit.Rate{PerSecond: 500, Burst: 5000},
		AddressSessions:  limit.Rate{PerSecond: 100, Burst: 5000},
		NetworkDecisions: limit.Rate{PerSecond: 2000, Burst: 20000},
		NetworkSessions:  limit.Rate{PerSecond: 400, Burst: 20000},
	}
}

// limitsFile is the [limits] table.
type limitsFile struct {
	AddressDecisionsPerS  *float64 `toml:"address_decisions_per_s"`
	AddressDecisionsBurst *float64 `toml:"address_decisions_burst"`
	AddressSessionsPerS   *float64 `toml:"address_sessions_per_s"`
	AddressSessionsBurst  *float64 `toml:"address_sessions_burst"`
	NetworkDecisionsPerS  *float64 `toml:"network_decisions_per_s"`
	NetworkDecisionsBurst *float64 `toml:"network_decisions_burst"`
	NetworkSessionsPerS   *float64 `toml:"network_sessions_per_s"`
	NetworkSessionsBurst  *float64 `toml:"network_sessions_burst"`
	// TrustedProxies (CIDRs or addresses) are the proxies whose
	// Forwarded, X-Forwarded-For, -Proto and -Host are read: for the
	// client these budgets count, and for the scheme and host every URL
	// the server writes is built on (internal/reach).
	TrustedProxies []string `toml:"trusted_proxies"`
}

// maxBudget bounds a rate or a burst: more than any server answers.
const maxBudget = 1e9

// limits reads the [limits] table: each budget's rate and burst, the
// default's where left out; a rate of 0 turns that budget off.
func (r *serveReader) limits(f *limitsFile) server.SteerLimits {
	out := DefaultBudgets()
	if f == nil {
		return out
	}
	rate := func(name string, perS, burst *float64, into *limit.Rate) {
		k := "limits." + name
		if perS != nil {
			switch v := *perS; {
			case math.IsNaN(v) || v < 0 || v > maxBudget:
				r.Errorf(k+"_per_s", "%v is not 0 (no budget) to %v a second", v, maxBudget)
			default:
				into.PerSecond = v
			}
		}
		if burst != nil {
			switch v := *burst; {
			case into.Off():
				r.Errorf(k+"_burst", "is a burst of a budget that is off (%s_per_s = 0): leave it out", name)
			case math.IsNaN(v) || v < 1 || v > maxBudget:
				r.Errorf(k+"_burst", "%v is not 1 to %v requests", v, maxBudget)
			default:
				into.Burst = v
			}
		}
	}
	rate("address_decisions", f.AddressDecisionsPerS, f.AddressDecisionsBurst, &out.AddressDecisions)
	rate("address_sessions", f.AddressSessionsPerS, f.AddressSessionsBurst, &out.AddressSessions)
	rate("network_decisions", f.NetworkDecisionsPerS, f.NetworkDecisionsBurst, &out.NetworkDecisions)
	rate("network_sessions", f.NetworkSessionsPerS, f.NetworkSessionsBurst, &out.NetworkSessions)
	for i, s := range f.TrustedProxies {
		k := "limits.trusted_proxies[" + strconv.Itoa(i) + "]"
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil && a.Zone() == "" {
				p = netip.PrefixFrom(a, a.BitLen())
			} else {
				r.Errorf(k, "%q is not a network such as \"10.0.0.0/8\" or \"2001:db8::/32\", nor an address", s)
				continue
			}
		}
		if p != p.Masked() {
			r.Errorf(k, "%q has bits set past its /%d: write %q", s, p.Bits(), p.Masked().String())
			continue
		}
		out.TrustedProxies = append(out.TrustedProxies, p)
	}
	return out
}
