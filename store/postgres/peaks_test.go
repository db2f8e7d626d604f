package postgres

import (
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/store"
)

// TestPeaks: appending to a log of n leaves reads only the hashes of its
// peaks, the complete subtrees RFC 6962 §2.1 splits n into (largest
// first): what a server keeps of a room's log between its appends.
func TestPeaks(t *testing.T) {
	for n := int64(0); n < 700; n++ {
		// The peaks, from n's binary digits: a subtree of 2^l leaves for
		// each bit l set, left to right.
		var want []int64
		start := int64(0)
		for l := 10; l >= 0; l-- {
			if n>>l&1 == 1 {
				want = append(want, tlog.StoredHashIndex(l, start>>l))
				start += 1 << l
			}
		}
		if got := peaks(n); !slices.Equal(got, want) {
			t.Fatalf("peaks(%d) = %v, want %v", n, got, want)
		}
		for _, k := range []int{1, 2, 7, 64} {
			asked := map[int64]bool{}
			leaves := make([][]byte, k)
			for i := range leaves {
				leaves[i] = make([]byte, store.LogEntrySize)
			}
			_, err := store.AppendLog(n, leaves, func(xs []int64) ([]tlog.Hash, error) {
				for _, x := range xs {
					asked[x] = true
				}
				return make([]tlog.Hash, len(xs)), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for x := range asked {
				if !slices.Contains(want, x) {
					t.Fatalf("appending %d to %d leaves reads hash %d, not a peak (%v)", k, n, x, want)
				}
			}
		}
	}
}
