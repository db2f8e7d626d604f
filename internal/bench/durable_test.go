package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The durable floor (d) answers only once the answer's bytes are in its
// file (issue 30's latency goal, measured beside a floor that writes what
// it signs): every append, from many goroutines at once, is in the file
// exactly once when it returns, and appends gather into fewer writes.
func TestDurableLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "durable")
	l, err := openDurableLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != durableLogSize {
		t.Fatalf("the file: %v, %v; want %d bytes of zeros first", fi, err, durableLogSize)
	}
	if _, err := openDurableLog(path); err == nil {
		t.Fatal("a second log over the same file was opened")
	}
	const writers, each = 32, 40
	payload := func(w, i int) []byte {
		return fmt.Appendf(nil, "<writer %02d append %03d %s>", w, i, bytes.Repeat([]byte{'a' + byte(w%26)}, 40))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				p := payload(w, i)
				if err := l.append(p); err != nil {
					errs <- err
					return
				}
				if w == 0 && i%10 == 0 {
					// Returned: it is in the file already.
					got, err := os.ReadFile(path)
					if err != nil || !bytes.Contains(got, p) {
						errs <- fmt.Errorf("append %d returned before its bytes were in the file (%v)", i, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		for i := range each {
			if n := bytes.Count(got, payload(w, i)); n != 1 {
				t.Fatalf("writer %d's append %d is in the file %d times", w, i, n)
			}
		}
	}
	groups := l.next - 1
	if groups < 1 || groups > writers*each {
		t.Fatalf("%d groups written for %d appends", groups, writers*each)
	}
	t.Logf("%d appends in %d writes", writers*each, groups)
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	if err := l.append([]byte("late")); err == nil {
		t.Fatal("an append after close returned no error")
	}
}

// An append larger than the file is refused with its reason, not written
// over the file's start.
func TestDurableLogTooLarge(t *testing.T) {
	l, err := openDurableLog(filepath.Join(t.TempDir(), "durable"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if err := l.append(make([]byte, durableLogSize+1)); err == nil {
		t.Fatal("an append larger than the file was taken")
	}
	if err := l.append([]byte("small")); err != nil {
		t.Fatalf("a small append after a refused one: %v", err)
	}
}
