// Package health checks a set of targets over plain HTTP and says when
// each goes down or comes back: the station seed's health checks (issue
// 12, item 4). It knows nothing of pools or rooms; the server runs a
// Checker per pool, and per energy room whose pathways have check URLs,
// and wires its changes to them.
//
// # A check
//
// A check is one GET of the target's URL over HTTP/1.1, with
//
//	GET /health HTTP/1.1
//	Host: edge-1.edges.example
//	User-Agent: waisteer-health
//	Connection: keep-alive
//	Accept: */*
//
// A 2xx answer passes. A redirect (3xx, never followed), any other status,
// a refused connection, a reset, an answer that is not HTTP and a timeout
// fail; the whole exchange, from the dial to the body's end, is bounded by
// Settings.Timeout. The body is read, at most 64 KiB of it, and discarded;
// a longer one is left unread and its connection dropped. Otherwise the
// connection is kept for the next check, and a kept connection the edge
// closed while idle is dialled again once within the same check.
//
// # When a target is up
//
// Every target starts up, since the seed counts an edge never checked as
// up; DownAfter failed checks in a row take it down, and one pass brings
// it back.
//
// # When a target is checked
//
// Target i of n is checked on its own grid, start + i·Every/n + k·Every,
// its place i·Every/n rounded down to a 50 ms tick, so that the checks of
// a set are spread over the period and the first of them over the first
// period, and the timers of targets close together fire as one. Each target has its
// own goroutine, so a slow check delays no other target's. A check is
// never doubled: the next one is at the first slot of the grid at least
// half a period after the last began, and when the last ran past that
// slot, the next starts as soon as it ends.
//
// # Cost
//
// A check on a kept connection is a write, two reads (the first finds
// nothing yet) and the parse of a few lines, with no allocation.
// BenchmarkPool1000 measured 1 000 loopback targets checked every second
// at 2.2 to 2.5 % of one core (user and system time of the checker's
// process; the edges run in a child) on the project's 2-core machine.
package health

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/waisteer/waisteer/internal/guard"
)

// Settings are a checker's timing: every target is checked every Every, each check may take
// Timeout, and DownAfter failures in a row take a target down; one pass brings it back.
type Settings struct {
	Every, Timeout time.Duration
	DownAfter      int
}

// Target is one thing to check: a name (a pathway ID) and a plain-HTTP URL. The URL was checked by
// the configuration's reader (http://, no userinfo); the checker still refuses anything else
// (New returns an error naming the target).
type Target struct{ Name, URL string }

// Status is what the operator sees of a target.
type Status struct {
	Up        bool
	Failures  int       // failed checks in a row
	Checks    uint64    // checks done since start
	LastCheck time.Time // zero before the first
	LastError string    // "" after a pass: why the last check failed
	LastMs    float64   // the last check's duration in milliseconds
	Since     time.Time // when Up last changed (when the target was added before any change)
}

// Outcome of one check, for metrics.
type Outcome string

const (
	OutcomePass     Outcome = "pass"
	OutcomeStatus   Outcome = "status" // not 2xx and not a redirect
	OutcomeRedirect Outcome = "redirect"
	OutcomeRefused  Outcome = "refused"
	OutcomeTimeout  Outcome = "timeout"
	OutcomeError    Outcome = "error" // anything else: garbage, reset, DNS
)

// Change is a target going down or coming back.
type Change struct {
	Name   string
	Up     bool
	Status Status // after the change
}

type Options struct {
	// OnChange is called, outside any lock the checker holds, for every change of Up, in order per
	// target. It must be quick (it runs on the checker's goroutine), and must not call Update or
	// Stop, which wait for the checks in flight.
	OnChange func(Change)
	// OnCheck is called after every check (metrics): name, outcome, duration.
	OnCheck func(name string, o Outcome, d time.Duration)
	// Now gives the times in Status; nil: time.Now. Durations and the
	// schedule use the monotonic clock whatever it is.
	Now    func() time.Time
	Logger *slog.Logger // nil: no logs (but a panic's, on slog's default); the checker logs each change at Info (down: Warn) with why
}

// Checker checks its targets, each on its own goroutine once started.
type Checker struct {
	onChange func(Change)
	onCheck  func(string, Outcome, time.Duration)
	now      func() time.Time
	log      *slog.Logger
	panicLog *slog.Logger // Options.Logger: nil logs a panic on slog's default

	// byName is read by Status without mu.
	byName atomic.Pointer[map[string]*runner]

	mu      sync.Mutex // Start, Stop and Update
	runners []*runner  // in the order given, which sets the spread
	ctx     context.Context
	cancel  context.CancelFunc
	epoch   time.Time // the grid's origin: Start
	stopped bool
	wg      sync.WaitGroup
}

// New makes a checker of targets; it checks nothing until Start.
func New(s Settings, targets []Target, o Options) (*Checker, error) {
	c := &Checker{onChange: o.OnChange, onCheck: o.OnCheck, now: o.Now, log: o.Logger, panicLog: o.Logger}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.byName.Store(&map[string]*runner{})
	if err := c.Update(s, targets); err != nil {
		return nil, err
	}
	return c, nil
}

// Start begins checking (each target's first check spread over the first period, never all at
// once) until ctx ends or Stop; Stop waits for the checks in flight to end.
func (c *Checker) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx != nil || c.stopped {
		return
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.epoch = time.Now()
	for _, r := range c.runners {
		c.launch(r, c.epoch)
	}
}

// Stop ends the checks, cutting short those in flight, and returns once
// they have ended. The checker is not started again.
func (c *Checker) Stop() {
	c.mu.Lock()
	c.stopped = true
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Status of one target; false for an unknown name.
func (c *Checker) Status(name string) (Status, bool) {
	r, ok := (*c.byName.Load())[name]
	if !ok {
		return Status{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st, true
}

// Update replaces the settings and targets (a reloaded configuration): a target kept with the
// same name and URL keeps its status; a new one starts up; removed ones stop, and Update returns
// once their checks in flight have ended. On an error nothing changes.
func (c *Checker) Update(s Settings, targets []Target) error {
	if err := s.check(); err != nil {
		return err
	}
	wires := make([]wire, len(targets))
	seen := make(map[string]bool, len(targets))
	for i, t := range targets {
		w, err := parseTarget(t)
		if err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("health: target %q is given twice", t.Name)
		}
		seen[t.Name], wires[i] = true, w
	}

	c.mu.Lock()
	old := *c.byName.Load()
	byName := make(map[string]*runner, len(targets))
	runners := make([]*runner, len(targets))
	var added []*runner
	n := time.Duration(len(targets))
	for i, t := range targets {
		p := &plan{
			every: s.Every, timeout: s.Timeout, downAfter: s.DownAfter,
			offset: (s.Every * time.Duration(i) / n).Truncate(tick),
		}
		r, kept := old[t.Name]
		if kept && r.target.URL == t.URL {
			r.plan.Store(p)
			select {
			case r.wake <- struct{}{}:
			default:
			}
		} else {
			r = c.newRunner(t, wires[i], p)
			added = append(added, r)
		}
		byName[t.Name], runners[i] = r, r
	}
	var removed []*runner
	for name, r := range old {
		if byName[name] != r {
			removed = append(removed, r)
		}
	}
	c.byName.Store(&byName)
	c.runners = runners
	if c.ctx != nil && !c.stopped {
		now := time.Now()
		for _, r := range added {
			c.launch(r, now)
		}
	}
	for _, r := range removed {
		if r.cancel != nil {
			r.cancel()
		}
	}
	c.mu.Unlock()

	for _, r := range removed {
		if r.done != nil {
			<-r.done
		}
	}
	return nil
}

func (s Settings) check() error {
	switch {
	case s.Every <= 0:
		return fmt.Errorf("health: the period %v is not positive", s.Every)
	case s.Timeout <= 0 || s.Timeout > s.Every:
		return fmt.Errorf("health: the timeout %v is not within the period %v", s.Timeout, s.Every)
	case s.DownAfter < 1:
		return fmt.Errorf("health: down after %d failures is fewer than one", s.DownAfter)
	}
	return nil
}

// wire is a target's URL made ready to use: where to dial and the request.
type wire struct {
	addr    string
	request []byte
}

// parseTarget refuses a URL that is not plain http:// with a host, or that
// carries userinfo, and builds the request once.
func parseTarget(t Target) (wire, error) {
	if t.Name == "" {
		return wire{}, fmt.Errorf("health: a target has no name")
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return wire{}, fmt.Errorf("health: target %q: %v", t.Name, err)
	}
	switch {
	case u.Scheme != "http":
		return wire{}, fmt.Errorf("health: target %q: %q is not a plain http:// URL", t.Name, t.URL)
	case u.User != nil:
		return wire{}, fmt.Errorf("health: target %q: %q carries userinfo", t.Name, t.URL)
	case u.Opaque != "" || u.Hostname() == "":
		return wire{}, fmt.Errorf("health: target %q: %q has no host", t.Name, t.URL)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return wire{}, fmt.Errorf("health: target %q: %q has no valid port", t.Name, t.URL)
	}
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\n" +
		"Host: " + u.Host + "\r\n" +
		"User-Agent: waisteer-health\r\n" +
		"Connection: keep-alive\r\n" +
		"Accept: */*\r\n\r\n"
	return wire{addr: net.JoinHostPort(u.Hostname(), port), request: []byte(req)}, nil
}

// tick is the grain of the spread: the targets whose places fall in one
// tick are checked together, so that the process wakes at most 20 times a
// second however many targets it checks; each wake of an idle process
// costs more than the check it makes. BenchmarkPool1000 (1 000 targets,
// 1 ms apart) on an idle machine: a wake per check 4.4 to 4.9 % of a core,
// a 10 ms tick 3.7 to 3.9 %, 50 ms 2.2 to 2.4 %, 100 ms 2.2 %.
const tick = 50 * time.Millisecond

// plan is a target's timing, replaced as a whole by Update.
type plan struct {
	every, timeout time.Duration
	downAfter      int
	offset         time.Duration // in [0, every): the target's place in the spread
}

// slot is the first time of the grid epoch + offset + k·every (k ≥ 0) not
// before t.
func (p *plan) slot(epoch, t time.Time) time.Time {
	d := t.Sub(epoch) - p.offset
	if d <= 0 {
		return epoch.Add(p.offset)
	}
	k := (d + p.every - 1) / p.every
	return epoch.Add(p.offset + k*p.every)
}

// runner is one target's checks.
type runner struct {
	c      *Checker
	target Target
	wire   wire

	plan atomic.Pointer[plan]
	wake chan struct{} // a new plan; buffered

	// Set by launch, under c.mu.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu sync.Mutex // st, for Status
	st Status

	// The kept connection. Only run changes conn, and under cmu, so that
	// halt can cut a check in flight short from another goroutine.
	cmu    sync.Mutex
	conn   net.Conn
	br     *bufio.Reader
	halted bool
}

func (c *Checker) newRunner(t Target, w wire, p *plan) *runner {
	r := &runner{c: c, target: t, wire: w, wake: make(chan struct{}, 1)}
	r.plan.Store(p)
	r.st = Status{Up: true, Since: c.now()}
	return r
}

// launch starts r's goroutine, whose first check is at the first slot of
// its grid from then on; c.mu is held.
func (c *Checker) launch(r *runner, from time.Time) {
	r.ctx, r.cancel = context.WithCancel(c.ctx)
	r.done = make(chan struct{})
	context.AfterFunc(r.ctx, r.halt)
	c.wg.Add(1)
	go r.run(c.epoch, from)
}

// run checks the target on its grid until its context ends.
func (r *runner) run(epoch, from time.Time) {
	defer close(r.done)
	defer r.c.wg.Done()
	defer r.drop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var last time.Time // when the last check began
	for {
		p := r.plan.Load()
		at := p.slot(epoch, from)
		if !last.IsZero() {
			at = p.slot(epoch, last.Add(p.every/2))
		}
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-r.ctx.Done():
				timer.Stop()
				return
			case <-r.wake:
				timer.Stop()
				continue
			case <-timer.C:
			}
		} else if r.ctx.Err() != nil {
			return
		}
		last = time.Now()
		// A panic in a check (reading the edge's answer, or the
		// caller's OnChange or OnCheck) is logged and counted, and the
		// target is checked again at its next slot.
		guard.Do(r.c.panicLog, "health", func() { r.check(p) })
	}
}

// check runs one check and records it.
func (r *runner) check(p *plan) {
	start := time.Now()
	o, why := r.probe(p.timeout, start)
	d := time.Since(start)
	if r.ctx.Err() != nil {
		// Cut short by Stop or Update: nothing was learnt of the target.
		return
	}
	now := r.c.now()
	r.mu.Lock()
	st := &r.st
	st.Checks++
	st.LastCheck = now
	st.LastMs = float64(d) / float64(time.Millisecond)
	changed := false
	if o == OutcomePass {
		st.Failures, st.LastError = 0, ""
		if !st.Up {
			st.Up, st.Since, changed = true, now, true
		}
	} else {
		st.Failures++
		st.LastError = why
		if st.Up && st.Failures >= p.downAfter {
			st.Up, st.Since, changed = false, now, true
		}
	}
	after := *st
	r.mu.Unlock()

	if changed {
		r.changed(after)
	}
	if r.c.onCheck != nil {
		r.c.onCheck(r.target.Name, o, d)
	}
}

// changed logs a change and reports it.
func (r *runner) changed(after Status) {
	if after.Up {
		r.c.log.Info("health: target up", "target", r.target.Name, "url", r.target.URL,
			"why", "a check passed", "ms", after.LastMs)
	} else {
		r.c.log.Warn("health: target down", "target", r.target.Name, "url", r.target.URL,
			"failures", after.Failures, "why", after.LastError)
	}
	if r.c.onChange != nil {
		r.c.onChange(Change{Name: r.target.Name, Up: after.Up, Status: after})
	}
}

// probe is one exchange, judged.
func (r *runner) probe(timeout time.Duration, start time.Time) (Outcome, string) {
	a, err := r.exchange(start.Add(timeout))
	if err != nil {
		r.drop()
		return judge(err, timeout)
	}
	if !a.reuse {
		r.drop()
	}
	switch {
	case a.status >= 200 && a.status < 300:
		return OutcomePass, ""
	case a.status >= 300 && a.status < 400:
		return OutcomeRedirect, fmt.Sprintf("status %d (a redirect is a failure)", a.status)
	default:
		return OutcomeStatus, fmt.Sprintf("status %d", a.status)
	}
}

// exchange sends the GET and reads the answer by deadline, on the kept
// connection or a new one. A kept connection the edge closed while idle
// fails before the first byte of an answer; it is dialled again, once.
func (r *runner) exchange(deadline time.Time) (answer, error) {
	for {
		reused := r.conn != nil
		if !reused {
			if err := r.dial(deadline); err != nil {
				return answer{}, err
			}
		}
		if err := r.arm(deadline); err != nil {
			return answer{}, err
		}
		_, err := r.conn.Write(r.wire.request)
		if err == nil {
			_, err = r.br.Peek(1)
		}
		if err != nil {
			if reused && stale(err) {
				r.drop()
				continue
			}
			return answer{}, err
		}
		a, err := readAnswer(r.br)
		if err == nil && r.br.Buffered() > 0 {
			// More than one answer came: the next would be misread.
			a.reuse = false
		}
		if err == nil && a.reuse {
			// A deadline left set would fire while the connection idles:
			// a timer event per check for nothing. (If halt came in
			// between, run sees its context ended before any wait.)
			r.conn.SetReadDeadline(time.Time{})
		}
		return a, err
	}
}

func (r *runner) dial(deadline time.Time) error {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.DialContext(r.ctx, "tcp", r.wire.addr)
	if err != nil {
		return err
	}
	r.cmu.Lock()
	defer r.cmu.Unlock()
	if r.halted {
		conn.Close()
		return context.Canceled
	}
	r.conn = conn
	if r.br == nil {
		r.br = bufio.NewReaderSize(conn, lineLimit)
	} else {
		r.br.Reset(conn)
	}
	return nil
}

// arm sets the check's deadline on the connection, unless halt came first.
// Only reading waits: a request of a hundred bytes, on a connection that
// carries one at a time, always fits the socket's buffer, and a write
// deadline would be one more runtime timer per check. The dial has its
// own deadline.
func (r *runner) arm(deadline time.Time) error {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	if r.halted {
		return context.Canceled
	}
	return r.conn.SetReadDeadline(deadline)
}

// halt cuts the check in flight short; it runs when r's context ends.
func (r *runner) halt() {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	r.halted = true
	if r.conn != nil {
		r.conn.SetDeadline(time.Unix(1, 0))
	}
}

// drop closes the kept connection.
func (r *runner) drop() {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	if r.conn != nil {
		r.conn.Close()
		r.conn = nil
	}
}

// stale says err is how a connection the peer closed while idle fails.
func stale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// judge names a failed exchange's outcome and says why, for LastError.
func judge(err error, timeout time.Duration) (Outcome, string) {
	var ne net.Error
	var dns *net.DNSError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return OutcomeTimeout, "timed out after " + timeout.String()
	case errors.Is(err, syscall.ECONNREFUSED):
		return OutcomeRefused, "connection refused"
	case errors.As(err, &dns):
		return OutcomeError, "lookup " + dns.Name + ": " + dns.Err
	case errors.Is(err, syscall.ECONNRESET):
		return OutcomeError, "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, syscall.EPIPE):
		return OutcomeError, "connection closed before an answer"
	default:
		// Garbage (notHTTP), an answer cut short, or anything else.
		return OutcomeError, err.Error()
	}
}
