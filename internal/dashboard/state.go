package dashboard

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
)

// State is everything the page shows, in one poll.
type State struct {
	Server string    `json:"server"`
	At     time.Time `json:"at"`
	// RefreshS is how often the page polls, seconds; SampleS how often
	// the server samples the history the charts draw (Every).
	RefreshS float64           `json:"refresh_s"`
	SampleS  float64           `json:"sample_s"`
	Rooms    []RoomState       `json:"rooms"`
	Pools    []PoolState       `json:"pools"`
	Front    *view.FrontStatus `json:"front,omitempty"` // with a [front]
}

// RoomState is one energy room: its status route's answer, each hop's
// records over the window, and the room's history.
type RoomState struct {
	Status view.Status `json:"status"`
	// Unit is what a figure's J / D is in: J in µJ, D by the policy's
	// basis (§5.3): bytes for basis 1, µs at or above the floor tier for 2.
	Unit    string       `json:"unit"`
	Hops    []HopState   `json:"hops"`
	History []RoomSample `json:"history"` // oldest first
}

// HopState is one hop of one pathway over the window [a, b) of the status:
// its records (the periods they cover and their class) and the parts of
// the window no record of it covers.
type HopState struct {
	Pathway string       `json:"pathway"`
	Hop     string       `json:"hop"` // its key, hex
	Records []RecordSpan `json:"records"`
	Gaps    [][2]uint64  `json:"gaps"` // [start, end) µs on the room clock
}

// RecordSpan is one record: [start, end) µs on the room clock.
type RecordSpan struct {
	Digest string `json:"digest"`
	Start  uint64 `json:"start"`
	End    uint64 `json:"end"`
	Class  string `json:"class"` // its label; "unmetered" for the unmetered marker
}

// RoomSample is a room at an instant: its decisions since start by reason
// and by first pathway (counts that only grow; the page charts their
// differences), and its live sessions by the pathway they are first for.
type RoomSample struct {
	At       time.Time         `json:"at"`
	ByReason map[string]uint64 `json:"by_reason"`
	First    map[string]uint64 `json:"first"`
	Load     map[string]uint32 `json:"load"`
	Refused  uint64            `json:"refused"` // records refused since start
}

// PoolState is one pool: its edges route's answer and its history.
type PoolState struct {
	View    view.PoolView `json:"view"`
	History []PoolSample  `json:"history"` // oldest first
}

// PoolSample is a pool's edges at an instant.
type PoolSample struct {
	At    time.Time             `json:"at"`
	Edges map[string]EdgeSample `json:"edges"`
}

// EdgeSample is one edge at an instant: its health, its manifests first
// since start, its live sessions, and its latest check's time.
type EdgeSample struct {
	Up       bool    `json:"up"`
	Drained  bool    `json:"drained"`
	First    uint64  `json:"first"`
	Sessions uint32  `json:"sessions"`
	CheckMs  float64 `json:"check_ms"`
}

// Every is how often the server samples the history (Sample); keepSamples
// how many samples it keeps (ten minutes).
const (
	Every       = 5 * time.Second
	keepSamples = 120
)

// history is the samples of every room and pool.
type history struct {
	mu    sync.Mutex
	rooms map[sig.Hash][]RoomSample
	pools map[string][]PoolSample
}

func keep[T any](xs []T, x T) []T {
	xs = append(xs, x)
	if len(xs) > keepSamples {
		xs = slices.Clone(xs[len(xs)-keepSamples:])
	}
	return xs
}

// Sample takes a sample of every room and pool.
func (d *Dashboard) Sample(ctx context.Context) {
	now := time.UnixMicro(int64(d.d.Clock())).UTC()
	// The loads a microsecond back: a read of the table moves the room's
	// instant on to its own (issue 16), and a background read must not
	// move a steering request's.
	back := max(d.d.Clock(), 1) - 1
	type roomS struct {
		id sig.Hash
		rs RoomSample
	}
	var rooms []roomS
	for _, r := range d.d.Rooms() {
		st, aerr := r.Status(ctx, back)
		if aerr != nil {
			continue
		}
		rooms = append(rooms, roomS{r.ID(), roomSampleOf(now, &st)})
	}
	type poolS struct {
		name string
		ps   PoolSample
	}
	var pools []poolS
	for _, p := range d.d.Pools() {
		v := p.View(ctx, back)
		pools = append(pools, poolS{p.Name(), poolSampleOf(now, &v)})
	}
	d.hist.mu.Lock()
	defer d.hist.mu.Unlock()
	for _, r := range rooms {
		d.hist.rooms[r.id] = keep(d.hist.rooms[r.id], r.rs)
	}
	for _, p := range pools {
		d.hist.pools[p.name] = keep(d.hist.pools[p.name], p.ps)
	}
}

func roomSampleOf(at time.Time, st *view.Status) RoomSample {
	rs := RoomSample{At: at, ByReason: st.Decisions.ByReason, First: map[string]uint64{}, Load: map[string]uint32{}}
	for _, p := range st.Pathways {
		rs.First[p.ID] = p.First
		if p.Load != nil {
			rs.Load[p.ID] = *p.Load
		}
	}
	for _, n := range st.Records.Refused {
		rs.Refused += n
	}
	return rs
}

func poolSampleOf(at time.Time, v *view.PoolView) PoolSample {
	ps := PoolSample{At: at, Edges: map[string]EdgeSample{}}
	for _, e := range v.Edges {
		ps.Edges[e.Pathway] = EdgeSample{Up: e.Health.Up, Drained: e.Drained, First: e.First, Sessions: e.Sessions, CheckMs: e.Health.LastMs}
	}
	return ps
}

// State is the page's poll: the history as sampled, and a sample of now at
// its end.
func (d *Dashboard) State(ctx context.Context) State {
	now := time.UnixMicro(int64(d.d.Clock())).UTC()
	out := State{Server: d.d.Name, At: now, RefreshS: 3, SampleS: Every.Seconds(), Rooms: []RoomState{}, Pools: []PoolState{}}
	d.hist.mu.Lock()
	rooms := make(map[sig.Hash][]RoomSample, len(d.hist.rooms))
	for k, v := range d.hist.rooms {
		rooms[k] = slices.Clone(v)
	}
	pools := make(map[string][]PoolSample, len(d.hist.pools))
	for k, v := range d.hist.pools {
		pools[k] = slices.Clone(v)
	}
	d.hist.mu.Unlock()
	for _, r := range d.d.Rooms() {
		st, aerr := r.Status(ctx, d.d.Clock())
		if aerr != nil {
			continue
		}
		rd := RoomState{Status: st, Unit: unitOf(r.Basis()), Hops: hopsOf(r, st.Window), History: append(rooms[r.ID()], roomSampleOf(now, &st))}
		out.Rooms = append(out.Rooms, rd)
	}
	for _, p := range d.d.Pools() {
		v := p.View(ctx, d.d.Clock())
		out.Pools = append(out.Pools, PoolState{View: v, History: append(pools[p.Name()], poolSampleOf(now, &v))})
	}
	if d.d.Front != nil {
		fs := d.d.Front(ctx)
		out.Front = &fs
	}
	return out
}

// unitOf is the unit of a figure J / D under a policy of basis b (§5.3).
func unitOf(b policy.Basis) string {
	switch b {
	case policy.PerByte:
		return "µJ per byte"
	case policy.PerSecond:
		return "µJ per µs at or above the floor tier"
	}
	return "µJ per unit of delivery"
}

// hopsOf is each hop's records over the window [a, b), by pathway in the
// policy's order and hop in the pathway's.
func hopsOf(r Room, w [2]uint64) []HopState {
	out := []HopState{}
	for _, hop := range r.Hops(w[0], w[1]) {
		hd := HopState{Pathway: hop.Pathway, Hop: hop.Key.String(), Records: []RecordSpan{}, Gaps: [][2]uint64{}}
		es := hop.Records
		slices.SortFunc(es, func(x, y evidence.Entry) int { return cmp.Compare(x.Record.Start, y.Record.Start) })
		at := w[0]
		for _, e := range es {
			r := e.Record
			class := r.Class.Label()
			if r.Joules == 0 {
				class = "unmetered"
			}
			hd.Records = append(hd.Records, RecordSpan{Digest: e.Digest.String(), Start: r.Start, End: r.End, Class: class})
			if r.Start > at {
				hd.Gaps = append(hd.Gaps, [2]uint64{at, min(r.Start, w[1])})
			}
			at = max(at, r.End)
		}
		if at < w[1] {
			hd.Gaps = append(hd.Gaps, [2]uint64{at, w[1]})
		}
		out = append(out, hd)
	}
	return out
}

func (d *Dashboard) serveState(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) || !d.d.Operator(w, r) {
		return
	}
	api.WriteJSON(w, http.StatusOK, d.State(r.Context()))
}
