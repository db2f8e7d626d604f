package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/sig"
)

// The index of decisions by digest (an auditor has only the digest, §8.4).
//
// A decision's row is keyed by t and digest, so rows are appended in t
// order and a group commit writes them to one or two pages. An index keyed
// by digest alone is in random order: kept as one B+tree, every decision
// would rewrite and sync a page of its own (4 KiB for some 40 bytes), the
// greatest cost of a decision after its signature. So the index is kept as
// sorted runs, as a log-structured merge tree keeps it:
//
//   - the tail: the rows at or after the watermark "index_through" are
//     found by scanning them, and are at most a few thousand;
//   - runs: when the tail has grown by a flush's worth, its rows before a
//     cut (a margin behind the latest t, so that a decision still on its
//     way to the committer does not arrive behind the watermark) are
//     written, sorted by digest, as a new run, a nested bucket written
//     sequentially and packed full; the watermark moves to the cut. A run
//     is written in blocks of up to runBlock entries, each under the
//     digest of its first entry: a bbolt Put per entry (a search from the
//     root, a node grown by one) was most of a merge's cost;
//   - merges: when a level holds fanIn runs, they are merged into one run
//     of the next level, a bounded number of entries in each group commit,
//     so that each entry is written again once per level;
//   - a row that arrives behind the watermark (a clock stepped back) is
//     indexed in decision_digests, digest → t, which files written before
//     the runs existed also hold.
//
// A lookup reads decision_digests, the runs newest first, then the tail. An
// index entry whose row Prune removed is not a decision: the lookup reads
// the row. All of it is written in the transactions of PutDecisions and
// Prune, so that what a reader sees is one committed state; what is in
// memory (merges under way, runs to delete) is rebuilt from the file when
// it is opened: a run no list names is a merge's unfinished output, and is
// deleted.

// Buckets and keys of the index.
var (
	bucketDecisionRuns    = []byte("decision_runs")     // run id u64 BE → nested bucket: digest → t u64 BE
	bucketDecisionRunList = []byte("decision_run_list") // run id u64 BE → level u8 ‖ count u64 BE ‖ tmin u64 BE ‖ tmax u64 BE
	metaIndexThrough      = []byte("index_through")     // rows with a key before this are indexed
)

// indexNames names an index by digest and the rows it indexes, each keyed
// t u64 BE ‖ digest: the decisions' (t their instant) and the records'
// (t their end, bolt_records.go) are kept alike, each in buckets of its
// own, but for their newest entries. The decisions' are the tail of their
// rows, which arrive in t order. Records arrive in no order of end that
// the store can count on (a hop posting a backlog, or records older than
// every other as the bench's are), so their newest entries are a bucket of
// their own, pending, in the order they were put: a cut writes it as a
// run and empties it, and a lookup scans it.
type indexNames struct {
	what    string // "decision" or "record", in errors
	rows    []byte // the rows
	digests []byte // digest → t u64 BE, for a row indexed on its own
	runs    []byte // run id u64 BE → nested bucket: digest → t u64 BE
	runList []byte // run id u64 BE → level u8 ‖ count u64 BE ‖ tmin u64 BE ‖ tmax u64 BE
	through []byte // the meta key of the watermark; nil with pending
	pending []byte // sequence u64 BE → digest ‖ t u64 BE; nil: the tail of the rows
}

var decisionIndex = &indexNames{
	what: "decision", rows: bucketDecisions, digests: bucketDecisionDigests,
	runs: bucketDecisionRuns, runList: bucketDecisionRunList, through: metaIndexThrough,
}

// Defaults of the index: a run is written per 1024 decisions, a decision
// must reach the store within 250 ms of its t not to arrive behind the
// watermark, 8 runs of a level are merged, and a group commit writes at
// least 512 entries of merges under way (a larger group, 16 per decision:
// more than the levels each decision is written at).
const (
	defaultIndexFlush  = 1024
	defaultIndexMargin = 250_000 // µs
	defaultIndexFanIn  = 8
	defaultIndexBudget = 512
)

// Sizes of a run's entries in the run list and in the run.
const (
	runInfoSize    = 1 + 8 + 8 + 8
	indexEntrySize = sig.HashSize + 8
)

// runBlock is the most entries of a block of a run. A run's items are
// blocks (format 3): the digest of the block's first entry → its entries,
// digest ‖ t u64 BE each, ascending; or, in a run written by format 2,
// entries alone: digest → t u64 BE. Both are read; only blocks are
// written. A block of 96 (3 840 bytes, its digest and its element's
// header, 3 888) and a page's header (16) fill a page of 4 KiB.
const runBlock = 96

// runInfo is a registered run.
type runInfo struct {
	id         uint64
	level      uint8
	count      uint64
	tmin, tmax uint64
}

func (r runInfo) key() []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), r.id) }

func (r runInfo) value() []byte {
	v := make([]byte, 0, runInfoSize)
	v = append(v, r.level)
	v = binary.BigEndian.AppendUint64(v, r.count)
	v = binary.BigEndian.AppendUint64(v, r.tmin)
	return binary.BigEndian.AppendUint64(v, r.tmax)
}

func parseRunInfo(k, v []byte) (runInfo, error) {
	if len(k) != 8 || len(v) != runInfoSize {
		return runInfo{}, fmt.Errorf("store: a run of the index named by %d bytes with %d", len(k), len(v))
	}
	return runInfo{
		id: binary.BigEndian.Uint64(k), level: v[0], count: binary.BigEndian.Uint64(v[1:]),
		tmin: binary.BigEndian.Uint64(v[9:]), tmax: binary.BigEndian.Uint64(v[17:]),
	}, nil
}

// digestIndex is what the store keeps in memory of the index, guarded by
// mu, which is held across each write transaction that changes the index
// and the update of this state after it commits.
type digestIndex struct {
	mu         sync.Mutex
	names      *indexNames
	flush      int    // rows in the tail that make a run
	margin     uint64 // µs behind the latest t that a flush leaves in the tail
	fanIn      int
	budget     int             // the least entries of merges a group commit writes
	block      int             // the most entries of a block of a run written (runBlock)
	sinceFlush int             // rows added to the tail since the last run was cut, about
	runs       []runInfo       // registered, in ascending id
	merges     []*runMerge     // under way, at most one per level
	garbage    []uint64        // runs no longer registered, deleted one per commit
	pruned     uint64          // decisions before this t are gone: merges drop them
	busy       map[uint64]bool // runs that are inputs of a merge

	// Scratch of the write transactions, which hold mu: bbolt keeps the
	// slices given to Put until the transaction ends, and none after, so
	// each is reused from one transaction to the next.
	entries [][indexEntrySize]byte // cut's entries, sorted in place
	blocks  []byte                 // the blocks of the runs cut
	arena   []byte                 // the merges' output blocks
	ids     []uint64               // merge's free runs of a level
	steps   []*runMerge            // merge's merges of the transaction
	heads   []runCursor            // step's inputs
}

// runCursor reads a run's entries in ascending order of digest, from its
// items of either form (runBlock): d and t are the entry at the cursor, d
// nil past the last; block is the rest of the block read, from that entry
// on (empty for an item that is an entry alone).
type runCursor struct {
	c     *bolt.Cursor
	block []byte
	d, t  []byte
}

// load reads the item k, v (nil k: past the last) and sets the cursor at
// its first entry.
func (r *runCursor) load(k, v []byte) error {
	r.block, r.d, r.t = nil, nil, nil
	switch {
	case k == nil:
		return nil
	case len(k) != sig.HashSize:
		return fmt.Errorf("store: a key of %d bytes in a run of the index", len(k))
	case len(v) == 8:
		r.d, r.t = k, v
		return nil
	case len(v) == 0 || len(v)%indexEntrySize != 0:
		return fmt.Errorf("store: an item of %d bytes in a run of the index", len(v))
	case !bytes.Equal(k, v[:sig.HashSize]):
		return fmt.Errorf("store: a block of the index under %x begins with %x", k, v[:sig.HashSize])
	}
	r.block = v
	r.d, r.t = v[:sig.HashSize], v[sig.HashSize:indexEntrySize]
	return nil
}

// first sets the cursor at the run's first entry.
func (r *runCursor) first() error { return r.load(r.c.First()) }

// next moves the cursor to the next entry.
func (r *runCursor) next() error {
	if len(r.block) > indexEntrySize {
		r.block = r.block[indexEntrySize:]
		r.d, r.t = r.block[:sig.HashSize], r.block[sig.HashSize:indexEntrySize]
		return nil
	}
	if r.d == nil {
		return nil
	}
	return r.load(r.c.Next())
}

// seek sets the cursor at the first entry whose digest is at least x, or,
// with after, greater than x.
func (r *runCursor) seek(x []byte, after bool) error {
	// The item under x, or else the one before it, which may hold x.
	k, v := r.c.Seek(x)
	switch {
	case k == nil:
		k, v = r.c.Last()
	case !bytes.Equal(k, x):
		if pk, pv := r.c.Prev(); pk != nil {
			k, v = pk, pv
		} else {
			k, v = r.c.First()
		}
	}
	if err := r.load(k, v); err != nil {
		return err
	}
	past := func(d []byte) bool { c := bytes.Compare(d, x); return c > 0 || c == 0 && !after }
	if n := len(r.block) / indexEntrySize; n > 1 {
		// Within a block, by bisection; past its last entry, on.
		i := sort.Search(n, func(i int) bool { return past(r.block[i*indexEntrySize : i*indexEntrySize+sig.HashSize]) })
		if i == n {
			if err := r.load(r.c.Next()); err != nil {
				return err
			}
		} else {
			r.block = r.block[i*indexEntrySize:]
			r.d, r.t = r.block[:sig.HashSize], r.block[sig.HashSize:indexEntrySize]
		}
	}
	for r.d != nil && !past(r.d) {
		if err := r.next(); err != nil {
			return err
		}
	}
	return nil
}

// entryT is the entry's t, checked to be of 8 bytes.
func (r *runCursor) entryT() (uint64, error) {
	if len(r.t) != 8 {
		return 0, fmt.Errorf("store: an entry of %d and %d bytes in a run of the index", len(r.d), len(r.t))
	}
	return binary.BigEndian.Uint64(r.t), nil
}

// runMerge is a merge under way: its inputs, its output, the last digest
// read from the inputs, and the output's entries not yet written, fewer
// than a block's.
type runMerge struct {
	level      uint8
	inputs     []uint64
	out        uint64
	last       []byte
	block      []byte
	count      uint64
	tmin, tmax uint64
}

// indexChange is what one write transaction did to the index, applied to
// the memory once the transaction commits.
type indexChange struct {
	added     int // rows put in the tail
	flushed   int // rows written as a run
	runs      []runInfo
	dropped   []uint64 // runs unregistered
	merges    []*runMerge
	garbage   []uint64
	collected int // garbage runs deleted
	pruned    uint64
	merged    bool // merges holds the merges under way
}

func idKey(id uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), id) }

// openIndex reads the index's state from the file in the transaction that
// opens it: the registered runs, the watermark (set to after the last row
// for a file written before the runs existed, whose rows decision_digests
// indexes), and the unregistered runs, which are deleted.
func openIndex(tx *bolt.Tx, ix *digestIndex) error {
	n := ix.names
	for _, name := range [][]byte{n.digests, n.runs, n.runList, n.pending} {
		if name == nil {
			continue
		}
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if n.pending == nil && meta.Get(n.through) == nil {
		through := []byte{}
		if k, _ := tx.Bucket(n.rows).Cursor().Last(); k != nil {
			through = append(clone(k), 0) // after the last row
		}
		if err := meta.Put(n.through, through); err != nil {
			return err
		}
	}
	ix.runs = ix.runs[:0]
	registered := map[uint64]bool{}
	err := tx.Bucket(n.runList).ForEach(func(k, v []byte) error {
		r, err := parseRunInfo(k, v)
		if err != nil {
			return err
		}
		ix.runs = append(ix.runs, r)
		registered[r.id] = true
		return nil
	})
	if err != nil {
		return err
	}
	runs := tx.Bucket(n.runs)
	var orphans [][]byte
	err = runs.ForEach(func(k, v []byte) error {
		if v != nil || len(k) != 8 {
			return fmt.Errorf("store: %s holds a key of %d bytes that is not a run", n.runs, len(k))
		}
		if !registered[binary.BigEndian.Uint64(k)] {
			orphans = append(orphans, clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range orphans {
		if err := runs.DeleteBucket(k); err != nil {
			return err
		}
	}
	for _, r := range ix.runs {
		if runs.Bucket(r.key()) == nil {
			return fmt.Errorf("store: run %d of the %ss' index is listed but not held", r.id, n.what)
		}
	}
	// The tail's size, so that the next run is cut on time.
	ix.sinceFlush = 0
	if n.pending != nil {
		ix.sinceFlush = tx.Bucket(n.pending).Stats().KeyN
	} else {
		c := tx.Bucket(n.rows).Cursor()
		for k, _ := c.Seek(meta.Get(n.through)); k != nil; k, _ = c.Next() {
			ix.sinceFlush++
		}
	}
	ix.merges, ix.garbage, ix.busy = nil, nil, map[uint64]bool{}
	return nil
}

// indexThrough is the decisions' watermark as the transaction sees it.
func indexThrough(tx *bolt.Tx) []byte { return decisionIndex.watermark(tx) }

// watermark is the index's watermark as the transaction sees it.
func (n *indexNames) watermark(tx *bolt.Tx) []byte { return tx.Bucket(bucketMeta).Get(n.through) }

// lookup finds the t of the decision with the digest (decisionIndex.lookup).
func lookup(tx *bolt.Tx, digest sig.Hash) (uint64, bool, error) {
	return decisionIndex.lookup(tx, digest)
}

// lookup finds the t of the row with the digest: in the digests bucket, in
// the runs (newest first), then in the pending entries or the tail.
func (n *indexNames) lookup(tx *bolt.Tx, digest sig.Hash) (uint64, bool, error) {
	if v := tx.Bucket(n.digests).Get(digest[:]); v != nil {
		if len(v) != 8 {
			return 0, false, fmt.Errorf("store: %s %s's t has %d bytes", n.what, digest, len(v))
		}
		return binary.BigEndian.Uint64(v), true, nil
	}
	runs := tx.Bucket(n.runs)
	c := tx.Bucket(n.runList).Cursor()
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		sub := runs.Bucket(k)
		if sub == nil {
			return 0, false, fmt.Errorf("store: run %x of the %ss' index is listed but not held", k, n.what)
		}
		r := runCursor{c: sub.Cursor()}
		if err := r.seek(digest[:], false); err != nil {
			return 0, false, fmt.Errorf("%w (run %x of the %ss' index)", err, k, n.what)
		}
		if r.d != nil && bytes.Equal(r.d, digest[:]) {
			t, err := r.entryT()
			if err != nil {
				return 0, false, fmt.Errorf("%w (run %x of the %ss' index)", err, k, n.what)
			}
			return t, true, nil
		}
	}
	if n.pending != nil {
		pc := tx.Bucket(n.pending).Cursor()
		for _, v := pc.First(); v != nil; _, v = pc.Next() {
			if len(v) == indexEntrySize && bytes.Equal(v[:sig.HashSize], digest[:]) {
				return binary.BigEndian.Uint64(v[sig.HashSize:]), true, nil
			}
		}
		return 0, false, nil
	}
	dc := tx.Bucket(n.rows).Cursor()
	for k, _ := dc.Seek(n.watermark(tx)); k != nil; k, _ = dc.Next() {
		if len(k) == 8+sig.HashSize && bytes.Equal(k[8:], digest[:]) {
			return binary.BigEndian.Uint64(k), true, nil
		}
	}
	return 0, false, nil
}

// maintain is the index's share of a group commit, in its transaction,
// once its rows are put: a run cut from the tail when it has grown by a
// flush's worth, merges started and advanced by at most budget entries,
// and one garbage run deleted. ch collects what changed.
func (ix *digestIndex) maintain(tx *bolt.Tx, ch *indexChange, budget int) error {
	if ix.sinceFlush+ch.added >= ix.flush {
		if err := ix.cut(tx, ch); err != nil {
			return err
		}
	}
	if err := ix.merge(tx, ch, budget); err != nil {
		return err
	}
	return ix.collect(tx, ch)
}

// collect deletes one run no longer registered: a large run takes a while
// to free, and one per transaction keeps each short.
func (ix *digestIndex) collect(tx *bolt.Tx, ch *indexChange) error {
	if len(ix.garbage) == 0 || ch.collected > 0 {
		return nil
	}
	if err := tx.Bucket(ix.names.runs).DeleteBucket(idKey(ix.garbage[0])); err != nil {
		return err
	}
	ch.collected = 1
	return nil
}

// cut writes the tail's rows before the cut as a run of level 0 and moves
// the watermark to the cut; or, with pending entries, writes them all as
// the run and empties their bucket.
func (ix *digestIndex) cut(tx *bolt.Tx, ch *indexChange) error {
	n := ix.names
	if n.pending != nil {
		return ix.cutPending(tx, ch)
	}
	rows := tx.Bucket(n.rows)
	last, _ := rows.Cursor().Last()
	if last == nil {
		return nil
	}
	latest := binary.BigEndian.Uint64(last)
	if latest <= ix.margin {
		return nil
	}
	cut := binary.BigEndian.AppendUint64(make([]byte, 0, 8), latest-ix.margin)
	through := n.watermark(tx)
	if bytes.Compare(cut, through) <= 0 {
		return nil
	}
	// The entries, digest ‖ t, in a reused buffer sorted in place.
	entries := ix.entries[:0]
	c := rows.Cursor()
	for k, _ := c.Seek(through); k != nil && bytes.Compare(k, cut) < 0; k, _ = c.Next() {
		if len(k) != 8+sig.HashSize {
			return fmt.Errorf("store: a %s key of %d bytes", n.what, len(k))
		}
		var e [indexEntrySize]byte
		copy(e[:], k[8:])
		copy(e[sig.HashSize:], k[:8])
		entries = append(entries, e)
	}
	ix.entries = entries
	if err := tx.Bucket(bucketMeta).Put(n.through, cut); err != nil {
		return err
	}
	return ix.writeRun(tx, ch, entries, 0)
}

// cutPending writes the pending entries as a run of level 0 and empties
// their bucket.
func (ix *digestIndex) cutPending(tx *bolt.Tx, ch *indexChange) error {
	n := ix.names
	entries := ix.entries[:0]
	err := tx.Bucket(n.pending).ForEach(func(k, v []byte) error {
		if len(v) != indexEntrySize {
			return fmt.Errorf("store: a pending %s index entry of %d bytes", n.what, len(v))
		}
		entries = append(entries, [indexEntrySize]byte(v))
		return nil
	})
	ix.entries = entries
	if err != nil {
		return err
	}
	// Emptied as a whole: its pages are freed, none rewritten.
	if err := tx.DeleteBucket(n.pending); err != nil {
		return err
	}
	if _, err := tx.CreateBucket(n.pending); err != nil {
		return err
	}
	return ix.writeRun(tx, ch, entries, 0)
}

// writeRun writes entries (digest ‖ t), sorted here in place, as a run of
// the level, and registers it; a digest given twice is one entry.
func (ix *digestIndex) writeRun(tx *bolt.Tx, ch *indexChange, entries [][indexEntrySize]byte, level uint8) error {
	n := ix.names
	slices.SortFunc(entries, func(a, b [indexEntrySize]byte) int { return bytes.Compare(a[:], b[:]) })
	entries = slices.CompactFunc(entries, func(a, b [indexEntrySize]byte) bool {
		return bytes.Equal(a[:sig.HashSize], b[:sig.HashSize])
	})
	count := len(entries)
	if count == 0 {
		return nil
	}
	r, err := n.newRun(tx, level)
	if err != nil {
		return err
	}
	sub := tx.Bucket(n.runs).Bucket(r.key())
	sub.FillPercent = 1 // written in ascending order, never inserted into
	r.tmin, r.tmax = ^uint64(0), 0
	w := blockWriter{b: sub, size: ix.block, buf: ix.blocks[:0]}
	defer func() { ix.blocks = w.buf[:0] }()
	for i := range entries {
		e := entries[i][:]
		if err := w.add(e[:sig.HashSize], e[sig.HashSize:]); err != nil {
			return err
		}
		t := binary.BigEndian.Uint64(e[sig.HashSize:])
		r.tmin, r.tmax = min(r.tmin, t), max(r.tmax, t)
	}
	if err := w.flush(); err != nil {
		return err
	}
	r.count = uint64(count)
	if err := tx.Bucket(n.runList).Put(r.key(), r.value()); err != nil {
		return err
	}
	ch.flushed = count
	ch.runs = append(ch.runs, r)
	return nil
}

// blockWriter writes a run's entries, given in ascending order of digest,
// as blocks of size entries (the last may hold fewer), into buf: bbolt
// holds a block's bytes until the transaction ends, so a block given to
// it is never written over (appending past it, or into a new array, does
// not), and buf is reused only in a later transaction. The block being
// filled begins at open.
type blockWriter struct {
	b    *bolt.Bucket
	size int // entries a block
	buf  []byte
	open int
}

// resume makes entries (a block's worth at most, carried from an earlier
// transaction) the start of the block being filled.
func (w *blockWriter) resume(entries []byte) {
	w.open = len(w.buf)
	w.buf = append(w.buf, entries...)
}

// add appends the entry d ‖ t, and writes the block once it is full.
func (w *blockWriter) add(d, t []byte) error {
	w.buf = append(append(w.buf, d...), t...)
	if len(w.buf)-w.open < w.size*indexEntrySize {
		return nil
	}
	return w.flush()
}

// flush writes the block being filled, if it holds an entry.
func (w *blockWriter) flush() error {
	if len(w.buf) == w.open {
		return nil
	}
	block := w.buf[w.open:len(w.buf):len(w.buf)]
	w.open = len(w.buf)
	return w.b.Put(block[:sig.HashSize], block)
}

// carry takes the entries of the block being filled out of w, as a copy
// of their own, unwritten.
func (w *blockWriter) carry() []byte {
	if len(w.buf) == w.open {
		return nil
	}
	entries := slices.Clone(w.buf[w.open:])
	w.buf = w.buf[:w.open]
	return entries
}

// newRun makes an empty run's bucket, not yet registered.
func (n *indexNames) newRun(tx *bolt.Tx, level uint8) (runInfo, error) {
	runs := tx.Bucket(n.runs)
	id, err := runs.NextSequence()
	if err != nil {
		return runInfo{}, err
	}
	r := runInfo{id: id, level: level}
	_, err = runs.CreateBucket(r.key())
	return r, err
}

// merge starts a merge for each level with fanIn runs that no merge takes
// and no merge under way, then advances the merges, the lowest level first,
// by at most budget entries in all.
func (ix *digestIndex) merge(tx *bolt.Tx, ch *indexChange, budget int) error {
	// The merges under way are copied (the memory keeps its own until
	// the transaction commits); the rest is the index's reused scratch.
	// A level's runs are few (fewer than fanIn, but while a merge takes
	// them), so slices searched serve where maps would allocate.
	merges := ix.steps[:0]
	defer func() { clear(merges); ix.steps = merges[:0] }()
	for _, m := range ix.merges {
		merges = append(merges, m.copy())
	}
	taken := func(id uint64) bool {
		for _, m := range merges {
			if slices.Contains(m.inputs, id) {
				return true
			}
		}
		return slices.Contains(ch.dropped, id)
	}
	merging := func(level uint8) bool {
		return slices.ContainsFunc(merges, func(m *runMerge) bool { return m.level == level })
	}
	all := [2][]runInfo{ix.runs, ch.runs}
	for _, rs := range all {
		for _, r := range rs {
			level := r.level
			if level == 255 || merging(level) {
				continue
			}
			ids := ix.ids[:0]
			for _, rs := range all {
				for _, q := range rs {
					if q.level == level && !taken(q.id) {
						ids = append(ids, q.id)
					}
				}
			}
			ix.ids = ids[:0]
			if len(ids) < ix.fanIn {
				continue
			}
			slices.Sort(ids) // the oldest first
			out, err := ix.names.newRun(tx, level+1)
			if err != nil {
				return err
			}
			merges = append(merges, &runMerge{level: level, inputs: slices.Clone(ids[:ix.fanIn]), out: out.id, tmin: ^uint64(0)})
		}
	}
	slices.SortFunc(merges, func(a, b *runMerge) int { return int(a.level) - int(b.level) })
	var open []*runMerge
	list := tx.Bucket(ix.names.runList)
	// The merges' blocks, in one buffer for the transaction: bbolt holds
	// each until it commits.
	arena := ix.arena[:0]
	if need := (budget + ix.block) * indexEntrySize; cap(arena) < need {
		arena = make([]byte, 0, need)
	}
	defer func() { ix.arena = arena[:0] }()
	for _, m := range merges {
		if budget <= 0 {
			open = append(open, m)
			continue
		}
		done, n, err := m.step(tx, ix.names, budget, ix.block, ix.pruned, &arena, &ix.heads)
		if err != nil {
			return err
		}
		budget -= n
		if !done {
			open = append(open, m)
			continue
		}
		// The output replaces the inputs, in this one transaction.
		for _, id := range m.inputs {
			if err := list.Delete(idKey(id)); err != nil {
				return err
			}
			ch.dropped = append(ch.dropped, id)
			ch.garbage = append(ch.garbage, id)
		}
		if m.count == 0 {
			ch.garbage = append(ch.garbage, m.out)
			continue
		}
		r := runInfo{id: m.out, level: m.level + 1, count: m.count, tmin: m.tmin, tmax: m.tmax}
		if err := list.Put(r.key(), r.value()); err != nil {
			return err
		}
		ch.runs = append(ch.runs, r)
	}
	ch.merges, ch.merged = open, true
	return nil
}

func (m *runMerge) copy() *runMerge {
	c := *m
	return &c
}

// step writes at most budget entries of the merge to its output, in
// ascending order of digest, leaving out those of decisions pruned, and
// reports whether the inputs are exhausted and how many entries it read.
// The output's last block is written once full or once the merge is
// done; until then its entries are carried in m.block from one step to
// the next (a merge not done when the file closes is deleted at Open).
func (m *runMerge) step(tx *bolt.Tx, names *indexNames, budget, block int, pruned uint64, arenap *[]byte, headsp *[]runCursor) (bool, int, error) {
	runs := tx.Bucket(names.runs)
	out := runs.Bucket(idKey(m.out))
	if out == nil {
		return false, 0, fmt.Errorf("store: the output %d of a merge of the index is not held", m.out)
	}
	out.FillPercent = 1
	heads := (*headsp)[:0]
	defer func() { clear(heads); *headsp = heads[:0] }()
	w := blockWriter{b: out, size: block, buf: *arenap}
	defer func() { *arenap = w.buf }()
	w.resume(m.block)
	for _, id := range m.inputs {
		in := runs.Bucket(idKey(id))
		if in == nil {
			return false, 0, fmt.Errorf("store: the input %d of a merge of the index is not held", id)
		}
		h := runCursor{c: in.Cursor()}
		var err error
		if m.last == nil {
			err = h.first()
		} else {
			err = h.seek(m.last, true)
		}
		if err != nil {
			return false, 0, err
		}
		if h.d != nil {
			heads = append(heads, h)
		}
	}
	// The merge's state before this step keeps its own last and block.
	m.last, m.block = slices.Clone(m.last), nil
	n := 0
	for n < budget {
		least := -1
		for i := range heads {
			if heads[i].d != nil && (least < 0 || bytes.Compare(heads[i].d, heads[least].d) < 0) {
				least = i
			}
		}
		if least < 0 {
			break
		}
		h := &heads[least]
		t, err := h.entryT()
		if err != nil {
			return false, n, err
		}
		n++
		m.last = append(m.last[:0], h.d...)
		if t >= pruned {
			if err := w.add(h.d, h.t); err != nil {
				return false, n, err
			}
			m.count++
			m.tmin, m.tmax = min(m.tmin, t), max(m.tmax, t)
		}
		// Equal digests in two inputs are one decision: both advance.
		for i := range heads {
			if heads[i].d != nil && bytes.Equal(heads[i].d, m.last) {
				if err := heads[i].next(); err != nil {
					return false, n, err
				}
			}
		}
	}
	for i := range heads {
		if heads[i].d != nil {
			m.block = w.carry()
			return false, n, nil
		}
	}
	return true, n, w.flush()
}

// pruneRuns unregisters the runs whose decisions are all before the
// instant and are no merge's inputs, and has them deleted.
func (ix *digestIndex) pruneRuns(tx *bolt.Tx, ch *indexChange, before uint64) error {
	list := tx.Bucket(ix.names.runList)
	if before <= ix.pruned {
		ch.pruned = before
		return nil
	}
	for _, r := range ix.runs {
		if r.tmax < before && !ix.busy[r.id] {
			if err := list.Delete(r.key()); err != nil {
				return err
			}
			ch.dropped = append(ch.dropped, r.id)
			ch.garbage = append(ch.garbage, r.id)
		}
	}
	ch.pruned = before
	return nil
}

// apply updates the memory after a transaction that changed the index
// committed.
func (ix *digestIndex) apply(ch *indexChange) {
	ix.sinceFlush = max(ix.sinceFlush+ch.added-ch.flushed, 0)
	if ch.flushed > 0 {
		ix.sinceFlush = 0
	}
	// A run cut in the transaction may have been merged in it too.
	ix.runs = append(ix.runs, ch.runs...)
	ix.runs = slices.DeleteFunc(ix.runs, func(r runInfo) bool { return slices.Contains(ch.dropped, r.id) })
	slices.SortFunc(ix.runs, func(a, b runInfo) int { return cmpU64(a.id, b.id) })
	ix.garbage = append(ix.garbage[ch.collected:], ch.garbage...)
	if ch.merged {
		ix.merges = ch.merges
	}
	clear(ix.busy)
	for _, m := range ix.merges {
		for _, id := range m.inputs {
			ix.busy[id] = true
		}
	}
	ix.pruned = max(ix.pruned, ch.pruned)
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
