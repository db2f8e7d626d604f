package bench

// Start-up on a big store (issue 30: "answering within 1 s on a store of
// 3.75 M decisions, and p99 unchanged while the restart's recount of live
// sessions runs"). 3.75 M is a TTL's worth (300 s) of decisions at
// 12 500 a second, each a session of its own: every one of them live at
// the restart, so the recount (internal/restore) reads each one back. The
// store is built through the store API, not HTTP: a server is started on
// a fresh data directory once (its room, policy and the window's records
// are then stored as serve stores them) and stopped; the decisions are
// then made, signed and put in groups (store.PutDecisions, which logs
// each), over the TTL before now, through a table of loads as the server
// steers (store.MemLoads), so that each states the loads it was made
// with. The store lives in the run's temporary directory.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// benchRecountStable is the start-up goal's "p99 unchanged": the p99 while
// the recount runs at most this times the p99 after it, at the same
// offered rate.
const benchRecountStable = 1.2

// benchBuildGroup is how many decisions each PutDecisions of the build
// writes.
const benchBuildGroup = 4096

// benchRecount is what the start-up on the big store measured.
type benchRecount struct {
	decisions  int
	built      time.Duration // the store's making
	bytes      int64
	startup    *benchStartup
	recount    time.Duration // from the spawn to the status's restoring_loads false
	rate       float64       // offered, a second
	during     benchPhase    // paced while the recount ran
	after      benchPhase    // paced after it, as long (30 s at most, -d at least)
	restoredOK bool          // the status said the recount ended
}

// bigStartup builds a store of o.StartupDecisions decisions of a room of
// 3 pathways, starts bench serve on it (fasthttp, pinned as the others),
// and paces the steering route at rate while the recount runs, then as
// long after it.
func (b *bencher) bigStartup(ctx context.Context, rate float64) (*benchRecount, error) {
	r, err := newBenchRoom(3, b.o.Players)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.tmp, "startup")
	cfg, err := r.writeFiles(dir, serve.EngineFast)
	if err != nil {
		return nil, err
	}
	// The room, its policy and the records of two windows, as serve stores
	// them.
	c, err := b.start(ctx, "bench", "serve", "-c", cfg)
	if err != nil {
		return nil, err
	}
	p := r.sc.Policy
	end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
	from := end - 2*p.WindowUs - 2*p.PeriodUs
	body := r.periods(from, end)
	if _, err := client.New().PostRecords(ctx, "http://"+c.addr+r.recordsPath(), body); err != nil {
		c.kill()
		return nil, fmt.Errorf("the records: %w", err)
	}
	if err := c.stop(); err != nil {
		return nil, err
	}
	rc := &benchRecount{decisions: b.o.StartupDecisions, rate: rate}
	storeFile := filepath.Join(dir, "data", serve.StoreFile)
	b.logf("start-up: building a store of %d decisions through the store API", rc.decisions)
	began := time.Now()
	again := b.pin.widen()
	err = buildDecisions(ctx, storeFile, r, from, end, rc.decisions)
	again()
	if err != nil {
		return nil, fmt.Errorf("building the store: %w", err)
	}
	rc.built = time.Since(began)
	rc.bytes = benchFileSize(storeFile)
	b.logf("start-up: built in %s, %d bytes", rc.built.Round(time.Millisecond), rc.bytes)

	st, child, err := b.startupChild(ctx, cfg, r.path, storeFile)
	if err != nil {
		return nil, err
	}
	defer child.kill()
	rc.startup = st
	st.decisions = uint64(rc.decisions)
	spawned := time.Now().Add(-st.took)
	recountProfiled := make(chan struct{}) // closed once the recount's profile and trace are written
	if child.pprof == "" {
		close(recountProfiled)
	} else {
		go func() {
			defer close(recountProfiled)
			file := filepath.Join(b.o.Profile, "cpu-recount.pprof")
			if err := benchFetch(child.pprof, "/debug/pprof/profile?seconds=5", file); err != nil {
				b.logf("profile of the recount: %v", err)
			}
			// Then 2 s of the runtime's execution trace, to tell what
			// the slowest answers waited for while the recount ran
			// (go tool trace -pprof=sched, sync, syscall).
			file = filepath.Join(b.o.Profile, "trace-recount.out")
			if err := benchFetch(child.pprof, "/debug/pprof/trace?seconds=2", file); err != nil {
				b.logf("trace of the recount: %v", err)
			}
		}()
	}
	l := newBenchLoad(child.addr, r.path, r.ids, r.initial, b.o.halfConns(), b.o.Players)
	defer func() { l.close() }()
	const chunk = 500 * time.Millisecond
	limit := max(20*b.o.Duration, 10*time.Minute)
	for time.Since(spawned) < limit && ctx.Err() == nil {
		restoring, err := benchRestoring(ctx, child.addr, r.sc.Room.ID())
		if err != nil {
			return nil, err
		}
		if !restoring {
			rc.restoredOK = true
			break
		}
		rc.recount = time.Since(spawned)
		ph := l.run(ctx, chunk, rate)
		rc.during.answered += ph.answered
		rc.during.failed += ph.failed
		rc.during.elapsed += ph.elapsed
		rc.during.latencies = append(rc.during.latencies, ph.latencies...)
		if rc.during.firstErr == nil {
			rc.during.firstErr = ph.firstErr
		}
	}
	if rc.restoredOK {
		rc.recount = time.Since(spawned)
	}
	slices.Sort(rc.during.latencies)
	rc.during.pct = [3]time.Duration{quantile(rc.during.latencies, 0.5), quantile(rc.during.latencies, 0.99), quantile(rc.during.latencies, 0.999)}
	// As long after as it ran, up to 30 s (and at least -d), by fresh
	// players too: each begins with a new session, as those of the phase
	// while it ran. A recount shorter than its profile (-quick's) is
	// profiled to the profile's end first: the process takes one CPU
	// profile at a time, and the child must outlive the trace.
	l.close()
	<-recountProfiled
	l = newBenchLoad(child.addr, r.path, r.ids, r.initial, b.o.halfConns(), b.o.Players)
	afterFor := max(min(rc.during.elapsed, 30*time.Second), b.o.Duration)
	profiled := b.profile(child, "after-recount", afterFor, false)
	rc.after = l.run(ctx, afterFor, rate)
	profiled()
	b.logf("start-up: the recount took %s; p99 %s while it ran (%d answers), %s after", benchDur(rc.recount), benchDur(rc.during.pct[1]), rc.during.answered, benchDur(rc.after.pct[1]))
	return rc, ctx.Err()
}

// benchRestoring reads the room's status (the operator's route, with the
// bench's token): whether the restart's recount is still running.
func benchRestoring(ctx context.Context, addr string, room sig.Hash) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/rooms/"+room.String()+"/status", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer bench")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var st struct {
		RestoringLoads *bool `json:"restoring_loads"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK || st.RestoringLoads == nil {
		return false, fmt.Errorf("the room's status (%s): %v", resp.Status, err)
	}
	return *st.RestoringLoads, nil
}

// benchBuilt is one group of the build: its decisions once signed, and
// the snapshots they name.
type benchBuilt struct {
	made []*decision.Decision
	keys []sig.Hash
	ev   []store.Evidence
	rows []store.Decision
	done chan struct{}
}

// buildDecisions puts count decisions of r into the store file, over the
// TTL before now, each of a session of its own: made in t order through a
// table of loads, signed on every core, put in groups in order.
func buildDecisions(ctx context.Context, storeFile string, r *benchRoom, from, end uint64, count int) error {
	sc := r.sc
	p := sc.Policy
	pd := p.Digest()
	pub := sc.SteerKey.Public()
	room := sc.Room.ID()
	n := len(r.ids)
	idx := evidence.NewIndex()
	for s := from; s < end; s += p.PeriodUs {
		for h := range r.hops {
			rec, err := evidence.ParseRecord(r.record(h, s, nil))
			if err != nil {
				return err
			}
			idx.Add(evidence.Entry{Digest: rec.Digest(), Record: rec})
		}
	}
	st, err := store.Open(storeFile)
	if err != nil {
		return err
	}
	defer st.Close()
	span := uint64(p.TTLs) * 1_000_000
	now := uint64(time.Now().UnixMicro())
	step := span / uint64(max(count, 1))
	if step == 0 {
		return fmt.Errorf("%d decisions in %d µs: fewer than one µs apart", count, span)
	}
	first := now - span
	grace := uint64(server.DefaultSessionGrace / time.Microsecond) // the bench's configuration sets none
	loads := store.NewLoads()
	work := make(chan *benchBuilt, 2*runtime.GOMAXPROCS(0))
	order := make(chan *benchBuilt, 4*runtime.GOMAXPROCS(0))
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			var buf []byte
			for g := range work {
				g.rows = make([]store.Decision, len(g.made))
				for i, d := range g.made {
					var dg sig.Hash
					buf, dg = decision.AppendSigned(buf[:0], d, sc.SteerKey)
					g.rows[i] = store.Compact(d, dg, g.keys[i])
				}
				close(g.done)
			}
		})
	}
	// The maker: in t order, through the table of loads.
	var makeErr error
	wg.Go(func() {
		defer close(work)
		defer close(order)
		var rk *decision.Ranking
		var ev store.Evidence
		g := &benchBuilt{done: make(chan struct{})}
		rep := report.Report{Present: report.HasPathway | report.HasThroughput, Throughput: 5_000_000}
		for i := range count {
			if bctx.Err() != nil {
				makeErr = bctx.Err()
				return
			}
			var session report.Session
			binary.LittleEndian.PutUint64(session[:], uint64(i)+1)
			binary.LittleEndian.PutUint64(session[8:], 0x9e3779b97f4a7c15*(uint64(i)+1))
			var d *decision.Decision
			err := loads.Steer(bctx, room, n, session, first+uint64(i)*step, func(ls []uint32, at uint64) (int, uint64, error) {
				if rk == nil || !rk.Covers(at) {
					var err error
					if rk, err = decision.RankAt(p, pd, at, idx); err != nil {
						return 0, 0, err
					}
					pws := make([]evidence.Pathway, n)
					for j := range pws {
						pws[j] = rk.Evidence(j)
					}
					ev = store.EncodeEvidence(pws)
					g.ev = append(g.ev, ev)
				}
				var err error
				if d, err = rk.Decision(pub, at, report.HLS, rep, session, ls); err != nil {
					return 0, 0, err
				}
				return int(d.Priority[0]), at + uint64(d.TTL)*1_000_000 + grace, nil
			})
			if err != nil {
				makeErr = err
				return
			}
			g.made, g.keys = append(g.made, d), append(g.keys, ev.Key)
			if len(g.made) == benchBuildGroup || i == count-1 {
				work <- g
				order <- g
				g = &benchBuilt{done: make(chan struct{}), ev: []store.Evidence{ev}}
			}
		}
	})
	var putErr error
	for g := range order {
		<-g.done
		if putErr == nil {
			if putErr = st.PutDecisions(bctx, g.ev, g.rows); putErr != nil {
				cancel()
			}
		}
	}
	wg.Wait()
	if makeErr != nil && putErr == nil {
		return makeErr
	}
	return putErr
}
