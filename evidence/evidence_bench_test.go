package evidence

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/waisteer/waisteer/policy"
)

const (
	minute = 60_000_000 // µs
	hour   = 60 * minute
	day    = 24 * hour
)

// benchPolicy has n pathways of k hops each (the first an edge, the rest
// interior), hop keys numbered from 1, on period P and window W, lag 30 s.
func benchPolicy(n, k int, period, window uint64) *policy.Policy {
	p := &policy.Policy{PeriodUs: period, WindowUs: window, LagUs: 30_000_000, Basis: policy.PerByte, Tiers: []uint64{1}}
	for i := range n {
		pw := policy.Pathway{ID: fmt.Sprint("p", i), Base: policy.NoBase, Capacity: policy.Unlimited}
		for j := range k {
			h := interior(0)
			if j == 0 {
				h = edge(0)
			}
			binary.LittleEndian.PutUint16(h.Key[1:], uint16(i*k+j+1))
			pw.Hops = append(pw.Hops, h)
		}
		p.Pathways = append(p.Pathways, pw)
	}
	return p
}

// benchIndex holds every hop's records cut on P over [0, span).
func benchIndex(p *policy.Policy, span uint64) *Index {
	x := NewIndex()
	for i := range p.Pathways {
		for _, h := range p.Pathways[i].Hops {
			for s := uint64(0); s < span; s += p.PeriodUs {
				r := rec(0, s, s+p.PeriodUs, OnChipCounter, 1_000_000+s%7, 1<<30)
				r.Hop = h.Key
				x.Add(entry(r))
			}
		}
	}
	return x
}

// BenchmarkCompute is one pathway's evidence (§5) from an index holding a
// day of records for every hop: 4 hops, a window of 12 five-minute records
// per hop, or of 24 one-hour records per hop.
func BenchmarkCompute(b *testing.B) {
	for _, c := range []struct {
		name           string
		period, window uint64
	}{
		{"4hops-1h-of-5min", 5 * minute, hour},
		{"4hops-24h-of-1h", hour, day},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := benchPolicy(1, 4, c.period, c.window)
			x := benchIndex(p, day)
			a, e := PolicyWindow(p, day+p.LagUs)
			ev, err := x.Compute(p, 0, a, e)
			if err != nil || ev.Status != StatusFigure {
				b.Fatalf("%+v %v", ev.Status, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				x.Compute(p, 0, a, e)
			}
		})
	}
}

// BenchmarkArrival is what a record's arrival costs the evidence: adding it
// to an index of 96 hops and recomputing its pathway (3 hops, a window of 12
// five-minute records each). Records arrive a period at a time, hop by hop;
// the index forgets what starts more than a day back, so it holds one to two
// days. Records are reused from a pool, so the figure is the index's own
// cost; each has a distinct stand-in digest.
func BenchmarkArrival(b *testing.B) {
	const hops, perDay = 96, 288
	p := benchPolicy(32, 3, 5*minute, hour)
	x := NewIndex()
	pool := make([]Entry, 3*perDay*hops)
	for k := range pool {
		r := rec(0, 0, 1, OnChipCounter, 1_000_000, 1<<30)
		pool[k] = Entry{Record: r}
	}
	k := 0
	arrive := func() (int, uint64) {
		hop, period := k%hops, uint64(k/hops)
		e := &pool[k%len(pool)]
		binary.LittleEndian.PutUint64(e.Digest[:], uint64(k))
		e.Record.Hop = p.Pathways[hop/3].Hops[hop%3].Key
		e.Record.Start, e.Record.End = period*p.PeriodUs, (period+1)*p.PeriodUs
		x.Add(*e)
		k++
		if k%(perDay*hops) == 0 && period >= perDay {
			x.Forget((period - perDay) * p.PeriodUs)
		}
		return hop / 3, e.Record.End
	}
	for range perDay * hops {
		arrive()
	}
	b.ReportAllocs()
	for b.Loop() {
		i, end := arrive()
		if _, err := x.Compute(p, i, end-p.WindowUs, end); err != nil {
			b.Fatal(err)
		}
	}
}
