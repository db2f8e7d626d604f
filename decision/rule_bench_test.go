package decision

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

const (
	benchMinute = 60_000_000 // µs
	benchHour   = 60 * benchMinute
	benchDay    = 24 * benchHour
)

// benchRulePolicy has n pathways of 3 hops (an edge and two interior), on
// period P and window W, with a share for every fourth pathway and a
// capacity on every third.
func benchRulePolicy(n int, period, window uint64) *policy.Policy {
	p := rulePolicy()
	p.PeriodUs, p.WindowUs, p.LagUs = period, window, 30_000_000
	for i := range n {
		pw := policy.Pathway{ID: fmt.Sprint("pathway-", i), Base: policy.NoBase, TopTier: 3, LatencyMs: 50, Capacity: policy.Unlimited}
		if i%4 == 0 {
			pw.MinSharePPM = 20_000
		}
		if i%3 == 0 {
			pw.Capacity = 1000
		}
		for j := range 3 {
			h := policy.Hop{Place: policy.Interior}
			if j == 0 {
				h.Place = policy.Edge
			}
			binary.LittleEndian.PutUint16(h.Key[:], uint16(i*3+j+1))
			pw.Hops = append(pw.Hops, h)
		}
		p.Pathways = append(p.Pathways, pw)
	}
	return p
}

// benchRecords fills an index with every hop's records cut on P over
// [0, span), pathway i's of class 4 or, for every fifth pathway, 5, with
// joules that differ by pathway.
func benchRecords(p *policy.Policy, span uint64) *evidence.Index {
	x := evidence.NewIndex()
	for i := range p.Pathways {
		class := evidence.OnChipCounter
		if i%5 == 0 {
			class = evidence.CalibratedInstrument
		}
		for _, h := range p.Pathways[i].Hops {
			for s := uint64(0); s < span; s += p.PeriodUs {
				r := &evidence.Record{
					Hop: h.Key, Start: s, End: s + p.PeriodUs, Class: class,
					Joules: 1_000_000 + uint64(i)*7919 + s%13, Sessions: 40,
					Tracks: []evidence.Track{
						{Kind: evidence.KindMedia, Direction: evidence.DirOut, Bytes: 1 << 32},
						{Kind: evidence.KindMedia, Direction: evidence.DirIn, Bytes: 1 << 30},
					},
				}
				x.Add(evidence.Entry{Digest: r.Digest(), Record: r})
			}
		}
	}
	return x
}

var benchShapes = []struct {
	name           string
	n              int
	period, window uint64
}{
	{"3pathways-1h-of-5min", 3, 5 * benchMinute, benchHour},
	{"32pathways-1h-of-5min", 32, 5 * benchMinute, benchHour},
	{"3pathways-24h-of-1h", 3, benchHour, benchDay},
	{"32pathways-24h-of-1h", 32, benchHour, benchDay},
}

// BenchmarkRankAt is building the ranking once per window (§5, §6.2) from an
// index holding a day of records for every hop (3 hops per pathway).
func BenchmarkRankAt(b *testing.B) {
	for _, c := range benchShapes {
		b.Run(c.name, func(b *testing.B) {
			p := benchRulePolicy(c.n, c.period, c.window)
			x := benchRecords(p, benchDay)
			t := uint64(benchDay) + p.LagUs
			r, err := RankAt(p, ruleDigest, t, x)
			if err != nil || r.Evidence(0).Status != evidence.StatusFigure {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				RankAt(p, ruleDigest, t, x)
			}
		})
	}
}

// BenchmarkRefresh is a record's arrival: its pathway's evidence recomputed
// and the order sorted again, in a new ranking.
func BenchmarkRefresh(b *testing.B) {
	for _, c := range benchShapes {
		b.Run(c.name, func(b *testing.B) {
			p := benchRulePolicy(c.n, c.period, c.window)
			x := benchRecords(p, benchDay)
			r, err := RankAt(p, ruleDigest, uint64(benchDay)+p.LagUs, x)
			if err != nil {
				b.Fatal(err)
			}
			_, end := r.Window()
			rec := &evidence.Record{Hop: p.Pathways[c.n-1].Hops[1].Key, Start: end - p.PeriodUs, End: end}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Refresh(x, rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecide is the per-request cost (§6.1, §6.3 to §6.5): the draw's
// hash, the limits, the six steps and the priority.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{3, 32} {
		b.Run(fmt.Sprint(n, "pathways"), func(b *testing.B) {
			p := benchRulePolicy(n, 5*benchMinute, benchHour)
			r, err := RankAt(p, ruleDigest, uint64(benchDay)+p.LagUs, benchRecords(p, benchDay))
			if err != nil {
				b.Fatal(err)
			}
			loads := make([]uint32, n)
			for i := range loads {
				loads[i] = uint32(i * 100)
			}
			reports := []report.Report{rep(-1, -1, -1), rep(n-1, 8000, 5000), rep(1, 3000, 5000), rep(0, 8000, 100)}
			k := 0
			b.ReportAllocs()
			for b.Loop() {
				s := report.Session{0: byte(k), 1: byte(k >> 8)}
				if _, err := r.Decide(reports[k%len(reports)], s, loads); err != nil {
					b.Fatal(err)
				}
				k++
			}
		})
	}
}

// BenchmarkDecision is the whole decision value (§7.1) a request signs,
// from the ranking.
func BenchmarkDecision(b *testing.B) {
	for _, n := range []int{3, 32} {
		b.Run(fmt.Sprint(n, "pathways"), func(b *testing.B) {
			p := benchRulePolicy(n, 5*benchMinute, benchHour)
			t := uint64(benchDay) + p.LagUs
			r, err := RankAt(p, ruleDigest, t, benchRecords(p, benchDay))
			if err != nil {
				b.Fatal(err)
			}
			loads := make([]uint32, n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Decision(sig.PublicKey{1}, t, report.HLS, rep(1, 8000, 5000), report.Session{7}, loads); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
