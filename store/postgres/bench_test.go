package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// benchDecisions makes n decisions of one room, policy and signer sharing
// one snapshot, as a busy room's group commits carry them: their bytes are
// the store's, whatever they sign.
func benchDecisions(n int, from uint64) ([]store.Decision, store.Evidence) {
	body := make([]byte, 3*(2+32+32+1+32)+2) // three pathways, one record each
	ev := store.Evidence{Key: sha256.Sum256(body), Body: body}
	ds := make([]store.Decision, n)
	for i := range ds {
		k := from + uint64(i)
		var d store.Decision
		binary.LittleEndian.PutUint64(d.Digest[:], k)
		d.Digest = sha256.Sum256(d.Digest[:])
		d.Room, d.Policy = sig.Digest([]byte("room")), sig.Digest([]byte("policy"))
		d.T = 1_800_000_000_000_000 + k*100
		copy(d.Session[:], d.Digest[16:])
		d.Protocol = report.HLS
		d.Report = report.Report{Present: report.HasPathway | report.HasThroughput, Pathway: 1, Throughput: 6_000_000}
		d.Loads = []uint32{1200, 3400, 56}
		d.Evidence = ev.Key
		copy(d.Sig[:], d.Digest[:])
		ds[i] = d
	}
	return ds, ev
}

// BenchmarkPutDecisions is one durable transaction of a group of decisions
// on PostgreSQL (fsync on, loopback): decisions/s for groups of 1, 16 and
// 128, beside store's BenchmarkPutDecisions of bbolt (go test -bench
// PutDecisions ./store/ ./store/postgres/).
func BenchmarkPutDecisions(b *testing.B) {
	for _, size := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("group=%d", size), func(b *testing.B) {
			s, _ := openB(b)
			next := uint64(0)
			start, puts := time.Now(), 0
			for b.Loop() {
				ds, ev := benchDecisions(size, next)
				next += uint64(size)
				if err := s.PutDecisions(context.Background(), []store.Evidence{ev}, ds); err != nil {
					b.Fatal(err)
				}
				puts++
			}
			b.ReportMetric(float64(puts*size)/time.Since(start).Seconds(), "decisions/s")
		})
	}
}

// BenchmarkStoredSize is what 10 000 decisions in groups of 128 cost in
// the database: the decisions' table and its indexes, with the contexts and
// snapshots they share, per decision (issue 15: stored as bbolt stores
// them; store's BenchmarkStoredSize is bbolt's).
func BenchmarkStoredSize(b *testing.B) {
	const count = 10_000
	var perDecision, table float64
	for b.Loop() {
		s, _ := openB(b)
		ctx := context.Background()
		size := func() (all, decisions int64) {
			if err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size('waisteer.decisions') + pg_total_relation_size('waisteer.contexts')
				+ pg_total_relation_size('waisteer.snapshots'), pg_relation_size('waisteer.decisions')`).Scan(&all, &decisions); err != nil {
				b.Fatal(err)
			}
			return all, decisions
		}
		all0, t0 := size()
		for i := 0; i < count; i += 128 {
			ds, ev := benchDecisions(min(128, count-i), uint64(i))
			if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.pool.Exec(ctx, "CHECKPOINT"); err != nil {
			b.Fatal(err)
		}
		all1, t1 := size()
		perDecision, table = float64(all1-all0)/count, float64(t1-t0)/count
	}
	ds, _ := benchDecisions(1, 0)
	row, err := store.AppendDecisionRow(nil, &ds[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(row)), "row-bytes")
	b.ReportMetric(table, "table-bytes/decision")
	b.ReportMetric(perDecision, "bytes/decision")
}

// openB is open for a benchmark.
func openB(b *testing.B) (*Store, string) {
	b.Helper()
	dsn := server.Database(b)
	s, err := Open(context.Background(), dsn, WithMigrate())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, dsn
}

// BenchmarkServersOneRoom is 1, 2 and 3 servers (stores on one database)
// each putting groups of 32 decisions of one room as fast as they commit
// (issue 31: adding a server should not lower a room's rate): decisions/s
// of them all together. Each appends to a log of its own (SPEC-NOTES "One
// log per server and room"), so no group waits for another server's.
func BenchmarkServersOneRoom(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			first, dsn := openB(b)
			ss := []*Store{first}
			for range n - 1 {
				s, err := Open(context.Background(), dsn)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				ss = append(ss, s)
			}
			putTogether(b, ss)
		})
	}
}

// putTogether has each store put groups of 32 decisions of one room as
// fast as they commit, for 3 s, all at once, and reports the decisions a
// second of them all together.
func putTogether(b *testing.B, ss []*Store) {
	b.Helper()
	var next atomic.Uint64
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			for time.Since(start) < 3*time.Second {
				from := next.Add(32) - 32
				ds, ev := benchDecisions(32, from)
				if err := s.PutDecisions(context.Background(), []store.Evidence{ev}, ds); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	var groups uint64
	for _, s := range ss {
		groups += s.metrics.groups.Load()
	}
	b.ReportMetric(float64(groups*32)/took.Seconds(), "decisions/s")
}
