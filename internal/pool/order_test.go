package pool

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strconv"
	"testing"
)

// sessions is how many sessions the tests of the order run over.
const sessions = 100_000

// TestShares: each edge is first for weight/Σweight of the sessions, within
// ±1 % absolute (the seed, "How the order is chosen": "an edge of weight 2
// is first for twice as many viewers as an edge of weight 1"); a weight-0
// edge comes after the pool, never first while another is up.
func TestShares(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges []any
		want  map[string]float64
	}{
		{"1,2,3", []any{"a", 1, "b", 2, "c", 3}, map[string]float64{"a": 1.0 / 6, "b": 2.0 / 6, "c": 3.0 / 6}},
		// The station seed's example: edge-1, edge-2 of weight 2, bunny 0.
		{"seed 1,2,0", []any{"edge-1", 1, "edge-2", 2, "bunny", 0}, map[string]float64{"edge-1": 1.0 / 3, "edge-2": 2.0 / 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, config(tc.edges...))
			os := orders(t, p, sessions)
			got := shares(os)
			for id, want := range tc.want {
				if !near(got[id], want) {
					t.Errorf("%s first for %.4f of the sessions, want %.4f ± 0.01", id, got[id], want)
				}
			}
			for id := range got {
				if _, ok := tc.want[id]; !ok {
					t.Errorf("%s first for %.4f of the sessions, want none", id, got[id])
				}
			}
			if tc.name == "seed 1,2,0" {
				for _, o := range os {
					if o[2] != "bunny" {
						t.Fatalf("order %q: the weight-0 edge is not after the pool", o)
					}
				}
			}
		})
	}
}

// TestDownMovesOnlyItsSessions: an edge going down moves only the sessions
// that had it first, spread over the rest in proportion to their weights,
// and every one of them comes back when it returns (the seed, "A viewer
// keeps their edge"). Every session's order less the edge stays as it was.
func TestDownMovesOnlyItsSessions(t *testing.T) {
	for _, down := range []string{"a", "c"} {
		t.Run(down, func(t *testing.T) {
			p := newPool(t, config("a", 1, "b", 2, "c", 3))
			before := orders(t, p, sessions)
			if !p.SetUp(down, false) {
				t.Fatal("SetUp changed nothing")
			}
			if p.SetUp(down, false) {
				t.Error("SetUp of an edge already down changed something")
			}
			after := orders(t, p, sessions)
			weights := map[string]float64{"a": 1, "b": 2, "c": 3}
			total := 6 - weights[down]
			moved := map[string]float64{}
			n := 0
			for i := range before {
				if want := without(before[i], down); !slices.Equal(after[i], want) {
					t.Fatalf("session %d: %q with %s down, was %q", i, after[i], down, before[i])
				}
				if before[i][0] == down {
					n++
					moved[after[i][0]]++
				}
			}
			for id, w := range weights {
				if id == down {
					continue
				}
				if got, want := moved[id]/float64(n), w/total; !near(got, want) {
					t.Errorf("%s took %.4f of the %d sessions moved, want %.4f ± 0.01", id, got, n, want)
				}
			}
			p.SetUp(down, true)
			back := orders(t, p, sessions)
			for i := range before {
				if !slices.Equal(back[i], before[i]) {
					t.Fatalf("session %d: %q after %s came back, was %q", i, back[i], down, before[i])
				}
			}
		})
	}
}

// TestDrainAndWeight: a drained edge leaves every order as if it were down
// and returns on undrain; a weight change of edge X moves sessions only to
// or from X, and the shares follow the new weights (issue 12 item 7:
// "sessions of the edges it did not touch keep their order").
func TestDrainAndWeight(t *testing.T) {
	p := newPool(t, config("a", 1, "b", 2, "c", 3))
	before := orders(t, p, sessions)

	if err := p.Drain("b", true); err != nil {
		t.Fatal(err)
	}
	drained := orders(t, p, sessions)
	for i := range before {
		if !slices.Equal(drained[i], without(before[i], "b")) {
			t.Fatalf("session %d: %q with b drained, was %q", i, drained[i], before[i])
		}
	}
	if err := p.Drain("b", false); err != nil {
		t.Fatal(err)
	}
	for i, o := range orders(t, p, sessions) {
		if !slices.Equal(o, before[i]) {
			t.Fatalf("session %d: %q after b's undrain, was %q", i, o, before[i])
		}
	}
	if err := p.Drain("x", true); err == nil {
		t.Error("Drain of an unknown pathway: no error")
	}

	if err := p.SetWeight("b", 4); err != nil {
		t.Fatal(err)
	}
	if w := p.Config().Edges[1].Weight; w != 4 {
		t.Errorf("Config's weight of b is %d after SetWeight 4", w)
	}
	heavier := orders(t, p, sessions)
	for i := range before {
		if was, is := before[i][0], heavier[i][0]; was != is && was != "b" && is != "b" {
			t.Fatalf("session %d moved from %s to %s when b's weight changed", i, was, is)
		}
	}
	got := shares(heavier)
	for id, want := range map[string]float64{"a": 1.0 / 8, "b": 4.0 / 8, "c": 3.0 / 8} {
		if !near(got[id], want) {
			t.Errorf("with weights 1, 4, 3: %s first for %.4f, want %.4f ± 0.01", id, got[id], want)
		}
	}
	if err := p.SetWeight("b", 0); err != nil {
		t.Fatal(err)
	}
	for i, o := range orders(t, p, sessions) {
		if o[2] != "b" || !slices.Equal(o[:2], without(before[i], "b")) {
			t.Fatalf("session %d: %q with b of weight 0, was %q", i, o, before[i])
		}
	}
	if err := p.SetWeight("b", maxWeight+1); err == nil {
		t.Error("SetWeight above the range: no error")
	}
	if err := p.SetWeight("x", 1); err == nil {
		t.Error("SetWeight of an unknown pathway: no error")
	}
}

// TestNothingHealthy: with nothing healthy, every edge not drained is
// listed, in the same ranking; with every edge drained, every edge (the
// seed: "The manifest is never empty"). A healthy weight-0 edge alone is
// listed alone.
func TestNothingHealthy(t *testing.T) {
	p := newPool(t, config("a", 1, "b", 2, "z", 0, "c", 3))
	before := orders(t, p, 1000)
	for _, id := range []string{"a", "b", "c"} {
		p.SetUp(id, false)
	}
	for i, o := range orders(t, p, 1000) {
		if !slices.Equal(o, []string{"z"}) {
			t.Fatalf("session %d: %q with only z up", i, o)
		}
	}
	p.SetUp("z", false)
	for i, o := range orders(t, p, 1000) {
		if !slices.Equal(o, before[i]) {
			t.Fatalf("session %d: %q with nothing up, want every edge as ranked: %q", i, o, before[i])
		}
	}
	p.Drain("b", true)
	for i, o := range orders(t, p, 1000) {
		if !slices.Equal(o, without(before[i], "b")) {
			t.Fatalf("session %d: %q with nothing up and b drained, was %q", i, o, before[i])
		}
	}
	for _, id := range []string{"a", "c", "z"} {
		p.Drain(id, true)
	}
	for i, o := range orders(t, p, 1000) {
		if !slices.Equal(o, before[i]) {
			t.Fatalf("session %d: %q with every edge drained, want every edge: %q", i, o, before[i])
		}
	}
}

// TestWeightZeroInOrderWritten: weight-0 edges follow the pool in the
// order written (the seed: "Weight 0 is a last resort").
func TestWeightZeroInOrderWritten(t *testing.T) {
	p := newPool(t, config("z2", 0, "a", 1, "z1", 0, "b", 1))
	for i, o := range orders(t, p, 1000) {
		if !slices.Equal(o[2:], []string{"z2", "z1"}) {
			t.Fatalf("session %d: %q, the last resorts not in the order written", i, o)
		}
	}
}

// TestRendezvousReference: the order is the package doc's weighted
// rendezvous hash, computed here from the doc's formula (score = w/−ln(u),
// highest first), so that it is the same in every process and release.
func TestRendezvousReference(t *testing.T) {
	var many []any
	for i := range 100 {
		many = append(many, "e"+strconv.Itoa(i), i%5)
	}
	t.Run("5 edges", func(t *testing.T) {
		rendezvousReference(t, []any{"edge-1", 1, "edge-2", 2, "cdn.b", 5, "x_y", 3, "bunny", 0}, 2000)
	})
	t.Run("100 edges", func(t *testing.T) { rendezvousReference(t, many, 200) })
}

func rendezvousReference(t *testing.T, edges []any, n int) {
	p := newPool(t, config(edges...))
	got := orders(t, p, n)
	splitmix := func(z uint64) uint64 {
		z += 0x9e3779b97f4a7c15
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	for i := range got {
		s := refSession(t, testKey, uint64(i), 0)
		s0, s1 := binary.LittleEndian.Uint64(s[:8]), binary.LittleEndian.Uint64(s[8:])
		type scored struct {
			id    string
			score float64
		}
		var pool, last []string
		var ss []scored
		for j := 0; j < len(edges); j += 2 {
			id, w := edges[j].(string), edges[j+1].(int)
			if w == 0 {
				last = append(last, id)
				continue
			}
			f := fnv.New64a()
			f.Write([]byte(id))
			h := splitmix(s0 ^ splitmix(s1^f.Sum64()))
			u := (float64(h>>11) + 0.5) / math.Pow(2, 53)
			ss = append(ss, scored{id, float64(w) / -math.Log(u)})
		}
		sort.SliceStable(ss, func(a, b int) bool { return ss[a].score > ss[b].score })
		for _, x := range ss {
			pool = append(pool, x.id)
		}
		if want := append(pool, last...); !slices.Equal(got[i], want) {
			t.Fatalf("session %d: %q, the doc's formula gives %q", i, got[i], want)
		}
	}
}

// TestSameSessionSameOrder: a session keeps its order across requests and
// across pools (a restart, or another server under the same key).
func TestSameSessionSameOrder(t *testing.T) {
	c := config("a", 1, "b", 1, "c", 1, "d", 1)
	one, two := orders(t, newPool(t, c), 1000), orders(t, newPool(t, c), 1000)
	again := orders(t, newPool(t, c), 1000)
	for i := range one {
		if !slices.Equal(one[i], two[i]) || !slices.Equal(one[i], again[i]) {
			t.Fatalf("session %d: %q, %q and %q", i, one[i], two[i], again[i])
		}
	}
}

// TestReconfigureKeepsState: an edge kept keeps its health, draining and
// count; a new one starts up; a removed one goes; a bad Config is refused
// and the pool left as it was.
func TestReconfigureKeepsState(t *testing.T) {
	p := newPool(t, config("a", 1, "b", 2, "c", 3))
	p.SetUp("a", false)
	p.Drain("b", true)
	steer(t, p, "")
	firstC := p.Edges()[2].First
	if firstC != 1 {
		t.Fatalf("c first in %d manifests of one, with a down and b drained", firstC)
	}
	next := config("c", 3, "b", 2, "d", 1)
	if err := p.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	got := p.Edges()
	want := []EdgeState{
		{Pathway: "c", Host: "c.edges.example", Weight: 3, Up: true, First: 1},
		{Pathway: "b", Host: "b.edges.example", Weight: 2, Up: true, Drained: true},
		{Pathway: "d", Host: "d.edges.example", Weight: 1, Up: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("after Reconfigure: %+v, want %+v", got, want)
	}
	bad := config("c", 3, "c", 1)
	if err := p.Reconfigure(bad); err == nil {
		t.Error("Reconfigure with a duplicate pathway: no error")
	}
	if !slices.Equal(p.Edges(), want) {
		t.Errorf("after a refused Reconfigure: %+v, want %+v", p.Edges(), want)
	}
}

// TestFirstCounts: each manifest counts once for the edge it puts first.
func TestFirstCounts(t *testing.T) {
	p := newPool(t, config("a", 1, "b", 2, "c", 3))
	count := map[string]uint64{}
	for range 3000 {
		m, _, _ := steer(t, p, "")
		count[m.Priority[0]]++
	}
	for _, e := range p.Edges() {
		if e.First != count[e.Pathway] {
			t.Errorf("%s: First %d, and %d manifests put it first", e.Pathway, e.First, count[e.Pathway])
		}
	}
}

// TestSortRanked: the sort orders by key and an equal key by index, as a
// stable sort of the text's order does, for sizes about its cut-off and
// with equal keys.
func TestSortRanked(t *testing.T) {
	r := uint64(1)
	for n := range 300 {
		for _, distinct := range []uint64{2, 7, 1 << 40} {
			a := make([]ranked, n)
			for i := range a {
				r = splitmixRef(r)
				a[i] = ranked{float64(r % distinct), int32(i)}
			}
			r = splitmixRef(r)
			rand := r
			// Shuffle, so that equal keys are out of their order.
			for i := len(a) - 1; i > 0; i-- {
				rand = splitmixRef(rand)
				j := int(rand % uint64(i+1))
				a[i], a[j] = a[j], a[i]
			}
			want := slices.Clone(a)
			sort.Slice(want, func(x, y int) bool {
				return want[x].key < want[y].key || want[x].key == want[y].key && want[x].i < want[y].i
			})
			sortRanked(a)
			if !slices.Equal(a, want) {
				t.Fatalf("%d keys of %d values: %v, want %v", n, distinct, a, want)
			}
		}
	}
}

// splitmixRef steps a SplitMix64 generator, for test data.
func splitmixRef(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
