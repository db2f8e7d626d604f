package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/limit"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// Budgets of the steering routes (issue 26 item 5). Every steering request
// a room decides is signed and stored, and every one without a session
// mints one; so a client address and its network each have a budget of
// decisions a second, and of requests without a session a second, each a
// token bucket with a burst (internal/limit). A request over a budget is
// not decided. It is answered so that players keep steering (players.md:
// 404, 410 and 429 stop them, and one 5xx may end steering in video.js):
//
//   - a request whose session had its latest manifest from this server
//     less than the room's min_ttl_s ago (§6.5: the shortest TTL a room
//     gives) is answered that manifest again, as it was: the same
//     decision, no new signature, nothing stored, no load counted. An
//     honest player never asks sooner than its manifest's TTL, so what is
//     answered so is a flood that keeps a session;
//   - a pool's request with a session it minted is answered the manifest
//     the pool orders for it, with nothing counted: a pool stores nothing
//     and its answer is the session's while its edges stand;
//   - anything else is answered 503 over_budget with Retry-After the
//     room's min_ttl_s (a pool's TTL), which every player retries: hls.js
//     and Shaka after the TTL, dash.js after its TTL unless it was its
//     first request, Media3 after 300 s.
//
// Each is counted by reason and answer, in /metrics and in the room's or
// pool's status. What a room stores is then at most its budgets' worth.

// SteerLimits are the budgets of the steering routes, per client address
// (an IPv4 address, an IPv6 /64) and per network (IPv4 /24, IPv6 /48). A
// Rate of no PerSecond is no budget; the zero SteerLimits limit nothing.
type SteerLimits struct {
	AddressDecisions, AddressSessions limit.Rate
	NetworkDecisions, NetworkSessions limit.Rate
	// TrustedProxies are the proxies whose X-Forwarded-For says whom a
	// request came from (limit.Proxies.Client); none: the peer.
	TrustedProxies limit.Proxies
}

func (c SteerLimits) off() bool {
	return c.AddressDecisions.Off() && c.AddressSessions.Off() && c.NetworkDecisions.Off() && c.NetworkSessions.Off()
}

// maxLimitKeys bounds each table of buckets: about 80 bytes a key, so 10
// MiB a table at most. A key past it is refused (table_full) until a
// sweep forgets the buckets that are full again.
const maxLimitKeys = 1 << 17

// The reasons a steering request is over budget, as counted.
const (
	overAddressSessions  = "address_sessions"
	overNetworkSessions  = "network_sessions"
	overAddressDecisions = "address_decisions"
	overNetworkDecisions = "network_decisions"
	overTableFull        = "table_full"
)

// The answers to a request over budget, as counted.
const (
	answerReplayed = "replayed" // the session's manifest again
	answerRefused  = "refused"  // 503 over_budget
)

// steerLimits are the server's budgets: one set for every room and pool,
// since they share the store and the cores; a client that steers in two
// rooms spends from one budget.
type steerLimits struct {
	addrDecisions, addrSessions *limit.Table[netip.Prefix]
	netDecisions, netSessions   *limit.Table[netip.Prefix]
}

func newSteerLimits(c SteerLimits) *steerLimits {
	if c.off() {
		return nil
	}
	return &steerLimits{
		addrDecisions: limit.NewTable[netip.Prefix](c.AddressDecisions, maxLimitKeys),
		addrSessions:  limit.NewTable[netip.Prefix](c.AddressSessions, maxLimitKeys),
		netDecisions:  limit.NewTable[netip.Prefix](c.NetworkDecisions, maxLimitKeys),
		netSessions:   limit.NewTable[netip.Prefix](c.NetworkSessions, maxLimitKeys),
	}
}

// forwardedFor is the header trusted proxies name the client in, as
// net/http and fasthttp spell it.
const forwardedFor = "X-Forwarded-For"

// clientAddr is the address r came from: its peer's, or through
// trusted proxies (Config.Limits.TrustedProxies), the one they name. A peer
// whose address does not read is the zero address, one key for all such.
// Budgets key on it; so may any route that weighs clients by address.
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	peer, _ := limit.ParseRemote(r.RemoteAddr)
	return s.proxies.Client(peer, r.Header[forwardedFor])
}

// admit spends the budgets of a request from a at now: a decision of its address and of its
// network, and for a request without a session (newSession), a new
// session of each. It returns "" when every budget held what it spends,
// and otherwise the first that did not, having spent nothing.
func (l *steerLimits) admit(a netip.Addr, newSession bool, now time.Time) string {
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

// sweep forgets the buckets that are full again.
func (l *steerLimits) sweep(now time.Time) {
	for _, t := range []*limit.Table[netip.Prefix]{l.addrDecisions, l.addrSessions, l.netDecisions, l.netSessions} {
		t.Sweep(now)
	}
}

// limitNow is the instant budgets are spent at: the room clock's.
func (s *Server) limitNow() time.Time { return time.UnixMicro(int64(s.clock())) }

// overBudget answers a room's steering request that is over budget (why):
// its session's latest manifest again when the room made it less than
// min_ttl_s ago under the policy it steers by now, else 503.
func (s *Server) overBudget(w http.ResponseWriter, h *hub, why string, session report.Session, hasSession bool) {
	st := h.state.Load()
	minTTL := uint64(st.policy.MinTTLs) * 1_000_000
	if hasSession {
		if e, ok := h.latest.get(session, s.clock(), minTTL); ok && e.st == st {
			h.limited.Add(why + "\x00" + answerReplayed)
			mb := buffers.Get().(*[]byte)
			m := st.writer.Append((*mb)[:0], e.ttl, session, e.prio[:e.n], e.digest)
			answerManifest(w, headerManifest, nil, m, mb)
			return
		}
	}
	h.limited.Add(why + "\x00" + answerRefused)
	refuseOverBudget(w, st.policy.MinTTLs)
}

// overBudget answers a pool's steering request that is over budget (why):
// with a session the pool minted (hasSession), the manifest the pool
// orders for it, with neither its report nor its session counted; else
// 503.
func (ph *poolHub) overBudget(w http.ResponseWriter, rt *poolRoute, req *pool.Request, rep report.Report, why string, hasSession bool) {
	if !hasSession {
		ph.limited.Add(why + "\x00" + answerRefused)
		refuseOverBudget(w, uint32(rt.ttl))
		return
	}
	ph.limited.Add(why + "\x00" + answerReplayed)
	if rt.qoe != nil {
		req.Away = ph.awayOf(rt, req, rep, time.UnixMicro(int64(ph.s.clock())))
	}
	mb := buffers.Get().(*[]byte)
	m, _, _ := ph.p.Steer((*mb)[:0], req)
	answerManifest(w, headerJSON, nil, m, mb)
}

// refuseOverBudget answers 503 over_budget with Retry-After retry seconds,
// as api.WriteError writes it, from bytes encoded once: a flood is answered
// this many times a second. It is counted, not logged: a flood would write
// a line a request.
func refuseOverBudget(w http.ResponseWriter, retry uint32) {
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
)

func limitedView(c *web.Counters[string]) *LimitedView {
	v := &LimitedView{Replayed: map[string]uint64{}, Refused: map[string]uint64{}}
	ks, ns := c.Sorted()
	for i, k := range ks {
		why, answer := splitLimited(k)
		if answer == answerReplayed {
			v.Replayed[why] = ns[i]
		} else {
			v.Refused[why] = ns[i]
		}
	}
	return v
}

// writeLimitMetrics writes the counts of steering requests over budget,
// by room or pool, reason and answer.
func (s *Server) writeLimitMetrics(b *bytes.Buffer) {
	if s.limits == nil {
		return
	}
	b.WriteString("# HELP waisteer_steer_over_budget_total Steering requests over a client address's or network's budget, by room or pool, reason and answer (replayed: the session's manifest again; refused: 503).\n# TYPE waisteer_steer_over_budget_total counter\n")
	for _, h := range s.sortedHubs() {
		ks, vs := h.limited.Sorted()
		for i, k := range ks {
			why, answer := splitLimited(k)
			fmt.Fprintf(b, "waisteer_steer_over_budget_total{room=\"%s\",reason=%q,answer=%q} %d\n", h.id, why, answer, vs[i])
		}
	}
	for _, ph := range s.poolsSorted() {
		ks, vs := ph.limited.Sorted()
		for i, k := range ks {
			why, answer := splitLimited(k)
			fmt.Fprintf(b, "waisteer_steer_over_budget_total{pool=%q,reason=%q,answer=%q} %d\n", ph.name, why, answer, vs[i])
		}
	}
	b.WriteString("# HELP waisteer_steer_budget_keys Client addresses and networks whose budgets the server holds (those that spent lately), by budget.\n# TYPE waisteer_steer_budget_keys gauge\n")
	for _, t := range []struct {
		name string
		t    *limit.Table[netip.Prefix]
	}{{overAddressDecisions, s.limits.addrDecisions}, {overAddressSessions, s.limits.addrSessions}, {overNetworkDecisions, s.limits.netDecisions}, {overNetworkSessions, s.limits.netSessions}} {
		fmt.Fprintf(b, "waisteer_steer_budget_keys{budget=%q} %d\n", t.name, t.t.Len())
	}
}

// splitLimited cuts a count's key into its reason and answer.
func splitLimited(k string) (why, answer string) {
	why, answer, _ = strings.Cut(k, "\x00")
	return why, answer
}

// latestManifest is what a room's manifest to one session was made of
// (§8.1), kept to answer it again.
type latestManifest struct {
	st     *roomState
	t      uint64 // the decision's, µs on the room clock
	digest sig.Hash
	ttl    uint32
	n      uint8
	prio   [policy.MaxPathways]uint8
}

// latestTable keeps each session's latest manifest for at least a period
// (the room's min_ttl_s: a manifest is answered again only that long) and
// at most two: two generations of a map per shard, the older dropped whole
// when the newer is a period old, so that nothing walks the table. It
// holds at most maxLatest manifests; past it a manifest is not kept, and
// its session is answered 503 if it is over budget.
type latestTable struct {
	shards [latestShards]latestShard
}

const (
	latestShards = 16
	maxLatest    = 1 << 18 // about 130 bytes each: 32 MiB a room at most, both generations
)

type latestShard struct {
	mu        sync.Mutex
	cur, prev map[report.Session]latestManifest
	since     uint64 // when cur began, µs
}

func (l *latestTable) shard(s report.Session) *latestShard { return &l.shards[s[0]%latestShards] }

// put keeps m as the session's latest manifest at now; period is the
// room's min_ttl_s in µs.
func (l *latestTable) put(s report.Session, m *latestManifest, now, period uint64) {
	sh := l.shard(s)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.turn(now, period)
	held, ok := sh.cur[s]
	switch {
	case ok && held.t > m.t:
		return // a later decision of the session was committed first
	case !ok && len(sh.cur) >= maxLatest/latestShards/2:
		return
	}
	sh.cur[s] = *m
}

// get returns the session's latest manifest when it was decided less than
// period µs before now.
func (l *latestTable) get(s report.Session, now, period uint64) (latestManifest, bool) {
	sh := l.shard(s)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.turn(now, period)
	m, ok := sh.cur[s]
	if !ok {
		m, ok = sh.prev[s]
	}
	// A decision's instant may be a few µs past the clock: the table of
	// loads orders a room's decisions by instants one µs apart.
	if !ok || now > m.t && now-m.t >= period {
		return latestManifest{}, false
	}
	return m, true
}

// turn makes the current generation the previous one once it is a period
// old, dropping the previous.
func (sh *latestShard) turn(now, period uint64) {
	if sh.cur == nil {
		sh.cur, sh.prev, sh.since = map[report.Session]latestManifest{}, map[report.Session]latestManifest{}, now
		return
	}
	if now < sh.since || now-sh.since < period {
		return
	}
	clear(sh.prev)
	sh.prev, sh.cur, sh.since = sh.cur, sh.prev, now
}

// keepLatest keeps the manifest of x's decision for its session, to be
// answered again if the session asks again over budget.
func (h *hub) keepLatest(x *steering, session report.Session) {
	d := &x.d
	m := latestManifest{st: x.st, t: x.t, digest: x.digest, ttl: d.TTL}
	m.n = uint8(copy(m.prio[:], d.Priority))
	h.latest.put(session, &m, x.t, uint64(x.st.policy.MinTTLs)*1_000_000)
}
