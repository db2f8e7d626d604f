package store

import (
	"context"
	"encoding/binary"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
)

// A room's log of decisions (issue 16): every decision a store holds is
// appended, in commit order (the order of PutDecisions' groups, and within
// a group the order given), as a leaf of an append-only Merkle tree hashed
// as RFC 6962 hashes one (golang.org/x/mod/sumdb/tlog), in the same
// durable write as the decision. The tree is kept as tlog's stored hashes:
// each leaf's hash and the hashes of the complete subtrees it closes, so
// that any tree size's root and any proof is read from them. Pruning a
// decision leaves its leaf: the log is append-only, and the decision's
// bytes are then gone from the store (404), as they are today.

// LogEntry is one leaf: a decision's digest and its t (µs on the room
// clock).
type LogEntry struct {
	Digest sig.Hash
	T      uint64
}

// LogEntrySize is the size of a leaf's bytes.
const LogEntrySize = sig.HashSize + 8

// Leaf is the leaf's bytes, which its record hash covers (RFC 6962 §2.1:
// SHA-256 of 0x00 and them): the digest, then t as a big-endian u64.
func (e LogEntry) Leaf() []byte {
	b := make([]byte, 0, LogEntrySize)
	b = append(b, e.Digest[:]...)
	return binary.BigEndian.AppendUint64(b, e.T)
}

// ParseLogEntry reads a leaf's bytes.
func ParseLogEntry(b []byte) (LogEntry, error) {
	if len(b) != LogEntrySize {
		return LogEntry{}, fmt.Errorf("store: a log entry of %d bytes, not %d", len(b), LogEntrySize)
	}
	return LogEntry{Digest: sig.Hash(b[:sig.HashSize]), T: binary.BigEndian.Uint64(b[sig.HashSize:])}, nil
}

// A room's decisions may be in several logs (issue 31): a store that
// several servers share (PostgreSQL) gives each server its own log of each
// room, so that no server's commit waits for another's, and the room's
// order is the merge of its logs by (t, log, index). A store of one server
// (bbolt, memory) has one log a room, number 0.

// LogInfo is one of a room's logs.
type LogInfo struct {
	// N is the log's number in its room: 0 is the room's first log (issue
	// 16's one log), the only one of a store of one server.
	N int64
	// Server names the server that appends to it ("host pid"), "" for a
	// store of one server and for a log from before issue 31.
	Server string
	// Size is its number of leaves, committed.
	Size int64
	// Sealed is true for a log nothing will be appended to again (its
	// server closed or went away): its size is final.
	Sealed bool
}

// Log reads a room's logs of decisions. Every Store is one.
type Log interface {
	// Logs returns the room's logs by ascending number; none for a room
	// that has none.
	Logs(ctx context.Context, room sig.Hash) ([]LogInfo, error)
	// OwnLog is the log this store appends the room's decisions to,
	// made (empty) when there is none yet.
	OwnLog(ctx context.Context, room sig.Hash) (LogInfo, error)
	// LogSize is the number of leaves in log n of the room (0 for a log
	// or a room it does not have).
	LogSize(ctx context.Context, room sig.Hash, n int64) (int64, error)
	// LogEntries returns the leaves [start, end) of log n of the room;
	// end must not pass its size.
	LogEntries(ctx context.Context, room sig.Hash, n, start, end int64) ([]LogEntry, error)
	// LogHashes returns the stored hashes of log n of the room at the
	// indexes (tlog's stored hash indexes), each of which must be below
	// tlog.StoredHashCount of the log's size.
	LogHashes(ctx context.Context, room sig.Hash, n int64, indexes []int64) ([]tlog.Hash, error)
	// LogRef is the log and the index of the decision's leaf in the room,
	// or ErrNotFound: for a digest no leaf of it names, and, in a store
	// that finds it through the decision's row (Bolt), for a pruned
	// decision.
	LogRef(ctx context.Context, room sig.Hash, digest sig.Hash) (n, index int64, err error)

	// PutKeyEpoch keeps a key log head the room has had, from where it is
	// in force in log e.Log: one whose (seq, log) is held already is left
	// as it is.
	PutKeyEpoch(ctx context.Context, room sig.Hash, e KeyEpoch) error
	// KeyEpochs returns the heads the room has had, by ascending seq and,
	// for one seq, by ascending log.
	KeyEpochs(ctx context.Context, room sig.Hash) ([]KeyEpoch, error)
}

// OneLog is a Log that reads one log of a room alone, without listing the
// others: a shared store's room gains a log at each opening of the store
// by a server, and a route that asks for one log must not read them all.
type OneLog interface {
	// LogOf is log n of the room, or ErrNotFound.
	LogOf(ctx context.Context, room sig.Hash, n int64) (LogInfo, error)
}

// LogOf is log n of the room in l, or ErrNotFound: read alone where l is
// a OneLog, else found among its Logs.
func LogOf(ctx context.Context, l Log, room sig.Hash, n int64) (LogInfo, error) {
	if one, ok := l.(OneLog); ok {
		return one.LogOf(ctx, room, n)
	}
	logs, err := l.Logs(ctx, room)
	if err != nil {
		return LogInfo{}, err
	}
	for _, li := range logs {
		if li.N == n {
			return li, nil
		}
	}
	return LogInfo{}, ErrNotFound
}

// A KeyEpoch is a key log head a room has had, and from where in one of
// its logs the head was in force: that log's decisions at or after From,
// and before the From of the log's next epoch, are checked against it
// (SPEC-NOTES, "Issue 16"; issue 31: each log has its own start of each
// head, its server's). A log with no start for a head has none of its
// decisions under it.
type KeyEpoch struct {
	Seq  uint64
	Log  int64  // the log it starts in: 0 in a store of one server
	From int64  // the log's size when its server installed the head
	Head []byte // the head's bytes (COMPANION §4)
	// Handover is the checkpoint the server signed, under the head before,
	// of the log's first From leaves; nil for a log's first head.
	Handover []byte
}

// appendKeyEpoch is the value a store keeps of an epoch: From (u64 BE),
// the head's length (u32 BE), the head and the handover.
func appendKeyEpoch(dst []byte, e KeyEpoch) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.From))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Head)))
	dst = append(dst, e.Head...)
	return append(dst, e.Handover...)
}

func parseKeyEpoch(seq uint64, b []byte) (KeyEpoch, error) {
	if len(b) < 12 {
		return KeyEpoch{}, fmt.Errorf("store: key epoch %d of %d bytes", seq, len(b))
	}
	n := binary.BigEndian.Uint32(b[8:])
	if uint64(len(b)-12) < uint64(n) || int64(binary.BigEndian.Uint64(b)) < 0 {
		return KeyEpoch{}, fmt.Errorf("store: key epoch %d is cut short", seq)
	}
	e := KeyEpoch{Seq: seq, From: int64(binary.BigEndian.Uint64(b)), Head: clone(b[12 : 12+n])}
	if rest := b[12+n:]; len(rest) > 0 {
		e.Handover = clone(rest)
	}
	return e, nil
}

// AppendLog computes the stored hashes that appending the leaves to a log
// of n leaves adds: those from tlog.StoredHashCount(n) on, in order. get
// reads the log's stored hashes (it is asked only for indexes below
// tlog.StoredHashCount(n)).
func AppendLog(n int64, leaves [][]byte, get func(indexes []int64) ([]tlog.Hash, error)) ([]tlog.Hash, error) {
	base := tlog.StoredHashCount(n)
	fresh := make([]tlog.Hash, 0, 2*len(leaves)+1)
	r := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		var miss []int64
		var at []int
		for i, x := range indexes {
			if x >= base && x-base < int64(len(fresh)) {
				out[i] = fresh[x-base]
			} else {
				miss, at = append(miss, x), append(at, i)
			}
		}
		if len(miss) > 0 {
			hs, err := get(miss)
			if err != nil {
				return nil, err
			}
			if len(hs) != len(miss) {
				return nil, fmt.Errorf("store: %d log hashes read for %d indexes", len(hs), len(miss))
			}
			for j, i := range at {
				out[i] = hs[j]
			}
		}
		return out, nil
	})
	for k, leaf := range leaves {
		hs, err := tlog.StoredHashes(n+int64(k), leaf, r)
		if err != nil {
			return nil, err
		}
		fresh = append(fresh, hs...)
	}
	return fresh, nil
}
