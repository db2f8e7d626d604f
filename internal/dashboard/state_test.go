package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/policy"
)

// fakeRoom is a room of one pathway of one hop, with the records given.
type fakeRoom struct {
	id      sig.Hash
	records []evidence.Entry
	loadsAt []uint64 // the instants Status was asked at
	basis   policy.Basis
}

func (r *fakeRoom) Basis() policy.Basis { return r.basis }

func (r *fakeRoom) ID() sig.Hash { return r.id }

func (r *fakeRoom) Status(_ context.Context, loadsAt uint64) (view.Status, *api.Error) {
	r.loadsAt = append(r.loadsAt, loadsAt)
	one := uint32(2)
	return view.Status{
		Window:    [2]uint64{100, 200},
		Pathways:  []view.PathwayStatus{{ID: "a", First: 7, Load: &one}},
		Decisions: view.DecisionsStatus{Total: 7, ByReason: map[string]uint64{"evidence": 7}},
		Records:   view.RecordsStatus{Refused: map[string]uint64{"bad_signature": 1, "wrong_room": 2}},
	}, nil
}

func (r *fakeRoom) Hops(a, b uint64) []Hop {
	var in []evidence.Entry
	for _, e := range r.records {
		if e.Record.InWindow(a, b) {
			in = append(in, e)
		}
	}
	return []Hop{{Pathway: "a", Key: sig.PublicKey{1}, Records: in}}
}

type fakePool struct{ v view.PoolView }

func (p fakePool) Name() string                               { return p.v.Pool }
func (p fakePool) View(context.Context, uint64) view.PoolView { return p.v }

func entry(n byte, start, end uint64, class evidence.Class, joules uint64) evidence.Entry {
	return evidence.Entry{Digest: sig.Hash{n}, Record: &evidence.Record{Hop: sig.PublicKey{1}, Start: start, End: end, Class: class, Joules: joules}}
}

// TestState: a room's hop has its records over the window and the gaps
// between them, which tile it; the history keeps its last samples, ends
// with now, and a background sample reads the loads a microsecond back.
func TestState(t *testing.T) {
	var now uint64 = 1_000_000
	room := &fakeRoom{id: sig.Hash{9}, basis: policy.PerByte, records: []evidence.Entry{
		entry(2, 150, 170, evidence.Unmetered, 0),
		entry(1, 110, 130, evidence.Estimator, 5),
	}}
	pool := fakePool{view.PoolView{Pool: "p", Edges: []view.EdgeView{{Pathway: "e1", Drained: true, First: 3, Sessions: 4, Health: view.HealthView{Up: true, LastMs: 1.5}}}}}
	d := New(Deps{
		Name:     "test",
		Clock:    func() uint64 { return now },
		Rooms:    func() []Room { return []Room{room} },
		Pools:    func() []Pool { return []Pool{pool} },
		Operator: func(http.ResponseWriter, *http.Request) bool { return true },
	})
	for range keepSamples + 5 {
		d.Sample(context.Background())
	}
	if !slices.Equal(room.loadsAt[:1], []uint64{now - 1}) {
		t.Errorf("a sample read the loads at %v, want %d", room.loadsAt[:1], now-1)
	}
	st := d.State(context.Background())
	if st.Server != "test" || len(st.Rooms) != 1 || len(st.Pools) != 1 || st.Front != nil {
		t.Fatalf("state %+v", st)
	}
	// The page says how often it polls and how often the history is
	// sampled (issue 29: empty states say when the first point comes),
	// and a figure's unit (§5.3: basis 1 counts bytes).
	if st.RefreshS != 3 || st.SampleS != 5 {
		t.Errorf("refresh %v s, sample %v s; want 3 and 5", st.RefreshS, st.SampleS)
	}
	rd := st.Rooms[0]
	if rd.Unit != "µJ per byte" {
		t.Errorf("the figure's unit %q on basis 1", rd.Unit)
	}
	if len(rd.History) != keepSamples+1 {
		t.Errorf("%d samples, want %d and now", len(rd.History), keepSamples)
	}
	last := rd.History[len(rd.History)-1]
	if last.First["a"] != 7 || last.Load["a"] != 2 || last.Refused != 3 || last.ByReason["evidence"] != 7 {
		t.Errorf("the last sample %+v", last)
	}
	if len(rd.Hops) != 1 {
		t.Fatalf("hops %+v", rd.Hops)
	}
	h := rd.Hops[0]
	wantRecords := []RecordSpan{{sig.Hash{1}.String(), 110, 130, "Estimator"}, {sig.Hash{2}.String(), 150, 170, "unmetered"}}
	wantGaps := [][2]uint64{{100, 110}, {130, 150}, {170, 200}}
	if h.Pathway != "a" || h.Hop != (sig.PublicKey{1}).String() || !slices.Equal(h.Records, wantRecords) || !slices.Equal(h.Gaps, wantGaps) {
		t.Errorf("hop %+v, want records %v gaps %v", h, wantRecords, wantGaps)
	}
	pd := st.Pools[0]
	if len(pd.History) != keepSamples+1 || pd.History[0].Edges["e1"] != (EdgeSample{Up: true, Drained: true, First: 3, Sessions: 4, CheckMs: 1.5}) {
		t.Errorf("pool history %d, first %+v", len(pd.History), pd.History[0])
	}

	// The route: the operator's check, then the state as JSON.
	w := httptest.NewRecorder()
	d.serveState(w, httptest.NewRequest("GET", "/v1/dashboard?x", nil))
	if w.Code != http.StatusBadRequest {
		t.Errorf("with a query: %d", w.Code)
	}
}

// TestUnit: §5.3's delivery D is bytes on basis 1 and µs at or above the
// floor tier on basis 2; a figure J / D (J in µJ) is per one of them.
func TestUnit(t *testing.T) {
	for _, c := range []struct {
		b    policy.Basis
		want string
	}{{policy.PerByte, "µJ per byte"}, {policy.PerSecond, "µJ per µs at or above the floor tier"}, {0, "µJ per unit of delivery"}} {
		if got := unitOf(c.b); got != c.want {
			t.Errorf("basis %d: %q, want %q", c.b, got, c.want)
		}
	}
}
