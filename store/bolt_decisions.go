package store

// Bolt's decisions: their contexts and snapshots, their writes and reads.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/sig"
)

// putScratch is what PutDecisions reuses from one group to the next,
// under the index's lock.
type putScratch struct {
	arena []byte
	keys  [][]byte
	given map[sig.Hash]bool
	refs  []snapshotRefs
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
//
// With a journal (journal.go), a group whose every snapshot is given is
// made durable there and applied to the file a little later; any other is
// written to the file at once, after the journal's groups before it.
func (s *Bolt) PutDecisions(ctx context.Context, ev []Evidence, ds []Decision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range ds {
		if err := checkRow(&ds[i]); err != nil {
			return err
		}
	}
	if s.jr != nil {
		if err := s.jr.appendEntry(ctx, ev, ds); !errors.Is(err, errJournalSkip) {
			return err
		}
		// After the groups journaled before it, at once.
		if err := s.jr.waitApplied(ctx, s.jr.seq.Load(), true); err != nil {
			return err
		}
	}
	return s.putDecisions(ev, ds, nil, 0)
}

// putDecisions writes the decisions to the file in one commit, which
// records seq as the journal's last group applied when it is not 0.
func (s *Bolt) putDecisions(ev []Evidence, ds []Decision, rs []Record, seq uint64) error {
	var fresh map[decisionContext]uint64 // contexts this update added
	var ch, rch indexChange
	var lch logChange
	s.ix.mu.Lock()
	defer s.ix.mu.Unlock()
	if len(rs) > 0 {
		s.rx.mu.Lock() // after ix.mu, as nowhere else holds both
		defer s.rx.mu.Unlock()
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		fresh, ch, rch, lch = nil, indexChange{}, indexChange{}, logChange{}
		if len(rs) > 0 {
			if err := s.putRecordsTx(tx, rs, nil, &rch); err != nil {
				return err
			}
		}
		b := decisionBucketsOf(tx)
		through := indexThrough(tx)
		// One arena for the rows and keys: bbolt keeps the slices given to
		// Put until the transaction ends, so none may be written again,
		// and appending past an arena's capacity moves only what follows.
		// The arena, keys, refs and given are the store's, reused from
		// group to group (ix.mu is held): once Update returns bbolt holds
		// none of them.
		sc := &s.put
		arena := sc.arena[:0]
		if need := len(ds) * (96 + 4*len(firstLoads(ds)) + 8 + sig.HashSize); cap(arena) < need {
			arena = make([]byte, 0, need)
		}
		// First the decisions not held yet, and how many of them
		// reference each snapshot: a group's share one or two, whose
		// counts are then written once each.
		keys := slices.Grow(sc.keys[:0], len(ds))[:len(ds)] // nil for one held, or given twice
		clear(keys)
		given := sc.given
		if given == nil {
			given = make(map[sig.Hash]bool, len(ds))
			sc.given = given
		}
		clear(given)
		refs := sc.refs[:0]
		defer func() { sc.arena, sc.keys, sc.refs = arena[:0], keys[:0], refs[:0] }()
		// A key after the last row's cannot be held: a room's t grows
		// with each decision (MemLoads.Steer), so a group's fresh
		// decisions are all after it and need no search of their own.
		// Any other (a clock stepped back, another room's t behind this
		// one's, a decision given again) is looked for.
		var last [8 + sig.HashSize]byte
		held := b.decisions.Cursor()
		lk, _ := held.Last()
		seekAll := lk != nil && len(lk) != len(last) // not a row's key: no bound
		copy(last[:], lk)
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
			if seekAll || lk != nil && bytes.Compare(key, last[:]) <= 0 {
				if k, _ := held.Seek(key); bytes.Equal(k, key) {
					arena = arena[:start]
					continue // held already: a decision's bytes are its digest's
				}
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
		if seq != 0 {
			if err := tx.Bucket(bucketMeta).Put(metaJournalApplied, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
				return err
			}
		}
		return s.ix.maintain(tx, &ch, max(s.ix.budget, 16*len(ds)))
	})
	if err != nil {
		return err
	}
	s.ix.apply(&ch)
	if len(rs) > 0 {
		s.rx.apply(&rch)
	}
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

// Decision returns the stored decision with the digest: one not found
// is looked for again once the journal's groups before it are applied.
func (s *Bolt) Decision(ctx context.Context, digest sig.Hash) (Decision, error) {
	return settled(s, ctx, func() (Decision, error) { return s.decision(ctx, digest) })
}

func (s *Bolt) decision(ctx context.Context, digest sig.Hash) (Decision, error) {
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
		d, err = s.decisionAt(tx, t, digest)
		return err
	})
	return d, err
}

// DecisionAt returns the decision with the digest made at t, as a log's
// leaf names it (LogEntry): its row is read by its key, without the index
// by digest, whose lookup reads a run of each level.
func (s *Bolt) DecisionAt(ctx context.Context, t uint64, digest sig.Hash) (Decision, error) {
	return settled(s, ctx, func() (Decision, error) { return s.decisionAtKey(ctx, t, digest) })
}

func (s *Bolt) decisionAtKey(ctx context.Context, t uint64, digest sig.Hash) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	var d Decision
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		d, err = s.decisionAt(tx, t, digest)
		return err
	})
	return d, err
}

// DecisionsAt reads, in one read transaction, the decisions the log's
// leaves es name, as DecisionAt each: it appends to rows and held one
// entry per leaf, held false (and the decision zero) for a decision the
// file does not hold, which DecisionAt then reads again once the journal
// is applied, or finds pruned. A restart's recount reads millions of
// decisions by their leaves; one transaction each (its begin, its
// buckets opened) was most of the cost of a read. Leaves in t order, as
// a log's are, name rows next to one another in the file: a cursor steps
// to each from the one before (rowCursor), and the snapshot the decisions
// before named is read once.
func (s *Bolt) DecisionsAt(ctx context.Context, es []LogEntry, rows []Decision, held []bool) ([]Decision, []bool, error) {
	if err := ctx.Err(); err != nil {
		return rows, held, err
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		rc := rowCursor{c: tx.Bucket(bucketDecisions).Cursor()}
		var sc snapshotCache
		for _, e := range es {
			d, err := s.decisionOf(tx, e.T, e.Digest, rc.get(e.T, e.Digest), &sc)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			rows, held = append(rows, d), append(held, err == nil)
		}
		return nil
	})
	return rows, held, err
}

// decisionAt reads the row of the decision with the digest made at t.
func (s *Bolt) decisionAt(tx *bolt.Tx, t uint64, digest sig.Hash) (Decision, error) {
	var sc snapshotCache
	return s.decisionOf(tx, t, digest, tx.Bucket(bucketDecisions).Get(rowKey(t, digest)), &sc)
}

// decisionOf is the decision with the digest made at t whose row is v
// (nil: not held), its snapshot's evidence read through sc.
func (s *Bolt) decisionOf(tx *bolt.Tx, t uint64, digest sig.Hash, v []byte, sc *snapshotCache) (Decision, error) {
	if v == nil {
		return Decision{}, ErrNotFound // pruned: the index keeps some entries a while longer
	}
	r, err := parseRow(v)
	if err != nil {
		return Decision{}, fmt.Errorf("store: decision %s: %w", digest, err)
	}
	c, err := s.decisionContextOf(tx, r.context)
	if err != nil {
		return Decision{}, err
	}
	if !sc.ok || sc.id != r.snapshot {
		body := tx.Bucket(bucketSnapshotBodies).Get(binary.BigEndian.AppendUint64(nil, r.snapshot))
		if len(body) < sig.HashSize {
			return Decision{}, fmt.Errorf("store: decision %s's snapshot %d is not held", digest, r.snapshot)
		}
		*sc = snapshotCache{id: r.snapshot, evidence: sig.Hash(body[:sig.HashSize]), ok: true}
	}
	return Decision{
		Digest: digest, Room: c.room, Policy: c.policy, T: t,
		Session: r.session, Protocol: r.protocol, Report: r.report, Loads: r.loads,
		Evidence: sc.evidence, Signer: c.signer, Sig: r.sig,
	}, nil
}

// snapshotCache is the evidence of the last snapshot a read of several
// decisions found, within its transaction: a snapshot's body never
// changes while it is held, and decisions made one after another mostly
// name the same one.
type snapshotCache struct {
	id       uint64
	evidence sig.Hash
	ok       bool
}

// rowCursor reads rows of the decisions bucket by key in one transaction,
// stepping forward from the row read before when the next key is a few
// rows on (a log's leaves, in t order, among other rooms' decisions), and
// seeking it otherwise: a seek descends from the root, a step mostly
// stays in its page.
type rowCursor struct {
	c        *bolt.Cursor
	key, val []byte // where c stands; key nil: nowhere yet, or past the end
	want     [rowKeySize]byte
}

// rowCursorSteps is how many rows a rowCursor steps over before it seeks.
const rowCursorSteps = 4

// get returns the row of the decision with the digest made at t, nil when
// the file holds none.
func (rc *rowCursor) get(t uint64, digest sig.Hash) []byte {
	k := appendRowKey(rc.want[:0], t, digest)
	if rc.key != nil {
		switch cmp := bytes.Compare(rc.key, k); {
		case cmp == 0:
			return rc.val
		case cmp < 0:
			for range rowCursorSteps {
				if rc.key, rc.val = rc.c.Next(); rc.key == nil {
					break
				}
				switch cmp := bytes.Compare(rc.key, k); {
				case cmp == 0:
					return rc.val
				case cmp > 0:
					return nil // stepped past it: not held
				}
			}
		}
	}
	rc.key, rc.val = rc.c.Seek(k)
	if rc.key != nil && bytes.Equal(rc.key, k) {
		return rc.val
	}
	return nil
}

// EvidenceSnapshot returns the body of the snapshot with the key (one
// not found is looked for again as Decision does).
func (s *Bolt) EvidenceSnapshot(ctx context.Context, key sig.Hash) ([]byte, error) {
	return settled(s, ctx, func() ([]byte, error) { return s.evidenceSnapshot(ctx, key) })
}

func (s *Bolt) evidenceSnapshot(ctx context.Context, key sig.Hash) ([]byte, error) {
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
