package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/sig"
)

// Bucket names (the package doc lists what each holds).
var (
	bucketMeta            = []byte("meta")
	bucketRooms           = []byte("rooms")
	bucketPolicies        = []byte("policies")
	bucketActive          = []byte("active")
	bucketRecords         = []byte("records")
	bucketRecordEnds      = []byte("record_ends")
	bucketDecisions       = []byte("decisions")
	bucketDecisionDigests = []byte("decision_digests")
	bucketContexts        = []byte("contexts")
	bucketContextIDs      = []byte("context_ids")
	bucketSnapshots       = []byte("snapshots")
	bucketSnapshotBodies  = []byte("snapshot_bodies")

	allBuckets = [][]byte{
		bucketMeta, bucketRooms, bucketPolicies, bucketActive, bucketRecords,
		bucketRecordEnds, bucketDecisions, bucketDecisionDigests, bucketContexts,
		bucketContextIDs, bucketSnapshots, bucketSnapshotBodies,
		bucketLogTiles, bucketLogSizes, bucketKeyEpochs,
	}

	metaFormat = []byte("format")
)

// appendFill is the fill of buckets whose keys mostly arrive in ascending
// order (decisions by t, snapshot bodies by id): a page split then leaves
// the page behind nearly full instead of half, since nothing will be
// inserted into it. Buckets keyed by digest keep bbolt's default.
const appendFill = 0.95

// Defaults of the options.
const (
	defaultPruneChunk  = 1000
	defaultOpenTimeout = 5 * time.Second
	recordsChunk       = 256
)

// An Option configures Open.
type Option func(*options)

type options struct {
	pruneChunk  int
	openTimeout time.Duration
	index       digestIndex // its settings: flush, margin, fanIn, budget
	logFlush    int
}

// WithPruneChunk sets how many records, or decisions, Prune removes in each
// write transaction (1000 by default): the longest a request waits behind
// Prune is one such transaction.
func WithPruneChunk(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.pruneChunk = n
		}
	}
}

// WithOpenTimeout sets how long Open waits for the file's lock, which
// another process may hold (5 s by default; 0 waits for ever).
func WithOpenTimeout(d time.Duration) Option {
	return func(o *options) { o.openTimeout = d }
}

// A decisionContext is what many decisions share: their room, policy and
// signer. A row names it by id (the package doc's contexts buckets).
type decisionContext struct {
	room   sig.Hash
	policy sig.Hash
	signer sig.PublicKey
}

const decisionContextSize = 2*sig.HashSize + sig.PublicKeySize

func (c *decisionContext) bytes() []byte {
	b := make([]byte, 0, decisionContextSize)
	b = append(b, c.room[:]...)
	b = append(b, c.policy[:]...)
	return append(b, c.signer[:]...)
}

func parseDecisionContext(b []byte) (decisionContext, bool) {
	var c decisionContext
	if len(b) != decisionContextSize {
		return c, false
	}
	copy(c.room[:], b)
	copy(c.policy[:], b[sig.HashSize:])
	copy(c.signer[:], b[2*sig.HashSize:])
	return c, true
}

// Bolt is the Store on one bbolt file. Every write is one bbolt update,
// which returns only after the file is synced.
type Bolt struct {
	db    *bolt.DB
	chunk int

	// The contexts, by value and by id, as committed: a cache of the
	// contexts buckets, filled at Open and after each commit that adds
	// one. A reader that misses reads the bucket.
	mu         sync.RWMutex
	contexts   map[decisionContext]uint64
	contextIDs map[uint64]decisionContext

	// ix is the index of decisions by digest (index.go).
	ix digestIndex
	// lg is the rooms' logs (boltlog.go). Its writers hold ix.mu.
	lg boltLog
}

var _ Store = (*Bolt)(nil)

// Open opens, or creates, the store in the bbolt file at path.
func Open(path string, opts ...Option) (*Bolt, error) {
	o := options{pruneChunk: defaultPruneChunk, openTimeout: defaultOpenTimeout, logFlush: defaultLogFlush}
	o.index.flush, o.index.margin, o.index.fanIn, o.index.budget = defaultIndexFlush, defaultIndexMargin, defaultIndexFanIn, defaultIndexBudget
	for _, f := range opts {
		f(&o)
	}
	// The freelist is written at each commit. Without it bbolt finds the
	// free pages at Open by walking every page of the file, which grows
	// with the decisions kept: 20 s for 3.75 M decisions (issue 14), before
	// the server can answer. With it Open reads one list, whatever the
	// file's size, also after a crash. Its cost is a few pages a commit
	// while Prune's freed pages wait to be reused (BenchmarkPrune).
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.openTimeout, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Bolt{db: db, chunk: o.pruneChunk, contexts: map[decisionContext]uint64{}, contextIDs: map[uint64]decisionContext{}}
	s.ix.flush, s.ix.margin, s.ix.fanIn, s.ix.budget = o.index.flush, o.index.margin, o.index.fanIn, o.index.budget
	s.lg.flush, s.lg.margin = o.logFlush, o.index.margin
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get(metaFormat); {
		case v == nil:
			if err := meta.Put(metaFormat, []byte{formatVersion}); err != nil {
				return err
			}
		case len(v) != 1 || v[0] != formatVersion:
			return fmt.Errorf("store: %s has format %x, not %d", path, v, formatVersion)
		}
		if err := openIndex(tx, &s.ix); err != nil {
			return fmt.Errorf("store: %s: %w", path, err)
		}
		err := tx.Bucket(bucketContextIDs).ForEach(func(k, v []byte) error {
			c, ok := parseDecisionContext(v)
			if len(k) != 8 || !ok {
				return fmt.Errorf("store: %s: a context of %d bytes under a key of %d", path, len(v), len(k))
			}
			id := binary.BigEndian.Uint64(k)
			s.contexts[c] = id
			s.contextIDs[id] = c
			return nil
		})
		if err != nil {
			return err
		}
		if err := s.openLog(tx); err != nil {
			return fmt.Errorf("store: %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	s.lg.hashing, s.lg.stop, s.lg.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	s.lg.hashing <- struct{}{} // what Open read again
	go s.hasher()
	return s, nil
}

// Close writes the logs' pending leaves (boltlog.go) and closes the file.
func (s *Bolt) Close() error {
	if s.lg.stop != nil {
		select {
		case <-s.lg.stop:
		default:
			close(s.lg.stop)
		}
		<-s.lg.done
	}
	err := s.flushLog()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Check runs bbolt's consistency check over the whole file and returns the
// first inconsistency found, or nil. It holds the write lock while it runs
// (bbolt's check is not safe beside writes in a read transaction), so it
// is for start-up and tests.
func (s *Bolt) Check() error {
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var first error
	for err := range tx.Check() {
		if first == nil {
			first = err
		}
	}
	return first
}

// clone copies a value out of a transaction, which owns it.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// PutRoom stores a room, replacing its descriptor and key log head.
func (s *Bolt) PutRoom(ctx context.Context, r Room) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v := make([]byte, 0, 6+len(r.Descriptor)+len(r.KeyLogHead))
	v = append(v, formatVersion, 0)
	if r.KeyLogHead != nil {
		v[1] = 1
	}
	v = binary.LittleEndian.AppendUint32(v, uint32(len(r.Descriptor)))
	v = append(v, r.Descriptor...)
	v = append(v, r.KeyLogHead...)
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRooms).Put(clone(r.ID[:]), v)
	})
}

// parseRoom reads a rooms value; it copies.
func parseRoom(id, v []byte) (Room, error) {
	var r Room
	if len(id) != sig.HashSize || len(v) < 6 || v[0] != formatVersion || v[1] > 1 {
		return r, fmt.Errorf("store: a room value of %d bytes does not read", len(v))
	}
	n := binary.LittleEndian.Uint32(v[2:])
	if uint64(n) > uint64(len(v)-6) {
		return r, fmt.Errorf("store: a room's descriptor of %d bytes in %d", n, len(v)-6)
	}
	copy(r.ID[:], id)
	r.Descriptor = clone(v[6 : 6+n])
	if r.Descriptor == nil {
		r.Descriptor = []byte{}
	}
	if v[1] == 1 {
		r.KeyLogHead = append([]byte{}, v[6+n:]...)
	} else if len(v) != int(6+n) {
		return r, fmt.Errorf("store: a room with no key log head has %d bytes more", len(v)-int(6+n))
	}
	return r, nil
}

// Rooms returns every room held.
func (s *Bolt) Rooms(ctx context.Context) ([]Room, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var rs []Room
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRooms).ForEach(func(k, v []byte) error {
			r, err := parseRoom(k, v)
			if err != nil {
				return err
			}
			rs = append(rs, r)
			return nil
		})
	})
	return rs, err
}

// PutPolicy stores a policy by digest and, with active, makes it the room's
// active policy.
func (s *Bolt) PutPolicy(ctx context.Context, room sig.Hash, digest sig.Hash, raw []byte, active bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPolicies).Put(clone(digest[:]), clone(raw)); err != nil {
			return err
		}
		if active {
			return tx.Bucket(bucketActive).Put(clone(room[:]), clone(digest[:]))
		}
		return nil
	})
}

// Policy returns the policy with the digest.
func (s *Bolt) Policy(ctx context.Context, digest sig.Hash) ([]byte, error) {
	return s.get(ctx, bucketPolicies, digest[:])
}

func (s *Bolt) get(ctx context.Context, bucket, key []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var v []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v = clone(tx.Bucket(bucket).Get(key))
		return nil
	})
	if err == nil && v == nil {
		err = ErrNotFound
	}
	return v, err
}

// ActivePolicy returns the room's active policy.
func (s *Bolt) ActivePolicy(ctx context.Context, room sig.Hash) (digest sig.Hash, raw []byte, err error) {
	if err := ctx.Err(); err != nil {
		return digest, nil, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		d := tx.Bucket(bucketActive).Get(room[:])
		if len(d) != sig.HashSize {
			return ErrNotFound
		}
		copy(digest[:], d)
		raw = clone(tx.Bucket(bucketPolicies).Get(d))
		if raw == nil {
			return fmt.Errorf("store: room %s's active policy %s is not held", room, digest)
		}
		return nil
	})
	return digest, raw, err
}

// Sizes of a record_ends entry.
const (
	recordEndKeySize = sig.HashSize + 8 + sig.HashSize
	recordEndValSize = sig.PublicKeySize + 8
)

// PutRecords stores the records not yet held, in one durable write, and
// reports which were new.
func (s *Bolt) PutRecords(ctx context.Context, rs []Record) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	added := make([]bool, len(rs))
	err := s.db.Update(func(tx *bolt.Tx) error {
		records, ends := tx.Bucket(bucketRecords), tx.Bucket(bucketRecordEnds)
		for i := range rs {
			r := &rs[i]
			if records.Get(r.Digest[:]) != nil {
				added[i] = false
				continue
			}
			if err := records.Put(clone(r.Digest[:]), clone(r.Raw)); err != nil {
				return err
			}
			k := make([]byte, 0, recordEndKeySize)
			k = append(k, r.Room[:]...)
			k = binary.BigEndian.AppendUint64(k, r.End)
			k = append(k, r.Digest[:]...)
			v := make([]byte, 0, recordEndValSize)
			v = append(v, r.Hop[:]...)
			v = binary.BigEndian.AppendUint64(v, r.Start)
			if err := ends.Put(k, v); err != nil {
				return err
			}
			added[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// Record returns the WMH1 bytes of the record with the digest.
func (s *Bolt) Record(ctx context.Context, digest sig.Hash) ([]byte, error) {
	return s.get(ctx, bucketRecords, digest[:])
}

// Records calls fn for each record of the room whose end is after since, in
// ascending order of end. It reads them in groups, each in its own read
// transaction, and calls fn outside any: a long read transaction would hold
// back the writers that grow the file.
func (s *Bolt) Records(ctx context.Context, room sig.Hash, since uint64, fn func(Record) error) error {
	if since == 1<<64-1 {
		return ctx.Err() // no end is after it
	}
	seek := make([]byte, 0, recordEndKeySize+1)
	seek = append(seek, room[:]...)
	seek = binary.BigEndian.AppendUint64(seek, since+1)
	batch := make([]Record, 0, recordsChunk)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch = batch[:0]
		err := s.db.View(func(tx *bolt.Tx) error {
			records := tx.Bucket(bucketRecords)
			c := tx.Bucket(bucketRecordEnds).Cursor()
			for k, v := c.Seek(seek); k != nil && len(batch) < recordsChunk && bytes.HasPrefix(k, room[:]); k, v = c.Next() {
				if len(k) != recordEndKeySize || len(v) != recordEndValSize {
					return fmt.Errorf("store: a record index entry of %d and %d bytes", len(k), len(v))
				}
				r := Record{Room: room, End: binary.BigEndian.Uint64(k[sig.HashSize:]), Start: binary.BigEndian.Uint64(v[sig.PublicKeySize:])}
				copy(r.Digest[:], k[sig.HashSize+8:])
				copy(r.Hop[:], v)
				if r.Raw = clone(records.Get(r.Digest[:])); r.Raw == nil {
					return fmt.Errorf("store: record %s is indexed but not held", r.Digest)
				}
				batch = append(batch, r)
				// The next group starts after this key: the key with one
				// more byte sorts after it and before any other.
				seek = append(append(seek[:0], k...), 0)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range batch {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(batch) < recordsChunk {
			return nil
		}
	}
}

// buckets of one update of decisions.
type decisionBuckets struct {
	decisions, digests, contexts, contextIDs, snapshots, bodies *bolt.Bucket
}

func decisionBucketsOf(tx *bolt.Tx) decisionBuckets {
	b := decisionBuckets{
		decisions:  tx.Bucket(bucketDecisions),
		digests:    tx.Bucket(bucketDecisionDigests),
		contexts:   tx.Bucket(bucketContexts),
		contextIDs: tx.Bucket(bucketContextIDs),
		snapshots:  tx.Bucket(bucketSnapshots),
		bodies:     tx.Bucket(bucketSnapshotBodies),
	}
	b.decisions.FillPercent = appendFill
	b.bodies.FillPercent = appendFill
	b.contextIDs.FillPercent = appendFill
	return b
}

// PutDecisions stores the decisions not yet held, and the snapshots they
// reference, in one durable write. A decision is held when its row is: its
// digest covers its t (§7.3), so a decision put again has the row's key.
// The index of decisions by digest has its share of the write (index.go).
func (s *Bolt) PutDecisions(ctx context.Context, ev []Evidence, ds []Decision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range ds {
		if err := checkRow(&ds[i]); err != nil {
			return err
		}
	}
	var fresh map[decisionContext]uint64 // contexts this update added
	var ch indexChange
	var lch logChange
	s.ix.mu.Lock()
	defer s.ix.mu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		fresh, ch, lch = nil, indexChange{}, logChange{}
		b := decisionBucketsOf(tx)
		through := indexThrough(tx)
		// One arena for the rows and keys: bbolt keeps the slices given to
		// Put until the transaction ends, so none may be written again,
		// and appending past an arena's capacity moves only what follows.
		arena := make([]byte, 0, len(ds)*(96+4*len(firstLoads(ds))+8+sig.HashSize))
		// First the decisions not held yet, and how many of them
		// reference each snapshot: a group's share one or two, whose
		// counts are then written once each.
		keys := make([][]byte, len(ds)) // nil for one held, or given twice
		given := make(map[sig.Hash]bool, len(ds))
		var refs []snapshotRefs
		held := b.decisions.Cursor()
		for i := range ds {
			d := &ds[i]
			if given[d.Digest] {
				continue
			}
			given[d.Digest] = true
			start := len(arena)
			arena = binary.BigEndian.AppendUint64(arena, d.T)
			arena = append(arena, d.Digest[:]...)
			key := arena[start:len(arena):len(arena)]
			if k, _ := held.Seek(key); bytes.Equal(k, key) {
				arena = arena[:start]
				continue // held already: a decision's bytes are its digest's
			}
			keys[i] = key
			j := slices.IndexFunc(refs, func(r snapshotRefs) bool { return r.key == d.Evidence })
			if j < 0 {
				j = len(refs)
				refs = append(refs, snapshotRefs{key: d.Evidence})
			}
			refs[j].n++
		}
		for j := range refs {
			var err error
			if refs[j].id, err = snapshotRef(&b, refs[j].key, ev, refs[j].n); err != nil {
				return err
			}
		}
		for i, key := range keys {
			if key == nil {
				continue
			}
			d := &ds[i]
			cid, err := s.contextID(&b, decisionContext{d.Room, d.Policy, d.Signer}, &fresh)
			if err != nil {
				return err
			}
			sid := refs[slices.IndexFunc(refs, func(r snapshotRefs) bool { return r.key == d.Evidence })].id
			start := len(arena)
			arena = appendRow(arena, &row{
				context: cid, session: d.Session, protocol: d.Protocol, report: d.Report,
				loads: d.Loads, snapshot: sid, sig: d.Sig,
				logIndex: s.lg.add(d.Room, LogEntry{Digest: d.Digest, T: d.T}, &lch),
			})
			if err := b.decisions.Put(key, arena[start:len(arena):len(arena)]); err != nil {
				return err
			}
			if bytes.Compare(key, through) < 0 {
				// Behind the watermark (index.go): indexed on its own.
				if err := b.digests.Put(key[8:], key[:8]); err != nil {
					return err
				}
				continue
			}
			ch.added++
		}
		if err := s.lg.commit(tx, &lch, false); err != nil {
			return err
		}
		return s.ix.maintain(tx, &ch, max(s.ix.budget, 16*len(ds)))
	})
	if err != nil {
		return err
	}
	s.ix.apply(&ch)
	s.lg.apply(&lch)
	if len(fresh) > 0 {
		s.mu.Lock()
		for c, id := range fresh {
			s.contexts[c] = id
			s.contextIDs[id] = c
		}
		s.mu.Unlock()
	}
	return nil
}

func firstLoads(ds []Decision) []uint32 {
	if len(ds) == 0 {
		return nil
	}
	return ds[0].Loads
}

// contextID is the id of c, from the cache, the bucket, or a new one added
// to fresh.
func (s *Bolt) contextID(b *decisionBuckets, c decisionContext, fresh *map[decisionContext]uint64) (uint64, error) {
	s.mu.RLock()
	id, ok := s.contexts[c]
	s.mu.RUnlock()
	if ok {
		return id, nil
	}
	if id, ok := (*fresh)[c]; ok {
		return id, nil
	}
	key := c.bytes()
	if v := b.contexts.Get(key); v != nil {
		if len(v) != 8 {
			return 0, fmt.Errorf("store: a context id of %d bytes", len(v))
		}
		id = binary.BigEndian.Uint64(v)
	} else {
		var err error
		if id, err = b.contexts.NextSequence(); err != nil {
			return 0, err
		}
		idb := binary.BigEndian.AppendUint64(nil, id)
		if err := b.contexts.Put(key, idb); err != nil {
			return 0, err
		}
		if err := b.contextIDs.Put(idb, key); err != nil {
			return 0, err
		}
	}
	if *fresh == nil {
		*fresh = map[decisionContext]uint64{}
	}
	(*fresh)[c] = id
	return id, nil
}

// decisionContextOf is the context with the id, from the cache or the bucket.
func (s *Bolt) decisionContextOf(tx *bolt.Tx, id uint64) (decisionContext, error) {
	s.mu.RLock()
	c, ok := s.contextIDs[id]
	s.mu.RUnlock()
	if ok {
		return c, nil
	}
	v := tx.Bucket(bucketContextIDs).Get(binary.BigEndian.AppendUint64(nil, id))
	if c, ok = parseDecisionContext(v); !ok {
		return c, fmt.Errorf("store: context %d is not held", id)
	}
	return c, nil
}

// snapshotRefs is how many decisions of a group reference a snapshot, and
// its id.
type snapshotRefs struct {
	key sig.Hash
	n   uint64
	id  uint64
}

// snapshotRef counts n more decisions referencing the snapshot key, storing
// it from ev when it is not held, and returns its id.
func snapshotRef(b *decisionBuckets, key sig.Hash, ev []Evidence, n uint64) (uint64, error) {
	if v := b.snapshots.Get(key[:]); v != nil {
		if len(v) != 16 {
			return 0, fmt.Errorf("store: snapshot %s's entry has %d bytes", key, len(v))
		}
		id := binary.BigEndian.Uint64(v)
		refs := binary.BigEndian.Uint64(v[8:])
		nv := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), id), refs+n)
		return id, b.snapshots.Put(clone(key[:]), nv)
	}
	var body []byte
	found := false
	for i := range ev {
		if ev[i].Key == key {
			body, found = ev[i].Body, true
			break
		}
	}
	if !found {
		return 0, fmt.Errorf("%w: %s", ErrSnapshotMissing, key)
	}
	if sha256.Sum256(body) != key {
		return 0, fmt.Errorf("store: snapshot %s is not the SHA-256 of its body", key)
	}
	id, err := b.bodies.NextSequence()
	if err != nil {
		return 0, err
	}
	idb := binary.BigEndian.AppendUint64(make([]byte, 0, 16), id)
	bv := make([]byte, 0, sig.HashSize+len(body))
	bv = append(append(bv, key[:]...), body...)
	if err := b.bodies.Put(idb[:8:8], bv); err != nil {
		return 0, err
	}
	return id, b.snapshots.Put(clone(key[:]), binary.BigEndian.AppendUint64(idb, n))
}

// Decision returns the stored decision with the digest.
func (s *Bolt) Decision(ctx context.Context, digest sig.Hash) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	var d Decision
	err := s.db.View(func(tx *bolt.Tx) error {
		t, found, err := lookup(tx, digest)
		if err != nil {
			return err
		}
		if !found {
			return ErrNotFound
		}
		v := tx.Bucket(bucketDecisions).Get(rowKey(t, digest))
		if v == nil {
			return ErrNotFound // pruned: the index keeps some entries a while longer
		}
		r, err := parseRow(v)
		if err != nil {
			return fmt.Errorf("store: decision %s: %w", digest, err)
		}
		c, err := s.decisionContextOf(tx, r.context)
		if err != nil {
			return err
		}
		body := tx.Bucket(bucketSnapshotBodies).Get(binary.BigEndian.AppendUint64(nil, r.snapshot))
		if len(body) < sig.HashSize {
			return fmt.Errorf("store: decision %s's snapshot %d is not held", digest, r.snapshot)
		}
		d = Decision{
			Digest: digest, Room: c.room, Policy: c.policy, T: t,
			Session: r.session, Protocol: r.protocol, Report: r.report, Loads: r.loads,
			Evidence: sig.Hash(body[:sig.HashSize]), Signer: c.signer, Sig: r.sig,
		}
		return nil
	})
	return d, err
}

// EvidenceSnapshot returns the body of the snapshot with the key.
func (s *Bolt) EvidenceSnapshot(ctx context.Context, key sig.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var body []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSnapshots).Get(key[:])
		if v == nil {
			return ErrNotFound
		}
		if len(v) != 16 {
			return fmt.Errorf("store: snapshot %s's entry has %d bytes", key, len(v))
		}
		bv := tx.Bucket(bucketSnapshotBodies).Get(v[:8])
		if len(bv) < sig.HashSize || !bytes.Equal(bv[:sig.HashSize], key[:]) {
			return fmt.Errorf("store: snapshot %s's body is not held", key)
		}
		body = clone(bv[sig.HashSize:])
		return nil
	})
	return body, err
}

// Prune removes, in groups of at most the prune chunk each committed on its
// own, the records whose end is before recordsBefore, then the decisions
// whose t is before decisionsBefore, and with the last decision referencing it each snapshot. Requests
// run between the groups. A context cancelled stops it between groups, with
// what it removed so far counted.
func (s *Bolt) Prune(ctx context.Context, recordsBefore, decisionsBefore uint64) (PruneStats, error) {
	var st PruneStats
	if err := s.pruneRecords(ctx, recordsBefore, &st); err != nil {
		return st, err
	}
	err := s.pruneDecisions(ctx, decisionsBefore, &st)
	return st, err
}

func (s *Bolt) pruneRecords(ctx context.Context, before uint64, st *PruneStats) error {
	var from []byte // the first key the next group looks at; nil for the first
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var victims [][]byte
		err := s.db.Update(func(tx *bolt.Tx) error {
			victims = victims[:0]
			records, ends := tx.Bucket(bucketRecords), tx.Bucket(bucketRecordEnds)
			c := ends.Cursor()
			k, _ := c.First()
			if from != nil {
				k, _ = c.Seek(from)
			}
			for k != nil && len(victims) < s.chunk {
				if len(k) != recordEndKeySize {
					return fmt.Errorf("store: a record index key of %d bytes", len(k))
				}
				if binary.BigEndian.Uint64(k[sig.HashSize:]) < before {
					victims = append(victims, clone(k))
					k, _ = c.Next()
					continue
				}
				// The room's other records end later: on to the next room.
				next, ok := nextRoom(k[:sig.HashSize])
				if !ok {
					k = nil
					break
				}
				k, _ = c.Seek(next)
			}
			from = clone(k)
			for _, v := range victims {
				if err := ends.Delete(v); err != nil {
					return err
				}
				if err := records.Delete(v[sig.HashSize+8:]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		st.Records += len(victims)
		if from == nil {
			return nil
		}
	}
}

// nextRoom is the least room id above room, as a key prefix: room plus one,
// read as a big-endian number; false when room is the greatest.
func nextRoom(room []byte) ([]byte, bool) {
	next := clone(room)
	for i := len(next) - 1; i >= 0; i-- {
		next[i]++
		if next[i] != 0 {
			return next, true
		}
	}
	return nil, false
}

func (s *Bolt) pruneDecisions(ctx context.Context, before uint64, st *PruneStats) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := false
		var removed, snapshots int
		var ch indexChange
		var lch logChange
		s.ix.mu.Lock()
		err := s.db.Update(func(tx *bolt.Tx) error {
			removed, snapshots, ch, lch = 0, 0, indexChange{}, logChange{}
			if err := s.ix.collect(tx, &ch); err != nil {
				return err
			}
			// A decision's leaf is written before its row can go.
			if err := s.lg.commit(tx, &lch, true); err != nil {
				return err
			}
			b := decisionBucketsOf(tx)
			type victim struct {
				key      []byte
				snapshot uint64
			}
			var victims []victim
			c := b.decisions.Cursor()
			k, v := c.First()
			for ; k != nil && len(victims) < s.chunk; k, v = c.Next() {
				if len(k) != 8+sig.HashSize {
					return fmt.Errorf("store: a decision key of %d bytes", len(k))
				}
				if binary.BigEndian.Uint64(k) >= before {
					break
				}
				r, err := parseRow(v)
				if err != nil {
					return fmt.Errorf("store: decision %x: %w", k[8:], err)
				}
				victims = append(victims, victim{clone(k), r.snapshot})
			}
			done = k == nil || binary.BigEndian.Uint64(k) >= before
			for _, vc := range victims {
				if err := b.decisions.Delete(vc.key); err != nil {
					return err
				}
				if err := b.digests.Delete(vc.key[8:]); err != nil {
					return err
				}
				gone, err := snapshotUnref(&b, vc.snapshot)
				if err != nil {
					return err
				}
				if gone {
					snapshots++
				}
			}
			removed = len(victims)
			if done {
				// The index's runs whose decisions are all gone go with
				// the last of them (index.go).
				return s.ix.pruneRuns(tx, &ch, before)
			}
			return nil
		})
		if err == nil {
			s.ix.apply(&ch)
			s.lg.apply(&lch)
		}
		s.ix.mu.Unlock()
		if err != nil {
			return err
		}
		st.Decisions += removed
		st.Snapshots += snapshots
		if done {
			return nil
		}
	}
}

// snapshotUnref counts one decision fewer referencing the snapshot id, and
// removes it with the last; it reports whether it did.
func snapshotUnref(b *decisionBuckets, id uint64) (bool, error) {
	idb := binary.BigEndian.AppendUint64(nil, id)
	bv := b.bodies.Get(idb)
	if len(bv) < sig.HashSize {
		return false, fmt.Errorf("store: snapshot %d is referenced but not held", id)
	}
	key := clone(bv[:sig.HashSize])
	v := b.snapshots.Get(key)
	if len(v) != 16 || binary.BigEndian.Uint64(v) != id {
		return false, fmt.Errorf("store: snapshot %d's entry does not name it", id)
	}
	refs := binary.BigEndian.Uint64(v[8:])
	if refs > 1 {
		return false, b.snapshots.Put(key, binary.BigEndian.AppendUint64(idb, refs-1))
	}
	if err := b.snapshots.Delete(key); err != nil {
		return false, err
	}
	return true, b.bodies.Delete(idb)
}

// Secret returns the secret of that name, making it in the same write
// that stores it when the store has none.
func (s *Bolt) Secret(ctx context.Context, name string, n int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := []byte("secret/" + name)
	var out []byte
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(key); v != nil {
			out = clone(v)
			return nil
		}
		v, err := newSecret(n)
		if err != nil {
			return err
		}
		out = v
		return meta.Put(key, clone(v))
	})
	if err != nil {
		return nil, err
	}
	if len(out) != n {
		return nil, fmt.Errorf("store: the secret %q is %d bytes, not %d", name, len(out), n)
	}
	return out, nil
}
