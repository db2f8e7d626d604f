// Package qoe aggregates what players report of their pathways (issue 17):
// per pathway and cohort, the throughput and buffer each session reported
// last within a sliding window, as quantiles over distinct sessions (at
// most PerClient of one client address, issue 26), and a rule that moves a
// cohort's sessions off a pathway whose median falls below a floor, or
// below a fraction of the cohort's best pathway, before its viewers
// rebuffer (the multi-CDN seed's "approach 2"), with hysteresis. It knows pathways by id and cohorts by name; where the
// reports come from and what a move does to an order is the caller's.
package qoe

import (
	"cmp"
	"fmt"
	"maps"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/report"
)

// Config is the rule's settings.
type Config struct {
	// Window is how long a session's latest report counts (60 s, the
	// seed's aggregation window, when 0).
	Window time.Duration
	// MinSessions is how many distinct sessions a pathway's cohort needs
	// for its figures to move it (30 when 0): one client, or a few that
	// lie, cannot move a cohort.
	MinSessions int
	// Floor is the median throughput, bits/s, below which a pathway is
	// degraded; 0 for none.
	Floor uint64
	// Fraction (0 to 1) degrades a pathway whose median is below this
	// fraction of the best median of the cohort's pathways; 0 for none.
	Fraction float64
	// Margin: a degraded pathway comes back once its median has stayed at
	// or above the floor × (1 + Margin), and the fraction of the best ×
	// (1 + Margin), for Hold (0.2 when 0).
	Margin float64
	// Hold is that time, and the least time between two moves of one
	// pathway's cohort (60 s when 0).
	Hold time.Duration
	// ProbeShare (0 to 1) is the share of a cohort's sessions that a
	// degraded pathway is given back to once too few report it for Hold,
	// to be measured again (0.2 when 0; 1 gives it back to every session).
	ProbeShare float64
}

func (c Config) withDefaults() Config {
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.MinSessions <= 0 {
		c.MinSessions = 30
	}
	if c.Margin <= 0 {
		c.Margin = 0.2
	}
	if c.Hold <= 0 {
		c.Hold = time.Minute
	}
	if c.ProbeShare <= 0 {
		c.ProbeShare = 0.2
	}
	return c
}

// Check refuses settings the rule cannot use.
func (c Config) Check() error {
	switch {
	case c.Fraction < 0 || c.Fraction >= 1:
		return fmt.Errorf("qoe: fraction %v is not in [0, 1)", c.Fraction)
	case c.Margin < 0 || c.Margin > 10:
		return fmt.Errorf("qoe: margin %v is not in [0, 10]", c.Margin)
	case c.ProbeShare < 0 || c.ProbeShare > 1:
		return fmt.Errorf("qoe: probe share %v is not in [0, 1]", c.ProbeShare)
	case c.Floor == 0 && c.Fraction == 0:
		return fmt.Errorf("qoe: neither a floor nor a fraction: nothing would ever move")
	}
	return nil
}

// MaxThroughput is the largest throughput a report may state, bits/s (1
// Tbit/s): one above it is ignored and counted, never aggregated.
const MaxThroughput = 1_000_000_000_000

// MaxBuffer is the largest buffer a report may state, ms (one day).
const MaxBuffer = 24 * 60 * 60 * 1000

// Key names one cell: a pathway in a cohort.
type Key struct {
	Pathway string
	Cohort  string
}

// PerClient is how many sessions of one client (Client: an IPv4 address,
// an IPv6 /64) a cell counts at most: those with its PerClient latest
// reports. A home behind one NAT holds a few players at once (a
// television, a laptop, phones), and each counts; a client that reports
// under many sessions (a flood of CMCD sids, or of steering requests that
// each mint a session) weighs like one household. In the smallest cohort
// that may move (MinSessions, 30) the median is the 15th value: it takes
// four clients to state 15 (3 × 4 = 12 cannot), where one could before.
const PerClient = 4

// Client is the network a report came from, as a cell weighs it: an IPv4
// address, or the /64 of an IPv6 address (one household's prefix, RFC
// 6177). The zero Client is a report whose address is not known; such
// reports are one client like any other.
type Client struct{ a netip.Addr }

// ClientOf is the client of address a: an IPv4 (or IPv4-mapped) address as
// it is, an IPv6 address's /64, without its zone.
func ClientOf(a netip.Addr) Client {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return Client{a}
}

// ParseClient is the client of a request's remote address, "host:port" or
// a bare host; the zero Client when it does not read.
func ParseClient(remote string) Client {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ClientOf(ap.Addr())
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return ClientOf(a)
	}
	return Client{}
}

func (c Client) String() string {
	switch {
	case !c.a.IsValid():
		return "unknown"
	case c.a.Is4():
		return c.a.String()
	}
	return c.a.String() + "/64"
}

// sample is a session's latest report in a cell.
type sample struct {
	at                 time.Time
	client             Client
	throughput, buffer uint64
	hasT, hasB         bool
}

// held is a client's sessions in a cell, at most PerClient.
type held struct {
	n int
	s [PerClient]report.Session
}

// remove takes s out of h, reporting whether it was there.
func (h *held) remove(s report.Session) bool {
	for i := range h.n {
		if h.s[i] == s {
			h.n--
			h.s[i] = h.s[h.n]
			h.s[h.n] = report.Session{}
			return true
		}
	}
	return false
}

type cell struct {
	latest  map[report.Session]sample
	clients map[Client]*held // every session of latest under its sample's client
	newest  time.Time        // the latest report's time

	degraded  bool
	probing   bool      // degraded, and given back to the probe share of the cohort's sessions
	lastMove  time.Time // zero: never moved
	goodSince time.Time // zero: not good now
	thinSince time.Time // zero: has enough sessions
}

// Aggregator is the reports of every cell and each cell's state. It is
// safe for concurrent use.
type Aggregator struct {
	cfg     Config
	mu      sync.RWMutex
	cells   map[Key]*cell
	ignored map[string]uint64 // reports not aggregated, by reason
	moves   []Move            // the latest, at most keepMoves
}

// keepMoves is how many moves Moves keeps.
const keepMoves = 256

// Bounds on what reports can make the aggregator hold: cells (pathways ×
// cohorts, a cohort's name being the client's to choose when it rides in a
// URL) and sessions in one cell's window. A report past either is ignored
// and counted.
const (
	MaxCells        = 10_000
	MaxCellSessions = 1 << 20
)

// New makes an aggregator with cfg (its zero fields defaulted).
func New(cfg Config) (*Aggregator, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Aggregator{cfg: cfg.withDefaults(), cells: map[Key]*cell{}, ignored: map[string]uint64{}}, nil
}

// Config is the aggregator's settings, defaults filled in.
func (a *Aggregator) Config() Config { return a.cfg }

// Add takes a session's report of its pathway at at, from client: its
// throughput (bits/s) and buffer (ms), either absent (has false). A report
// is taken as of no earlier than the cell's latest. A report with neither,
// or with a value past MaxThroughput or MaxBuffer, is ignored and counted
// by reason. A client's sessions in a cell are at most PerClient: a new
// session of a client that has as many takes the place of the one whose
// latest report is the oldest (counted crowded_client).
func (a *Aggregator) Add(k Key, s report.Session, client Client, throughput uint64, hasT bool, buffer uint64, hasB bool, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case hasT && throughput > MaxThroughput:
		a.ignored["throughput_absurd"]++
		return
	case hasB && buffer > MaxBuffer:
		a.ignored["buffer_absurd"]++
		return
	case !hasT && !hasB:
		a.ignored["no_figure"]++
		return
	}
	c := a.cells[k]
	if c == nil {
		if len(a.cells) >= MaxCells {
			a.ignored["too_many_cohorts"]++
			return
		}
		c = &cell{latest: map[report.Session]sample{}, clients: map[Client]*held{}}
		a.cells[k] = c
	}
	prev, known := c.latest[s]
	if !known && len(c.latest) >= MaxCellSessions {
		a.ignored["cohort_full"]++
		return
	}
	if at.Before(c.newest) {
		at = c.newest // reports are taken in the order they came
	}
	c.newest = at
	if !known || prev.client != client {
		if known {
			c.release(prev.client, s) // a session that changed networks
		}
		h := c.clients[client]
		if h == nil {
			h = &held{}
			c.clients[client] = h
		}
		if h.n == PerClient {
			// The client's session with the oldest latest report gives
			// its place.
			old := 0
			for i := 1; i < h.n; i++ {
				if c.latest[h.s[i]].at.Before(c.latest[h.s[old]].at) {
					old = i
				}
			}
			delete(c.latest, h.s[old])
			h.s[old] = s
			a.ignored["crowded_client"]++
		} else {
			h.s[h.n] = s
			h.n++
		}
	}
	c.latest[s] = sample{at: at, client: client, throughput: throughput, buffer: buffer, hasT: hasT, hasB: hasB}
}

// release takes session s out of client's sessions in the cell.
func (c *cell) release(client Client, s report.Session) {
	if h := c.clients[client]; h != nil && h.remove(s) && h.n == 0 {
		delete(c.clients, client)
	}
}

// Ignore counts a report the caller did not give to Add, by reason (a
// body that does not read, a flood).
func (a *Aggregator) Ignore(why string) {
	a.mu.Lock()
	a.ignored[why]++
	a.mu.Unlock()
}

// Ignored is the count of reports not aggregated, by reason.
func (a *Aggregator) Ignored() map[string]uint64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make(map[string]uint64, len(a.ignored))
	for k, v := range a.ignored {
		out[k] = v
	}
	return out
}

// expire drops from the cell the sessions whose latest report is a
// window old or older at now. It walks every session, as figures does
// after it: an Add costs a map write and nothing more.
func (c *cell) expire(now time.Time, window time.Duration) {
	cut := now.Add(-window)
	for s, v := range c.latest {
		if !v.at.After(cut) {
			delete(c.latest, s)
			c.release(v.client, s)
		}
	}
}

// Quantile is the q-quantile (0 < q ≤ 1) of values by nearest rank: the
// smallest value with at least q × n of them at or below it, the
// ⌈q·n⌉-th in ascending order. values must be sorted; 0 for none.
func Quantile(sorted []uint64, q float64) uint64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// ⌈q·n⌉ with q·n computed in µ-units, exact for q of up to six places.
	qm := uint64(q*1e6 + 0.5)
	r := int((qm*uint64(n) + 999_999) / 1_000_000)
	r = max(1, min(r, n))
	return sorted[r-1]
}

// Figures are one cell's figures at an instant.
type Figures struct {
	Key
	// Sessions are the distinct sessions with a report in the window, at
	// most PerClient of each of the Clients.
	Sessions, Clients int
	// Throughput and Buffer quantiles over the sessions that reported
	// each: 10th, 50th (the median) and 90th percentiles.
	Throughput, Buffer [3]uint64
	WithT, WithB       int
	Degraded           bool
	Probing            bool // degraded, and probed by a share of the cohort's sessions
	LastMove           time.Time
}

func (c *cell) figures(k Key) Figures {
	f := Figures{Key: k, Sessions: len(c.latest), Clients: len(c.clients), Degraded: c.degraded, Probing: c.probing, LastMove: c.lastMove}
	var ts, bs []uint64
	for _, s := range c.latest {
		if s.hasT {
			ts = append(ts, s.throughput)
		}
		if s.hasB {
			bs = append(bs, s.buffer)
		}
	}
	slices.Sort(ts)
	slices.Sort(bs)
	f.WithT, f.WithB = len(ts), len(bs)
	for i, q := range []float64{0.1, 0.5, 0.9} {
		f.Throughput[i], f.Buffer[i] = Quantile(ts, q), Quantile(bs, q)
	}
	return f
}

// Move is a change of a cell's state, with its figures and reason.
type Move struct {
	At       time.Time
	Key      Key
	Degraded bool   // the state it moved to
	Probing  bool   // degraded, and given back to the probe share
	Median   uint64 // the cell's median throughput
	Best     uint64 // the best median of the cohort's pathways
	Sessions int
	Reason   string
}

func (m Move) String() string {
	to := "back"
	switch {
	case m.Probing:
		to = "back for a probe share of"
	case m.Degraded:
		to = "off"
	}
	return fmt.Sprintf("%s: cohort %q moved %s pathway %s: median %d bit/s of %d sessions, the cohort's best %d; %s",
		m.At.UTC().Format(time.RFC3339), m.Key.Cohort, to, m.Key.Pathway, m.Median, m.Sessions, m.Best, m.Reason)
}

// Evaluate expires old reports and applies the rule at now to every cell,
// returning the moves it made. Cohorts are evaluated apart: a pathway's
// median in one cohort never moves another cohort's sessions.
func (a *Aggregator) Evaluate(now time.Time) []Move {
	a.mu.Lock()
	defer a.mu.Unlock()
	cfg := a.cfg
	cohorts := map[string][]Key{}
	figs := map[Key]Figures{}
	for k, c := range a.cells {
		c.expire(now, cfg.Window)
		if len(c.latest) == 0 && !c.degraded && (c.lastMove.IsZero() || now.Sub(c.lastMove) >= cfg.Hold) {
			delete(a.cells, k) // nothing to say of it, to undo or to hold
			continue
		}
		figs[k] = c.figures(k)
		cohorts[k.Cohort] = append(cohorts[k.Cohort], k)
	}
	var moves []Move
	for _, name := range slices.Sorted(maps.Keys(cohorts)) {
		keys := cohorts[name]
		slices.SortFunc(keys, func(x, y Key) int { return strings.Compare(x.Pathway, y.Pathway) })
		var best uint64
		for _, k := range keys {
			if f := figs[k]; f.WithT >= cfg.MinSessions {
				best = max(best, f.Throughput[1])
			}
		}
		for _, k := range keys {
			if m, ok := a.step(a.cells[k], figs[k], best, now); ok {
				moves = append(moves, m)
			}
		}
	}
	a.moves = append(a.moves, moves...)
	if n := len(a.moves); n > keepMoves {
		a.moves = slices.Clone(a.moves[n-keepMoves:])
	}
	return moves
}

// step applies the rule to one cell.
func (a *Aggregator) step(c *cell, f Figures, best uint64, now time.Time) (Move, bool) {
	cfg := a.cfg
	m := Move{At: now, Key: f.Key, Median: f.Throughput[1], Best: best, Sessions: f.WithT}
	mayMove := c.lastMove.IsZero() || now.Sub(c.lastMove) >= cfg.Hold
	if f.WithT < cfg.MinSessions {
		// Too few to say. A degraded pathway whose sessions were moved off
		// has few left to report: after Hold with too few, it is given back
		// to the probe share of the cohort's sessions, to be measured
		// again; after another Hold with too few (a cohort too small for a
		// share to say), to every session. If it is still bad, their
		// reports move it off again, at most once per Hold.
		c.goodSince = time.Time{}
		if c.thinSince.IsZero() {
			c.thinSince = now
		}
		if !c.degraded || !mayMove || now.Sub(c.thinSince) < cfg.Hold {
			return m, false
		}
		c.lastMove, c.thinSince = now, now
		if !c.probing && cfg.ProbeShare < 1 {
			c.probing = true
			m.Degraded, m.Probing = true, true
			m.Reason = fmt.Sprintf("fewer than %d sessions reported for %s: back for %.0f%% of the cohort's sessions, to be measured again", cfg.MinSessions, cfg.Hold, 100*cfg.ProbeShare)
			return m, true
		}
		c.degraded, c.probing = false, false
		m.Reason = fmt.Sprintf("fewer than %d sessions reported for %s: back, to be measured again", cfg.MinSessions, cfg.Hold)
		return m, true
	}
	c.thinSince = time.Time{}
	med := f.Throughput[1]
	belowFloor := cfg.Floor > 0 && med < cfg.Floor
	belowBest := cfg.Fraction > 0 && float64(med) < cfg.Fraction*float64(best)
	good := (cfg.Floor == 0 || float64(med) >= float64(cfg.Floor)*(1+cfg.Margin)) &&
		(cfg.Fraction == 0 || float64(med) >= cfg.Fraction*float64(best)*(1+cfg.Margin))
	why := func() string {
		if belowFloor {
			return fmt.Sprintf("median below the floor of %d bit/s", cfg.Floor)
		}
		return fmt.Sprintf("median below %.2f of the cohort's best", cfg.Fraction)
	}
	switch {
	case (!c.degraded || c.probing) && (belowFloor || belowBest):
		if !mayMove {
			return m, false
		}
		m.Reason = why()
		if c.probing {
			m.Reason += ", as its probe share measured it"
		}
		c.degraded, c.probing, c.lastMove, c.goodSince = true, false, now, time.Time{}
		m.Degraded = true
		return m, true
	case c.degraded && good:
		if c.goodSince.IsZero() {
			c.goodSince = now
		}
		if now.Sub(c.goodSince) >= cfg.Hold && mayMove {
			c.degraded, c.probing, c.lastMove, c.goodSince = false, false, now, time.Time{}
			m.Reason = fmt.Sprintf("median at or above the recovery threshold (margin %.2f) for %s", cfg.Margin, cfg.Hold)
			return m, true
		}
	case c.degraded:
		c.goodSince = time.Time{}
	}
	return m, false
}

// Degraded reports whether the pathway is moved off for the cohort.
func (a *Aggregator) Degraded(pathway, cohort string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	c := a.cells[Key{pathway, cohort}]
	return c != nil && c.degraded
}

// Moved is a cohort's moves: the pathways its sessions' orders put
// behind the others, and of them those given back to the probe share.
type Moved struct {
	Behind, Probing []string
}

// Behind is every cohort's moves, each list sorted: what a pool's orders
// apply (pool.SetBehind).
func (a *Aggregator) Behind() map[string]Moved {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := map[string]Moved{}
	for k, c := range a.cells {
		if c.degraded {
			m := out[k.Cohort]
			m.Behind = append(m.Behind, k.Pathway)
			if c.probing {
				m.Probing = append(m.Probing, k.Pathway)
			}
			out[k.Cohort] = m
		}
	}
	for _, m := range out {
		slices.Sort(m.Behind)
		slices.Sort(m.Probing)
	}
	return out
}

// Share is the probe share, its default filled in.
func (c Config) Share() float64 { return c.withDefaults().ProbeShare }

// InProbe reports whether a session is in the probe share of its cohort:
// its first byte, uniform for the random sessions the server mints, below
// share × 256.
func InProbe(s report.Session, share float64) bool {
	return float64(s[0]) < share*256
}

// Figures are every cell's figures now (without expiring; Evaluate does),
// by cohort then pathway.
func (a *Aggregator) Figures() []Figures {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]Figures, 0, len(a.cells))
	for k, c := range a.cells {
		out = append(out, c.figures(k))
	}
	slices.SortFunc(out, func(x, y Figures) int {
		return cmp.Or(strings.Compare(x.Cohort, y.Cohort), strings.Compare(x.Pathway, y.Pathway))
	})
	return out
}

// Moves are the latest moves, oldest first.
func (a *Aggregator) Moves() []Move {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.moves)
}

// BelowLowest is the per-client rule (apex-steering's): a client whose
// throughput is below 1.2 times the lowest variant's bitrate on its
// pathway is given the next pathway first and the short TTL. Exact: 5·T <
// 6·lowest.
func BelowLowest(throughput, lowest uint64) bool {
	th, tl := bits.Mul64(5, throughput)
	lh, ll := bits.Mul64(6, lowest)
	return th < lh || th == lh && tl < ll
}
