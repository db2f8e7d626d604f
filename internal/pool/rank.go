package pool

import (
	"encoding/binary"
	"hash/fnv"
	"math"
)

// pathwayHash is p of the package doc: FNV-1a 64 of the pathway ID, which
// is the same in every process.
func pathwayHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// mix is SplitMix64's output function: a bijection of 64 bits in which
// each input bit changes about half the output bits.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// halves are the session's two 64-bit halves, read little-endian.
func halves(s *Session) (uint64, uint64) {
	return binary.LittleEndian.Uint64(s[:8]), binary.LittleEndian.Uint64(s[8:])
}

// rendezvousKey is −ln(u)/w for the session's halves and an edge's p and
// 1/w: the edge's score w/−ln(u) inverted, so that the lowest key is the
// highest score, and a weight is multiplied by rather than divided by.
// −ln(u)/w is an exponential variable of rate w, and the least of several
// is the one of rate w with odds w/Σw: the edge's share of first places.
func rendezvousKey(s0, s1, p uint64, invWeight float64) float64 {
	h := mix(s0 ^ mix(s1^p))
	u := (float64(h>>11) + 0.5) / (1 << 53)
	return -math.Log(u) * invWeight
}

// ranked is one edge and its key for a session.
type ranked struct {
	key float64
	i   int32
}

// rank appends the edges of idx to out in the session's rendezvous order,
// skipping those whose bit is set in skip and setting the bit of each one
// it appends. keys is scratch of at least len(idx).
func (sh *shape) rank(out []int32, keys []ranked, idx []int32, s0, s1 uint64, skip []uint64) []int32 {
	keys = keys[:0]
	for _, i := range idx {
		if skip[i>>6]&(1<<(i&63)) != 0 {
			continue
		}
		keys = append(keys, ranked{rendezvousKey(s0, s1, sh.seed[i], sh.inv[i]), i})
	}
	sortRanked(keys)
	for _, k := range keys {
		skip[k.i>>6] |= 1 << (k.i & 63)
		out = append(out, k.i)
	}
	return out
}

// before orders keys lowest first (the highest score), and an equal key by
// the order written.
func before(a, b ranked) bool {
	return a.key < b.key || a.key == b.key && a.i < b.i
}

// sortRanked sorts keys by before: a quicksort with the comparison inlined,
// which slices.SortFunc's call per comparison made three times slower for
// a pool of 1000 edges. The keys are pseudo-random, so a median of three
// makes a bad split as unlikely as the hash is good.
func sortRanked(a []ranked) {
	for len(a) > 12 {
		m, last := len(a)/2, len(a)-1
		if before(a[m], a[0]) {
			a[m], a[0] = a[0], a[m]
		}
		if before(a[last], a[m]) {
			a[last], a[m] = a[m], a[last]
			if before(a[m], a[0]) {
				a[m], a[0] = a[0], a[m]
			}
		}
		pivot := a[m]
		i, j := 0, last
		for i <= j {
			for before(a[i], pivot) {
				i++
			}
			for before(pivot, a[j]) {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		// Recurse into the smaller side, loop on the larger: a stack of
		// log n at most.
		if j < last-i {
			sortRanked(a[:j+1])
			a = a[i:]
		} else {
			sortRanked(a[i:])
			a = a[:j+1]
		}
	}
	for j := 1; j < len(a); j++ {
		for k := j; k > 0 && before(a[k], a[k-1]); k-- {
			a[k], a[k-1] = a[k-1], a[k]
		}
	}
}
