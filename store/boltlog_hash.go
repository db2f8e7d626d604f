package store

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
)

// The pending leaves' stored hashes, as tlog.StoredHashes makes them
// (RFC 6962 §2.1's hashes, in tlog's order of storage), without its
// reader's slices: the hasher makes them after every group commit, and
// allocates nothing but the room's hashes as they grow.

// leafHash is RFC 6962's hash of a leaf's bytes: SHA-256(0x00 ‖ leaf), as
// tlog.RecordHash.
func leafHash(e LogEntry) tlog.Hash {
	var b [1 + LogEntrySize]byte
	copy(b[1:], e.Digest[:])
	binary.BigEndian.PutUint64(b[1+sig.HashSize:], e.T)
	return sha256.Sum256(b[:])
}

// nodeHash is RFC 6962's hash of an interior node: SHA-256(0x01 ‖ left ‖
// right), as tlog.NodeHash.
func nodeHash(left, right tlog.Hash) tlog.Hash {
	var b [1 + 2*tlog.HashSize]byte
	b[0] = 1
	copy(b[1:], left[:])
	copy(b[1+tlog.HashSize:], right[:])
	return sha256.Sum256(b[:])
}

// logHasher appends the stored hashes of a room's pending leaves to those
// it holds. It reads a written hash from the tiles (in a read transaction
// it begins the first time one is needed, which the caller ends with
// done), and a pending one from the room's hashes in memory (r.hashes,
// from StoredHashCount(r.written) on) or from what it appends (fresh).
type logHasher struct {
	db   *bolt.DB
	tx   *bolt.Tx // begun when a written hash is first needed
	room sig.Hash
	from int64       // StoredHashCount(written): the first hash in memory
	held []tlog.Hash // the room's hashes in memory, from from
	base int64       // the index of fresh's first hash
	one  [1]int64    // tileHashes's argument
	at   [1]int
	out  [1]tlog.Hash
}

// hash reads stored hash x, from memory or, below from, from the tiles.
func (h *logHasher) hash(fresh []tlog.Hash, x int64) (tlog.Hash, error) {
	switch {
	case x >= h.base && x-h.base < int64(len(fresh)):
		return fresh[x-h.base], nil
	case x >= h.from && x-h.from < int64(len(h.held)):
		return h.held[x-h.from], nil
	case x >= h.from:
		return tlog.Hash{}, fmt.Errorf("store: room %s's log hash %d is not held", h.room, x)
	}
	if h.tx == nil {
		tx, err := h.db.Begin(false)
		if err != nil {
			return tlog.Hash{}, err
		}
		h.tx = tx
	}
	h.one[0] = x
	if err := tileHashes(h.tx.Bucket(bucketLogTiles), h.room, h.one[:], h.out[:], h.at[:]); err != nil {
		return tlog.Hash{}, err
	}
	return h.out[0], nil
}

// done ends the read transaction, if one was begun.
func (h *logHasher) done() {
	if h.tx != nil {
		h.tx.Rollback()
		h.tx = nil
	}
}

// appendHashes returns in fresh's array (reused: its contents are
// dropped) the stored hashes that the leaves es add to a log of
// n leaves: each leaf's hash, then the hash of each subtree it completes
// (tlog.StoredHashesForRecordHash's order).
func (h *logHasher) appendHashes(fresh []tlog.Hash, n int64, es []LogEntry) ([]tlog.Hash, error) {
	h.base, fresh = tlog.StoredHashCount(n), fresh[:0]
	for k := range es {
		x := n + int64(k)
		hh := leafHash(es[k])
		fresh = append(fresh, hh)
		// Each trailing 1 bit of x completes a subtree with its left
		// sibling, stored at StoredHashIndex(level, x>>level - 1).
		for level := range bits.TrailingZeros64(uint64(x + 1)) {
			left, err := h.hash(fresh, tlog.StoredHashIndex(level, x>>uint(level)-1))
			if err != nil {
				return nil, err
			}
			hh = nodeHash(left, hh)
			fresh = append(fresh, hh)
		}
	}
	return fresh, nil
}
