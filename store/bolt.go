package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket names (the package doc lists what each holds).
var (
	bucketMeta            = []byte("meta")
	bucketRooms           = []byte("rooms")
	bucketPolicies        = []byte("policies")
	bucketActive          = []byte("active")
	bucketRecordEnds      = []byte("record_ends")
	bucketDecisions       = []byte("decisions")
	bucketDecisionDigests = []byte("decision_digests")
	bucketContexts        = []byte("contexts")
	bucketContextIDs      = []byte("context_ids")
	bucketSnapshots       = []byte("snapshots")
	bucketSnapshotBodies  = []byte("snapshot_bodies")

	allBuckets = [][]byte{
		bucketMeta, bucketRooms, bucketPolicies, bucketActive, bucketRecordRows,
		bucketRecordEnds, bucketDecisions, bucketDecisionDigests, bucketContexts,
		bucketContextIDs, bucketSnapshots, bucketSnapshotBodies,
		bucketLogTiles, bucketLogSizes, bucketKeyEpochs,
	}

	metaFormat = []byte("format")
)

// fileFormat is the file's format, in meta's "format". Format 1 kept the
// records by digest; Open moves them to rows keyed by end and digest
// (bolt_records.go), in the transaction that opens the file. Format 2 kept
// the runs of the indexes by digest an entry per key; format 3 writes
// them in blocks (index.go, runBlock) and reads both, so a file of format
// 2 is opened as it is, its runs of entries merged into blocks in time. A
// server refuses a file of a format after its own.
const fileFormat = 3

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

// defaultInitialMap is how much of the file bbolt maps at Open, ahead of
// its growth. bbolt maps the file in steps (doubling up to 1 GiB, then a
// GiB at a time), and each step unmaps the file and maps it again: the
// commit that grows it waits for every read under way to end and holds
// every new one, and the pages read before are faulted in again, on a
// server of one core under the requests' feet. Mapping ahead is address
// space only: no memory is taken until a page is read, and the file grows
// with what it holds, but on Windows, where bbolt sizes the file to the
// map, so it is not done there, nor where addresses are 32 bits
// (BenchmarkGrowthStall; SPEC-NOTES "The file mapped ahead").
var defaultInitialMap = func() int {
	if strconv.IntSize < 64 || runtime.GOOS == "windows" {
		return 0
	}
	return min(8<<30, math.MaxInt) // 8 GiB (math.MaxInt: compiled where int has 32 bits too)
}()

// boltOpen is bolt.Open; a test replaces it to see the options and fail
// as the system can.
var boltOpen = bolt.Open

// An Option configures Open.
type Option func(*options)

type options struct {
	pruneChunk  int
	openTimeout time.Duration
	index       digestIndex // its settings: flush, margin, fanIn, budget, block
	logFlush    int
	// noFreelistSync is bbolt's NoFreelistSync, for the measures of
	// issue 30 (export_test.go): see Open.
	noFreelistSync bool
	// noJournal writes every group of decisions to the file at once
	// (WithoutJournal); journalRegion is the size of each of the
	// journal's regions (journal.go).
	noJournal     bool
	journalRegion int64
	// journalRing: whether the journal syncs through an io_uring where
	// the kernel has one (journalRing(), or a test's choice).
	journalRing bool
	// initialMap is bbolt's InitialMmapSize (defaultInitialMap).
	initialMap int
}

// WithoutJournal has PutDecisions write every group to the file in a
// commit of its own, without the journal in front of it (journal.go):
// twice the syncs a group, for a store read by a tool that does not know
// the journal, or to measure one beside the other.
func WithoutJournal() Option {
	return func(o *options) { o.noJournal = true }
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
	// rx is the index of records by digest (bolt_records.go). Their
	// writers hold rx.mu.
	rx digestIndex
	// lg is the rooms' logs (boltlog.go). Its writers hold ix.mu.
	lg boltLog
	// jr is the journal of decisions in front of the file (journal.go),
	// nil without one.
	jr *journal
	// put is PutDecisions's scratch, reused under ix.mu.
	put putScratch
}

var _ Store = (*Bolt)(nil)

// Open opens, or creates, the store in the bbolt file at path.
func Open(path string, opts ...Option) (*Bolt, error) {
	o := options{pruneChunk: defaultPruneChunk, openTimeout: defaultOpenTimeout, logFlush: defaultLogFlush, journalRegion: defaultJournalRegion, journalRing: journalRing(), initialMap: defaultInitialMap}
	o.index.flush, o.index.margin, o.index.fanIn, o.index.budget = defaultIndexFlush, defaultIndexMargin, defaultIndexFanIn, defaultIndexBudget
	o.index.block = runBlock
	for _, f := range opts {
		f(&o)
	}
	// The freelist is written at each commit. Without it bbolt finds the
	// free pages at Open by walking every page of the file, which grows
	// with the decisions kept: 20 s for 3.75 M decisions (issue 14), before
	// the server can answer. With it Open reads one list, whatever the
	// file's size, also after a crash. Its cost is a few pages a commit
	// while Prune's freed pages wait to be reused (BenchmarkPrune).
	// Measured again for issue 30 (BenchmarkOpenLarge, 3.75 M decisions,
	// 1.2 GB, the file in the page cache): Open takes 25 ms with it, 0.65
	// to 0.74 s without, most of the 1 s start-up goal before a cold disk
	// is read; its saving, 0.3 to 0.7 µs of CPU a decision
	// (BenchmarkGroupCommit), does not pay for that.
	bo := &bolt.Options{Timeout: o.openTimeout, FreelistType: bolt.FreelistMapType, NoFreelistSync: o.noFreelistSync, InitialMmapSize: o.initialMap}
	db, err := boltOpen(path, 0o600, bo)
	if errors.Is(err, syscall.ENOMEM) && bo.InitialMmapSize > 0 {
		// The address space is limited (ulimit -v): the file is mapped
		// as it grows instead.
		bo.InitialMmapSize = 0
		db, err = boltOpen(path, 0o600, bo)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Bolt{db: db, chunk: o.pruneChunk, contexts: map[decisionContext]uint64{}, contextIDs: map[uint64]decisionContext{}}
	s.ix.names = decisionIndex
	s.ix.flush, s.ix.margin, s.ix.fanIn, s.ix.budget, s.ix.block = o.index.flush, o.index.margin, o.index.fanIn, o.index.budget, o.index.block
	s.rx.names = recordIndex
	s.rx.flush, s.rx.fanIn, s.rx.budget, s.rx.block = o.index.flush, o.index.fanIn, o.index.budget, o.index.block
	s.lg.flush, s.lg.margin = o.logFlush, o.index.margin
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		var migrated [][indexEntrySize]byte
		switch v := meta.Get(metaFormat); {
		case v == nil:
		case len(v) == 1 && v[0] == 1:
			var err error
			if migrated, err = migrateRecords(tx); err != nil {
				return fmt.Errorf("store: %s: moving its records to format %d: %w", path, fileFormat, err)
			}
		case len(v) == 1 && v[0] == 2:
			// Its runs of entries are read as they are (index.go).
		case len(v) != 1 || v[0] != fileFormat:
			return fmt.Errorf("store: %s has format %x, not 1, 2 or %d", path, v, fileFormat)
		}
		if err := meta.Put(metaFormat, []byte{fileFormat}); err != nil {
			return err
		}
		if err := openIndex(tx, &s.ix); err != nil {
			return fmt.Errorf("store: %s: %w", path, err)
		}
		if err := openIndex(tx, &s.rx); err != nil {
			return fmt.Errorf("store: %s: %w", path, err)
		}
		if len(migrated) > 0 {
			if err := s.rx.migratedRun(tx, migrated); err != nil {
				return fmt.Errorf("store: %s: %w", path, err)
			}
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
	// The groups journaled and not applied when the last server stopped
	// are applied before anything reads the file, also by a store opened
	// without the journal.
	_, serr := os.Stat(journalPath(path))
	if !o.noJournal || serr == nil {
		if s.jr, err = openJournal(journalPath(path), o.journalRegion, o.journalRing && !o.noJournal); err == nil {
			if err = s.replayJournal(); err != nil || o.noJournal {
				s.jr.close()
			}
		}
		if err != nil {
			s.jr = nil
			s.Close()
			return nil, fmt.Errorf("store: %s: %w", path, err)
		}
		if o.noJournal {
			s.jr = nil
		} else {
			go s.applier()
		}
	}
	return s, nil
}

// Close applies the journal's pending groups (journal.go), writes the
// logs' pending leaves (boltlog.go) and closes the files.
func (s *Bolt) Close() error {
	var err error
	if j := s.jr; j != nil {
		select {
		case <-j.stop:
		default:
			close(j.stop)
		}
		<-j.done
		j.mu.Lock()
		if len(j.pending) > 0 {
			err = j.err // they stay in the journal, for the next Open
		}
		j.mu.Unlock()
		if cerr := j.close(); err == nil && !errors.Is(cerr, os.ErrClosed) {
			err = cerr
		}
	}
	if s.lg.stop != nil {
		select {
		case <-s.lg.stop:
		default:
			close(s.lg.stop)
		}
		<-s.lg.done
	}
	if ferr := s.flushLog(); err == nil {
		err = ferr
	}
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
