package qoe

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/report"
)

// FuzzAggregatorModel: the QoE evaluation's inputs (issue 26, "find each
// loop's inputs and fuzz them") are the reports Add takes, with keys and
// values a player chooses, the reasons Ignore counts, and the instants of
// Evaluate. Whatever their sequence, nothing panics, and after each
// Evaluate:
//   - every cell's figures are those of a brute-force model kept beside
//     it (each session's latest report in the window, quantiles by nearest
//     rank over a sorted copy), and a cell the aggregator dropped has no
//     session in the model;
//   - the reports not aggregated are counted as the model counts them;
//   - a move behind the others had at least MinSessions sessions and a
//     median below the floor or the fraction of the cohort's best (one
//     client cannot move a cohort), two moves of one cell are at least
//     Hold apart, and each move's state is the cell's after;
//   - Behind lists exactly the degraded cells, and Figures is sorted.
func FuzzAggregatorModel(f *testing.F) {
	f.Add([]byte{3, 10, 1, 0, 0}, []byte("\x00\x01\x00\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00"))
	f.Add([]byte{2, 5, 0, 0, 9}, []byte("\x00\x00\x00\x02\x20\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x40\x01bad\x02\x40\x03\xff"))
	f.Fuzz(func(t *testing.T, settings []byte, ops []byte) {
		if len(ops) > 4096 {
			return // a few hundred reports and evaluations say as much
		}
		cfg := fuzzConfig(settings)
		a, err := New(cfg)
		if err != nil {
			return
		}
		cfg = a.Config()
		names := []string{"", "a", "cdn-b", "\xff\x00", "a\x00b"}
		m := newModel()
		now := time.Unix(1_700_000_000, 0)
		lastMove := map[Key]time.Time{}
		r := reader{b: ops}
		for !r.done() {
			switch r.byte() % 4 {
			case 0: // Add
				k := Key{Pathway: names[int(r.byte())%len(names)], Cohort: names[int(r.byte())%len(names)]}
				var s report.Session
				s[0] = r.byte()
				tp, hasT := r.u64(), r.byte()%2 == 0
				bf, hasB := r.u64(), r.byte()%2 == 0
				at := now.Add(time.Duration(int8(r.byte())) * 100 * time.Millisecond)
				// Each session its own client: the bound on one client's
				// sessions is FuzzAggregator's to check.
				a.Add(k, s, ClientOf(netip.AddrFrom4([4]byte{10, 0, 0, s[0]})), tp, hasT, bf, hasB, at)
				m.add(k, s, tp, hasT, bf, hasB, at)
			case 1: // Ignore
				why := string(r.bytes(int(r.byte() % 8)))
				a.Ignore(why)
				m.ignored[why]++
			case 2: // Evaluate
				now = now.Add(time.Duration(r.byte()) * 250 * time.Millisecond)
				moves := a.Evaluate(now)
				m.expire(now, cfg.Window)
				figs := a.Figures()
				checkModel(t, cfg, m, figs, moves, lastMove, now)
				if !slices.Equal(sortedBehind(figs), sortedBehind2(a.Behind())) {
					t.Fatalf("Behind %v, figures' degraded %v", a.Behind(), sortedBehind(figs))
				}
			case 3: // the clock moves, perhaps back
				now = now.Add(time.Duration(int8(r.byte())) * time.Second)
			}
		}
		ig := a.Ignored()
		for k, v := range m.ignored {
			if ig[k] != v {
				t.Fatalf("ignored %q: %d, the model counts %d (all: %v, model %v)", k, ig[k], v, ig, m.ignored)
			}
		}
		if len(ig) != len(m.ignored) {
			t.Fatalf("ignored %v, the model %v", ig, m.ignored)
		}
	})
}

// fuzzConfig makes settings from bytes, small enough for a few reports to
// move a cell.
func fuzzConfig(b []byte) Config {
	b = append(b, make([]byte, 5)...)
	return Config{
		Window:      time.Duration(b[0]%20) * time.Second,
		MinSessions: int(b[1] % 6),
		Floor:       uint64(b[2]%4) * 1_000_000,
		Fraction:    float64(b[3]%10) / 10,
		Hold:        time.Duration(b[4]%8) * time.Second,
		ProbeShare:  float64(b[4]/8%5) / 4,
	}
}

// model is the brute-force aggregator: every session's latest report in
// each cell, as Add documents it.
type model struct {
	cells   map[Key]map[report.Session]sample
	newest  map[Key]time.Time
	ignored map[string]uint64
}

func newModel() *model {
	return &model{cells: map[Key]map[report.Session]sample{}, newest: map[Key]time.Time{}, ignored: map[string]uint64{}}
}

func (m *model) add(k Key, s report.Session, tp uint64, hasT bool, bf uint64, hasB bool, at time.Time) {
	switch {
	case hasT && tp > MaxThroughput:
		m.ignored["throughput_absurd"]++
		return
	case hasB && bf > MaxBuffer:
		m.ignored["buffer_absurd"]++
		return
	case !hasT && !hasB:
		m.ignored["no_figure"]++
		return
	}
	if m.cells[k] == nil {
		m.cells[k] = map[report.Session]sample{}
	}
	if at.Before(m.newest[k]) {
		at = m.newest[k]
	}
	m.newest[k] = at
	m.cells[k][s] = sample{at: at, throughput: tp, buffer: bf, hasT: hasT, hasB: hasB}
}

func (m *model) expire(now time.Time, window time.Duration) {
	for _, c := range m.cells {
		for s, v := range c {
			if !v.at.After(now.Add(-window)) {
				delete(c, s)
			}
		}
	}
}

// quantiles are the p10, p50 and p90 by nearest rank, worked out on a
// sorted copy: the ⌈q·n⌉-th smallest, counted up one by one.
func quantiles(vs []uint64) [3]uint64 {
	var out [3]uint64
	if len(vs) == 0 {
		return out
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	for i, q := range []int{10, 50, 90} {
		r := 1
		for r*100 < q*len(s) {
			r++
		}
		out[i] = s[r-1]
	}
	return out
}

func checkModel(t *testing.T, cfg Config, m *model, figs []Figures, moves []Move, lastMove map[Key]time.Time, now time.Time) {
	t.Helper()
	seen := map[Key]Figures{}
	for i, f := range figs {
		if i > 0 && (figs[i-1].Cohort > f.Cohort || figs[i-1].Cohort == f.Cohort && figs[i-1].Pathway >= f.Pathway) {
			t.Fatalf("figures not sorted: %+v before %+v", figs[i-1].Key, f.Key)
		}
		seen[f.Key] = f
		var ts, bs []uint64
		for _, v := range m.cells[f.Key] {
			if v.hasT {
				ts = append(ts, v.throughput)
			}
			if v.hasB {
				bs = append(bs, v.buffer)
			}
		}
		if f.Sessions != len(m.cells[f.Key]) || f.WithT != len(ts) || f.WithB != len(bs) || f.Throughput != quantiles(ts) || f.Buffer != quantiles(bs) {
			t.Fatalf("cell %q: %+v; the model: %d sessions, throughputs %v, buffers %v", f.Key, f, len(m.cells[f.Key]), ts, bs)
		}
		if f.Probing && !f.Degraded {
			t.Fatalf("cell %q probing and not degraded", f.Key)
		}
	}
	for k, c := range m.cells {
		if _, ok := seen[k]; !ok {
			if len(c) > 0 {
				t.Fatalf("cell %q dropped with %d sessions in the window", k, len(c))
			}
			delete(m.newest, k) // a cell made again starts anew
		}
	}
	for _, mv := range moves {
		f, ok := seen[mv.Key]
		if !ok || f.Degraded != mv.Degraded || f.Probing != mv.Probing || mv.Sessions != f.WithT || mv.Median != f.Throughput[1] || !mv.At.Equal(now) {
			t.Fatalf("move %+v, the cell after %+v", mv, f)
		}
		if mv.Degraded && !mv.Probing {
			below := cfg.Floor > 0 && mv.Median < cfg.Floor || cfg.Fraction > 0 && float64(mv.Median) < cfg.Fraction*float64(mv.Best)
			if mv.Sessions < cfg.MinSessions || !below {
				t.Fatalf("moved behind with %d sessions (at least %d), median %d, best %d: %+v", mv.Sessions, cfg.MinSessions, mv.Median, mv.Best, cfg)
			}
		}
		if prev, ok := lastMove[mv.Key]; ok && now.Sub(prev) < cfg.Hold {
			t.Fatalf("cell %q moved at %v and again %v later, within the hold %v", mv.Key, prev, now.Sub(prev), cfg.Hold)
		}
		lastMove[mv.Key] = now
	}
}

func sortedBehind(figs []Figures) []string {
	var out []string
	for _, f := range figs {
		if f.Degraded {
			out = append(out, f.Cohort+"\x00"+f.Pathway)
		}
	}
	slices.Sort(out)
	return out
}

func sortedBehind2(b map[string]Moved) []string {
	var out []string
	for c, m := range b {
		for _, p := range m.Behind {
			out = append(out, c+"\x00"+p)
		}
	}
	slices.Sort(out)
	return out
}

// reader reads the fuzzer's bytes, zeros once they run out.
type reader struct{ b []byte }

func (r *reader) done() bool { return len(r.b) == 0 }

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(n int) []byte {
	n = min(n, len(r.b))
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// u64 reads 8 bytes little-endian: any throughput or buffer, absurd ones
// too.
func (r *reader) u64() uint64 {
	var b [8]byte
	copy(b[:], r.bytes(8))
	return binary.LittleEndian.Uint64(b[:])
}
