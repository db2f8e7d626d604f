package store_test

import (
	"testing"

	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/store/storetest"
)

// engines are the stores of this package under the shared suite, each made
// fresh per test and checked when it ends.
var engines = []storetest.Engine{
	{
		Name: "memory",
		Open: func(t *testing.T, chunk int) store.Store {
			m := store.NewMemoryPruneChunk(chunk)
			t.Cleanup(func() {
				if err := store.MemoryInvariants(m); err != nil {
					t.Error(err)
				}
			})
			return m
		},
		Snapshots: store.SnapshotCount,
	},
	{
		Name: "bolt",
		Open: func(t *testing.T, chunk int) store.Store {
			// Checked with bbolt's tx.Check and the store's invariants.
			return store.OpenTestBolt(t, "", store.WithPruneChunk(chunk))
		},
		Snapshots: store.SnapshotCount,
	},
	{
		// The logs written every 5 leaves, so that the suite reads
		// written and pending leaves together (boltlog.go).
		Name: "bolt-log-5",
		Open: func(t *testing.T, chunk int) store.Store {
			return store.OpenTestBolt(t, "", store.WithPruneChunk(chunk), store.WithLogFlush(5))
		},
		Snapshots: store.SnapshotCount,
	},
}

// TestEngines runs the suite of store.Store on each engine.
func TestEngines(t *testing.T) {
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) { storetest.Run(t, e) })
	}
}
