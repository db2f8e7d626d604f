// Package storetest is the test suite of store.Store that every engine
// runs: the engine's own tests call Run with an Engine that opens it, and
// the suite holds it to what the interface promises (its doc comments, and
// the sections of the extension and COMPANION each test cites). What is
// true of one engine only (its file surviving a reopen, its indexes) is
// tested beside that engine.
package storetest

import (
	"context"
	"testing"

	"github.com/waisteer/waisteer/store"
)

// Engine is a store implementation under the suite.
type Engine struct {
	Name string
	// Open returns a fresh, empty store whose Prune removes at most chunk
	// rows per durable write (chunk 0: the engine's default). The store is
	// closed (and checked, where the engine can check itself) by t.Cleanup.
	Open func(t *testing.T, chunk int) store.Store
	// Snapshots counts the evidence snapshots the store holds (the suite's
	// tests of sharing and pruning need it).
	Snapshots func(t testing.TB, s store.Store) int
}

// tests are the suite, by the names of the subtests Run makes (the names
// of the package store tests they were before every engine shared them).
var tests = []struct {
	name string
	f    func(t *testing.T, e Engine)
}{
	{"Rooms", testRooms},
	{"Policies", testPolicies},
	{"Records", testRecords},
	{"DecisionsRoundTrip_7_1", testDecisionsRoundTrip_7_1},
	{"PutDecisionsIdempotent", testPutDecisionsIdempotent},
	{"PutDecisionsRefuses", testPutDecisionsRefuses},
	{"SnapshotsShared", testSnapshotsShared},
	{"Prune", testPrune},
	{"PruneCutoffsApart", testPruneCutoffsApart},
	{"PruneBesideWriters", testPruneBesideWriters},
	{"ContextCancelled", testContextCancelled},
	{"Secret", testSecret},
	{"Log", testLog},
	{"KeyEpochs", testKeyEpochs},
}

// Run runs every engine-agnostic test of store.Store on e, each as a subtest
// named as today's test function (t.Run("Rooms", ...), etc.).
func Run(t *testing.T, e Engine) {
	if e.Open == nil || e.Snapshots == nil {
		t.Fatalf("engine %q: Open and Snapshots are both needed", e.Name)
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) { c.f(t, e) })
	}
}

var bg = context.Background()
