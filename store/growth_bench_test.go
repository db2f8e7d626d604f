package store

import (
	"encoding/binary"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkGrowthStall grows a bbolt file past 512 MiB and 1 GiB, as a
// store of a few million decisions grows, reading back what each commit
// wrote through the map, on one P (a server pinned to one core), while a
// goroutine ticks every millisecond; it reports the latest tick and the
// ticks over 10 ms late. mapped=0
// is bbolt's own mapping, in steps, each unmapping the file; ahead is
// Open's (defaultInitialMap). SPEC-NOTES "The file mapped ahead".
//
//	go test -run=NONE -bench=GrowthStall -benchtime=1x ./store
func BenchmarkGrowthStall(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
	}{{"mapped=0", 0}, {"mapped=ahead", defaultInitialMap}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				lates, took := growthStall(b, c.size, 1100<<20)
				over := 0
				for _, l := range lates {
					if l > 10*time.Millisecond {
						over++
					}
				}
				b.ReportMetric(float64(slices.Max(lates).Microseconds())/1000, "worst-tick-late-ms")
				b.ReportMetric(float64(over), "ticks-late>10ms")
				b.ReportMetric(took.Seconds(), "s-to-grow")
			}
		})
	}
}

func growthStall(b *testing.B, initial int, until int64) (lates []time.Duration, took time.Duration) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	path := filepath.Join(b.TempDir(), "grow.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType, InitialMmapSize: initial})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	stop, done := make(chan struct{}), make(chan []time.Duration)
	go func() {
		var lates []time.Duration
		next := time.Now()
		for {
			select {
			case <-stop:
				done <- lates
				return
			default:
			}
			next = next.Add(time.Millisecond)
			time.Sleep(time.Until(next))
			late := time.Since(next)
			lates = append(lates, late)
			if late > 5*time.Millisecond {
				next = time.Now()
			}
		}
	}()
	began := time.Now()
	val, key := make([]byte, 3000), make([]byte, 8)
	var n uint64
	for {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for range 200 {
				n++
				if err := bk.Put(binary.BigEndian.AppendUint64(key[:0], n), val); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			err = db.View(func(tx *bolt.Tx) error {
				c := tx.Bucket([]byte("b")).Cursor()
				for k := n - 199; k <= n; k++ {
					if _, v := c.Seek(binary.BigEndian.AppendUint64(key[:0], k)); len(v) != len(val) {
						b.Fatalf("key %d: %d bytes read back", k, len(v))
					}
				}
				return nil
			})
		}
		if err != nil {
			b.Fatal(err)
		}
		var size int64
		db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
		if size > until {
			break
		}
		time.Sleep(200 * time.Microsecond) // a server's pace, not a bulk load's
	}
	took = time.Since(began)
	close(stop)
	return <-done, took
}
