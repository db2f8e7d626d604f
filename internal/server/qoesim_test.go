package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/report/qoe"
	"github.com/waisteer/waisteer/store"
)

// workedExample is the multi-CDN seed's worked example ("approach 2"),
// replayed in process against the real steering handler (Server.ServeHTTP
// of a pool with QoE): viewers on cdn-a and cdn-b, half each by the pool's
// weights, steering TTL 60 s, each asking again a TTL after its last
// manifest (the one the manifest states) and reporting its pathway's
// throughput as hls.js does (_HLS_pathway, _HLS_throughput); the cohort is
// a region header a CDN adds. 15 % of viewers are Frankfurt's (fra), the
// rest Paris's (par). At T = 8 min cdn-a's Frankfurt viewers drop from 18
// to 6 Mbit/s (every throughput ±20 %, per report). The seed: detected
// within the 60 s window, propagated within a TTL, 120 s in all.
type workedExample struct {
	viewers int
	// lie, when set, is what 5 % of sessions report instead of their
	// throughput.
	lie func(uint64) uint64
}

type workedResult struct {
	detected, lastMoved time.Duration // after the drop; detected −1 when never
	affected, moved     int
	kept                int // manifests to an affected session after detection that kept cdn-a first
	otherMoved          int // sessions of par whose first pathway changed, and moves of par's cells
	movedBefore         int // moves before the drop
	probed              int // affected sessions sent back to cdn-a after their move (the probe share)
	endState            string
	requests            int
	wall                time.Duration
}

func (ex workedExample) run(tb testing.TB) workedResult {
	tb.Helper()
	const (
		ttl  = 60 * time.Second
		drop = 8 * time.Minute
		end  = 15 * time.Minute
		tick = 100 * time.Millisecond
	)
	was := qoeEvery
	qoeEvery = time.Hour // the simulation evaluates at its own clock's seconds
	defer func() { qoeEvery = was }()

	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(t0.UnixMicro())
	c := pool.Config{
		Path: pool.DefaultPath, TTL: int(ttl / time.Second), CheckEvery: time.Second, CheckTimeout: time.Second, DownAfter: 2,
		Assign: pool.AssignRendezvous, Buckets: 12, CohortHeader: "X-Region",
		Edges: []pool.Edge{{Pathway: "cdn-a", Weight: 1}, {Pathway: "cdn-b", Weight: 1}},
		QoE:   &pool.QoE{Config: qoe.Config{Window: time.Minute, MinSessions: 100, Fraction: 0.5, Margin: 0.2, Hold: time.Minute}, ShortTTL: 30},
	}
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{c}, Clock: func() uint64 { return uint64(clock.Load()) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, store.NewMemory(), store.NewLoads())
	if err != nil {
		tb.Fatal(err)
	}
	defer srv.Close(context.Background())
	w := srv.poolNamed("").Watch()

	type viewer struct {
		region   string
		reload   string // "" before its first manifest
		pathway  string
		liar     bool
		affected bool // on cdn-a in fra at the drop, or after it
		moved    time.Duration
	}
	rng := rand.New(rand.NewPCG(17, uint64(ex.viewers)))
	vs := make([]viewer, ex.viewers)
	due := make([][]int32, int((end+ttl)/tick)+1)
	for i := range vs {
		vs[i].region = "par"
		if i%100 < 15 {
			vs[i].region = "fra"
		}
		vs[i].liar = ex.lie != nil && rng.IntN(20) == 0
		k := rng.Int64N(int64(ttl / tick))
		due[k] = append(due[k], int32(i))
	}
	throughput := func(v *viewer, at time.Duration) uint64 {
		tp := uint64(18_000_000)
		if v.pathway == "cdn-a" && v.region == "fra" && at >= drop {
			tp = 6_000_000
		}
		tp = uint64(float64(tp) * (0.8 + 0.4*rng.Float64()))
		if v.liar {
			tp = ex.lie(tp)
		}
		return tp
	}
	var m struct {
		TTL      int      `json:"TTL"`
		Reload   string   `json:"RELOAD-URI"`
		Priority []string `json:"PATHWAY-PRIORITY"`
	}
	res := workedResult{detected: -1}
	began := time.Now()
	for now := time.Duration(0); now < end; now += tick {
		clock.Store(t0.Add(now).UnixMicro())
		if now%time.Second == 0 {
			for _, mv := range w.Evaluate(srv.log, t0.Add(now)) {
				if mv.Degraded && res.detected < 0 && mv.Key == (qoe.Key{Pathway: "cdn-a", Cohort: "fra"}) && now >= drop {
					res.detected = now - drop
				}
				if mv.Key.Cohort != "fra" {
					res.otherMoved++
				}
				if now < drop {
					res.movedBefore++
				}
			}
		}
		for _, i := range due[int(now/tick)] {
			v := &vs[i]
			target := pool.DefaultPath
			if v.reload != "" {
				target = v.reload + "&_HLS_pathway=" + v.pathway + "&_HLS_throughput=" + strconv.FormatUint(throughput(v, now), 10)
			}
			if now >= drop && v.pathway == "cdn-a" && v.region == "fra" {
				v.affected = true
			}
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("X-Region", v.region)
			// Each viewer at home, on its own address (issue 26 item 2).
			r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:443", i>>16&0xff, i>>8&0xff, i&0xff)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, r)
			res.requests++
			m.Priority = nil
			if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &m) != nil || len(m.Priority) == 0 {
				tb.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
			}
			first := m.Priority[0]
			switch {
			case v.pathway != "" && first != v.pathway && v.region != "fra":
				res.otherMoved++
			case v.affected && v.moved == 0 && first != "cdn-a":
				v.moved = now
				res.lastMoved = max(res.lastMoved, now-drop)
			case v.affected && v.moved == 0 && res.detected >= 0:
				res.kept++
			case v.affected && v.moved > 0 && first == "cdn-a" && v.pathway != "cdn-a":
				res.probed++
			}
			v.pathway = first
			v.reload = strings.TrimPrefix(m.Reload, "http://example.com")
			next := now + time.Duration(m.TTL)*time.Second
			if k := int(next / tick); k < len(due) {
				due[k] = append(due[k], i)
			}
		}
	}
	res.wall = time.Since(began)
	for _, f := range w.Agg.Figures() {
		if f.Key == (qoe.Key{Pathway: "cdn-a", Cohort: "fra"}) {
			res.endState = map[bool]string{true: "degraded", false: "ok"}[f.Degraded]
			if f.Probing {
				res.endState = "probing"
			}
		}
	}
	for i := range vs {
		if vs[i].affected {
			res.affected++
			if vs[i].moved > 0 {
				res.moved++
			}
		}
	}
	return res
}

// check holds a run to the seed's figures: no move before the drop,
// detection within the 60 s window, the last affected session moved
// within 120 s, every affected session moved, none kept on cdn-a by a
// manifest after detection, and no session of the other cohort moved.
func (r workedResult) check(tb testing.TB, viewers int) {
	tb.Helper()
	tb.Logf("%d viewers, %d requests in %v: detected %v after the drop; the last of %d affected sessions moved %v after it (%d moved); %d manifests kept one on cdn-a after detection; %d moves in the other cohort; %d before the drop; %d sent back to probe cdn-a; cdn-a in fra %s at the end",
		viewers, r.requests, r.wall.Round(time.Millisecond), r.detected, r.affected, r.lastMoved, r.moved, r.kept, r.otherMoved, r.movedBefore, r.probed, r.endState)
	if r.movedBefore != 0 || r.detected < 0 || r.detected > time.Minute || r.lastMoved > 2*time.Minute {
		tb.Errorf("moves before the drop %d, detection %v, last move %v: want 0, within 60 s and 120 s", r.movedBefore, r.detected, r.lastMoved)
	}
	want := viewers * 15 / 100 / 2 * 9 / 10 // most of fra's half on cdn-a
	if r.affected < want || r.moved != r.affected || r.kept != 0 || r.otherMoved != 0 {
		tb.Errorf("%d affected (want ≥ %d), %d moved, %d kept after detection, %d moves of the other cohort", r.affected, want, r.moved, r.kept, r.otherMoved)
	}
	// cdn-a stays bad: 7 min after the drop it is still kept from the
	// cohort, but for a probe share at most.
	if r.endState == "ok" {
		tb.Errorf("cdn-a is back for all of fra at the end, still degraded")
	}
}

var liars = []struct {
	name string
	lie  func(uint64) uint64
}{
	{"honest", nil},
	{"5% report 0", func(uint64) uint64 { return 0 }},
	{"5% report 10x", func(v uint64) uint64 { return 10 * v }},
}

// TestQoEWorkedExample runs the worked example at a hundredth of its size
// (8 000 viewers, 600 affected), honest and with 5 % of sessions lying
// either way: no cohort moves on lies alone.
func TestQoEWorkedExample(t *testing.T) {
	for _, l := range liars {
		t.Run(l.name, func(t *testing.T) {
			workedExample{viewers: 8_000, lie: l.lie}.run(t).check(t, 8_000)
		})
	}
}

// BenchmarkQoEWorkedExample runs it at a tenth of its size (80 000
// viewers, 6 000 affected), reporting the seed's figures.
func BenchmarkQoEWorkedExample(b *testing.B) {
	for _, l := range liars {
		b.Run(l.name, func(b *testing.B) {
			for range b.N {
				r := workedExample{viewers: 80_000, lie: l.lie}.run(b)
				r.check(b, 80_000)
				b.ReportMetric(r.detected.Seconds(), "detect_s")
				b.ReportMetric(r.lastMoved.Seconds(), "last_moved_s")
				b.ReportMetric(float64(r.kept), "kept")
				b.ReportMetric(float64(r.otherMoved), "other_moved")
				b.ReportMetric(float64(r.requests)/r.wall.Seconds(), "requests/s")
			}
		})
	}
}
