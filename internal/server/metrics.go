package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/procmem"
	"github.com/waisteer/waisteer/internal/qoewatch"
	"github.com/waisteer/waisteer/internal/roomsteer"
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

// metrics are the server's own counters; the rooms' are on their hubs.
type metrics struct {
	requests [routeCount]web.Counters[int] // by status
	latency  [routeCount]*web.Histogram
}

func newMetrics() *metrics {
	m := &metrics{}
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
	s.commits.WriteMetrics(&b)
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
	if m, ok := s.st.(interface{ WriteMetrics(*bytes.Buffer) }); ok {
		m.WriteMetrics(&b) // a shared store's own (store/postgres, issue 31)
	}

	roomsteer.WriteMetrics(r.Context(), &b, s.sortedHubs(), s.clock())
	s.pools.WriteMetrics(r.Context(), &b)
	qoewatch.WriteMetrics(&b, s.watches())
	s.writeReportMetrics(&b)
	s.writeFrontMetrics(&b)
	writePanicMetrics(&b)
	s.writeLimitMetrics(&b)
	s.reach.WriteMetrics(&b)
	procmem.WriteMetrics(&b)

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
func (s *Server) loadsNow(ctx context.Context, h *roomsteer.Room, n int, at uint64) []uint32 {
	loads, err := s.loads.Snapshot(ctx, h.ID(), n, at)
	if err != nil {
		return nil
	}
	return loads
}
