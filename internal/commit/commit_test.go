package commit

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
	c.StartDeciding()
	go func() { first <- c.Commit(context.Background(), job(1)) }()
	waitFor(t, func() bool { return len(g.sizes()) == 1 })

	// While the first write is held, five more are handed over.
	var wg sync.WaitGroup
	for i := range 5 {
		c.StartDeciding()
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Commit(context.Background(), job(byte(2+i))) }()
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
		c.StartDeciding()
		if err := c.Commit(context.Background(), job(1)); !errors.Is(err, bad) {
			t.Fatalf("commit: %v, want the store's error", err)
		}
	}
	if !c.Failing() || c.Outages() != 1 {
		t.Fatalf("failing %v, outages %d; want true, 1", c.Failing(), c.Outages())
	}
	g.mu.Lock()
	g.fail = nil
	g.mu.Unlock()
	c.StartDeciding()
	if err := c.Commit(context.Background(), job(2)); err != nil || c.Failing() {
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
