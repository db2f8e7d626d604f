// Package commit makes the server's writes durable in groups: the
// decisions of the steering requests (Decisions), one durable write for
// every decision that waits, and the records of the hops' POSTs (Records).
// It owns the groups, their patience and their metrics, and knows nothing
// of rooms, pools or routes: a steerer hands it a Job and waits. The
// server makes, runs and closes them; it imports no steerer nor the
// server.
package commit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/store"
)

// maxGroup is the most decisions one group commit writes.
const maxGroup = 1024

// commitTimeout bounds one group commit: a store that does not answer in
// this time is treated as failing, and its requests are answered 503.
const commitTimeout = 5 * time.Second

// ErrClosed is the error of a commit handed to a closed Decisions.
var ErrClosed = errors.New("commit: closing")

// ErrCounted is the error of a decision refused unwritten: it may have
// counted the session of a decision that was not stored (Decisions.Undo).
var ErrCounted = errors.New("commit: the decision may count a session whose decision was not stored")

// Job is one decision waiting to be durable.
type Job struct {
	Evidence store.Evidence // the snapshot the decision names
	Decision store.Decision
	done     chan error // buffered: Decisions never waits on a request
	// began and handed are when the request started deciding and handed
	// the job over (monotonic ns, now): its loads were read between.
	began, handed int64
}

// NewJob makes a job, to be reused for one decision after another.
func NewJob() Job { return Job{done: make(chan error, 1)} }

// Decisions writes decisions to the store in groups: one durable write
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
// meanwhile. A Decisions that spaced its writes by an interval instead
// (issue 7 had 4 ms) left the core idle once every request was in the
// group: issue 14 measured its core 74 to 78 % busy at saturation. A lone
// request is written at once.
type Decisions struct {
	st  store.Store
	log *slog.Logger

	// Undo takes back, in the table of loads, the session of a decision
	// that is not stored (store.Loads.Unsteer); set before Run, nil when
	// there is none. §6 counts a session from its latest stored decision,
	// and a decision states the loads it was decided with: one decided
	// while another's session was counted, whose decision then was not
	// stored, states a session the audit's recount (§9.2) never sees. So
	// when a group fails, its sessions are taken back before its requests
	// are answered, and every decision that may have been decided between
	// one of those sessions' Steer and its Undo (began before the Undo,
	// handed over after the Steer's request began) in the same room is
	// refused unwritten (ErrCounted), and taken back in its turn.
	Undo func(d *store.Decision)
	// undone are the spans, per room, in which the sessions of decisions
	// not stored were counted: Run's alone.
	undone  []undoneSpan
	refused atomic.Uint64 // decisions refused unwritten (ErrCounted)

	batch    *web.Histogram // decisions per group
	latency  *web.Histogram // a group's write
	failures atomic.Uint64  // groups the store refused

	in       inbox[*Job]
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

// NewDecisions writes decisions to st; Run does the writing.
func NewDecisions(st store.Store, log *slog.Logger) *Decisions {
	return &Decisions{
		st: st, log: log, in: newInbox[*Job](maxGroup), done: make(chan struct{}),
		batch: web.NewHistogram(batchBounds, 1), latency: web.NewLatencyHistogram(),
	}
}

// batchBounds are the upper bounds of the group sizes' buckets.
var batchBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// StartDeciding counts a request being decided into j, which a group
// waits for (up to groupPatience) until it hands j over (Commit) or gives
// up (LeaveDeciding). It is called before the request reads the table of
// loads.
func (c *Decisions) StartDeciding(j *Job) {
	j.began = now()
	c.deciding.start()
}

// epoch is now's origin: its readings are monotonic.
var epoch = time.Now()

// now is the time since epoch, ns.
func now() int64 { return int64(time.Since(epoch)) }

// undoneSpan is a room's span of time in which sessions of decisions not
// stored were counted: from the earliest of those decisions' requests
// began deciding until their sessions were taken back.
type undoneSpan struct {
	room     sig.Hash
	from, to int64
}

// undoneKeep is how long a span is kept: a request handed over longer
// after it began than this was refused by its table of loads (whose waits
// are bounded at a second) or its client long before.
const undoneKeep = time.Minute

// maxUndone bounds the spans kept; past it, the oldest are forgotten.
const maxUndone = 256

// counted reports whether j may have counted a session taken back: it
// began deciding before one of its room's spans ended and was handed over
// after that span began.
func (c *Decisions) counted(j *Job) bool {
	for i := range c.undone {
		u := &c.undone[i]
		if j.began < u.to && j.handed > u.from && u.room == j.Decision.Room {
			return true
		}
	}
	return false
}

// takeBack undoes the sessions of jobs, whose decisions are not stored,
// and keeps the spans in which they were counted.
func (c *Decisions) takeBack(jobs []*Job) {
	if c.Undo != nil {
		for _, j := range jobs {
			c.Undo(&j.Decision)
		}
	}
	to := now()
	c.undone = slices.DeleteFunc(c.undone, func(u undoneSpan) bool { return to-u.to > int64(undoneKeep) })
	fresh := len(c.undone) // this take-back's spans, one a room, from here
	for _, j := range jobs {
		i := slices.IndexFunc(c.undone[fresh:], func(u undoneSpan) bool { return u.room == j.Decision.Room })
		if i < 0 {
			c.undone = append(c.undone, undoneSpan{room: j.Decision.Room, from: j.began, to: to})
		} else {
			c.undone[fresh+i].from = min(c.undone[fresh+i].from, j.began)
		}
	}
	if len(c.undone) > maxUndone {
		c.undone = slices.Delete(c.undone, 0, len(c.undone)-maxUndone)
	}
}

// refuse answers j, which may have counted a session taken back, without
// writing it, and takes its own session back.
func (c *Decisions) refuse(j *Job) {
	c.refused.Add(1)
	c.takeBack([]*Job{j})
	j.done <- ErrCounted
}

// LeaveDeciding counts a request that started deciding and will hand
// nothing over.
func (c *Decisions) LeaveDeciding() { c.deciding.leave() }

// Failing says whether the last group failed.
func (c *Decisions) Failing() bool { return c.failing.Load() }

// Outages is how many times groups began failing.
func (c *Decisions) Outages() uint64 { return c.outages.Load() }

// Groups is how many groups were written and the decisions they held.
func (c *Decisions) Groups() (groups, decisions uint64) { return c.batch.Totals() }

// WriteMetrics writes the group commits' metric families.
func (c *Decisions) WriteMetrics(b *bytes.Buffer) {
	b.WriteString("# HELP waisteer_commit_group_size Decisions per durable group commit.\n# TYPE waisteer_commit_group_size histogram\n")
	c.batch.Write(b, "waisteer_commit_group_size", "")
	b.WriteString("# HELP waisteer_commit_duration_seconds Time of one durable group commit.\n# TYPE waisteer_commit_duration_seconds histogram\n")
	c.latency.Write(b, "waisteer_commit_duration_seconds", "")
	b.WriteString("# HELP waisteer_commit_failures_total Group commits the store refused.\n# TYPE waisteer_commit_failures_total counter\n")
	fmt.Fprintf(b, "waisteer_commit_failures_total %d\n", c.failures.Load())
	b.WriteString("# HELP waisteer_commit_refused_total Decisions refused unwritten, since they may count the session of a decision whose group failed (§6: a session counts from a stored decision).\n# TYPE waisteer_commit_refused_total counter\n")
	fmt.Fprintf(b, "waisteer_commit_refused_total %d\n", c.refused.Load())
}

// Commit hands a decision to the Decisions and waits until it is durable,
// or until the store refused its group. the request was counted with
// StartDeciding; Commit has it leave. A decision handed over
// is in a group whatever its client does, so commit waits for the group's
// outcome even when the client has gone (ctx is not read): a decision
// stored is answered and counted as stored, never as store_unavailable
// (issue 14), and the job is free for reuse once commit returns.
func (c *Decisions) Commit(_ context.Context, j *Job) error {
	j.handed = now()
	c.deciding.leave() // before the send, so that a lone request's group waits for none
	if !c.in.send(j) {
		return ErrClosed
	}
	return <-j.done
}

// Close stops taking decisions; Run commits those already handed over and
// returns.
func (c *Decisions) Close() { c.in.close() }

// Run writes groups until Close: each holds the decisions queued when the
// write before it returned, and those of the requests then being decided
// that reach it within groupPatience.
func (c *Decisions) Run() {
	defer close(c.done)
	group := make([]*Job, 0, maxGroup)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		j, ok := <-c.in.ch
		if !ok {
			return
		}
		group = group[:0]
		add := func(j *Job) bool {
			if len(c.undone) > 0 && c.counted(j) {
				c.refuse(j) // at once: what it counted is taken back sooner
				return false
			}
			group = append(group, j)
			return len(group) >= maxGroup
		}
		add(j)
		open := c.in.gather(add, c.deciding.since(), groupPatience, groupPoll, timer)
		if len(group) > 0 {
			c.write(group)
		}
		clear(group)
		if !open {
			return
		}
	}
}

// write commits one group and answers each request: with the store's
// error, or the panic recovered in writing it (guard), which fails the
// group as a store's error does.
func (c *Decisions) write(group []*Job) {
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
	if err != nil {
		c.takeBack(group)
	}
	for _, j := range group {
		j.done <- err
	}
}

// put writes one group: the distinct evidence snapshots its decisions
// reference (the store skips those it holds) and the decisions, in one
// durable write.
func (c *Decisions) put(group []*Job) error {
	// A group's decisions share one or two snapshots: a search finds them.
	evs, ds := c.evs[:0], c.ds[:0]
	for _, j := range group {
		ds = append(ds, j.Decision)
		if !slices.ContainsFunc(evs, func(e store.Evidence) bool { return e.Key == j.Evidence.Key }) {
			evs = append(evs, j.Evidence)
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
	c.latency.ObserveDuration(time.Since(start))
	c.batch.Observe(float64(len(group)), uint64(len(group)))
	if err != nil {
		c.failures.Add(1)
	}
	return err
}

// inbox is a Decisions's channel of jobs, closed once: a job sent after
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

// inFlight counts the requests on their way to a Decisions: those that
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
