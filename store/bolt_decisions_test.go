package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

// TestPutDecisionsBehindLast (issue 30 item 1): PutDecisions looks for a
// held row only for keys at or before the last row's; a key after it is
// fresh. Around that bound: a decision of another room whose t is behind
// the last row's (fresh, though not after it), the last row itself given
// again (held: its key equals the bound), an older one given again
// (held), and one after the bound (fresh) are stored once each, each
// fresh one with the next leaf of its room's log.
func TestPutDecisionsBehindLast(t *testing.T) {
	s := openTestBolt(t, "")
	sc := pathwaysScenario(t, 3, 8)
	ms := makeDecisions(t, sc, 13, 12, 6*scenario.Period, 1_000)
	room, other := sc.Room.ID(), hash("another room")
	first := ms[:8]
	if err := s.PutDecisions(bg, evidenceOf(first), rowsOf(first)); err != nil {
		t.Fatal(err)
	}
	behind := ms[8]
	behind.row.Room = other
	behind.row.T = ms[2].row.T + 1 // before the last row's t: another room's clock
	g := []made{behind, ms[7], ms[3], ms[9]}
	if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		room sig.Hash
		want []LogEntry
	}{
		{room, entriesOf(append(first, ms[9]))},
		{other, entriesOf([]made{behind})},
	} {
		n, err := s.LogSize(bg, c.room, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.LogEntries(bg, c.room, 0, 0, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("room %s's log holds %d leaves, want %d", c.room, len(got), len(c.want))
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("room %s's leaf %d is %v, want %v", c.room, i, got[i], c.want[i])
			}
		}
	}
	for _, m := range []made{behind, ms[7], ms[3], ms[9]} {
		d, err := s.Decision(bg, m.row.Digest)
		if err != nil || d.T != m.row.T || d.Room != m.row.Room {
			t.Fatalf("decision at %d: %+v, %v", m.row.T, d, err)
		}
	}
	var rows int
	if err := s.db.View(func(tx *bolt.Tx) error { rows = tx.Bucket(bucketDecisions).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	if rows != 10 {
		t.Fatalf("%d rows, want 10: 8, then one behind the last and one after it", rows)
	}
}

func entriesOf(ms []made) []LogEntry {
	es := make([]LogEntry, len(ms))
	for i, m := range ms {
		es[i] = LogEntry{Digest: m.row.Digest, T: m.row.T}
	}
	return es
}

// TestDecisionsAtAnyOrder: DecisionsAt, the recount's read of many leaves
// at once (its cursor stepping from one row to the next, its snapshot
// read once for the decisions after that name it), gives for any list of
// leaves what DecisionAt gives for each alone: two rooms' decisions
// interleaved in t, each room's snapshots of its own, read in t order,
// with gaps past the cursor's steps, backwards, shuffled, twice over, and
// with leaves the file does not hold (a µs off, a digest of none) among
// them.
func TestDecisionsAtAnyOrder(t *testing.T) {
	s := openTestBolt(t, "")
	a := makeDecisions(t, pathwaysScenario(t, 3, 8), 21, 60, 6*scenario.Period, 1_000)
	b := makeDecisions(t, pathwaysScenario(t, 4, 8), 22, 60, 6*scenario.Period+500, 1_000)
	putAll(t, s, append(append([]made(nil), a...), b...), 16)
	var both, gaps, odd []LogEntry
	for i := range a {
		both = append(both, LogEntry{Digest: a[i].row.Digest, T: a[i].row.T}, LogEntry{Digest: b[i].row.Digest, T: b[i].row.T})
		if i%(rowCursorSteps+3) != 0 {
			gaps = append(gaps, LogEntry{Digest: a[i].row.Digest, T: a[i].row.T})
		}
		odd = append(odd, LogEntry{Digest: a[i].row.Digest, T: a[i].row.T + 1}, LogEntry{Digest: hash(fmt.Sprint("none", i)), T: b[i].row.T})
	}
	if ev := evidenceOf(append(append([]made(nil), a...), b...)); len(ev) < 2 {
		t.Fatalf("%d snapshots: the test wants decisions of several", len(ev))
	}
	backwards := slices.Clone(both)
	slices.Reverse(backwards)
	rng := rand.New(rand.NewPCG(23, 1))
	shuffled := slices.Concat(both, both, odd)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, c := range []struct {
		name string
		es   []LogEntry
	}{{"in t order", both}, {"with gaps", gaps}, {"backwards", backwards}, {"shuffled", shuffled}, {"not held", odd}} {
		var want []Decision
		var wantHeld []bool
		for _, e := range c.es { // the reference: one read each, by key
			d, err := s.DecisionAt(bg, e.T, e.Digest)
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			want, wantHeld = append(want, d), append(wantHeld, err == nil)
		}
		rows, held, err := s.DecisionsAt(bg, c.es, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(held, wantHeld) {
			t.Fatalf("%s: held %v, want %v", c.name, held, wantHeld)
		}
		for i := range rows {
			if !reflect.DeepEqual(rows[i], want[i]) {
				t.Fatalf("%s, leaf %d: %+v, want %+v", c.name, i, rows[i], want[i])
			}
		}
	}
}
