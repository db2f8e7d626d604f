package qoewatch

import (
	"crypto/sha256"
	"log/slog"
	"time"

	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
)

// Watch is a steerer's steering by what its players report (issue 17):
// the aggregator, fed by the reports of steering requests (§4's reader)
// and by CMCD v2 event reports, evaluated every second by the server; its
// moves applied by the steerer (a pool's orders, a room's overlay policy).
type Watch struct {
	Agg   *qoe.Aggregator
	apply func(behind map[string]qoe.Moved)
	label string
	limit *reportLimits
	moves web.Counters[string] // by pathway, cohort and "behind" or "back", NUL-separated
}

// New watches agg for the steerer named label; apply applies its moves.
func New(agg *qoe.Aggregator, label string, apply func(map[string]qoe.Moved)) *Watch {
	return &Watch{Agg: agg, apply: apply, label: label, limit: newReportLimits()}
}

// Evaluate applies the rule at now; each move is logged with its cohort,
// figures and reason, and applied.
func (w *Watch) Evaluate(log *slog.Logger, now time.Time) []qoe.Move {
	moves := w.Agg.Evaluate(now)
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
		log.Warn(verb, "steerer", w.label, "cohort", m.Key.Cohort, "pathway", m.Key.Pathway,
			"median_bps", m.Median, "best_bps", m.Best, "sessions", m.Sessions, "reason", m.Reason)
	}
	w.apply(w.Agg.Behind())
	return moves
}

// AddReport gives the aggregator a steering request's report (§4): the
// throughput and buffer the session states of the pathway it is on, from
// client (the request's address, Server.clientAddr).
func (w *Watch) AddReport(ids []string, rep report.Report, cohort string, session report.Session, client qoe.Client, at time.Time) {
	if rep.Present&report.HasPathway == 0 || int(rep.Pathway) >= len(ids) {
		return
	}
	hasT, hasB := rep.Present&report.HasThroughput != 0, rep.Present&report.HasBuffer != 0
	if !hasT && !hasB {
		return
	}
	w.Agg.Add(qoe.Key{Pathway: ids[rep.Pathway], Cohort: cohort}, session, client, rep.Throughput, hasT, rep.Buffer, hasB, at)
}

// cmcdSession is the aggregator's session of a CMCD v2 player's sid:
// apart from every session the server mints, which are random.
func cmcdSession(sid string) report.Session {
	h := sha256.Sum256([]byte("waisteer cmcd sid\x00" + sid))
	var s report.Session
	copy(s[:], h[:])
	return s
}

// View is the watch as the operator sees it.
func (w *Watch) View() *view.QoEView {
	c := w.Agg.Config()
	v := &view.QoEView{
		Settings: view.QoESettings{WindowS: c.Window.Seconds(), MinSessions: c.MinSessions, FloorBps: c.Floor, Fraction: c.Fraction, Margin: c.Margin, HoldS: c.Hold.Seconds(), ProbeShare: c.ProbeShare},
		Cells:    []view.QoECell{}, Moves: []view.QoEMove{}, Ignored: w.Agg.Ignored(),
	}
	for _, f := range w.Agg.Figures() {
		cell := view.QoECell{Pathway: f.Pathway, Cohort: f.Cohort, Sessions: f.Sessions, Clients: f.Clients, WithThroughput: f.WithT, Throughput: f.Throughput,
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
	for _, m := range w.Agg.Moves() {
		to := "back"
		switch {
		case m.Probing:
			to = "probe"
		case m.Degraded:
			to = "behind"
		}
		v.Moves = append(v.Moves, view.QoEMove{At: m.At.UTC(), Pathway: m.Key.Pathway, Cohort: m.Key.Cohort, To: to, Median: m.Median, Best: m.Best, Sessions: m.Sessions, Reason: m.Reason})
	}
	return v
}

// Label names the steerer the watch is of, in logs and metrics.
func (w *Watch) Label() string { return w.label }

// Sweep forgets the report rates that are idle at now.
func (w *Watch) Sweep(now time.Time) { w.limit.sweep(now) }
