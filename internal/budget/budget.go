package budget

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/limit"
)

// Config holds the budgets of the steering routes, per client address (an
// IPv4 address, an IPv6 /64) and per network (IPv4 /24, IPv6 /48). A Rate
// of no PerSecond is no budget; the zero Config limits nothing.
type Config struct {
	AddressDecisions, AddressSessions limit.Rate
	NetworkDecisions, NetworkSessions limit.Rate
	// TrustedProxies are the proxies whose Forwarded or X-Forwarded-For
	// says whom a request came from, and whose Forwarded or
	// X-Forwarded-Proto and -Host what it reached (internal/reach); none:
	// the peer.
	TrustedProxies limit.Proxies
}

func (c Config) off() bool {
	return c.AddressDecisions.Off() && c.AddressSessions.Off() && c.NetworkDecisions.Off() && c.NetworkSessions.Off()
}

// maxKeys bounds each table of buckets: about 80 bytes a key, so 10 MiB a
// table at most. A key past it is refused (table_full) until a sweep
// forgets the buckets that are full again.
const maxKeys = 1 << 17

// The reasons a steering request is over budget, as counted.
const (
	overAddressSessions  = "address_sessions"
	overNetworkSessions  = "network_sessions"
	overAddressDecisions = "address_decisions"
	overNetworkDecisions = "network_decisions"
	overTableFull        = "table_full"
)

// Budgets are the server's budgets: one set for every room and pool, since
// they share the store and the cores; a client that steers in two rooms
// spends from one budget.
type Budgets struct {
	addrDecisions, addrSessions *limit.Table[netip.Prefix]
	netDecisions, netSessions   *limit.Table[netip.Prefix]
}

// New makes the budgets of c; nil when c limits nothing.
func New(c Config) *Budgets {
	if c.off() {
		return nil
	}
	return &Budgets{
		addrDecisions: limit.NewTable[netip.Prefix](c.AddressDecisions, maxKeys),
		addrSessions:  limit.NewTable[netip.Prefix](c.AddressSessions, maxKeys),
		netDecisions:  limit.NewTable[netip.Prefix](c.NetworkDecisions, maxKeys),
		netSessions:   limit.NewTable[netip.Prefix](c.NetworkSessions, maxKeys),
	}
}

// Admit spends the budgets of a request from a at now: a decision of its
// address and of its network, and for a request without a session
// (newSession), a new session of each. It returns "" when every budget
// held what it spends, and otherwise the first that did not, having spent
// nothing.
func (l *Budgets) Admit(a netip.Addr, newSession bool, now time.Time) string {
	ak, nk := limit.Address(a), limit.Network(a)
	type spend struct {
		t   *limit.Table[netip.Prefix]
		k   netip.Prefix
		why string
	}
	spends := [4]spend{
		{l.addrSessions, ak, overAddressSessions}, {l.netSessions, nk, overNetworkSessions},
		{l.addrDecisions, ak, overAddressDecisions}, {l.netDecisions, nk, overNetworkDecisions},
	}
	first := 2
	if newSession {
		first = 0
	}
	for i := first; i < len(spends); i++ {
		sp := spends[i]
		if o := sp.t.Take(sp.k, 1, now); o != limit.Taken {
			for _, back := range spends[first:i] {
				back.t.Give(back.k, 1)
			}
			if o == limit.Full {
				return overTableFull
			}
			return sp.why
		}
	}
	return ""
}

// Sweep forgets the buckets that are full again.
func (l *Budgets) Sweep(now time.Time) {
	for _, t := range []*limit.Table[netip.Prefix]{l.addrDecisions, l.addrSessions, l.netDecisions, l.netSessions} {
		t.Sweep(now)
	}
}

// WriteKeys writes how many keys each budget's table holds.
func (l *Budgets) WriteKeys(b *bytes.Buffer) {
	b.WriteString("# HELP waisteer_steer_budget_keys Client addresses and networks whose budgets the server holds (those that spent lately), by budget.\n# TYPE waisteer_steer_budget_keys gauge\n")
	for _, t := range []struct {
		name string
		t    *limit.Table[netip.Prefix]
	}{{overAddressDecisions, l.addrDecisions}, {overAddressSessions, l.addrSessions}, {overNetworkDecisions, l.netDecisions}, {overNetworkSessions, l.netSessions}} {
		fmt.Fprintf(b, "waisteer_steer_budget_keys{budget=%q} %d\n", t.name, t.t.Len())
	}
}

// Refuse answers 503 over_budget with Retry-After retry seconds, as
// api.WriteError writes it, from bytes encoded once: a flood is answered
// this many times a second. It is counted, not logged: a flood would write
// a line a request.
func Refuse(w http.ResponseWriter, retry uint32) {
	h := w.Header()
	h["Retry-After"] = []string{strconv.FormatUint(uint64(retry), 10)}
	h["Content-Type"] = headerJSON
	h["Content-Length"] = overBudgetLength
	h["X-Content-Type-Options"] = headerNoSniff
	w.WriteHeader(api.StatusOf(api.OverBudget))
	w.Write(overBudgetBody)
}

var (
	overBudgetBody = func() []byte {
		b, _ := json.Marshal(api.Errorf(api.OverBudget, "the server steers this client's address or network at its budget; ask again after Retry-After"))
		return append(b, '\n')
	}()
	overBudgetLength = []string{strconv.Itoa(len(overBudgetBody))}
	headerNoSniff    = []string{"nosniff"}
	headerJSON       = []string{"application/json"}
)
