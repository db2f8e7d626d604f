package postgres

import (
	"bytes"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// TestMetrics (issue 31, "Prometheus: the shared store's state, commit and
// round-trip latency, the follower's lag"): after five groups on one
// server and two on another, in one room, and a steered decision of the
// first's (a group of its own), the first server counts six committed
// groups, with a commit time each, and seven round trips: the first
// group's two batches, and one for each of the five after it, written in
// one statement (once.go: the same log, context and snapshot as the first;
// the steered decision's are benchDecisions'), and one log made (its own of the room, whatever
// the other did: SPEC-NOTES "One log per server and room"), none sealed.
// The shared table reports itself counted and its lag.
func TestMetrics(t *testing.T) {
	a, b := openTwo(t)
	ctx := bg(t)
	l := newLoads(t, a)
	put := func(s *Store, from uint64) {
		t.Helper()
		ds, ev := benchDecisions(10, from)
		if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
			t.Fatal(err)
		}
	}
	put(a, 0)
	put(a, 10)
	put(b, 20)
	put(b, 30)
	put(a, 40)
	put(a, 50)
	put(a, 60)
	steerTo(t, l, sig.Digest([]byte("room")), report.Session{1}, 100, 0, 1000)
	<-l.Restored()
	var buf bytes.Buffer
	a.WriteMetrics(&buf)
	out := buf.String()
	for _, want := range []string{
		"waisteer_pg_groups_total{result=\"committed\"} 6\n",
		"waisteer_pg_groups_total{result=\"failed\"} 0\n",
		"waisteer_pg_group_commit_seconds_count 6\n",
		"waisteer_pg_round_trip_seconds_count 7\n",
		"waisteer_pg_groups_at_once_total{result=\"committed\"} 5\n",
		"waisteer_pg_groups_at_once_total{result=\"missed\"} 0\n",
		"waisteer_pg_logs_made_total 1\n",
		"waisteer_pg_logs_sealed_total{by=\"another\"} 0\n",
		"waisteer_pg_logs_sealed_total{by=\"this\"} 0\n",
		"waisteer_pg_loads_restored 1\n",
		"# TYPE waisteer_pg_connections gauge\n",
		"# TYPE waisteer_pg_loads_follow_age_seconds gauge\n",
		"waisteer_pg_loads_pending 0\n",
		"waisteer_pg_loads_waits_total 0\n",
		"waisteer_pg_loads_refused_total 0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the metrics lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "waisteer_pg_loads_follow_age_seconds -1") {
		t.Error("the table of loads has followed, and says it never has")
	}
}
