package roomsteer

import (
	"bytes"
	"context"
	"fmt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
)

// WriteMetrics writes the rooms' metric families, each room's series in
// the order of rooms: decisions by reason and first pathway, loads at now,
// evidence status, records by outcome, and the pathways' health.
func WriteMetrics(ctx context.Context, b *bytes.Buffer, rooms []*Room, now uint64) {
	b.WriteString("# HELP waisteer_decisions_total Decisions signed and stored, by room, reason (§6.4) and first pathway.\n# TYPE waisteer_decisions_total counter\n")
	for _, h := range rooms {
		st := h.state.Load()
		for rsn := decision.Buffer; rsn <= decision.None; rsn++ {
			for i, id := range st.ids {
				if n := st.firsts[rsn][i].Load(); n > 0 {
					fmt.Fprintf(b, "waisteer_decisions_total{room=\"%s\",reason=%q,first=%q} %d\n", h.id, rsn.String(), id, n)
				}
			}
		}
	}
	b.WriteString("# HELP waisteer_load Sessions steered first to a pathway (§6), by room and pathway.\n# TYPE waisteer_load gauge\n")
	for _, h := range rooms {
		st := h.state.Load()
		loads, err := h.d.Loads.Snapshot(ctx, h.id, len(st.ids), now)
		if err != nil {
			continue
		}
		for i, id := range st.ids {
			fmt.Fprintf(b, "waisteer_load{room=\"%s\",pathway=%q} %d\n", h.id, id, loads[i])
		}
	}
	b.WriteString("# HELP waisteer_evidence_status A pathway's evidence status (§5.3) in the current window, 1 for the status it has.\n# TYPE waisteer_evidence_status gauge\n")
	for _, h := range rooms {
		rk := h.ranking.Load()
		if rk == nil {
			continue
		}
		for i, id := range rk.st.ids {
			got := rk.r.Evidence(i).Status
			for s := evidence.StatusFigure; s <= evidence.StatusEmpty; s++ {
				v := 0
				if s == got {
					v = 1
				}
				fmt.Fprintf(b, "waisteer_evidence_status{room=\"%s\",pathway=%q,status=%q} %d\n", h.id, id, s.String(), v)
			}
		}
	}
	b.WriteString("# HELP waisteer_records_total Per-hop records posted, by room and outcome.\n# TYPE waisteer_records_total counter\n")
	for _, h := range rooms {
		fmt.Fprintf(b, "waisteer_records_total{room=\"%s\",outcome=\"accepted\"} %d\n", h.id, h.accepted.Load())
		fmt.Fprintf(b, "waisteer_records_total{room=\"%s\",outcome=\"duplicate\"} %d\n", h.id, h.duplicates.Load())
	}
	b.WriteString("# HELP waisteer_records_off_policy_total Per-hop records accepted whose hop is in no pathway of the room's active policy.\n# TYPE waisteer_records_off_policy_total counter\n")
	for _, h := range rooms {
		fmt.Fprintf(b, "waisteer_records_off_policy_total{room=\"%s\"} %d\n", h.id, h.offPolicy.Load())
	}
	b.WriteString("# HELP waisteer_records_refused_total Per-hop records refused, by room and refusal code.\n# TYPE waisteer_records_refused_total counter\n")
	for _, h := range rooms {
		ks, vs := h.refused.Sorted()
		for i, k := range ks {
			fmt.Fprintf(b, "waisteer_records_refused_total{room=\"%s\",code=%q} %d\n", h.id, k, vs[i])
		}
	}

	b.WriteString("# HELP waisteer_pathway_up 1 while a room's pathway passes its health checks; only pathways with a check URL.\n# TYPE waisteer_pathway_up gauge\n")
	for _, h := range rooms {
		for _, id := range h.state.Load().ids {
			if hs, ok := h.pathwayHealth(id); ok {
				v := 0
				if hs.Up {
					v = 1
				}
				fmt.Fprintf(b, "waisteer_pathway_up{room=\"%s\",pathway=%q} %d\n", h.id, id, v)
			}
		}
	}
}
