package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/scenario"
)

// Issue 31: a server on a shared store writes the store's metrics in its
// /metrics: the groups it committed (one steering answer, so at least
// one), the connections and the shared table of loads, counted once the
// start's live sessions are read.
func TestSharedStoreMetrics(t *testing.T) {
	es := sharedEnvs(t, scenario.Spec{Periods: 6}, 1)
	e := es[0]
	e.postRecords(e.sc.Records, http.StatusOK)
	e.steer("/v1/steer", nil)
	within(t, 2*time.Second, "the loads counted", func() bool {
		_, mb := e.get("/metrics")
		return strings.Contains(string(mb), "waisteer_pg_loads_restored 1\n")
	})
	_, mb := e.get("/metrics")
	out := string(mb)
	for _, want := range []string{"# TYPE waisteer_pg_group_commit_seconds histogram\n", "waisteer_pg_round_trip_seconds_count ",
		"waisteer_pg_logs_made_total 1\n", "waisteer_pg_connections{state=\"max\"} ", "waisteer_pg_loads_follow_age_seconds "} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(out, "waisteer_pg_groups_total{result=\"committed\"} 0\n") {
		t.Error("/metrics counts no group committed after a steering answer")
	}
}
