package store

// What the external tests (engines_test.go) need of the engines' insides:
// the checks of their invariants and the count of snapshots held.

var (
	OpenTestBolt     = openTestBolt
	MemoryInvariants = memoryInvariants
	SnapshotCount    = snapshotCount
)

// NewMemoryPruneChunk is NewMemory with Prune removing at most n rows per
// write (n 0: the default), as WithPruneChunk sets it for a Bolt.
func NewMemoryPruneChunk(n int) *Memory {
	m := NewMemory()
	if n > 0 {
		m.chunk = n
	}
	return m
}

// WithLogFlush sets how many pending leaves make a Bolt write its logs
// (boltlog.go; 1024 by default).
func WithLogFlush(n int) Option { return func(o *options) { o.logFlush = n } }

// withNoFreelistSync opens a Bolt with bbolt's NoFreelistSync: its
// freelist is not written at each commit, and is found at Open by walking
// the file's pages (BenchmarkOpenLarge measures both).
func withNoFreelistSync() Option { return func(o *options) { o.noFreelistSync = true } }

// withJournalRegion makes a new journal of regions of n bytes, so that a
// test fills and reuses them (journal.go).
func withJournalRegion(n int64) Option { return func(o *options) { o.journalRegion = n } }

// withJournalRing has the journal sync through an io_uring, where the
// kernel has one, or not, whatever the processors (journalRing).
func withJournalRing(on bool) Option { return func(o *options) { o.journalRing = on } }
