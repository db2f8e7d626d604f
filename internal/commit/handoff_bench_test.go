package commit

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waisteer/waisteer/store"
)

// syncStore takes a group as a disk's sync does: it waits, and spends no
// CPU.
type syncStore struct {
	store.Store
	wait time.Duration
}

func (s syncStore) PutDecisions(context.Context, []store.Evidence, []store.Decision) error {
	time.Sleep(s.wait)
	return nil
}

func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHandOff is the hand-off of decisions to the committer and the
// wake-up of their requests (issue 30: "fewer wake-ups per request"), on
// a store whose write waits 300 µs as a sync does and costs nothing: 64
// requests hand over decision after decision. It reports the CPU per
// decision, which is the hand-off's, and the decisions per group.
func BenchmarkHandOff(b *testing.B) {
	const requests = 64
	c := NewDecisions(syncStore{Store: store.NewMemory(), wait: 300 * time.Microsecond}, quiet())
	go c.Run()
	defer c.Close()
	cpu0, start := cpuNow(b), time.Now()
	per := b.N/requests + 1
	var wg sync.WaitGroup
	b.ResetTimer()
	for range requests {
		wg.Go(func() {
			j := NewJob()
			for range per {
				c.StartDeciding(&j)
				if err := c.Commit(context.Background(), &j); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	n := per * requests
	groups, ds := c.Groups()
	b.ReportMetric(float64((cpuNow(b)-cpu0).Nanoseconds())/float64(n), "cpu-ns/decision")
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n), "ns/decision")
	b.ReportMetric(float64(ds)/float64(groups), "decisions/group")
}
