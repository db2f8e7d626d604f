package commit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/store"
)

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

// Records writes the records of the hops' POSTs in groups: the
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
// during the last write paid for a write every few records (issue 14).
//
// A group of fewer than recordEnough records then lingers, up to
// recordLinger from its first POST, for more: hops post every few seconds,
// apart, so that at a thousand POSTs a second hardly any is being checked
// when the last write returns, and every POST would pay a durable write of
// its own (on bbolt, a journal entry's sync, store/journal.go; on
// PostgreSQL, a transaction's), several times what checking its record
// costs (issue 30: 1 000 records a second within a tenth of a core). A hop waits for
// its answer recordLinger more at most, which no steering reads: a record
// counts once it is durable, as before.
type Records struct {
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

// recordLinger and recordEnough: a group of fewer than recordEnough
// records waits up to recordLinger from its first POST for more.
const (
	recordLinger = 25 * time.Millisecond
	recordEnough = 32
)

func NewRecords(st store.Store, log *slog.Logger) *Records {
	return &Records{st: st, log: log, in: newInbox[*recordJob](64), done: make(chan struct{})}
}

// Check counts a POST whose records are being checked, until the returned
// function is called, once, when they are handed over or refused.
func (c *Records) Check() (done func()) {
	c.checking.start()
	var once sync.Once
	return func() { once.Do(c.checking.leave) }
}

// Put hands rs to the Decisions and waits until they are durable, and
// reports for each whether it was new (Store.PutRecords). checked is the
// function check returned for the POST.
func (c *Records) Put(ctx context.Context, rs []store.Record, checked func()) ([]bool, error) {
	j := &recordJob{rs: rs, done: make(chan struct{})}
	checked() // before the send, so that a lone POST's group waits for none
	if !c.in.send(j) {
		return nil, ErrClosed
	}
	select {
	case <-j.done:
		return j.added, j.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops taking records; Run writes those already handed over.
func (c *Records) Close() { c.in.close() }

// Run writes groups until Close.
func (c *Records) Run() {
	defer close(c.done)
	var group []*recordJob
	var all []store.Record
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for j := range c.in.ch {
		first := time.Now()
		group, all = append(group[:0], j), append(all[:0], j.rs...)
		open := true
		if len(all) < maxRecordGroup {
			open = c.in.gather(func(j *recordJob) bool {
				group, all = append(group, j), append(all, j.rs...)
				return len(all) >= maxRecordGroup
			}, c.checking.since(), recordPatience, recordPoll, timer)
		}
		if linger := recordLinger - time.Since(first); open && len(all) < recordEnough && linger > 0 {
			c.in.gather(func(j *recordJob) bool {
				group, all = append(group, j), append(all, j.rs...)
				return len(all) >= recordEnough
			}, always, linger, linger, timer)
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

// always is a gather's waiting that waits its whole patience.
func always() bool { return true }
