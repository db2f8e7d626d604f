package postgres

// The shared store's Prometheus metrics (issue 31), written by hand as the
// server's others are (web.Histogram): what a group of decisions costs and
// waits, the logs this server made and sealed, the connections, and the
// shared table of loads.

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/web"
)

// storeMetrics are the store's counts, from atomic counters.
type storeMetrics struct {
	commit      *web.Histogram // a group's transaction, begin to commit
	roundTrip   *web.Histogram // each batch sent, to its last result
	groups      atomic.Uint64
	failures    atomic.Uint64
	logsMade    atomic.Uint64 // logs this server made
	sealedUnder atomic.Uint64 // this server's logs its groups found sealed
	sealedGone  atomic.Uint64 // logs of servers gone that this one sealed
	// Groups written in one statement (once.go), and those whose
	// statement found what this server knew changed.
	atOnce, atOnceMissed atomic.Uint64
}

func newStoreMetrics() *storeMetrics {
	return &storeMetrics{commit: web.NewLatencyHistogram(), roundTrip: web.NewLatencyHistogram()}
}

// WriteMetrics writes the shared store's metric families (the server's
// /metrics writes them for a store that has them).
func (s *Store) WriteMetrics(b *bytes.Buffer) {
	m := s.metrics
	b.WriteString("# HELP waisteer_pg_group_commit_seconds Time a group of decisions took in PostgreSQL, its transaction's begin to its commit.\n# TYPE waisteer_pg_group_commit_seconds histogram\n")
	m.commit.Write(b, "waisteer_pg_group_commit_seconds", "")
	b.WriteString("# HELP waisteer_pg_round_trip_seconds Time of each batch of statements a group sent, to its last result.\n# TYPE waisteer_pg_round_trip_seconds histogram\n")
	m.roundTrip.Write(b, "waisteer_pg_round_trip_seconds", "")
	b.WriteString("# HELP waisteer_pg_groups_total Groups of decisions written, and those that failed.\n# TYPE waisteer_pg_groups_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_groups_total{result=\"committed\"} %d\n", m.groups.Load())
	fmt.Fprintf(b, "waisteer_pg_groups_total{result=\"failed\"} %d\n", m.failures.Load())
	b.WriteString("# HELP waisteer_pg_groups_at_once_total Groups written in one statement, and those whose statement found a log or a snapshot changed and left them to two round trips.\n# TYPE waisteer_pg_groups_at_once_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_groups_at_once_total{result=\"committed\"} %d\n", m.atOnce.Load())
	fmt.Fprintf(b, "waisteer_pg_groups_at_once_total{result=\"missed\"} %d\n", m.atOnceMissed.Load())
	b.WriteString("# HELP waisteer_pg_logs_made_total Logs of decisions this server made: one at its first decision in a room, and another after one was sealed under it.\n# TYPE waisteer_pg_logs_made_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_logs_made_total %d\n", m.logsMade.Load())
	b.WriteString("# HELP waisteer_pg_logs_sealed_total Logs sealed: this server's, found sealed under it by another that took it for gone; and other servers', sealed by this one as gone.\n# TYPE waisteer_pg_logs_sealed_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_logs_sealed_total{by=\"another\"} %d\n", m.sealedUnder.Load())
	fmt.Fprintf(b, "waisteer_pg_logs_sealed_total{by=\"this\"} %d\n", m.sealedGone.Load())

	st := s.pool.Stat()
	b.WriteString("# HELP waisteer_pg_connections The pool's connections to PostgreSQL, by state.\n# TYPE waisteer_pg_connections gauge\n")
	fmt.Fprintf(b, "waisteer_pg_connections{state=\"acquired\"} %d\n", st.AcquiredConns())
	fmt.Fprintf(b, "waisteer_pg_connections{state=\"idle\"} %d\n", st.IdleConns())
	fmt.Fprintf(b, "waisteer_pg_connections{state=\"max\"} %d\n", st.MaxConns())
	b.WriteString("# HELP waisteer_pg_connection_wait_seconds_total Time spent waiting for a connection of the pool, summed.\n# TYPE waisteer_pg_connection_wait_seconds_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_connection_wait_seconds_total %g\n", st.AcquireDuration().Seconds())

	s.mu.Lock()
	l := s.loads
	s.mu.Unlock()
	if l != nil {
		l.writeMetrics(b)
	}
}

// writeMetrics writes the shared table's metric families.
func (l *Loads) writeMetrics(b *bytes.Buffer) {
	restored := 0
	select {
	case <-l.restored:
		restored = 1
	default:
	}
	b.WriteString("# HELP waisteer_pg_loads_restored 1 once the live sessions every server held at the start are counted here.\n# TYPE waisteer_pg_loads_restored gauge\n")
	fmt.Fprintf(b, "waisteer_pg_loads_restored %d\n", restored)
	age := -1.0
	if at := l.followed.Load(); at > 0 {
		age = time.Since(time.Unix(0, at)).Seconds()
	}
	b.WriteString("# HELP waisteer_pg_loads_follow_age_seconds Time since the other servers' sessions were last read (-1 before the first): the follower's lag, beside the 50 ms it polls at.\n# TYPE waisteer_pg_loads_follow_age_seconds gauge\n")
	fmt.Fprintf(b, "waisteer_pg_loads_follow_age_seconds %g\n", age)
	l.mu.Lock()
	pending := len(l.made)
	l.mu.Unlock()
	b.WriteString("# HELP waisteer_pg_loads_waits_total Decisions that waited for the shared table of loads to be current (δ: the last follow, and this server's commits, within 100 ms).\n# TYPE waisteer_pg_loads_waits_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_loads_waits_total %d\n", l.waited.Load())
	b.WriteString("# HELP waisteer_pg_loads_refused_total Decisions refused (503) because the shared table of loads was not current in time, or the database was down.\n# TYPE waisteer_pg_loads_refused_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_loads_refused_total %d\n", l.refused.Load())
	after, ahead := l.local.Clocks()
	b.WriteString("# HELP waisteer_pg_loads_after_others_total Decisions given a t past this server's clock, just after another server's decision whose session they counted (a Lamport clock: that server's clock is ahead, by under a second).\n# TYPE waisteer_pg_loads_after_others_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_loads_after_others_total %d\n", after)
	b.WriteString("# HELP waisteer_pg_loads_clock_behind_total Decisions that counted another server's decision of a t a second or more past their own: that server's clock is that far ahead of this one's, and the audit places the decision before the session it counted.\n# TYPE waisteer_pg_loads_clock_behind_total counter\n")
	fmt.Fprintf(b, "waisteer_pg_loads_clock_behind_total %d\n", ahead)
	b.WriteString("# HELP waisteer_pg_loads_pending Sessions of this server's decisions not yet committed, which the others read with them.\n# TYPE waisteer_pg_loads_pending gauge\n")
	fmt.Fprintf(b, "waisteer_pg_loads_pending %d\n", pending)
}
