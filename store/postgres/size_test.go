package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/waisteer/waisteer/store"
)

// storedTables are the tables that grow with a room's decisions: each
// decision's row (its leaf in it), the contexts and snapshots they share,
// the logs and their tiles.
var storedTables = []string{"decisions", "contexts", "snapshots", "logs", "log_tiles"}

// tableBytes is each stored table's size on disk, its indexes and TOAST
// included (pg_total_relation_size).
func tableBytes(t testing.TB, s *Store) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, name := range storedTables {
		var n int64
		if err := s.pool.QueryRow(context.Background(), "SELECT pg_total_relation_size($1)", "waisteer."+name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	return out
}

// TestBytesPerDecision (issue 31, "at most 400 bytes per decision in
// PostgreSQL, tables and indexes together, at 1 M decisions"): 100 000
// decisions of one room in groups of 500, as a busy room's group commits
// carry them (benchDecisions: three pathways, one snapshot), cost at most
// 400 bytes each, everything they grow counted. Everything here grows
// linearly with the decisions (a row, its index entries, 32 bytes of
// tile), and the fixed part (the empty tables' pages) only lowers the
// figure at 1 M: the bound at 100 000 holds at 1 M. WAISTEER_PG_DECISIONS
// sets another count (1000000 for the figure itself).
func TestBytesPerDecision(t *testing.T) {
	count := 100_000
	if v := os.Getenv("WAISTEER_PG_DECISIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("WAISTEER_PG_DECISIONS=%q", v)
		}
		count = n
	}
	const group = 500
	s, _ := open(t)
	ctx := bg(t)
	before := tableBytes(t, s)
	for i := 0; i < count; i += group {
		ds, ev := benchDecisions(min(group, count-i), uint64(i))
		if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
			t.Fatal(err)
		}
	}
	if own, err := s.OwnLog(ctx, ds0Room()); err != nil || own.Size != int64(count) {
		t.Fatalf("the log holds %d leaves, %v; want %d", own.Size, err, count)
	}
	if _, err := s.pool.Exec(ctx, "VACUUM"); err != nil {
		t.Fatal(err)
	}
	after := tableBytes(t, s)
	var all int64
	msg := ""
	for _, name := range storedTables {
		d := after[name] - before[name]
		all += d
		msg += fmt.Sprintf(" %s %.1f", name, float64(d)/float64(count))
	}
	per := float64(all) / float64(count)
	t.Logf("%d decisions: %.1f bytes a decision (by table:%s)", count, per, msg)
	if per > 400 {
		t.Errorf("%.1f bytes a decision, more than issue 31's 400 (by table:%s)", per, msg)
	}
}

// ds0Room is benchDecisions' room.
func ds0Room() [32]byte {
	ds, _ := benchDecisions(1, 0)
	return ds[0].Room
}
