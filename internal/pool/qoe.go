package pool

import (
	"fmt"
	"math"
	"time"

	"github.com/waisteer/waisteer/report/qoe"
)

// QoE is a pool's steering by what its players report (issue 17): the
// aggregator's rule, which moves a cohort's sessions off a pathway that
// degrades, and the per-client rule.
type QoE struct {
	qoe.Config
	// ShortTTL is the TTL, in seconds, of a manifest that a move shaped: a
	// session of a cohort with a pathway moved behind, or a client moved
	// by the per-client rule, asks again sooner.
	ShortTTL int
	// Lowest is the lowest variant's bitrate, bits/s: a client reporting
	// less than 1.2 times it on its pathway gets the next pathway first
	// (apex-steering's rule); 0 for no per-client rule.
	Lowest uint64
}

// QoEFile is the [steering.qoe] (or [pool.qoe]) table.
type QoEFile struct {
	WindowS     *int64   `toml:"window_s"`
	MinSessions *int64   `toml:"min_sessions"`
	FloorBps    *int64   `toml:"floor_bps"`
	Fraction    *float64 `toml:"fraction"`
	Margin      *float64 `toml:"margin"`
	HoldS       *int64   `toml:"hold_s"`
	ShortTTLs   *int64   `toml:"short_ttl_s"`
	LowestBps   *int64   `toml:"lowest_bps"`
	ProbeShare  *float64 `toml:"probe_share"`
}

// The QoE table's defaults (the multi-CDN seed: a 60 s aggregation window;
// 30 s the least TTL it calls practical) and ranges.
const (
	defaultShortTTL = 30
	maxWindow       = time.Hour
	maxMinSessions  = 1_000_000
	maxFloor        = qoe.MaxThroughput
)

// readQoE reads the table into c.QoE, its defaults filled: window_s 60,
// min_sessions 30, margin 0.2, hold_s 60, probe_share 0.2, short_ttl_s 30
// (or the pool's TTL when shorter).
func readQoE(f *QoEFile, c *Config, ps *problems) {
	q := &QoE{Config: qoe.Config{Window: time.Minute, MinSessions: 30, Margin: 0.2, Hold: time.Minute, ProbeShare: 0.2}, ShortTTL: -1}
	if f.WindowS != nil {
		q.Window = ps.seconds("qoe.window_s", *f.WindowS, maxWindow)
	}
	if f.MinSessions != nil {
		ps.inRange("qoe.min_sessions", *f.MinSessions, 1, maxMinSessions)
		q.MinSessions = clampInt(*f.MinSessions)
	}
	if f.FloorBps != nil {
		q.Floor = ps.bps("qoe.floor_bps", *f.FloorBps)
	}
	if f.Fraction != nil {
		q.Fraction = *f.Fraction
	}
	if f.Margin != nil {
		q.Margin = *f.Margin
	}
	if f.ProbeShare != nil {
		q.ProbeShare = *f.ProbeShare
	}
	if f.HoldS != nil {
		q.Hold = ps.seconds("qoe.hold_s", *f.HoldS, maxWindow)
	}
	if f.ShortTTLs != nil {
		ps.inRange("qoe.short_ttl_s", *f.ShortTTLs, 1, maxTTL)
		q.ShortTTL = clampInt(*f.ShortTTLs)
	}
	if f.LowestBps != nil {
		q.Lowest = ps.bps("qoe.lowest_bps", *f.LowestBps)
	}
	if q.ShortTTL < 0 {
		q.ShortTTL = min(defaultShortTTL, c.TTL)
	}
	c.QoE = q
}

// seconds reads a count of seconds, 1 to top, checked as written.
func (ps *problems) seconds(key string, v int64, top time.Duration) time.Duration {
	ps.inRange(key, v, 1, int64(top/time.Second))
	return time.Duration(clamp(v, -1e6, 1e6)) * time.Second
}

// bps reads a bitrate, 0 to maxFloor, checked as written.
func (ps *problems) bps(key string, v int64) uint64 {
	ps.inRange(key, v, 0, maxFloor)
	return uint64(clamp(v, 0, math.MaxInt64))
}

// checkQoE is Check's part for the QoE table.
func (c *Config) checkQoE(ps *problems) {
	q := c.QoE
	if q == nil {
		return
	}
	if q.Window < time.Second || q.Window > maxWindow {
		ps.add("qoe.window_s", "%s is not 1 to %s", seconds(q.Window), seconds(maxWindow))
	}
	if q.Hold < time.Second || q.Hold > maxWindow {
		ps.add("qoe.hold_s", "%s is not 1 to %s", seconds(q.Hold), seconds(maxWindow))
	}
	ps.inRange("qoe.min_sessions", int64(q.MinSessions), 1, maxMinSessions)
	if q.Floor > maxFloor {
		ps.add("qoe.floor_bps", "%d is not 0 to %s", q.Floor, grouped(maxFloor))
	}
	if q.Lowest > maxFloor {
		ps.add("qoe.lowest_bps", "%d is not 0 to %s", q.Lowest, grouped(maxFloor))
	}
	switch {
	case math.IsNaN(q.Fraction) || q.Fraction < 0 || q.Fraction >= 1:
		ps.add("qoe.fraction", "%v is not 0 to 1 (less than 1): a pathway below this fraction of the cohort's best moves", q.Fraction)
	case math.IsNaN(q.Margin) || q.Margin < 0 || q.Margin > 10:
		ps.add("qoe.margin", "%v is not 0 to 10", q.Margin)
	case math.IsNaN(q.ProbeShare) || q.ProbeShare < 0 || q.ProbeShare > 1:
		ps.add("qoe.probe_share", "%v is not 0 to 1", q.ProbeShare)
	case q.Floor == 0 && q.Fraction == 0 && q.Lowest == 0:
		ps.add("qoe", "neither floor_bps, fraction nor lowest_bps is set: nothing would ever move")
	}
	if q.ShortTTL < 1 || q.ShortTTL > c.TTL {
		ps.add("qoe.short_ttl_s", "%d is not 1 to %d (ttl_s)", q.ShortTTL, c.TTL)
	}
}

// aggregates says whether the cohort rule is on (a floor or a fraction),
// as against the per-client rule alone.
func (q *QoE) aggregates() bool { return q.Floor > 0 || q.Fraction > 0 }

// Aggregator makes the aggregator of the pool's QoE configuration; nil
// when it has none or only the per-client rule.
func (c *Config) Aggregator() (*qoe.Aggregator, error) {
	if c.QoE == nil || !c.QoE.aggregates() {
		return nil, nil
	}
	a, err := qoe.New(c.QoE.Config)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", c.Name, err)
	}
	return a, nil
}

// CohortOf is the cohort a request's session is in, as Steer reads it: the
// cohort_header's value or the cohort_param's, "" for none or for a value
// no cohort could hold. A QoE report counts in that cohort.
func (p *Pool) CohortOf(req *Request) string {
	st := p.state.Load()
	switch {
	case st.cfg.CohortHeader != "":
		if validCohort(req.Cohort) {
			return req.Cohort
		}
	case st.cfg.CohortParam != "":
		q := readQuery(req.RawQuery, st.cfg.CohortParam)
		if q.hasCohort {
			if v, ok := unescape(make([]byte, 0, maxCohortLen), q.cohort); ok && validCohort(v) {
				return string(v)
			}
		}
	}
	return ""
}

// SessionOf is the session a request carries when Steer keeps it: this
// server minted it (and, under buckets, its bucket holds).
func (p *Pool) SessionOf(req *Request) (Session, bool) {
	st := p.state.Load()
	q := readQuery(req.RawQuery, st.cfg.CohortParam)
	var scratch [32]byte
	s, _, ok := p.kept(st, &q, scratch[:])
	return s, ok
}
