package bench

// The durable floor (d) of issue 30's latency goal: the signing floor (c)
// that also makes each answer durable before it answers, in the least a
// durable server can do: the digest of what it signed and the signature
// (96 bytes, less than any store's row of a decision: waisteer's is about
// 300 whatever the room, while the signed message of 32 pathways is 11.7
// KB, whose writes alone outran this machine's disk), in a group commit
// of one write and one fdatasync of a file written as zeros beforehand.
// A durable answer's p99 cannot be below what the disk's syncs make this
// floor's at the same offered rate, so the bench measures it beside (c):
// serve's p99 over (d)'s is what steering and its store add, (d)'s over
// (c)'s the disk's.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// durableLogSize is the floor's file: written over from its start once
// full, as the store's journal reuses its regions.
const durableLogSize = 16 << 20

// durableLog appends byte strings to a file, each durable before its
// append returns, gathering those that arrive while a sync is under way
// into the next write.
type durableLog struct {
	f    *os.File
	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte // gathered for the next write
	next uint64 // the number of the group buf is
	done uint64 // groups synced: done >= n once group n is
	busy bool   // a writer is writing or syncing
	off  int64
	err  error
}

// openDurableLog creates path as durableLogSize zeros, synced, so that a
// write's sync writes data and no file size.
func openDurableLog(path string) (*durableLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < durableLogSize; off += int64(len(zero)) {
		if _, err := f.WriteAt(zero, off); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	l := &durableLog{f: f, next: 1}
	l.cond = sync.NewCond(&l.mu)
	return l, nil
}

// append makes b durable: it joins the group being gathered, and the
// first of a group to find no write under way writes and syncs it.
func (l *durableLog) append(b []byte) error {
	if len(b) > durableLogSize {
		return fmt.Errorf("durable floor: %d bytes, more than the file's %d", len(b), durableLogSize)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.buf = append(l.buf, b...)
	mine := l.next
	for l.done < mine && l.err == nil {
		if l.busy {
			l.cond.Wait()
			continue
		}
		// This group's turn, written by whoever of it comes first.
		group, n := l.buf, l.next
		if len(group) > durableLogSize {
			group = group[:durableLogSize] // the rest is not the floor's concern
		}
		l.buf, l.next, l.busy = nil, n+1, true
		off := l.off
		if off+int64(len(group)) > durableLogSize {
			off = 0
		}
		l.off = off + int64(len(group))
		l.mu.Unlock()
		err := l.write(group, off)
		l.mu.Lock()
		l.busy, l.done = false, n
		if err != nil && l.err == nil {
			l.err = err
		}
		l.cond.Broadcast()
	}
	return l.err
}

func (l *durableLog) write(b []byte, off int64) error {
	if _, err := l.f.WriteAt(b, off); err != nil {
		return fmt.Errorf("durable floor: %w", err)
	}
	for {
		err := syscall.Fdatasync(int(l.f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return fmt.Errorf("durable floor: fdatasync: %w", err)
			}
			return nil
		}
	}
}

func (l *durableLog) close() error {
	l.mu.Lock()
	if l.err == nil {
		l.err = errors.New("durable floor: closed")
	}
	l.cond.Broadcast()
	l.mu.Unlock()
	return l.f.Close()
}
