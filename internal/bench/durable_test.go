package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// The durable floor's child keeps of each answer the SHA-256 of what it
// signed and the signature, 96 bytes, before answering (durable.go: no
// more than any store must keep): after n answers one after another, the
// file begins with n such records, Ed25519 being deterministic, and holds
// zeros after them.
func TestPlainChildDurable(t *testing.T) {
	dir := t.TempDir()
	manifest, msg := filepath.Join(dir, "manifest"), filepath.Join(dir, "msg")
	if err := os.WriteFile(manifest, []byte(`{"VERSION":1,"TTL":300}`), 0o644); err != nil {
		t.Fatal(err)
	}
	message := bytes.Repeat([]byte("a decision's bytes "), 600)
	if err := os.WriteFile(msg, message, 0o644); err != nil {
		t.Fatal(err)
	}
	durable := filepath.Join(dir, "durable")
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- PlainChild(ctx, pw, io.Discard, manifest, msg, durable, "127.0.0.1:0")
		pw.Close()
	}()
	defer cancel()
	rd := bufio.NewReader(pr)
	line, err := rd.ReadString('\n')
	for err == nil && !strings.HasPrefix(line, "ready ") {
		line, err = rd.ReadString('\n')
	}
	if err != nil {
		t.Fatalf("the child printed no ready line: %v", err)
	}
	go io.Copy(io.Discard, rd)
	url := strings.TrimSpace(strings.TrimPrefix(line, "ready "))
	const n = 5
	for i := range n {
		resp, err := http.Get(url + "/steer")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("answer %d: %s", i, resp.Status)
		}
	}
	got, err := os.ReadFile(durable)
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	digest := sha256.Sum256(message)
	record := append(digest[:], ed25519.Sign(key, message)...)
	if len(record) != 96 {
		t.Fatalf("a record of %d bytes", len(record))
	}
	for i := range n {
		if !bytes.Equal(got[i*96:(i+1)*96], record) {
			t.Fatalf("record %d is %x, want the message's SHA-256 and its signature %x", i, got[i*96:(i+1)*96], record)
		}
	}
	if rest := got[n*96:]; len(rest) != durableLogSize-n*96 || bytes.ContainsFunc(rest, func(r rune) bool { return r != 0 }) {
		t.Fatalf("after the %d records the file holds more than zeros", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
