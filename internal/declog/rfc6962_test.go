package declog_test

import (
	"crypto/sha256"

	"golang.org/x/mod/sumdb/tlog"
)

// refTree is RFC 6962 §2.1's Merkle Tree Hash over a list of leaves,
// written from the RFC alone: a leaf's hash is SHA-256(0x00 ‖ leaf), a
// node's SHA-256(0x01 ‖ left ‖ right), and the tree of n > 1 leaves splits
// them at k, the largest power of two below n. The leaves' hashes are kept
// so that many subtrees are cheap to hash.
type refTree struct {
	leaves [][]byte
	hashes [][32]byte
}

func newRefTree(leaves [][]byte) *refTree {
	r := &refTree{leaves: leaves, hashes: make([][32]byte, len(leaves))}
	for i, l := range leaves {
		r.hashes[i] = sha256.Sum256(append([]byte{0}, l...))
	}
	return r
}

// mth is MTH(D[lo:hi]).
func (r *refTree) mth(lo, hi int64) tlog.Hash {
	switch n := hi - lo; {
	case n == 0:
		return sha256.Sum256(nil)
	case n == 1:
		return r.hashes[lo]
	default:
		k := int64(1)
		for 2*k < n {
			k *= 2
		}
		a, b := r.mth(lo, lo+k), r.mth(lo+k, hi)
		return sha256.Sum256(append(append([]byte{1}, a[:]...), b[:]...))
	}
}

// tile is C2SP tlog-tiles' tile at level l, index n, width w: the hashes
// MTH(D[(n·256 + i)·256^l : (n·256 + i + 1)·256^l]) for i from 0 to w−1;
// and for the entries' level (tlog's −1), each entry after its length as a
// big-endian u16.
func (r *refTree) tile(l int, n int64, w int) []byte {
	var b []byte
	if l < 0 {
		for i := range int64(w) {
			e := r.leaves[n*256+i]
			b = append(b, byte(len(e)>>8), byte(len(e)))
			b = append(b, e...)
		}
		return b
	}
	span := int64(1) << (8 * l)
	for i := range int64(w) {
		h := r.mth((n*256+i)*span, (n*256+i+1)*span)
		b = append(b, h[:]...)
	}
	return b
}

// storedHashes reads tlog's stored hashes, each computed here: tlog's
// index names a level and a place, and the hash there is the MTH of the
// 2^level leaves from place·2^level.
func (r *refTree) storedHashes() tlog.HashReader {
	return tlog.HashReaderFunc(func(x []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(x))
		for i, index := range x {
			level, n := tlog.SplitStoredHashIndex(index)
			out[i] = r.mth(n<<level, (n+1)<<level)
		}
		return out, nil
	})
}
