package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// maxGroup is the most decisions one group commit writes.
const maxGroup = 1024

// commitTimeout bounds one group commit: a store that does not answer in
// this time is treated as failing, and its requests are answered 503.
const commitTimeout = 5 * time.Second

// errClosed is the error of a commit handed to a closed committer.
var errClosed = errors.New("server: closing")

// commitJob is one decision waiting to be durable.
type commitJob struct {
	ev   store.Evidence
	d    store.Decision
	done chan error // buffered: the committer never waits on a request
}

var jobs = sync.Pool{New: func() any { return &commitJob{done: make(chan error, 1)} }}

// committer writes decisions to the store in groups: one durable write
// (PutDecisions) for every decision that waits, so that durability costs
// one write per group rather than one per request.
//
// A group is the decisions waiting when the last write ended, and those
// that join it within the interval while requests are still being decided
// (pending counts them): a group is written at once when no request is
// between its decision and its commit, so that a lone request does not
// wait for others that are not coming.
type committer struct {
	st       store.Store
	interval time.Duration
	metrics  *metrics
	log      *slog.Logger

	in      chan *commitJob
	mu      sync.RWMutex // held for reading while sending on in; for writing to close it
	closed  bool
	pending atomic.Int64 // requests decided or deciding and not yet handed over
	failing atomic.Bool  // the last group failed
	done    chan struct{}
}

func newCommitter(st store.Store, interval time.Duration, m *metrics, log *slog.Logger) *committer {
	return &committer{st: st, interval: interval, metrics: m, log: log, in: make(chan *commitJob, maxGroup), done: make(chan struct{})}
}

// commit hands a decision to the committer and waits until it is durable.
// The caller counted itself in pending before deciding; commit counts it
// out. When ctx ends first, the decision may still be committed; the job
// is then left to the garbage collector, since the committer will still
// answer on it.
func (c *committer) commit(ctx context.Context, j *commitJob) error {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		c.pending.Add(-1)
		return errClosed
	}
	c.in <- j
	c.pending.Add(-1)
	c.mu.RUnlock()
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops taking decisions; run commits those already handed over and
// returns.
func (c *committer) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.in)
	}
	c.mu.Unlock()
}

// run gathers groups and writes them until close.
func (c *committer) run() {
	defer close(c.done)
	group := make([]*commitJob, 0, maxGroup)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		j, ok := <-c.in
		if !ok {
			return
		}
		group = append(group[:0], j)
		open := true
		timer.Reset(c.interval)
	gather:
		for len(group) < maxGroup {
			select {
			case j, ok := <-c.in:
				if !ok {
					open = false
					break gather
				}
				group = append(group, j)
				continue
			default:
			}
			// Nothing is queued: wait only while some request is on its
			// way here.
			if c.pending.Load() == 0 {
				break
			}
			select {
			case j, ok := <-c.in:
				if !ok {
					open = false
					break gather
				}
				group = append(group, j)
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		c.write(group)
		clear(group)
		if !open {
			return
		}
	}
}

// write commits one group: the distinct evidence snapshots its decisions
// reference (the store skips those it holds) and the decisions, in one
// durable write, and answers each request.
func (c *committer) write(group []*commitJob) {
	evs := make([]store.Evidence, 0, 2)
	seen := make(map[sig.Hash]bool, 2)
	ds := make([]store.Decision, len(group))
	for i, j := range group {
		ds[i] = j.d
		if !seen[j.ev.Key] {
			seen[j.ev.Key] = true
			evs = append(evs, j.ev)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	start := time.Now()
	err := c.st.PutDecisions(ctx, evs, ds)
	cancel()
	c.metrics.commitLatency.observeDuration(time.Since(start))
	c.metrics.commitBatch.observe(float64(len(group)), uint64(len(group)))
	if err != nil {
		c.metrics.commitFailures.Add(1)
		c.log.Error("group commit failed", "decisions", len(group), "err", err)
	}
	c.failing.Store(err != nil)
	for _, j := range group {
		j.done <- err
	}
}
