package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/guard"
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

// committer writes decisions to the store in groups: one durable write
// (PutDecisions) for every decision that waits, so that durability costs
// one write per group rather than one per request.
//
// A group is written once the write before it has returned, and holds
// every decision handed over meanwhile; under load the groups grow by
// themselves, to the decisions made while one write syncs, and the
// server's core signs the next group's decisions while the disk syncs this
// one's. A group also waits, up to groupPatience, for the requests being
// decided when it would be written (deciding counts them; not for those
// that start meanwhile, which at a moderate rate would keep every group
// waiting its whole patience): a write's cost
// is mostly its own, and a group of the five 32-pathway decisions signed
// during one sync paid for a write every five (issue 14). The wait costs
// the core nothing, since the requests it waits for are what it does
// meanwhile. A committer that spaced its writes by an interval instead
// (issue 7 had 4 ms) left the core idle once every request was in the
// group: issue 14 measured its core 74 to 78 % busy at saturation. A lone
// request is written at once.
type committer struct {
	st      store.Store
	metrics *metrics
	log     *slog.Logger

	in       inbox[*commitJob]
	deciding inFlight      // requests being decided, not yet handed over
	failing  atomic.Bool   // the last group failed
	outages  atomic.Uint64 // the times groups began failing
	done     chan struct{}

	evs []store.Evidence // reused by write, which run alone calls
	ds  []store.Decision
}

// groupPatience bounds how long a group waits for the requests being
// decided; it looks again at least every groupPoll, since a request whose
// decision fails hands nothing over.
const (
	groupPatience = time.Millisecond
	groupPoll     = 200 * time.Microsecond
)

func newCommitter(st store.Store, m *metrics, log *slog.Logger) *committer {
	return &committer{st: st, metrics: m, log: log, in: newInbox[*commitJob](maxGroup), done: make(chan struct{})}
}

// commit hands a decision to the committer and waits until it is durable,
// or until the store refused its group. decide counted the request in
// deciding; commit has it leave. A decision handed over
// is in a group whatever its client does, so commit waits for the group's
// outcome even when the client has gone (ctx is not read): a decision
// stored is answered and counted as stored, never as store_unavailable
// (issue 14), and the job is free for reuse once commit returns.
func (c *committer) commit(_ context.Context, j *commitJob) error {
	c.deciding.leave() // before the send, so that a lone request's group waits for none
	if !c.in.send(j) {
		return errClosed
	}
	return <-j.done
}

// close stops taking decisions; run commits those already handed over and
// returns.
func (c *committer) close() { c.in.close() }

// run writes groups until close: each holds the decisions queued when the
// write before it returned, and those of the requests then being decided
// that reach it within groupPatience.
func (c *committer) run() {
	defer close(c.done)
	group := make([]*commitJob, 0, maxGroup)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		j, ok := <-c.in.ch
		if !ok {
			return
		}
		group = append(group[:0], j)
		open := c.in.gather(func(j *commitJob) bool {
			group = append(group, j)
			return len(group) >= maxGroup
		}, c.deciding.since(), groupPatience, groupPoll, timer)
		c.write(group)
		clear(group)
		if !open {
			return
		}
	}
}

// write commits one group and answers each request: with the store's
// error, or the panic recovered in writing it (guard), which fails the
// group as a store's error does.
func (c *committer) write(group []*commitJob) {
	err := guard.Try(c.log, "committer", func() error { return c.put(group) })
	// One line per change of state, not per group (issue 26 item 6): a
	// store that logs its own outages (store.Health) has said why.
	if was := c.failing.Swap(err != nil); was != (err != nil) {
		failed, again := slog.LevelError, slog.LevelInfo
		if _, ok := c.st.(store.Health); ok {
			failed, again = slog.LevelDebug, slog.LevelDebug
		}
		if err != nil {
			c.outages.Add(1)
			c.log.Log(context.Background(), failed, "group commits failing", "decisions", len(group), "err", err)
		} else {
			c.log.Log(context.Background(), again, "group commits durable again")
		}
	}
	for _, j := range group {
		j.done <- err
	}
}

// put writes one group: the distinct evidence snapshots its decisions
// reference (the store skips those it holds) and the decisions, in one
// durable write.
func (c *committer) put(group []*commitJob) error {
	// A group's decisions share one or two snapshots: a search finds them.
	evs, ds := c.evs[:0], c.ds[:0]
	for _, j := range group {
		ds = append(ds, j.d)
		if !slices.ContainsFunc(evs, func(e store.Evidence) bool { return e.Key == j.ev.Key }) {
			evs = append(evs, j.ev)
		}
	}
	defer func() {
		clear(evs)
		clear(ds) // nothing of the requests' is kept past their answers
		c.evs, c.ds = evs[:0], ds[:0]
	}()
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	start := time.Now()
	err := c.st.PutDecisions(ctx, evs, ds)
	cancel()
	c.metrics.commitLatency.ObserveDuration(time.Since(start))
	c.metrics.commitBatch.Observe(float64(len(group)), uint64(len(group)))
	if err != nil {
		c.metrics.commitFailures.Add(1)
	}
	return err
}

// maxRecordGroup is the most records one group write of records holds: a
// few POSTs of the largest size.
const maxRecordGroup = 64 << 10

// recordJob is one POST's records waiting to be durable.
type recordJob struct {
	rs    []store.Record
	added []bool
	err   error
	done  chan struct{}
}

// recordCommitter writes the records of the hops' POSTs in groups: the
// POSTs that arrive while a write runs are written together by the next,
// one durable write (PutRecords) for all of them. A record given twice in a
// group is stored once, the later answered as a duplicate, as if the POSTs
// had been written one by one.
//
// A POST's records are checked (a signature each, the greatest cost of a
// record) before they are handed over, and a write's cost is mostly its
// own, not its records'. So a group also waits, up to recordPatience, for
// the POSTs being checked when it would be written (checking counts them):
// with one record per POST from many hops, a group of the few checked
// during the last write paid for a write every few records (issue 14). A
// POST alone is written at once.
type recordCommitter struct {
	st       store.Store
	log      *slog.Logger
	in       inbox[*recordJob]
	checking inFlight // POSTs whose records are being checked, not yet handed over
	done     chan struct{}
}

// recordPatience bounds how long a group of records waits for the POSTs
// being checked; it looks again at least every recordPoll, since a POST
// refused in its check hands nothing over.
const (
	recordPatience = 2 * time.Millisecond
	recordPoll     = 200 * time.Microsecond
)

func newRecordCommitter(st store.Store, log *slog.Logger) *recordCommitter {
	return &recordCommitter{st: st, log: log, in: newInbox[*recordJob](64), done: make(chan struct{})}
}

// check counts a POST whose records are being checked, until the returned
// function is called, once, when they are handed over or refused.
func (c *recordCommitter) check() (done func()) {
	c.checking.start()
	var once sync.Once
	return func() { once.Do(c.checking.leave) }
}

// put hands rs to the committer and waits until they are durable, and
// reports for each whether it was new (Store.PutRecords). checked is the
// function check returned for the POST.
func (c *recordCommitter) put(ctx context.Context, rs []store.Record, checked func()) ([]bool, error) {
	j := &recordJob{rs: rs, done: make(chan struct{})}
	checked() // before the send, so that a lone POST's group waits for none
	if !c.in.send(j) {
		return nil, errClosed
	}
	select {
	case <-j.done:
		return j.added, j.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *recordCommitter) close() { c.in.close() }

// inbox is a committer's channel of jobs, closed once: a job sent after
// the close is refused, never a send on a closed channel.
type inbox[T any] struct {
	ch     chan T
	mu     sync.RWMutex // held for reading while sending on ch; for writing to close it
	closed bool
}

func newInbox[T any](n int) inbox[T] { return inbox[T]{ch: make(chan T, n)} }

// send hands j over, and reports false when the inbox is closed.
func (b *inbox[T]) send(j T) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	b.ch <- j
	return true
}

// gather adds to a group, through add, the jobs queued after its first,
// and then, while waiting reports requests on their way to the inbox and
// patience has not passed, the jobs they send; add reports when the group
// is full. It asks waiting again at least every poll, since a request may
// leave without sending. It reports false once the inbox is closed (the
// jobs sent before are in the group). timer is the caller's, stopped.
func (b *inbox[T]) gather(add func(T) (full bool), waiting func() bool, patience, poll time.Duration, timer *time.Timer) (open bool) {
	until := time.Now().Add(patience)
	for {
		select {
		case j, ok := <-b.ch:
			if !ok {
				return false
			}
			if add(j) {
				return true
			}
			continue
		default:
		}
		// Nothing is queued: wait for the requests on their way.
		wait := time.Until(until)
		if wait <= 0 || !waiting() {
			return true
		}
		timer.Reset(min(wait, poll))
		select {
		case j, ok := <-b.ch:
			timer.Stop()
			if !ok {
				return false
			}
			if add(j) {
				return true
			}
		case <-timer.C:
		}
	}
}

// inFlight counts the requests on their way to a committer: those that
// started (deciding, or checking records) and those that left (handed
// their job over, or gave up without one).
type inFlight struct{ started, left atomic.Uint64 }

func (f *inFlight) start() { f.started.Add(1) }
func (f *inFlight) leave() { f.left.Add(1) }

// since returns a function reporting whether the requests started before
// now may still be on their way: fewer have left than had started. Those
// that start later do not keep it true (a later one that leaves first
// ends the wait a little early, which costs a smaller group, nothing
// more).
func (f *inFlight) since() func() bool {
	n := f.started.Load()
	return func() bool { return f.left.Load() < n }
}

// close closes the channel, once; the receiver takes what was sent.
func (b *inbox[T]) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.ch)
	}
}

// run writes groups until close.
func (c *recordCommitter) run() {
	defer close(c.done)
	var group []*recordJob
	var all []store.Record
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for j := range c.in.ch {
		group, all = append(group[:0], j), append(all[:0], j.rs...)
		if len(all) < maxRecordGroup {
			c.in.gather(func(j *recordJob) bool {
				group, all = append(group, j), append(all, j.rs...)
				return len(all) >= maxRecordGroup
			}, c.checking.since(), recordPatience, recordPoll, timer)
		}
		var added []bool
		err := guard.Try(c.log, "records", func() (err error) {
			ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
			defer cancel()
			added, err = c.st.PutRecords(ctx, all)
			return err
		})
		if err == nil && len(added) != len(all) {
			err = errors.New("the store answered for another count of records")
		}
		for _, j := range group {
			j.err = err
			if err == nil {
				j.added, added = added[:len(j.rs):len(j.rs)], added[len(j.rs):]
			}
			close(j.done)
		}
		clear(group)
		clear(all)
	}
}
