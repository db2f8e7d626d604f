package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
)

// Memory is the Store in memory, with Bolt's semantics but no durability:
// for tests, and for a server run without a data directory. Everything it
// returns is a copy.
type Memory struct {
	mu        sync.RWMutex
	chunk     int
	rooms     map[sig.Hash]Room
	policies  map[sig.Hash][]byte
	active    map[sig.Hash]sig.Hash
	records   map[sig.Hash]Record
	decisions map[sig.Hash]Decision
	snapshots map[sig.Hash]*memSnapshot
	secrets   map[string][]byte
	logs      map[sig.Hash]*memLog
}

// memLog is a room's log of decisions: its leaves, and its stored hashes
// by index (appended in order, so dense).
type memLog struct {
	entries []LogEntry
	hashes  []tlog.Hash
	index   map[sig.Hash]int64 // by digest
	epochs  []KeyEpoch         // by seq
}

// memSnapshot is a snapshot and how many decisions reference it.
type memSnapshot struct {
	body []byte
	refs uint64
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{
		chunk:     defaultPruneChunk,
		rooms:     map[sig.Hash]Room{},
		policies:  map[sig.Hash][]byte{},
		active:    map[sig.Hash]sig.Hash{},
		records:   map[sig.Hash]Record{},
		decisions: map[sig.Hash]Decision{},
		snapshots: map[sig.Hash]*memSnapshot{},
		secrets:   map[string][]byte{},
		logs:      map[sig.Hash]*memLog{},
	}
}

// Close does nothing: a Memory holds nothing outside the process.
func (m *Memory) Close() error { return nil }

func copyRoom(r Room) Room {
	r.Descriptor = clone(r.Descriptor)
	if r.Descriptor == nil {
		r.Descriptor = []byte{}
	}
	if r.KeyLogHead != nil {
		r.KeyLogHead = append([]byte{}, r.KeyLogHead...)
	}
	return r
}

// PutRoom stores a room, replacing its descriptor and key log head.
func (m *Memory) PutRoom(ctx context.Context, r Room) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r = copyRoom(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rooms[r.ID] = r
	return nil
}

// Rooms returns every room held.
func (m *Memory) Rooms(ctx context.Context) ([]Room, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var rs []Room
	for _, r := range m.rooms {
		rs = append(rs, copyRoom(r))
	}
	return rs, nil
}

// PutPolicy stores a policy by digest and, with active, makes it the room's
// active policy.
func (m *Memory) PutPolicy(ctx context.Context, room sig.Hash, digest sig.Hash, raw []byte, active bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw = append([]byte{}, raw...)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.policies[digest] = raw
	if active {
		m.active[room] = digest
	}
	return nil
}

// Policy returns the policy with the digest.
func (m *Memory) Policy(ctx context.Context, digest sig.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	raw, ok := m.policies[digest]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte{}, raw...), nil
}

// ActivePolicy returns the room's active policy.
func (m *Memory) ActivePolicy(ctx context.Context, room sig.Hash) (sig.Hash, []byte, error) {
	if err := ctx.Err(); err != nil {
		return sig.Hash{}, nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	digest, ok := m.active[room]
	if !ok {
		return sig.Hash{}, nil, ErrNotFound
	}
	return digest, append([]byte{}, m.policies[digest]...), nil
}

// PutRecords stores the records not yet held and reports which were new.
func (m *Memory) PutRecords(ctx context.Context, rs []Record) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	added := make([]bool, len(rs))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range rs {
		if _, ok := m.records[r.Digest]; ok {
			continue
		}
		r.Raw = append([]byte{}, r.Raw...)
		m.records[r.Digest] = r
		added[i] = true
	}
	return added, nil
}

// Record returns the WMH1 bytes of the record with the digest.
func (m *Memory) Record(ctx context.Context, digest sig.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.records[digest]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte{}, r.Raw...), nil
}

// Records calls fn, outside the lock, for each record of the room whose end
// is after since, in ascending order of end and then digest (Bolt's order).
func (m *Memory) Records(ctx context.Context, room sig.Hash, since uint64, fn func(Record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.RLock()
	var rs []Record
	for _, r := range m.records {
		if r.Room == room && r.End > since {
			r.Raw = append([]byte{}, r.Raw...)
			rs = append(rs, r)
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(rs, func(x, y Record) int {
		if x.End != y.End {
			if x.End < y.End {
				return -1
			}
			return 1
		}
		return slices.Compare(x.Digest[:], y.Digest[:])
	})
	for _, r := range rs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// PutDecisions stores the decisions not yet held, and the snapshots they
// reference; it changes nothing when one of them cannot be stored.
func (m *Memory) PutDecisions(ctx context.Context, ev []Evidence, ds []Decision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range ds {
		if err := checkRow(&ds[i]); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Check first, then write, so that a refusal leaves nothing behind.
	fresh := map[sig.Hash]bool{}
	newKeys := map[sig.Hash][]byte{}
	for i := range ds {
		d := &ds[i]
		if _, ok := m.decisions[d.Digest]; ok || fresh[d.Digest] {
			continue
		}
		fresh[d.Digest] = true
		if _, ok := m.snapshots[d.Evidence]; ok {
			continue
		}
		if _, ok := newKeys[d.Evidence]; ok {
			continue
		}
		i := slices.IndexFunc(ev, func(e Evidence) bool { return e.Key == d.Evidence })
		if i < 0 {
			return fmt.Errorf("%w: %s", ErrSnapshotMissing, d.Evidence)
		}
		if sha256.Sum256(ev[i].Body) != d.Evidence {
			return fmt.Errorf("store: snapshot %s is not the SHA-256 of its body", d.Evidence)
		}
		newKeys[d.Evidence] = ev[i].Body
	}
	for k, body := range newKeys {
		m.snapshots[k] = &memSnapshot{body: append([]byte{}, body...)}
	}
	for i := range ds {
		d := ds[i]
		if _, ok := m.decisions[d.Digest]; ok {
			continue
		}
		d.Loads = slices.Clone(d.Loads)
		m.decisions[d.Digest] = d
		m.snapshots[d.Evidence].refs++
		if err := m.appendLog(d); err != nil {
			return err
		}
	}
	return nil
}

// appendLog appends the decision to its room's log; m.mu is held.
func (m *Memory) appendLog(d Decision) error {
	l := m.logs[d.Room]
	if l == nil {
		l = &memLog{}
		m.logs[d.Room] = l
	}
	e := LogEntry{Digest: d.Digest, T: d.T}
	fresh, err := AppendLog(int64(len(l.entries)), [][]byte{e.Leaf()}, func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			out[i] = l.hashes[x]
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	l.hashes = append(l.hashes, fresh...)
	if l.index == nil {
		l.index = map[sig.Hash]int64{}
	}
	l.index[e.Digest] = int64(len(l.entries))
	l.entries = append(l.entries, e)
	return nil
}

// errNoSuchLog is a log number other than 0, the one log a room has here.
func errNoSuchLog(n int64) error {
	return fmt.Errorf("store: no log %d: a room has one log here, 0", n)
}

// Logs returns the room's one log, when it has one.
func (m *Memory) Logs(ctx context.Context, room sig.Hash) ([]LogInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if l := m.logs[room]; l != nil {
		return []LogInfo{{Size: int64(len(l.entries))}}, nil
	}
	return nil, nil
}

// OwnLog is the room's one log, 0.
func (m *Memory) OwnLog(ctx context.Context, room sig.Hash) (LogInfo, error) {
	if err := ctx.Err(); err != nil {
		return LogInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[room]
	if l == nil {
		l = &memLog{}
		m.logs[room] = l
	}
	return LogInfo{Size: int64(len(l.entries))}, nil
}

// LogSize is the number of leaves in the room's log.
func (m *Memory) LogSize(ctx context.Context, room sig.Hash, n int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if l := m.logs[room]; l != nil && n == 0 {
		return int64(len(l.entries)), nil
	}
	return 0, nil
}

// LogEntries returns the leaves [start, end) of the room's log.
func (m *Memory) LogEntries(ctx context.Context, room sig.Hash, n, start, end int64) ([]LogEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n != 0 {
		return nil, errNoSuchLog(n)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var es []LogEntry
	if l := m.logs[room]; l != nil {
		es = l.entries
	}
	if start < 0 || start > end || end > int64(len(es)) {
		return nil, fmt.Errorf("store: log entries [%d, %d) of a log of %d", start, end, len(es))
	}
	return slices.Clone(es[start:end]), nil
}

// LogHashes returns the room's stored log hashes at the indexes.
func (m *Memory) LogHashes(ctx context.Context, room sig.Hash, n int64, indexes []int64) ([]tlog.Hash, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n != 0 {
		return nil, errNoSuchLog(n)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var hs []tlog.Hash
	if l := m.logs[room]; l != nil {
		hs = l.hashes
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(hs)) {
			return nil, fmt.Errorf("store: log hash %d of %d stored", x, len(hs))
		}
		out[i] = hs[x]
	}
	return out, nil
}

// LogRef is the index of the decision's leaf in the room's log, 0.
func (m *Memory) LogRef(ctx context.Context, room sig.Hash, digest sig.Hash) (int64, int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if l := m.logs[room]; l != nil {
		if x, ok := l.index[digest]; ok {
			return 0, x, nil
		}
	}
	return 0, 0, ErrNotFound
}

// PutKeyEpoch keeps a head the room has had.
func (m *Memory) PutKeyEpoch(ctx context.Context, room sig.Hash, e KeyEpoch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.Log != 0 {
		return errNoSuchLog(e.Log)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[room]
	if l == nil {
		l = &memLog{}
		m.logs[room] = l
	}
	i, held := slices.BinarySearchFunc(l.epochs, e.Seq, func(x KeyEpoch, seq uint64) int { return cmp.Compare(x.Seq, seq) })
	if !held {
		e.Head, e.Handover = slices.Clone(e.Head), slices.Clone(e.Handover)
		l.epochs = slices.Insert(l.epochs, i, e)
	}
	return nil
}

// KeyEpochs returns the heads the room has had.
func (m *Memory) KeyEpochs(ctx context.Context, room sig.Hash) ([]KeyEpoch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if l := m.logs[room]; l != nil {
		return slices.Clone(l.epochs), nil
	}
	return nil, nil
}

// Decision returns the stored decision with the digest.
func (m *Memory) Decision(ctx context.Context, digest sig.Hash) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	d, ok := m.decisions[digest]
	if !ok {
		return Decision{}, ErrNotFound
	}
	d.Loads = slices.Clone(d.Loads)
	return d, nil
}

// EvidenceSnapshot returns the body of the snapshot with the key.
func (m *Memory) EvidenceSnapshot(ctx context.Context, key sig.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.snapshots[key]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte{}, s.body...), nil
}

// Prune removes the records whose end is before recordsBefore, the decisions
// whose t is before decisionsBefore, and the snapshots no decision left references. It finds them
// under the read lock and removes them in groups under the write lock, so
// that requests run between the groups.
func (m *Memory) Prune(ctx context.Context, recordsBefore, decisionsBefore uint64) (PruneStats, error) {
	var st PruneStats
	if err := ctx.Err(); err != nil {
		return st, err
	}
	m.mu.RLock()
	var records, decisions []sig.Hash
	for k, r := range m.records {
		if r.End < recordsBefore {
			records = append(records, k)
		}
	}
	for k, d := range m.decisions {
		if d.T < decisionsBefore {
			decisions = append(decisions, k)
		}
	}
	m.mu.RUnlock()
	for len(records) > 0 {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		n := min(m.chunk, len(records))
		m.mu.Lock()
		for _, k := range records[:n] {
			if _, ok := m.records[k]; ok {
				delete(m.records, k)
				st.Records++
			}
		}
		m.mu.Unlock()
		records = records[n:]
	}
	for len(decisions) > 0 {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		n := min(m.chunk, len(decisions))
		m.mu.Lock()
		for _, k := range decisions[:n] {
			d, ok := m.decisions[k]
			if !ok {
				continue
			}
			delete(m.decisions, k)
			st.Decisions++
			if s := m.snapshots[d.Evidence]; s.refs > 1 {
				s.refs--
			} else {
				delete(m.snapshots, d.Evidence)
				st.Snapshots++
			}
		}
		m.mu.Unlock()
		decisions = decisions[n:]
	}
	return st, nil
}

// Secret returns the secret of that name, made at its first call.
func (m *Memory) Secret(ctx context.Context, name string, n int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.secrets[name]
	if !ok {
		var err error
		if v, err = newSecret(n); err != nil {
			return nil, err
		}
		m.secrets[name] = v
	}
	if len(v) != n {
		return nil, fmt.Errorf("store: the secret %q is %d bytes, not %d", name, len(v), n)
	}
	return clone(v), nil
}

// newSecret makes n bytes from crypto/rand.
func newSecret(n int) ([]byte, error) {
	if n <= 0 || n > 1024 {
		return nil, fmt.Errorf("store: a secret of %d bytes", n)
	}
	v := make([]byte, n)
	if _, err := rand.Read(v); err != nil {
		return nil, fmt.Errorf("store: making a secret: %w", err)
	}
	return v, nil
}
