package store

// A Bolt's journal of decisions (issue 30). bbolt syncs a commit twice (its
// pages, then its meta page), and each commit of a few decisions allocates
// some 20 KB of nodes and pages: at a moderate rate every decision paid a
// commit of its own, its two syncs in its wait and its garbage in the
// collector's. A group of decisions is instead written to the journal,
// once, with one fdatasync, and answered; a goroutine of the store applies
// the journal's groups to the bbolt file a little later, many in one
// commit. The commit that applies a group also records its number
// (journal_applied in meta), so that Open applies again exactly the
// groups the file does not hold, in their order, and every leaf of the
// logs keeps the index it would have had.
//
// Every read of decisions, snapshots or logs first waits for the groups
// journaled before it to be applied (settle), and asks for that at once:
// what a write returned is what a later read sees, as before. A read of
// a decision, snapshot or log leaf that is found does not wait: only a
// miss, or a log's size, does.
//
// The journal is one file beside the store's (path + "-journal") of two
// regions written in turn, each from its start. An entry is
//
//	magic    "WJE1"
//	length   u32 BE   of the payload
//	seq      u64 BE   the group's number: one more than the entry before
//	crc      u32 BE   CRC-32C of seq and payload
//	payload  evidence u32 BE n, then n of: key 32, length u32 BE, body
//	         decisions u32 BE n, then n of: digest 32, room 32, policy 32,
//	         t u64 BE, signer 32, evidence 32, length u32 BE, and the row
//	         AppendDecisionRow writes
//	         records, only in an entry of records: u32 BE n, then n of:
//	         digest 32, room 32, hop 32, start u64 BE, end u64 BE,
//	         length u32 BE, and the WMH1 bytes
//
// The hops' records go through the journal too (PutRecords), in entries
// of their own: a group of records paid a bbolt commit (two syncs, and
// the pages of four buckets and an index written) where an entry is one
// write and one sync, and the applier applies the records of many entries
// in one commit. Records alone linger longer before they are applied
// (journalRecordsLinger), since no steering waits for them to be read
// back; decisions pending cut that short. An entry of decisions alone is
// written as before, so a journal that holds no records reads as it did.
//
// A region is reused only once every entry in it is applied, so an entry
// left from a region's earlier use has a number below those written after
// it: reading a region stops at the first entry that is torn, not an
// entry, or not numbered one more than the one before.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

const (
	journalMagic  = "WJE1"
	journalHeader = 4 + 4 + 8 + 4
	// defaultJournalRegion is each region's size: at 15 000 decisions a
	// second (some 270 bytes each in an entry, with 3 pathways), a region
	// holds about a second of them, which the applier applies every
	// journalLinger. A group that does not fit is written to the file.
	defaultJournalRegion = 4 << 20
	// journalLinger is how long the applier lets groups gather after the
	// first waiting before it applies them, unless a reader or the writer
	// waits for them; journalApplyMax bounds the decisions of one of its
	// commits. A commit's CPU comes in one burst (bbolt's spill, the
	// index's merge steps) that the requests on a one-core server wait
	// behind: 190 decisions a commit (20 ms at 9 500 a second) held the
	// core 2 to 5 ms, and p99 at that rate was 7.4 ms; at most 64, 4.3 to
	// 5.1 ms (waisteer bench, SPEC-NOTES "A journal in front of bbolt").
	journalLinger   = 10 * time.Millisecond
	journalApplyMax = 128
	// journalRecordsLinger is how long groups of records alone wait to be
	// applied, unless journalRecordsEnough of their records are pending:
	// at a thousand records a second (issue 30's hops), a commit of a
	// quarter of a second's instead of one each 25 ms POSTs' group
	// (commit.Records).
	journalRecordsLinger = 250 * time.Millisecond
	journalRecordsEnough = 4096
	// journalRetry spaces the applier's attempts while the file refuses
	// them.
	journalRetry = 100 * time.Millisecond
)

var metaJournalApplied = []byte("journal_applied")

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// crc32Entry is an entry's checksum: CRC-32C of its number, then payload.
func crc32Entry(seq, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(seq, crc32c), crc32c, payload)
}

// errJournalSkip is a group the journal does not take (a snapshot it
// names is not given, a body given is not its key's, or the entry exceeds
// a region): PutDecisions writes it straight to the file.
var errJournalSkip = errors.New("store: not for the journal")

// A journalGroup is a group as journaled, read back from its entry.
type journalGroup struct {
	seq uint64
	ev  []Evidence
	ds  []Decision
	rs  []Record
}

// journal is a Bolt's journal: its writer's state (wmu), and the groups
// written and not yet applied (mu).
type journal struct {
	f      *os.File
	region int64
	ring   *uring // syncs the entries, or nil: fdatasync(2) (journalRing)

	wmu  sync.Mutex
	cur  int       // the region written
	off  int64     // the next entry's offset in it
	last [2]uint64 // the number of the last entry written to each region
	seq  atomic.Uint64

	mu      sync.Mutex
	pending []journalGroup
	records map[sig.Hash]Record // the pending groups' records, by digest
	applied uint64
	err     error         // the last apply's
	changed chan struct{} // closed, and replaced, when applied or err changes

	// The applier's scratch, which applyGroups reuses from commit to
	// commit (the applier, or Open before it starts, calls it alone):
	// grown afresh, a commit's list of up to journalApplyMax decisions
	// was about a sixth of the bytes a decision allocated
	// (BenchmarkGroupCommit).
	applyEv []Evidence
	applyDs []Decision
	applyRs []Record

	replayed int // the entries Open applied again
	applies  int // the applier's commits (mu)
	switches int // the writer's changes of region (wmu)

	kick  chan struct{} // a group is pending
	hurry chan struct{} // someone waits for the pending groups
	stop  chan struct{}
	done  chan struct{}
}

// journalPath is the journal's file beside the store's.
func journalPath(path string) string { return path + "-journal" }

// openJournal opens the journal file, or makes one of two regions of
// size region: zeros, written once, so that an entry's fdatasync writes
// no size, and renamed into place once written, so that a journal file is
// always whole. A file made before is read with its own regions' size
// (half its size), whatever region says.
func openJournal(path string, region int64, ring bool) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		if err = makeJournal(path, region); err == nil {
			f, err = os.OpenFile(path, os.O_RDWR, 0)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: journal: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store: journal: %w", err)
	}
	if fi.Size()%2 != 0 || fi.Size() < 2*journalHeader {
		f.Close()
		return nil, fmt.Errorf("store: journal %s has %d bytes, not two regions", path, fi.Size())
	}
	j := &journal{
		f: f, region: fi.Size() / 2, changed: make(chan struct{}), records: map[sig.Hash]Record{},
		kick: make(chan struct{}, 1), hurry: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if ring {
		j.ring, _ = newURing() // where there is none, fdatasync(2)
	}
	return j, nil
}

// journalRing reports whether a journal syncs through an io_uring, where
// the kernel has one: when the server has more than one processor. On
// two, the ring's sync cost a decision 10 % less CPU and the store made
// 15 % more a second; on one, where the kernel's worker thread and the
// server share the core, 2 to 15 % more CPU (SPEC-NOTES, "The journal's
// sync through an io_uring"). A server opens its store before it adds its
// spare processor (internal/serve), so this counts the processors it was
// given.
func journalRing() bool { return runtime.GOMAXPROCS(0) > 1 }

// JournalSync names how the store makes a group of decisions durable, for
// the server's log: "io_uring" or "fdatasync" through its journal, or
// "bbolt" without one (WithoutJournal).
func (s *Bolt) JournalSync() string {
	switch {
	case s.jr == nil:
		return "bbolt"
	case s.jr.ring != nil:
		return "io_uring"
	}
	return "fdatasync"
}

// sync makes what was written to the journal durable.
func (j *journal) sync() error {
	if j.ring != nil {
		return j.ring.fdatasync(j.f)
	}
	return fdatasync(j.f)
}

// close closes the file and the ring.
func (j *journal) close() error {
	if j.ring != nil {
		j.ring.close()
	}
	return j.f.Close()
}

// makeJournal writes a journal of zeros beside path and renames it there.
func makeJournal(path string, region int64) error {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	zeros := make([]byte, min(1<<20, 2*region))
	for off := int64(0); off < 2*region && err == nil; off += int64(len(zeros)) {
		_, err = f.WriteAt(zeros[:min(int64(len(zeros)), 2*region-off)], off)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is durable once the directory is.
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// appendEntry makes the group durable in the journal and queues it to be
// applied. It returns errJournalSkip for a group the journal does not take.
func (j *journal) appendEntry(ctx context.Context, ev []Evidence, ds []Decision) error {
	if len(ds) == 0 {
		return nil // nothing to store: a snapshot no decision names is not kept
	}
	if !journalable(ev, ds) {
		return errJournalSkip
	}
	b, err := journalEntry(ev, ds, nil)
	if err != nil {
		return err
	}
	if int64(len(b)) > j.region {
		return errJournalSkip
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	return j.writeEntry(ctx, b)
}

// appendRecords makes the records of rs not held yet durable in the
// journal, as one entry, queues them to be applied, and reports which were
// new: a record is held when the file has its row or a pending group has
// its digest, and one given twice in rs is new once. held reports, for
// each record of rs not set in skip, whether the file has it, in a read
// begun after the call. Records too many for a region are written
// through direct, after the groups before them are applied.
func (j *journal) appendRecords(ctx context.Context, rs []Record, held func(rs []Record, skip []bool) ([]bool, error), direct func([]Record) ([]bool, error)) ([]bool, error) {
	j.wmu.Lock() // no entry is written, nor a group added, until this one is
	defer j.wmu.Unlock()
	// First the pending groups, then the file: the applier forgets a
	// group's digests only once its commit is in the file, so a record
	// being applied meanwhile is found in one or the other.
	skip := make([]bool, len(rs))
	j.mu.Lock()
	given := make(map[sig.Hash]bool, len(rs))
	for i := range rs {
		_, pending := j.records[rs[i].Digest]
		skip[i] = pending || given[rs[i].Digest]
		given[rs[i].Digest] = true
	}
	j.mu.Unlock()
	inFile, err := held(rs, skip)
	if err != nil {
		return nil, err
	}
	added := make([]bool, len(rs))
	var fresh []Record
	for i := range rs {
		if added[i] = !skip[i] && !inFile[i]; added[i] {
			fresh = append(fresh, rs[i])
		}
	}
	if len(fresh) == 0 {
		return added, nil // nothing to make durable
	}
	b, err := journalEntry(nil, nil, fresh)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > j.region {
		if err := j.waitApplied(ctx, j.seq.Load(), true); err != nil {
			return nil, err
		}
		return direct(rs)
	}
	return added, j.writeEntry(ctx, b)
}

// journalEntry is the entry of a group, its header's room left for
// writeEntry.
func journalEntry(ev []Evidence, ds []Decision, rs []Record) ([]byte, error) {
	b := make([]byte, journalHeader, journalHeader+journalPayloadSize(ev, ds, rs))
	return appendJournalPayload(b, ev, ds, rs)
}

// writeEntry writes the entry b (its header's room, then its payload),
// makes it durable, and queues its group to be applied. The caller holds
// wmu.
func (j *journal) writeEntry(ctx context.Context, b []byte) error {
	payload := b[journalHeader:]
	if j.off+int64(len(b)) > j.region {
		other := 1 - j.cur
		if err := j.waitApplied(ctx, j.last[other], true); err != nil {
			return err
		}
		j.cur, j.off = other, 0
		j.switches++
	}
	seq := j.seq.Load() + 1
	copy(b, journalMagic)
	binary.BigEndian.PutUint32(b[4:], uint32(len(payload)))
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint32(b[16:], crc32Entry(b[8:16], payload))
	if _, err := j.f.WriteAt(b, int64(j.cur)*j.region+j.off); err != nil {
		return fmt.Errorf("store: journal: %w", err)
	}
	if err := j.sync(); err != nil {
		// The entry may reach the disk or not. The next is written over
		// it with the same number; if none is before a crash, Open may
		// apply it: decisions stored that were not answered, as a crash
		// between a sync and the answers leaves too.
		return fmt.Errorf("store: journal: %w", err)
	}
	g, err := parseJournalPayload(payload)
	if err != nil {
		return fmt.Errorf("store: journal: reading back entry %d: %w", seq, err)
	}
	g.seq = seq
	j.off += int64(len(b))
	j.last[j.cur] = seq
	j.mu.Lock()
	j.pending = append(j.pending, g)
	for i := range g.rs {
		j.records[g.rs[i].Digest] = g.rs[i]
	}
	j.mu.Unlock()
	j.seq.Store(seq)
	signal(j.kick)
	return nil
}

// pendingRecord returns a copy of the WMH1 bytes of the record with the
// given digest in a pending group, if one holds it.
func (j *journal) pendingRecord(digest sig.Hash) ([]byte, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r, ok := j.records[digest]
	return clone(r.Raw), ok
}

// journalable reports whether every decision's snapshot is given, as the
// body of its key: such a group cannot fail to apply for what it holds.
func journalable(ev []Evidence, ds []Decision) bool {
	checked := make([]bool, len(ev))
	for i := range ds {
		k := slices.IndexFunc(ev, func(e Evidence) bool { return e.Key == ds[i].Evidence })
		if k < 0 {
			return false
		}
		if !checked[k] {
			if sha256.Sum256(ev[k].Body) != ev[k].Key {
				return false
			}
			checked[k] = true
		}
	}
	return true
}

// waitApplied waits until the entries through seq are applied, hurrying
// the applier when hurry is set; it returns the last apply's error once
// one fails.
func (j *journal) waitApplied(ctx context.Context, seq uint64, hurry bool) error {
	for {
		j.mu.Lock()
		applied, err, ch := j.applied, j.err, j.changed
		j.mu.Unlock()
		if applied >= seq {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: the journal's groups are not applied: %w", err)
		}
		if hurry {
			signal(j.hurry)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-j.done:
			j.mu.Lock()
			applied = j.applied
			j.mu.Unlock()
			if applied >= seq {
				return nil
			}
			return errors.New("store: closed")
		}
	}
}

// settle waits until every group journaled before it is applied: a read
// of decisions, snapshots or logs sees what every write returned had
// written. A read does not hurry the applier: it waits for its next
// commit (journalLinger at most, and the commit), so that requests
// for decisions not held (a flood of them, say) cost no commit of their
// own.
func (s *Bolt) settle(ctx context.Context) error {
	if s.jr == nil {
		return nil
	}
	return s.jr.waitApplied(ctx, s.jr.seq.Load(), false)
}

// settled reads with read, and, when what it looks for is not found while
// groups journaled are not applied yet, reads again once those are: a
// decision found needs no wait (a row is written once), one not found may
// be in a group returned and not applied (the restart's recount reads
// millions, each found).
func settled[T any](s *Bolt, ctx context.Context, read func() (T, error)) (T, error) {
	v, err := read()
	if j := s.jr; j != nil && errors.Is(err, ErrNotFound) && j.unapplied() {
		if err := s.settle(ctx); err != nil {
			return v, err
		}
		v, err = read()
	}
	return v, err
}

// unapplied reports whether groups journaled are not applied yet.
func (j *journal) unapplied() bool {
	seq := j.seq.Load()
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.applied < seq
}

// applier applies the pending groups until Close, which it applies too.
func (s *Bolt) applier() {
	j := s.jr
	defer close(j.done)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case <-j.kick:
		case <-j.hurry:
		case <-j.stop:
			s.applyPending()
			return
		}
		wait := j.linger()
		linger.Reset(wait)
	lingering:
		for {
			select {
			case <-linger.C:
				break lingering
			case <-j.hurry:
				linger.Stop()
				break lingering
			case <-j.kick:
				// Decisions joined records lingering: they wait no
				// longer than they would have alone.
				if wait > journalLinger && j.linger() == journalLinger {
					wait = journalLinger
					linger.Reset(wait)
				}
			case <-j.stop:
				linger.Stop()
				s.applyPending()
				return
			}
		}
		for s.applyPending() != nil {
			linger.Reset(journalRetry)
			select {
			case <-linger.C:
			case <-j.stop:
				linger.Stop()
				s.applyPending()
				return
			}
		}
	}
}

// linger is how long the pending groups wait to be applied:
// journalRecordsLinger while they hold records alone, fewer than
// journalRecordsEnough, and journalLinger otherwise.
func (j *journal) linger() time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.records) >= journalRecordsEnough {
		return journalLinger
	}
	for i := range j.pending {
		if len(j.pending[i].ds) > 0 {
			return journalLinger
		}
	}
	return journalRecordsLinger
}

// applyPending applies the groups pending now, in commits of at most
// journalApplyMax decisions.
func (s *Bolt) applyPending() error {
	for {
		more, err := s.applySome()
		if err != nil || !more {
			return err
		}
		runtime.Gosched()
	}
}

// applySome applies, in one commit, the oldest pending groups, up to
// journalApplyMax decisions (at least one group), and reports whether
// more were pending.
func (s *Bolt) applySome() (more bool, err error) {
	j := s.jr
	j.mu.Lock()
	n, end := 0, 0
	for end < len(j.pending) && (end == 0 || n+len(j.pending[end].ds) <= journalApplyMax) {
		n += len(j.pending[end].ds)
		end++
	}
	batch := j.pending[:end:end]
	more = end < len(j.pending)
	j.mu.Unlock()
	if len(batch) == 0 {
		return false, nil
	}
	err = s.applyGroups(batch)
	j.mu.Lock()
	defer j.mu.Unlock()
	if err == nil {
		j.applies++
		j.applied = batch[len(batch)-1].seq
		for _, g := range batch {
			for i := range g.rs {
				delete(j.records, g.rs[i].Digest)
			}
		}
		clear(j.pending[:len(batch)]) // batch's too: nothing of the groups is kept
		j.pending = j.pending[len(batch):]
	}
	j.err = err
	close(j.changed)
	j.changed = make(chan struct{})
	return more, err
}

// applyGroups writes groups, in their order, to the file in one commit
// that records the last one's number. A panic in the commit (bbolt's,
// on a file it cannot read) fails it as an error does: the commit is
// rolled back, the groups stay pending, and the server is not stopped.
func (s *Bolt) applyGroups(gs []journalGroup) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: applying the journal's groups %d to %d: panic: %v", gs[0].seq, gs[len(gs)-1].seq, r)
		}
	}()
	j := s.jr
	n := 0
	for _, g := range gs {
		n += len(g.ds)
	}
	ev, ds, rs := j.applyEv[:0], slices.Grow(j.applyDs[:0], n), j.applyRs[:0]
	defer func() {
		clear(ev)
		clear(ds) // nothing of the groups is kept once applied
		clear(rs)
		j.applyEv, j.applyDs, j.applyRs = ev[:0], ds[:0], rs[:0]
	}()
	for _, g := range gs {
		for _, e := range g.ev {
			if !slices.ContainsFunc(ev, func(x Evidence) bool { return x.Key == e.Key }) {
				ev = append(ev, e)
			}
		}
		ds = append(ds, g.ds...)
		rs = append(rs, g.rs...)
	}
	// The records in the order of their rows' keys: bbolt inserts a key
	// into its node's list by moving the keys after it, so thousands put
	// in one commit each before the last (hops' backlogs, older than
	// every record held, sent newest first) moved all of those before,
	// and cost more than a commit a group did (BenchmarkPutRecords,
	// "older"). Pending groups hold no digest twice (appendRecords).
	slices.SortFunc(rs, func(a, b Record) int {
		if c := cmpUint64(a.End, b.End); c != 0 {
			return c
		}
		return bytes.Compare(a.Digest[:], b.Digest[:])
	})
	return s.putDecisions(ev, ds, rs, gs[len(gs)-1].seq)
}

// replayJournal applies the journal's entries the file does not hold
// (numbered after journal_applied), in their order, before the store
// serves; the writer then starts at the first region's start.
func (s *Bolt) replayJournal() error {
	j := s.jr
	var applied uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaJournalApplied); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("store: journal_applied has %d bytes", len(v))
			}
			applied = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var found []journalGroup
	for r := range int64(2) {
		gs, err := readJournalRegion(io.NewSectionReader(j.f, r*j.region, j.region))
		if err != nil {
			return err
		}
		for _, g := range gs {
			if g.seq > applied {
				found = append(found, g)
			}
		}
	}
	slices.SortFunc(found, func(a, b journalGroup) int { return cmpUint64(a.seq, b.seq) })
	next := applied + 1
	run := 0
	for run < len(found) && found[run].seq == next {
		run++
		next++
	}
	for start := 0; start < run; {
		end, n := start, 0
		for end < run && (n == 0 || n+len(found[end].ds)+len(found[end].rs) <= 1<<16) {
			n += len(found[end].ds) + len(found[end].rs)
			end++
		}
		if err := s.applyGroups(found[start:end]); err != nil {
			return fmt.Errorf("store: applying the journal's entries %d to %d: %w", found[start].seq, found[end-1].seq, err)
		}
		start = end
	}
	last := applied + uint64(run)
	j.replayed = run
	if run < len(found) {
		// Entries after a gap: none can be (each entry is synced before
		// the next is written), so the regions are not read as written.
		// Cleared, so that no later entry is read beside them.
		zeros := make([]byte, j.region)
		for r := range int64(2) {
			if _, err := j.f.WriteAt(zeros, r*j.region); err != nil {
				return fmt.Errorf("store: journal: %w", err)
			}
		}
		if err := j.sync(); err != nil {
			return fmt.Errorf("store: journal: %w", err)
		}
	}
	j.seq.Store(last)
	j.applied = last
	j.last = [2]uint64{last, last}
	return nil
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readJournalRegion reads a region's entries from its start: consecutive
// numbers, up to the first that is torn, not an entry, or out of order.
// An entry whose length runs past the region's end is torn: its bytes are
// never asked for, so that a length the disk garbled (up to 4 GiB) costs
// no memory.
func readJournalRegion(r *io.SectionReader) ([]journalGroup, error) {
	var out []journalGroup
	var off int64
	var h [journalHeader]byte
	for {
		if _, err := r.ReadAt(h[:], off); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("store: journal: %w", err)
		}
		if string(h[:4]) != journalMagic {
			return out, nil
		}
		n := int64(binary.BigEndian.Uint32(h[4:]))
		if n > r.Size()-off-journalHeader {
			return out, nil
		}
		seq := binary.BigEndian.Uint64(h[8:])
		if len(out) > 0 && seq != out[len(out)-1].seq+1 {
			return out, nil
		}
		payload := make([]byte, n)
		if _, err := r.ReadAt(payload, off+journalHeader); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("store: journal: %w", err)
		}
		if crc32Entry(h[8:16], payload) != binary.BigEndian.Uint32(h[16:]) {
			return out, nil
		}
		g, err := parseJournalPayload(payload)
		if err != nil {
			// Its checksum holds: written so by a store, not torn.
			return nil, fmt.Errorf("store: journal entry %d: %w", seq, err)
		}
		g.seq = seq
		out = append(out, g)
		off += journalHeader + n
	}
}

const journalDecisionFixed = 3*sig.HashSize + 8 + sig.PublicKeySize + sig.HashSize + 4

const journalRecordFixed = 2*sig.HashSize + sig.PublicKeySize + 8 + 8 + 4

func journalPayloadSize(ev []Evidence, ds []Decision, rs []Record) int {
	n := 8
	for i := range ev {
		n += sig.HashSize + 4 + len(ev[i].Body)
	}
	for i := range ds {
		n += journalDecisionFixed + 96 + 10*len(ds[i].Loads)
	}
	if len(rs) > 0 {
		n += 4
	}
	for i := range rs {
		n += journalRecordFixed + len(rs[i].Raw)
	}
	return n
}

// appendJournalPayload appends an entry's payload: the snapshots that the
// decisions name, then the decisions, then, when there are any, the
// records.
func appendJournalPayload(b []byte, ev []Evidence, ds []Decision, rs []Record) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, uint32(len(ev)))
	for i := range ev {
		b = append(b, ev[i].Key[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(ev[i].Body)))
		b = append(b, ev[i].Body...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(ds)))
	for i := range ds {
		d := &ds[i]
		b = append(b, d.Digest[:]...)
		b = append(b, d.Room[:]...)
		b = append(b, d.Policy[:]...)
		b = binary.BigEndian.AppendUint64(b, d.T)
		b = append(b, d.Signer[:]...)
		b = append(b, d.Evidence[:]...)
		at := len(b)
		b = append(b, 0, 0, 0, 0)
		var err error
		if b, err = AppendDecisionRow(b, d); err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	}
	if len(rs) == 0 {
		return b, nil
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(rs)))
	for i := range rs {
		r := &rs[i]
		b = append(b, r.Digest[:]...)
		b = append(b, r.Room[:]...)
		b = append(b, r.Hop[:]...)
		b = binary.BigEndian.AppendUint64(b, r.Start)
		b = binary.BigEndian.AppendUint64(b, r.End)
		b = binary.BigEndian.AppendUint32(b, uint32(len(r.Raw)))
		b = append(b, r.Raw...)
	}
	return b, nil
}

// parseJournalPayload reads an entry's payload, refusing one that is not
// exactly one.
func parseJournalPayload(b []byte) (journalGroup, error) {
	var g journalGroup
	take := func(n int) ([]byte, error) {
		if n < 0 || len(b) < n {
			return nil, reason.New(reason.Truncated, "a journal entry ends within its %d bytes", n)
		}
		v := b[:n:n]
		b = b[n:]
		return v, nil
	}
	u32 := func() (int, error) {
		v, err := take(4)
		if err != nil {
			return 0, err
		}
		return int(binary.BigEndian.Uint32(v)), nil
	}
	n, err := u32()
	if err != nil {
		return g, err
	}
	if n > len(b)/(sig.HashSize+4) {
		return g, reason.New(reason.Malformed, "a journal entry of %d snapshots in %d bytes", n, len(b))
	}
	g.ev = make([]Evidence, n)
	for i := range g.ev {
		k, err := take(sig.HashSize)
		if err != nil {
			return g, err
		}
		l, err := u32()
		if err != nil {
			return g, err
		}
		body, err := take(l)
		if err != nil {
			return g, err
		}
		g.ev[i] = Evidence{Key: sig.Hash(k), Body: body}
	}
	if n, err = u32(); err != nil {
		return g, err
	}
	if n > len(b)/journalDecisionFixed {
		return g, reason.New(reason.Malformed, "a journal entry of %d decisions in %d bytes", n, len(b))
	}
	g.ds = make([]Decision, n)
	for i := range g.ds {
		fixed, err := take(journalDecisionFixed)
		if err != nil {
			return g, err
		}
		d := &g.ds[i]
		d.Digest = sig.Hash(fixed[0:])
		d.Room = sig.Hash(fixed[sig.HashSize:])
		d.Policy = sig.Hash(fixed[2*sig.HashSize:])
		d.T = binary.BigEndian.Uint64(fixed[3*sig.HashSize:])
		d.Signer = sig.PublicKey(fixed[3*sig.HashSize+8:])
		d.Evidence = sig.Hash(fixed[3*sig.HashSize+8+sig.PublicKeySize:])
		l := int(binary.BigEndian.Uint32(fixed[journalDecisionFixed-4:]))
		row, err := take(l)
		if err != nil {
			return g, err
		}
		if err := ParseDecisionRow(row, d); err != nil {
			return g, err
		}
		if err := checkRow(d); err != nil {
			return g, reason.New(reason.Malformed, "%v", err)
		}
	}
	if len(b) == 0 {
		return g, nil
	}
	if n, err = u32(); err != nil {
		return g, err
	}
	if n == 0 || n > len(b)/journalRecordFixed {
		return g, reason.New(reason.Malformed, "a journal entry of %d records in %d bytes", n, len(b))
	}
	g.rs = make([]Record, n)
	for i := range g.rs {
		fixed, err := take(journalRecordFixed)
		if err != nil {
			return g, err
		}
		r := &g.rs[i]
		r.Digest = sig.Hash(fixed[0:])
		r.Room = sig.Hash(fixed[sig.HashSize:])
		r.Hop = sig.PublicKey(fixed[2*sig.HashSize:])
		r.Start = binary.BigEndian.Uint64(fixed[2*sig.HashSize+sig.PublicKeySize:])
		r.End = binary.BigEndian.Uint64(fixed[2*sig.HashSize+sig.PublicKeySize+8:])
		if r.Raw, err = take(int(binary.BigEndian.Uint32(fixed[journalRecordFixed-4:]))); err != nil {
			return g, err
		}
	}
	if len(b) != 0 {
		return g, reason.New(reason.Malformed, "%d bytes after a journal entry's records", len(b))
	}
	return g, nil
}
