package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/web"
)

// The metrics are written by hand in the Prometheus text exposition format
// (version 0.0.4), from atomic counters (web.Counters, web.Histogram).

// route names a family of routes, the label of the request metrics.
type route uint8

const (
	routeSteer route = iota
	routePreflight
	routeDecision
	routePolicy
	routeRecord
	routeDescriptor
	routeKeyLog
	routeRecordsPost
	routePolicyPut
	routeKeyLogPut
	routeStatus
	routeHealth
	routeReady
	routeMetrics
	routePoolEdges
	routePoolChange
	routeFront
	routeFrontStatus
	routeLog
	routeReports
	routeDashboard
	routeOther
	routeCount
)

var routeNames = [routeCount]string{
	"steer", "preflight", "decision", "policy", "record", "descriptor", "keylog",
	"records_post", "policy_put", "keylog_put", "status", "healthz", "readyz", "metrics",
	"pool_edges", "pool_change", "front", "front_status", "log", "reports", "dashboard", "other",
}

// routeNamed is the family a route's metrics are counted under.
func routeNamed(name string) (route, bool) {
	i := slices.Index(routeNames[:], name)
	return route(i), i >= 0
}

// batchBounds are the upper bounds of the commit group sizes' buckets.
var batchBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// metrics are the server's own counters; the rooms' are on their hubs.
type metrics struct {
	requests [routeCount]web.Counters[int] // by status
	latency  [routeCount]*web.Histogram

	commitBatch    *web.Histogram
	commitLatency  *web.Histogram
	commitFailures atomic.Uint64
}

func newMetrics() *metrics {
	m := &metrics{
		commitBatch:   web.NewHistogram(batchBounds, 1),
		commitLatency: web.NewLatencyHistogram(),
	}
	for i := range m.latency {
		m.latency[i] = web.NewLatencyHistogram()
	}
	return m
}

// count runs h and counts its request by route and status, and its
// latency; a refused request is logged, one line each.
func (s *Server) count(rt route, w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request)) {
	start := time.Now()
	sw := web.NewWriter(w)
	h(sw, r)
	status, refusal := sw.Result()
	sw.Release()
	s.metrics.requests[rt].Add(status)
	s.metrics.latency[rt].ObserveDuration(time.Since(start))
	if refusal != nil {
		level := slog.LevelInfo // the client's doing
		switch {
		case refusal.Code == api.StoreUnavailable:
			level = slog.LevelDebug // logged once per outage (web.StoreFailures)
		case status >= 500:
			level = slog.LevelWarn // the server's
		}
		s.log.Log(r.Context(), level, "request refused", "route", routeNames[rt], "method", r.Method,
			"path", r.URL.Path, "status", status, "code", string(refusal.Code), "detail", refusal.Detail)
	}
}

// serveMetrics writes every metric (GET /metrics).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) {
		return
	}
	var b bytes.Buffer
	m := s.metrics

	b.WriteString("# HELP waisteer_http_requests_total HTTP requests by route and status.\n# TYPE waisteer_http_requests_total counter\n")
	for rt := range routeCount {
		ks, vs := m.requests[rt].Sorted()
		for i, k := range ks {
			fmt.Fprintf(&b, "waisteer_http_requests_total{route=%q,code=\"%d\"} %d\n", routeNames[rt], k, vs[i])
		}
	}
	b.WriteString("# HELP waisteer_http_request_duration_seconds Time to answer a request, by route.\n# TYPE waisteer_http_request_duration_seconds histogram\n")
	for rt := range routeCount {
		m.latency[rt].Write(&b, "waisteer_http_request_duration_seconds", fmt.Sprintf("route=%q", routeNames[rt]))
	}
	b.WriteString("# HELP waisteer_commit_group_size Decisions per durable group commit.\n# TYPE waisteer_commit_group_size histogram\n")
	m.commitBatch.Write(&b, "waisteer_commit_group_size", "")
	b.WriteString("# HELP waisteer_commit_duration_seconds Time of one durable group commit.\n# TYPE waisteer_commit_duration_seconds histogram\n")
	m.commitLatency.Write(&b, "waisteer_commit_duration_seconds", "")
	b.WriteString("# HELP waisteer_commit_failures_total Group commits the store refused.\n# TYPE waisteer_commit_failures_total counter\n")
	fmt.Fprintf(&b, "waisteer_commit_failures_total %d\n", m.commitFailures.Load())
	s.follower.WriteMetrics(&b)
	up, outages := s.storeUp()
	b.WriteString("# HELP waisteer_store_up 1 while the store answers, 0 while it cannot be reached.\n# TYPE waisteer_store_up gauge\n")
	upValue := 0
	if up {
		upValue = 1
	}
	fmt.Fprintf(&b, "waisteer_store_up %d\n", upValue)
	b.WriteString("# HELP waisteer_store_outages_total Times the store became unreachable.\n# TYPE waisteer_store_outages_total counter\n")
	fmt.Fprintf(&b, "waisteer_store_outages_total %d\n", outages)

	hubs := s.sortedHubs()
	now := s.clock()
	b.WriteString("# HELP waisteer_decisions_total Decisions signed and stored, by room, reason (§6.4) and first pathway.\n# TYPE waisteer_decisions_total counter\n")
	for _, h := range hubs {
		st := h.state.Load()
		for rsn := decision.Buffer; rsn <= decision.None; rsn++ {
			for i, id := range st.ids {
				if n := st.firsts[rsn][i].Load(); n > 0 {
					fmt.Fprintf(&b, "waisteer_decisions_total{room=\"%s\",reason=%q,first=%q} %d\n", h.id, rsn.String(), id, n)
				}
			}
		}
	}
	b.WriteString("# HELP waisteer_load Sessions steered first to a pathway (§6), by room and pathway.\n# TYPE waisteer_load gauge\n")
	for _, h := range hubs {
		st := h.state.Load()
		loads, err := s.loads.Snapshot(r.Context(), h.id, len(st.ids), now)
		if err != nil {
			continue
		}
		for i, id := range st.ids {
			fmt.Fprintf(&b, "waisteer_load{room=\"%s\",pathway=%q} %d\n", h.id, id, loads[i])
		}
	}
	b.WriteString("# HELP waisteer_evidence_status A pathway's evidence status (§5.3) in the current window, 1 for the status it has.\n# TYPE waisteer_evidence_status gauge\n")
	for _, h := range hubs {
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
				fmt.Fprintf(&b, "waisteer_evidence_status{room=\"%s\",pathway=%q,status=%q} %d\n", h.id, id, s.String(), v)
			}
		}
	}
	b.WriteString("# HELP waisteer_records_total Per-hop records posted, by room and outcome.\n# TYPE waisteer_records_total counter\n")
	for _, h := range hubs {
		fmt.Fprintf(&b, "waisteer_records_total{room=\"%s\",outcome=\"accepted\"} %d\n", h.id, h.accepted.Load())
		fmt.Fprintf(&b, "waisteer_records_total{room=\"%s\",outcome=\"duplicate\"} %d\n", h.id, h.duplicates.Load())
	}
	b.WriteString("# HELP waisteer_records_off_policy_total Per-hop records accepted whose hop is in no pathway of the room's active policy.\n# TYPE waisteer_records_off_policy_total counter\n")
	for _, h := range hubs {
		fmt.Fprintf(&b, "waisteer_records_off_policy_total{room=\"%s\"} %d\n", h.id, h.offPolicy.Load())
	}
	b.WriteString("# HELP waisteer_records_refused_total Per-hop records refused, by room and refusal code.\n# TYPE waisteer_records_refused_total counter\n")
	for _, h := range hubs {
		ks, vs := h.refused.Sorted()
		for i, k := range ks {
			fmt.Fprintf(&b, "waisteer_records_refused_total{room=\"%s\",code=%q} %d\n", h.id, k, vs[i])
		}
	}

	b.WriteString("# HELP waisteer_pathway_up 1 while a room's pathway passes its health checks; only pathways with a check URL.\n# TYPE waisteer_pathway_up gauge\n")
	for _, h := range hubs {
		for _, id := range h.state.Load().ids {
			if hs, ok := h.pathwayHealth(id); ok {
				v := 0
				if hs.Up {
					v = 1
				}
				fmt.Fprintf(&b, "waisteer_pathway_up{room=\"%s\",pathway=%q} %d\n", h.id, id, v)
			}
		}
	}
	s.writePoolMetrics(r.Context(), &b)
	s.writeQoEMetrics(&b)
	s.writeReportMetrics(&b)
	s.writeFrontMetrics(&b)
	writePanicMetrics(&b)
	s.writeLimitMetrics(&b)

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}

// panicLoops are the process's loops whose panics guard recovers, written
// at 0 before any: the server's committers, follower, overlay, restore and
// ticks (server.go), the health checks (internal/health), the reload of
// the configuration (internal/serve).
var panicLoops = []string{"committer", "dashboard", "follow", "health", "overlay", "prune", "qoe", "records", "reload", "restore", "sweep"}

// writePanicMetrics writes the panics guard recovered in the process: a
// loop's, and a request's (which net/http would have recovered too).
func writePanicMetrics(b *bytes.Buffer) {
	counts := guard.Counts()
	b.WriteString("# HELP waisteer_background_panics_total Panics recovered in a background loop, which went on; each is logged at ERROR with its stack.\n# TYPE waisteer_background_panics_total counter\n")
	loops := slices.Clone(panicLoops)
	for k := range counts {
		if k != "request" && !slices.Contains(loops, k) {
			loops = append(loops, k)
		}
	}
	slices.Sort(loops)
	for _, l := range loops {
		fmt.Fprintf(b, "waisteer_background_panics_total{loop=%q} %d\n", l, counts[l])
	}
	b.WriteString("# HELP waisteer_request_panics_total Panics recovered in answering a request, whose connection was closed; each is logged at ERROR with its stack.\n# TYPE waisteer_request_panics_total counter\n")
	fmt.Fprintf(b, "waisteer_request_panics_total %d\n", counts["request"])
}

// loadsNow is the room's loads at now, or nil when the table cannot say.
func (s *Server) loadsNow(ctx context.Context, h *hub, n int, at uint64) []uint32 {
	loads, err := s.loads.Snapshot(ctx, h.id, n, at)
	if err != nil {
		return nil
	}
	return loads
}
