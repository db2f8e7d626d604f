package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
)

// qoeWatch is a steerer's steering by what its players report (issue 17):
// the aggregator, fed by the reports of steering requests (§4's reader)
// and by CMCD v2 event reports, evaluated every second by the server; its
// moves applied by the steerer (a pool's orders, a room's overlay policy).
type qoeWatch struct {
	agg   *qoe.Aggregator
	apply func(behind map[string]qoe.Moved)
	label string
	limit *reportLimits
	moves web.Counters[string] // by pathway, cohort and "behind" or "back", NUL-separated
}

func newQoEWatch(agg *qoe.Aggregator, label string, apply func(map[string]qoe.Moved)) *qoeWatch {
	return &qoeWatch{agg: agg, apply: apply, label: label, limit: newReportLimits()}
}

// evaluate applies the rule at now; each move is logged with its cohort,
// figures and reason, and applied.
func (s *Server) evaluate(w *qoeWatch, now time.Time) []qoe.Move {
	moves := w.agg.Evaluate(now)
	if len(moves) == 0 {
		return nil
	}
	for _, m := range moves {
		verb, to := "QoE: a pathway moved back", "back"
		switch {
		case m.Probing:
			verb, to = "QoE: a pathway given back to a probe share of its cohort", "probe"
		case m.Degraded:
			verb, to = "QoE: a pathway moved behind the others", "behind"
		}
		w.moves.Add(m.Key.Pathway + "\x00" + m.Key.Cohort + "\x00" + to)
		s.log.Warn(verb, "steerer", w.label, "cohort", m.Key.Cohort, "pathway", m.Key.Pathway,
			"median_bps", m.Median, "best_bps", m.Best, "sessions", m.Sessions, "reason", m.Reason)
	}
	w.apply(w.agg.Behind())
	return moves
}

// qoeEvery is how often the server evaluates the QoE rule: each second,
// the aggregator's resolution. Tests that drive the clock themselves set
// it before New.
var qoeEvery = time.Second

// watches are every steerer's QoE watch.
func (s *Server) watches() []*qoeWatch {
	var out []*qoeWatch
	for _, ph := range s.poolsSorted() {
		if w := ph.qoe.Load(); w != nil {
			out = append(out, w)
		}
	}
	for _, h := range s.sortedHubs() {
		if h.qoe != nil {
			out = append(out, h.qoe)
		}
	}
	return out
}

// evaluateQoE is the server's tick: every watch evaluated, and the pools'
// clients kept away by the per-client rule forgotten once their time is up.
func (s *Server) evaluateQoE(context.Context) {
	now := time.UnixMicro(int64(s.clock()))
	for _, w := range s.watches() {
		s.evaluate(w, now)
		w.limit.sweep(now)
	}
	for _, ph := range s.poolsSorted() {
		ph.away.sweep(now)
	}
}

// addReport gives the aggregator a steering request's report (§4): the
// throughput and buffer the session states of the pathway it is on, from
// client (the request's address, Server.clientAddr).
func (w *qoeWatch) addReport(ids []string, rep report.Report, cohort string, session report.Session, client qoe.Client, at time.Time) {
	if rep.Present&report.HasPathway == 0 || int(rep.Pathway) >= len(ids) {
		return
	}
	hasT, hasB := rep.Present&report.HasThroughput != 0, rep.Present&report.HasBuffer != 0
	if !hasT && !hasB {
		return
	}
	w.agg.Add(qoe.Key{Pathway: ids[rep.Pathway], Cohort: cohort}, session, client, rep.Throughput, hasT, rep.Buffer, hasB, at)
}

// awayTable is a pool's clients the per-client rule moved off a pathway,
// kept away from it until their time is up (the QoE's hold): once on the
// next pathway a client reports that pathway's throughput, and without
// this its next order would send it back to the slow one.
type awayTable struct {
	mu sync.Mutex
	m  map[report.Session]awayEntry
	n  atomic.Int64 // len(m), read without the lock
}

// empty reports whether no client is kept away.
func (t *awayTable) empty() bool { return t.n.Load() == 0 }

type awayEntry struct {
	pathway string
	until   time.Time
}

// maxAway bounds the clients kept away; a client past it is moved for one
// manifest only.
const maxAway = 1 << 20

func (t *awayTable) keep(s report.Session, pathway string, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[report.Session]awayEntry{}
	}
	if _, ok := t.m[s]; ok || len(t.m) < maxAway {
		t.m[s] = awayEntry{pathway, until}
	}
	t.n.Store(int64(len(t.m)))
}

// of is the pathway the session is kept away from at now, "" for none.
func (t *awayTable) of(s report.Session, now time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[s]; ok && now.Before(e.until) {
		return e.pathway
	}
	return ""
}

func (t *awayTable) sweep(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s, e := range t.m {
		if !now.Before(e.until) {
			delete(t.m, s)
		}
	}
	t.n.Store(int64(len(t.m)))
}

func (t *awayTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// cmcdSession is the aggregator's session of a CMCD v2 player's sid:
// apart from every session the server mints, which are random.
func cmcdSession(sid string) report.Session {
	h := sha256.Sum256([]byte("waisteer cmcd sid\x00" + sid))
	var s report.Session
	copy(s[:], h[:])
	return s
}

func (w *qoeWatch) view() *QoEView {
	c := w.agg.Config()
	v := &QoEView{
		Settings: QoESettings{WindowS: c.Window.Seconds(), MinSessions: c.MinSessions, FloorBps: c.Floor, Fraction: c.Fraction, Margin: c.Margin, HoldS: c.Hold.Seconds(), ProbeShare: c.ProbeShare},
		Cells:    []QoECell{}, Moves: []QoEMove{}, Ignored: w.agg.Ignored(),
	}
	for _, f := range w.agg.Figures() {
		cell := QoECell{Pathway: f.Pathway, Cohort: f.Cohort, Sessions: f.Sessions, Clients: f.Clients, WithThroughput: f.WithT, Throughput: f.Throughput,
			WithBuffer: f.WithB, Buffer: f.Buffer, State: "ok"}
		switch {
		case f.Probing:
			cell.State = "probing"
		case f.Degraded:
			cell.State = "degraded"
		}
		if !f.LastMove.IsZero() {
			t := f.LastMove.UTC()
			cell.LastMove = &t
		}
		v.Cells = append(v.Cells, cell)
	}
	for _, m := range w.agg.Moves() {
		to := "back"
		switch {
		case m.Probing:
			to = "probe"
		case m.Degraded:
			to = "behind"
		}
		v.Moves = append(v.Moves, QoEMove{At: m.At.UTC(), Pathway: m.Key.Pathway, Cohort: m.Key.Cohort, To: to, Median: m.Median, Best: m.Best, Sessions: m.Sessions, Reason: m.Reason})
	}
	return v
}

// writeQoEMetrics writes every QoE watch's figures: per pathway and cohort
// the sessions, the throughput and buffer quantiles and the state; the
// moves; and the reports not aggregated, by reason.
func (s *Server) writeQoEMetrics(b *bytes.Buffer) {
	type row struct {
		label string
		w     *qoeWatch
		figs  []qoe.Figures
	}
	var rows []row
	for _, w := range s.watches() {
		rows = append(rows, row{w.label, w, w.agg.Figures()})
	}
	cells := func(name, kind, help string, v func(f qoe.Figures, b *bytes.Buffer, labels string)) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
		for _, r := range rows {
			for _, f := range r.figs {
				v(f, b, fmt.Sprintf("steerer=%q,pathway=%q,cohort=%q", r.label, f.Pathway, f.Cohort))
			}
		}
	}
	quantiles := [3]string{"0.1", "0.5", "0.9"}
	cells("waisteer_qoe_sessions", "gauge", "Distinct sessions with a report in the window, by steerer, pathway and cohort.", func(f qoe.Figures, b *bytes.Buffer, l string) {
		fmt.Fprintf(b, "waisteer_qoe_sessions{%s} %d\n", l, f.Sessions)
	})
	cells("waisteer_qoe_throughput_bps", "gauge", "Quantiles of the throughput the window's sessions reported, bits/s.", func(f qoe.Figures, b *bytes.Buffer, l string) {
		for i, q := range quantiles {
			if f.WithT > 0 {
				fmt.Fprintf(b, "waisteer_qoe_throughput_bps{%s,quantile=%q} %d\n", l, q, f.Throughput[i])
			}
		}
	})
	cells("waisteer_qoe_buffer_ms", "gauge", "Quantiles of the buffer the window's sessions reported, ms.", func(f qoe.Figures, b *bytes.Buffer, l string) {
		for i, q := range quantiles {
			if f.WithB > 0 {
				fmt.Fprintf(b, "waisteer_qoe_buffer_ms{%s,quantile=%q} %d\n", l, q, f.Buffer[i])
			}
		}
	})
	cells("waisteer_qoe_degraded", "gauge", "1 while a pathway is moved behind the others for a cohort (but for its probe share while probing).", func(f qoe.Figures, b *bytes.Buffer, l string) {
		d := 0
		if f.Degraded {
			d = 1
		}
		fmt.Fprintf(b, "waisteer_qoe_degraded{%s} %d\n", l, d)
	})
	b.WriteString("# HELP waisteer_qoe_moves_total Moves of a pathway for a cohort: behind the others, back for a probe share, or back.\n# TYPE waisteer_qoe_moves_total counter\n")
	for _, r := range rows {
		ks, vs := r.w.moves.Sorted()
		for i, k := range ks {
			f := strings.SplitN(k, "\x00", 3)
			fmt.Fprintf(b, "waisteer_qoe_moves_total{steerer=%q,pathway=%q,cohort=%q,to=%q} %d\n", r.label, f[0], f[1], f[2], vs[i])
		}
	}
	b.WriteString("# HELP waisteer_qoe_reports_ignored_total Reports not aggregated, by reason.\n# TYPE waisteer_qoe_reports_ignored_total counter\n")
	for _, r := range rows {
		ig := r.w.agg.Ignored()
		for _, k := range slices.Sorted(maps.Keys(ig)) {
			fmt.Fprintf(b, "waisteer_qoe_reports_ignored_total{steerer=%q,reason=%q} %d\n", r.label, k, ig[k])
		}
	}
}
