package store

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/waisteer/waisteer/internal/sig"
)

// BenchmarkPutRecords: a group write of records (PutRecords) on a store
// already holding 200 000, in groups of 1, 25 (a thousand POSTs a second
// of one record each, written alone or lingering, issue 30) and 64 (the
// largest POSTs of waisteer bench's records phase): wall time and the
// process's CPU per record. The records end a millisecond apart, as a
// thousand a second of hops posting as their periods end do; "older" puts
// each record before every record held, newest first, as a backlog sent
// back to front would (waisteer bench's records phase posts records older
// than any other phase's, in the order of their ends, between the two
// cases). "bbolt" writes each group in a commit of its
// own (WithoutJournal), as the store did before stop 52; otherwise the
// journal takes it, and the CPU counted includes its applier's commits
// (the last waited for).
func BenchmarkPutRecords(b *testing.B) {
	for _, c := range []struct {
		group int
		older bool
		bbolt bool
	}{{1, false, false}, {1, false, true}, {25, false, false}, {25, false, true}, {25, true, false}, {25, true, true}, {64, false, false}, {64, false, true}, {64, true, false}, {64, true, true}} {
		name := "group=" + strconv.Itoa(c.group)
		if c.older {
			name += ",older"
		}
		var opts []Option
		if c.bbolt {
			name += ",bbolt"
			opts = append(opts, WithoutJournal())
		}
		b.Run(name, func(b *testing.B) {
			st, err := Open(filepath.Join(b.TempDir(), "store.db"), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			room := sig.Hash{7}
			n := uint64(0)
			next := func(k int, older bool) []Record {
				rs := make([]Record, k)
				for i := range rs {
					n++
					var d sig.Hash
					binary.LittleEndian.PutUint64(d[:], n*0x9e3779b97f4a7c15)
					end := 1e12 + n*1000
					if older {
						end = 1e12 - n*1000
					}
					rs[i] = Record{Digest: d, Room: room, Start: end - 10_000_000, End: end, Raw: make([]byte, 330)}
				}
				return rs
			}
			for range 200 {
				if _, err := st.PutRecords(ctx, next(1000, false)); err != nil {
					b.Fatal(err)
				}
			}
			if err := st.settle(ctx); err != nil {
				b.Fatal(err)
			}
			cpu0 := cpuTime(b)
			for b.Loop() {
				if _, err := st.PutRecords(ctx, next(c.group, c.older)); err != nil {
					b.Fatal(err)
				}
			}
			if err := st.settle(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.group)/1e3, "µs/record")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N*c.group)/1e3, "cpu-µs/record")
		})
	}
}

// BenchmarkRecordByDigest: a record found by its digest (GET
// /v1/records/{digest}) on a store of 200 000 records put in groups of
// 25, through the records' index (its runs and its pending entries,
// issue 30).
func BenchmarkRecordByDigest(b *testing.B) {
	st, err := Open(filepath.Join(b.TempDir(), "store.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	room := sig.Hash{7}
	var held []sig.Hash
	for g := range 8000 {
		rs := make([]Record, 25)
		for i := range rs {
			n := uint64(g*25 + i + 1)
			var d sig.Hash
			binary.LittleEndian.PutUint64(d[:], n*0x9e3779b97f4a7c15)
			end := 1e12 + n*1000
			rs[i] = Record{Digest: d, Room: room, Start: end - 10_000_000, End: end, Raw: make([]byte, 330)}
			held = append(held, d)
		}
		if _, err := st.PutRecords(ctx, rs); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		if _, err := st.Record(ctx, held[(i*7919)%len(held)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
