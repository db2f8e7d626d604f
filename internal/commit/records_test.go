package commit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// countStore counts the writes of records it is given, and the records
// of each.
type countStore struct {
	store.Store
	mu     sync.Mutex
	writes []int
}

func (c *countStore) PutRecords(ctx context.Context, rs []store.Record) ([]bool, error) {
	c.mu.Lock()
	c.writes = append(c.writes, len(rs))
	c.mu.Unlock()
	return c.Store.PutRecords(ctx, rs)
}

func (c *countStore) sizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.writes...)
}

func record(n uint16) store.Record {
	return store.Record{Digest: sig.Hash{byte(n), byte(n >> 8), 1}, Raw: []byte{byte(n)}}
}

// TestRecordsLinger: POSTs of one record each, a millisecond apart (a
// thousand hops' records a second, issue 30), are written in groups that
// each wait up to recordLinger (25 ms) for more, not one write each as
// when a POST alone was written at once: 40 POSTs over about 40 ms make
// two writes (a group stops at recordEnough, 32); twenty is a bound no scheduler's delays reach, and
// forty (one per POST) is what the code made before.
func TestRecordsLinger(t *testing.T) {
	st := &countStore{Store: store.NewMemory()}
	c := NewRecords(st, quiet())
	go c.Run()
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range uint16(40) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checked := c.Check()
			added, err := c.Put(context.Background(), []store.Record{record(i)}, checked)
			if err == nil && (len(added) != 1 || !added[0]) {
				t.Errorf("POST %d: added %v, want [true]", i, added)
			}
			errs <- err
		}()
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sizes := st.sizes()
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total != 40 || len(sizes) > 20 {
		t.Fatalf("writes %v (%d records): want the 40 records in at most 20 writes", sizes, total)
	}
}

// TestRecordsEnough: a group that reaches recordEnough records stops
// lingering: a hundred POSTs of that many records each, one after the
// other, take less than a hundred lingers would. A lone POST lingering
// when Close comes is written, or refused with ErrClosed, never left
// waiting or answered as stored when it is not.
func TestRecordsEnough(t *testing.T) {
	st := &countStore{Store: store.NewMemory()}
	c := NewRecords(st, quiet())
	go c.Run()
	rs := make([]store.Record, recordEnough)
	for i := range rs {
		rs[i] = record(uint16(i))
	}
	start := time.Now()
	for round := range 100 {
		checked := c.Check()
		if _, err := c.Put(context.Background(), rs, checked); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if d := time.Since(start); d >= 100*recordLinger {
		t.Fatalf("100 full groups took %v, a linger each or more", d)
	}
	if n := len(st.sizes()); n != 100 {
		t.Fatalf("%d writes, want 100", n)
	}

	done := make(chan error, 1)
	checked := c.Check()
	go func() {
		_, err := c.Put(context.Background(), []store.Record{record(1000)}, checked)
		done <- err
	}()
	time.Sleep(time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		added, perr := st.Store.PutRecords(context.Background(), []store.Record{record(1000)})
		switch {
		case perr != nil:
			t.Fatal(perr)
		case err == nil && added[0]:
			t.Fatal("the lone POST was answered stored, and the store did not hold it")
		case err != nil && !errors.Is(err, ErrClosed):
			t.Fatalf("the lone POST: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lone POST was left waiting after Close")
	}
}
