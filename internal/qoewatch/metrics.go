package qoewatch

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/report/qoe"
)

// WriteMetrics writes every QoE watch's figures: per pathway and cohort
// the sessions, the throughput and buffer quantiles and the state; the
// moves; and the reports not aggregated, by reason.
func WriteMetrics(b *bytes.Buffer, watches []*Watch) {
	type row struct {
		label string
		w     *Watch
		figs  []qoe.Figures
	}
	var rows []row
	for _, w := range watches {
		rows = append(rows, row{w.label, w, w.Agg.Figures()})
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
		ig := r.w.Agg.Ignored()
		for _, k := range slices.Sorted(maps.Keys(ig)) {
			fmt.Fprintf(b, "waisteer_qoe_reports_ignored_total{steerer=%q,reason=%q} %d\n", r.label, k, ig[k])
		}
	}
}
