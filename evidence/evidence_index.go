package evidence

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// Index holds a room's verified per-hop records by hop, each hop's in
// ascending order of start, then end, then digest: the order in which §5.2
// names them, kept as records arrive so that a pathway's evidence is computed
// from a binary search and one pass over the window's records of its hops.
//
// An Index is not safe for concurrent use; a server guards it, and computes
// from it the evidence it then shares (decision.Ranking).
type Index struct {
	hops map[sig.PublicKey][]Entry
	n    int

	// Scratch for Select, reused so that recomputing a pathway after a
	// record arrives allocates only the evidence it returns.
	win   []Entry
	names []Entry
	count []int32
	next  []int32
}

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{hops: make(map[sig.PublicKey][]Entry)} }

// compareEntries orders a hop's records by start, then end, then digest.
// Records with one digest have one hop, start and end (the digest covers
// them), so equal entries are the same record.
func compareEntries(x, y Entry) int {
	if c := cmp.Compare(x.Record.Start, y.Record.Start); c != 0 {
		return c
	}
	if c := cmp.Compare(x.Record.End, y.Record.End); c != 0 {
		return c
	}
	return bytes.Compare(x.Digest[:], y.Digest[:])
}

// Add adds a verified record and reports whether it was new: a record whose
// digest the index holds already is not added again, so that no digest can be
// named twice (§7.2).
func (x *Index) Add(e Entry) bool {
	if e.Record == nil {
		return false
	}
	rs := x.hops[e.Record.Hop]
	k, found := slices.BinarySearchFunc(rs, e, compareEntries)
	if found {
		return false
	}
	// Records mostly arrive in time order, so this is mostly an append.
	x.hops[e.Record.Hop] = slices.Insert(rs, k, e)
	x.n++
	return true
}

// Len is the number of records held.
func (x *Index) Len() int { return x.n }

// Forget drops the records that start before the instant before, and returns
// how many it dropped. A window's a never moves back as t advances (§5.1), so
// a server may forget what starts before the current window's a for the
// policy it steers by.
func (x *Index) Forget(before uint64) int {
	dropped := 0
	for hop, rs := range x.hops {
		k := firstAtOrAfter(rs, before)
		if k == 0 {
			continue
		}
		dropped += k
		if k == len(rs) {
			delete(x.hops, hop)
			continue
		}
		x.hops[hop] = slices.Delete(rs, 0, k)
	}
	x.n -= dropped
	return dropped
}

// InWindow returns the hop's records in the window [a, b) (§5.1), in
// ascending order of start, then end, then digest, in a new slice.
func (x *Index) InWindow(hop sig.PublicKey, a, b uint64) []Entry {
	return x.inWindow(nil, hop, a, b)
}

// inWindow appends to dst the hop's records with a ≤ start and end ≤ b.
func (x *Index) inWindow(dst []Entry, hop sig.PublicKey, a, b uint64) []Entry {
	rs := x.hops[hop]
	for _, e := range rs[firstAtOrAfter(rs, a):] {
		if e.Record.Start >= b {
			break
		}
		if e.Record.End <= b {
			dst = append(dst, e)
		}
	}
	return dst
}

// window is the hop's records in [a, b) (§5.1), sorted: a part of the
// index's own slice when no record starting in [a, b) ends past b, as when
// records are cut on the period; otherwise those records copied into the
// index's scratch. Either is valid until the index next changes.
func (x *Index) window(hop sig.PublicKey, a, b uint64) []Entry {
	rs := x.hops[hop]
	lo := firstAtOrAfter(rs, a)
	hi := lo
	for ; hi < len(rs) && rs[hi].Record.Start < b; hi++ {
		if rs[hi].Record.End > b {
			x.win = x.inWindow(x.win[:0], hop, a, b)
			return x.win
		}
	}
	return rs[lo:hi]
}

// Select gives the records a decision names for pathway i over the window
// [a, b) (§5.2), in a new slice: for each hop in the pathway's hop order,
//
//   - when the hop's records in the window hold a tiling of [a, b), exactly
//     one tiling: the one of fewest records; among those, the one whose
//     records end earliest, compared record by record from a; and of two
//     records with one start and one end, the one whose digest is lower
//     bytewise;
//   - otherwise the hop's records in the window in ascending order of start,
//     and of records with one start only the first by end, then digest,
//     because §9.1 step 4.6 wants each start under a hop later than the one
//     before it.
//
// At most MaxNamed records are named (§7.1): when the hops hold more, the
// first MaxNamed in that order are named and the pathway is stale, since the
// hop whose names are cut is no longer covered (a part of a tiling does not
// reach b) and the hops after it have none. Naming fewer is the direction
// that §12 says cannot make a pathway look cheaper.
func (x *Index) Select(p *policy.Policy, i int, a, b uint64) ([]Entry, error) {
	names, err := x.selectNames(p, i, a, b)
	if err != nil {
		return nil, err
	}
	return slices.Clone(names), nil
}

// Compute gives pathway i's evidence over the window [a, b) (§5): the
// records Select names and the status, class, J and D they give (§5.3).
func (x *Index) Compute(p *policy.Policy, i int, a, b uint64) (Pathway, error) {
	names, err := x.selectNames(p, i, a, b)
	if err != nil {
		return Pathway{}, err
	}
	return figure(p, i, a, b, names), nil
}

// selectNames is Select into the index's scratch.
func (x *Index) selectNames(p *policy.Policy, i int, a, b uint64) ([]Entry, error) {
	if i < 0 || i >= len(p.Pathways) {
		return nil, fmt.Errorf("evidence: pathway %d of a policy of %d", i, len(p.Pathways))
	}
	x.names = x.names[:0]
	for _, hop := range p.Pathways[i].Hops {
		x.names = x.tiling(x.names, x.window(hop.Key, a, b), a, b)
		if len(x.names) > MaxNamed {
			x.names = x.names[:MaxNamed]
			break
		}
	}
	return x.names, nil
}

// tiling appends to dst the names for one hop whose records in the window
// [a, b) are w, sorted, as Select describes.
func (x *Index) tiling(dst []Entry, w []Entry, a, b uint64) []Entry {
	n := len(w)
	if n == 0 {
		return dst
	}
	x.count = slices.Grow(x.count[:0], n)[:n]
	x.next = slices.Grow(x.next[:0], n)[:n]

	// count[k]: the fewest records of a chain that begins with w[k], each
	// starting where the one before it ends, and ends at b; 0 for none.
	// next[k]: the record after w[k] in that chain, the first of the
	// fewest in the order of w (earliest end, then lowest digest); -1
	// when w[k] ends at b. A record's successors start after it does, so
	// they sit later in w and are known when it is reached from the end.
	for k := n - 1; k >= 0; k-- {
		x.count[k], x.next[k] = 0, -1
		end := w[k].Record.End
		if end == b {
			x.count[k] = 1
			continue
		}
		// The successors start at end: mostly the very next record.
		j := k + 1
		if j < n && w[j].Record.Start < end {
			j += firstAtOrAfter(w[j:], end)
		}
		for ; j < n && w[j].Record.Start == end; j++ {
			if c := x.count[j]; c > 0 && (x.count[k] == 0 || c+1 < x.count[k]) {
				x.count[k], x.next[k] = c+1, int32(j)
			}
		}
	}

	// The chain begins with a record that starts at a; every record starts
	// at a or later, so those come first in w.
	first := int32(-1)
	for j := 0; j < n && w[j].Record.Start == a; j++ {
		if c := x.count[j]; c > 0 && (first < 0 || c < x.count[first]) {
			first = int32(j)
		}
	}
	if first >= 0 {
		for k := first; k >= 0; k = x.next[k] {
			dst = append(dst, w[k])
		}
		return dst
	}

	// No tiling: every start once, the first record of each.
	for k, e := range w {
		if k == 0 || e.Record.Start != w[k-1].Record.Start {
			dst = append(dst, e)
		}
	}
	return dst
}

// firstAtOrAfter is the index of the first of w, sorted by start, that starts
// at t or later; len(w) when none does.
func firstAtOrAfter(w []Entry, t uint64) int {
	k, _ := slices.BinarySearchFunc(w, t, func(e Entry, t uint64) int { return cmp.Compare(e.Record.Start, t) })
	return k
}
