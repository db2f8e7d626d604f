package commit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// gateStore holds each PutDecisions until the test lets it go, and keeps
// the size of every group it was given.
type gateStore struct {
	store.Store
	mu     sync.Mutex
	groups []int
	gate   chan struct{}
	fail   error
}

func (g *gateStore) PutDecisions(_ context.Context, _ []store.Evidence, ds []store.Decision) error {
	g.mu.Lock()
	g.groups = append(g.groups, len(ds))
	g.mu.Unlock()
	<-g.gate
	return g.fail
}

func (g *gateStore) sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.groups...)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func job(n byte) *Job {
	j := NewJob()
	j.Decision.Digest = sig.Hash{n}
	return &j
}

// TestGroups: a lone decision is written at once, in a group of one; the
// decisions handed over while that write runs are written together by the
// next one, in one durable write (issue 14's group commit).
func TestGroups(t *testing.T) {
	g := &gateStore{Store: store.NewMemory(), gate: make(chan struct{})}
	c := NewDecisions(g, quiet())
	go c.Run()
	defer c.Close()

	first := make(chan error, 1)
	j1 := job(1)
	c.StartDeciding(j1)
	go func() { first <- c.Commit(context.Background(), j1) }()
	waitFor(t, func() bool { return len(g.sizes()) == 1 })

	// While the first write is held, five more are handed over.
	var wg sync.WaitGroup
	for i := range 5 {
		j := job(byte(2 + i))
		c.StartDeciding(j)
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Commit(context.Background(), j) }()
	}
	waitFor(t, func() bool { return len(c.in.ch) == 5 })
	close(g.gate) // every write from now on returns at once
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := g.sizes(); len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Fatalf("groups %v, want [1 5]", got)
	}
	if n, d := c.Groups(); n != 2 || d != 6 {
		t.Fatalf("Groups() = %d, %d; want 2, 6", n, d)
	}
}

// TestFailing: a group the store refuses answers each of its decisions
// with the store's error and counts one outage, until a group is durable
// again; a decision handed over after Close is refused with ErrClosed.
func TestFailing(t *testing.T) {
	gate := make(chan struct{})
	close(gate)
	bad := errors.New("disk full")
	g := &gateStore{Store: store.NewMemory(), gate: gate, fail: bad}
	c := NewDecisions(g, quiet())
	go c.Run()
	for range 2 {
		j := job(1)
		c.StartDeciding(j)
		if err := c.Commit(context.Background(), j); !errors.Is(err, bad) {
			t.Fatalf("commit: %v, want the store's error", err)
		}
	}
	if !c.Failing() || c.Outages() != 1 {
		t.Fatalf("failing %v, outages %d; want true, 1", c.Failing(), c.Outages())
	}
	g.mu.Lock()
	g.fail = nil
	g.mu.Unlock()
	j := job(2)
	c.StartDeciding(j)
	if err := c.Commit(context.Background(), j); err != nil || c.Failing() {
		t.Fatalf("after the store is back: %v, failing %v", err, c.Failing())
	}
	c.Close()
	if err := c.Commit(context.Background(), job(3)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// failFirstStore holds its first PutDecisions until gate is closed and
// fails it; it keeps the digests of every later group, which it takes.
type failFirstStore struct {
	store.Store
	gate    chan struct{}
	mu      sync.Mutex
	calls   int
	written []sig.Hash
}

func (f *failFirstStore) PutDecisions(_ context.Context, _ []store.Evidence, ds []store.Decision) error {
	f.mu.Lock()
	f.calls++
	first := f.calls == 1
	if !first {
		for _, d := range ds {
			f.written = append(f.written, d.Digest)
		}
	}
	f.mu.Unlock()
	if first {
		<-f.gate
		return errors.New("disk full")
	}
	return nil
}

// TestCountedRefused (§6, §9.2; SPEC-NOTES "A decision that counted one
// not stored is not stored"): when a group fails, its sessions are taken
// back (Undo) before its requests are answered; a decision of the same
// room that began deciding before that and was handed over after the
// failed one began may have counted its session, and is refused unwritten
// (ErrCounted) and taken back too; one of another room, or one that began
// after the take-back, is written.
func TestCountedRefused(t *testing.T) {
	f := &failFirstStore{Store: store.NewMemory(), gate: make(chan struct{})}
	c := NewDecisions(f, quiet())
	var mu sync.Mutex
	var undone []byte
	c.Undo = func(d *store.Decision) {
		mu.Lock()
		undone = append(undone, d.Digest[0])
		mu.Unlock()
	}
	go c.Run()
	defer c.Close()
	roomA, roomB := sig.Hash{0xa}, sig.Hash{0xb}
	jobIn := func(n byte, room sig.Hash) *Job {
		j := job(n)
		j.Decision.Room = room
		return j
	}
	commit := func(j *Job) chan error {
		out := make(chan error, 1)
		go func() { out <- c.Commit(context.Background(), j) }()
		return out
	}
	p := jobIn(1, roomA)
	c.StartDeciding(p)
	pDone := commit(p)
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.calls == 1 })
	// Decided while p's group is being written: one of p's room, one of
	// another.
	same, other := jobIn(2, roomA), jobIn(3, roomB)
	c.StartDeciding(same)
	c.StartDeciding(other)
	sameDone, otherDone := commit(same), commit(other)
	waitFor(t, func() bool { return len(c.in.ch) == 2 })
	close(f.gate)
	if err := <-pDone; err == nil || errors.Is(err, ErrCounted) {
		t.Errorf("the failed group's decision: %v, want the store's error", err)
	}
	if err := <-sameDone; !errors.Is(err, ErrCounted) {
		t.Errorf("the decision of the same room decided meanwhile: %v, want ErrCounted", err)
	}
	if err := <-otherDone; err != nil {
		t.Errorf("the decision of another room decided meanwhile: %v, want it stored", err)
	}
	// Begun after the take-back: written.
	after := jobIn(4, roomA)
	c.StartDeciding(after)
	if err := c.Commit(context.Background(), after); err != nil {
		t.Errorf("a decision begun after the take-back: %v, want it stored", err)
	}
	mu.Lock()
	got := append([]byte(nil), undone...)
	mu.Unlock()
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("taken back: %v, want [1 2] (the failed one, then the one that counted it)", got)
	}
	f.mu.Lock()
	written := append([]sig.Hash(nil), f.written...)
	f.mu.Unlock()
	if len(written) != 2 || written[0][0] != 3 || written[1][0] != 4 {
		t.Errorf("written: %v, want the other room's and the one begun after", written)
	}
	var b bytes.Buffer
	c.WriteMetrics(&b)
	if !strings.Contains(b.String(), "\nwaisteer_commit_refused_total 1\n") {
		t.Errorf("metrics: want waisteer_commit_refused_total 1:\n%s", b.String())
	}
}
