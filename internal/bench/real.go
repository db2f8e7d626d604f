package bench

// The real server over a room, behind each engine, in turns with the
// signing floor; the plain server; the records phases.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/sig"
)

// benchReport is everything one run measured.
type benchReport struct {
	o          Options
	machine    []string
	loadAvg    [2]string
	when       time.Time
	fsync      time.Duration // the disk probe's median
	disk       benchDisk
	generator  string
	pinned     bool
	wrk        bool
	rooms      []*benchRoomRun
	plain      benchServed // (b), saturated at the least count of connections
	plainHalf  benchServed
	demo       *benchDemo
	recount    *benchRecount
	recountRef *benchRealRun // the run whose half rate the start-up's phases are paced at
	demoRef    *benchRealRun // the run whose half rate the demo's half-rate phase is paced at
	evidence   []benchEvidence
	sessions   []benchSessions
}

// benchRoomRun is one room: the real server behind each engine, and the
// signing floor of its decisions' size.
type benchRoomRun struct {
	n                            int
	decisionBytes, manifestBytes int
	msg, manifest                []byte // a decision's signed message, and a manifest
	runs                         []*benchRealRun
	floor                        map[int]*benchServer // (c), by connections
	floorSat                     map[int]*benchServed // (c) saturated
	durable                      *benchServer         // (d), at the least connections
	twoCores                     []*benchRealRun      // the first room's: each engine on two cores (issue 30)
	bare, bareAll                time.Duration        // (a)
	bareStd                      time.Duration        // (a) through crypto/ed25519
	check                        time.Duration        // a record's parse and check, its signature's verification
}

// benchRealRun is the real server behind one engine over one room.
type benchRealRun struct {
	n           int
	engine      string
	storeFile   string
	dir, path   string               // its files' directory, and the path of server_uri
	sat         map[int]*benchServed // by connections
	half        benchServed          // paced at half the rate saturated at the least connections
	floorHalf   benchServed          // (c) paced at the same offered rate as half, right after it (issue 30)
	durableHalf benchServed          // (d) the same, right after (c)
	cores       int                  // the cores its child ran on (1 pinned to core 0; 2 the two-core phase)
	procs       int                  // its child's GOMAXPROCS, as it printed it
	stages      *benchStages         // the cost per decision by stage, from a CPU profile of a saturated turn of its own
	paced       *benchPaced          // records at 1 000 a second (issue 30)
	groupSize   float64
	bytesInUse  float64 // per decision, in the decision buckets
	fileBytes   float64 // per decision, the file's growth while steering
	fileSize    int64
	stored      uint64 // the store's decisions once the server stopped
	leaves      uint64 // its log's leaves then
	answered    uint64 // its steering route's 200s over its life
	received    uint64 // the manifests the generators read
	peakRSS     int64
	ingest      []benchIngest
	profiled    []string
}

type benchIngest struct {
	batch   int
	records uint64
	rate    float64
	cpu     time.Duration // server CPU per record
	failed  uint64
	err     error
}

func (b *bencher) run(ctx context.Context) (*benchReport, error) {
	rep := &benchReport{o: b.o, when: time.Now().UTC(), machine: benchMachine(), generator: b.generator(), pinned: b.pin.on, wrk: b.wrk != ""}
	rep.loadAvg[0] = benchLoadAvg()
	probe := 2 * time.Second
	if b.o.Quick {
		probe = 300 * time.Millisecond
	}
	rep.disk = benchFsync(b.tmp, probe)
	rep.fsync = rep.disk.pct[0]

	for k, n := range b.o.Pathways {
		room, err := b.room(ctx, n, rep, k == 0)
		if err != nil {
			return nil, fmt.Errorf("%d pathways: %w", n, err)
		}
		rep.rooms = append(rep.rooms, room)
	}
	b.logf("the demo, its own process")
	var err error
	rep.demoRef = rep.rooms[0].runs[0]
	if fast := rep.rooms[0].engine(serve.EngineFast); fast != nil {
		rep.demoRef = fast
	}
	if rep.demo, err = b.demo(ctx, rep.demoRef.sat[b.o.halfConns()].rate/2); err != nil {
		return nil, fmt.Errorf("the demo: %w", err)
	}
	// Start-up on a big store, paced at serve's half-rate phase's offered
	// rate (fasthttp's, of the first room).
	rep.recountRef = rep.demoRef
	if rep.recount, err = b.bigStartup(ctx, rep.demoRef.sat[b.o.halfConns()].rate/2); err != nil {
		return nil, fmt.Errorf("start-up: %w", err)
	}
	b.pin.unpinSelf() // what follows runs in this process alone
	b.logf("evidence update and memory per session")
	for _, w := range b.o.WindowSizes {
		ev, err := benchEvidenceUpdate(w, b.o.EvidenceTime)
		if err != nil {
			return nil, fmt.Errorf("evidence update: %w", err)
		}
		rep.evidence = append(rep.evidence, ev)
	}
	for _, n := range b.o.Pathways {
		rep.sessions = append(rep.sessions, benchSessionMemory(b.o.Sessions, n))
	}
	rep.loadAvg[1] = benchLoadAvg()
	return rep, ctx.Err()
}

// room measures the real server over a room of n pathways behind each
// engine, each on a fresh store, in turns with the signing floor (c) of
// its decisions' size (and, for the first room, the plain server (b)
// beside the first engine).
func (b *bencher) room(ctx context.Context, n int, rep *benchReport, first bool) (*benchRoomRun, error) {
	r, err := newBenchRoom(n, b.o.Players)
	if err != nil {
		return nil, err
	}
	room := &benchRoomRun{n: n, floor: map[int]*benchServer{}}
	var plain *benchServer
	var children []*benchChild
	defer func() {
		for _, c := range children {
			c.kill()
		}
	}()
	for ei, engine := range b.o.Engines {
		b.logf("steering, %d pathways, behind %s", n, engine)
		s, err := b.startReal(ctx, r, engine, b.pin.serverCore(), nil, b.o.Conns)
		if err != nil {
			return nil, err
		}
		if ei == 0 {
			// A manifest and its decision, for the baselines, then the
			// baselines' servers.
			if err := b.decisionOf(ctx, s, room); err != nil {
				s.close()
				return nil, err
			}
			b.logf("(c) a plain server signing %d bytes per request, in turns with it", len(room.msg))
			fc, err := b.startPlain(ctx, room.manifest, room.msg, false)
			if err != nil {
				s.close()
				return nil, fmt.Errorf("the signing floor: %w", err)
			}
			children = append(children, fc)
			for _, c := range b.o.Conns {
				if room.floor[c], err = b.plainServer(ctx, "the signing floor (c)", fc, room.manifest, c); err != nil {
					s.close()
					return nil, err
				}
			}
			b.logf("(d) the signing floor that makes each answer's bytes durable first")
			dc, err := b.startPlain(ctx, room.manifest, room.msg, true)
			if err != nil {
				s.close()
				return nil, fmt.Errorf("the durable floor: %w", err)
			}
			children = append(children, dc)
			if room.durable, err = b.plainServer(ctx, "the durable floor (d)", dc, room.manifest, b.o.halfConns()); err != nil {
				s.close()
				return nil, err
			}
			if first {
				pc, err := b.startPlain(ctx, room.manifest, nil, false)
				if err != nil {
					s.close()
					return nil, fmt.Errorf("the plain server: %w", err)
				}
				children = append(children, pc)
				if plain, err = b.plainServer(ctx, "the plain server (b)", pc, room.manifest, b.o.halfConns()); err != nil {
					s.close()
					return nil, err
				}
			}
		}
		besides := plain
		if ei > 0 {
			besides = nil // (b) is measured beside the first engine only
		}
		run, err := b.steer(ctx, s, room.floor, room.durable, besides, ei == 0)
		if err == nil {
			err = s.finish(run)
		} else {
			s.close()
		}
		if err != nil {
			return nil, fmt.Errorf("behind %s: %w", engine, err)
		}
		room.runs = append(room.runs, run)
		if first {
			two, err := b.twoCores(ctx, r, engine, run)
			if err != nil {
				return nil, fmt.Errorf("behind %s on two cores: %w", engine, err)
			}
			room.twoCores = append(room.twoCores, two)
		}
	}
	room.floorSat = map[int]*benchServed{}
	for _, c := range b.o.Conns {
		fs, err := b.served(room.floor[c])
		if err != nil {
			return nil, err
		}
		room.floorSat[c] = &fs
	}
	if plain != nil {
		if rep.plain, err = b.served(plain); err != nil {
			return nil, err
		}
		if rep.plainHalf, err = b.pace(ctx, plain, rep.plain.rate/2); err != nil {
			return nil, fmt.Errorf("the plain server: %w", err)
		}
		plain.l.close()
	}
	for _, f := range room.floor {
		f.l.close()
	}
	for _, c := range children {
		if err := c.stop(); err != nil {
			return nil, err
		}
	}
	children = nil
	room.bare, room.bareAll = benchBare(room.msg, b.o.Bare), benchBareAll(room.msg, b.o.Bare)
	room.bareStd = benchBareStd(room.msg, b.o.Bare)
	if room.check, err = benchRecordCheck(r.record(0, 0, nil), r.sc.Room.ID(), b.o.Bare); err != nil {
		return nil, err
	}
	return room, nil
}

// benchReal is the real server running over a room: its child, its hops
// posting each period's records, and a load for each count of connections.
type benchReal struct {
	r          *benchRoom
	engine     string
	dir        string
	c          *benchChild
	loads      map[int]*benchServer
	hopsDone   func()
	hops       chan struct{}
	fileBefore int64
}

func (s *benchReal) storeFile() string { return filepath.Join(s.dir, "data", serve.StoreFile) }

// close stops the hops and kills the server, when finish has not stopped
// it.
func (s *benchReal) close() {
	if s.hopsDone != nil {
		s.hopsDone()
		<-s.hops
		s.hopsDone = nil
	}
	for _, l := range s.loads {
		l.l.close()
	}
	if s.c != nil {
		s.c.kill()
		s.c = nil
	}
}

// startReal starts bench serve over r behind engine on a fresh store,
// gives it a full window of records and has its hops post each period,
// then primes a load for each count of connections and warms it up.
func (b *bencher) startReal(ctx context.Context, r *benchRoom, engine, cpus string, env []string, conns []int) (*benchReal, error) {
	dir, err := os.MkdirTemp(b.tmp, fmt.Sprintf("room-%d-", len(r.ids)))
	if err != nil {
		return nil, err
	}
	cfg, err := r.writeFiles(dir, engine)
	if err != nil {
		return nil, err
	}
	// Always a profiling listener: the cost per stage is read from a CPU
	// profile (stages.go).
	c, err := b.startChildOn(ctx, benchReady, cpus, env, "bench", "serve", "-c", cfg, "-pprof", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &benchReal{r: r, engine: engine, dir: dir, c: c, loads: map[int]*benchServer{}}
	if err := b.startHops(ctx, s); err != nil {
		s.close()
		return nil, err
	}
	s.fileBefore = benchFileSize(s.storeFile())
	for _, conns := range conns {
		l := newBenchLoad(c.addr, r.path, r.ids, r.initial, conns, b.o.Players)
		if err := l.prime(ctx); err != nil {
			s.close()
			return nil, fmt.Errorf("the players' first manifests: %w", err)
		}
		if s.loads[conns], err = b.newServer(fmt.Sprintf("waisteer serve (%s)", engine), c, l, true); err != nil {
			s.close()
			return nil, err
		}
	}
	if err := b.warm(ctx, s.loads[slices.Min(conns)]); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// startHops posts a full window of records, and the period before it
// (§5.1), then each hop's record each period as it ends, well within the
// lag.
func (b *bencher) startHops(ctx context.Context, s *benchReal) error {
	r := s.r
	p := r.sc.Policy
	hc := client.New()
	records := "http://" + s.c.addr + r.recordsPath()
	end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
	if _, err := hc.PostRecords(ctx, records, r.periods(end-p.WindowUs-p.PeriodUs, end)); err != nil {
		return fmt.Errorf("the window's records: %w", err)
	}
	hopCtx, hopsDone := context.WithCancel(ctx)
	s.hopsDone, s.hops = hopsDone, make(chan struct{})
	go func() {
		defer close(s.hops)
		for {
			now := uint64(time.Now().UnixMicro())
			next := (now/p.PeriodUs + 1) * p.PeriodUs
			select {
			case <-hopCtx.Done():
				return
			case <-time.After(time.Duration(next-now)*time.Microsecond + 500*time.Millisecond):
			}
			// Each hop posts its own record, as the room's hops would.
			for h := range r.hops {
				if _, err := hc.PostRecords(hopCtx, records, r.record(h, next-p.PeriodUs, nil)); err != nil && hopCtx.Err() == nil {
					b.logf("a period's records: %v", err)
				}
			}
		}
	}()
	return nil
}

// warm runs s's load for the warm-up.
func (b *bencher) warm(ctx context.Context, s *benchServer) error {
	if b.o.Warmup <= 0 {
		return nil
	}
	_, _, _, _, _, err := b.phase(ctx, s, b.o.Warmup, 0)
	return err
}

// decisionOf takes a manifest from the server and the decision it names,
// whose signed message the baselines sign.
func (b *bencher) decisionOf(ctx context.Context, s *benchReal, room *benchRoomRun) error {
	m, err := benchGet(ctx, s.c.addr, s.r.path+"?_HLS_pathway=%22p00%22&_HLS_throughput=5000000")
	if err != nil {
		return err
	}
	s.loads[b.o.halfConns()].l.answered.Add(1)
	// §8.1: the decision's URI is decision_uri followed by its digest.
	key := []byte(`"science.transaction.wai-decision":"`)
	i := bytes.Index(m, key)
	uri := []byte{}
	if i >= 0 {
		uri = m[i+len(key):]
		uri = uri[:max(bytes.IndexByte(uri, '"'), 0)]
	}
	if len(uri) < 2*sig.HashSize {
		return fmt.Errorf("a manifest without its decision: %s", m)
	}
	digest := string(uri[len(uri)-2*sig.HashSize:])
	raw, err := benchGet(ctx, s.c.addr, "/v1/decisions/"+digest)
	if err != nil {
		return err
	}
	if _, err := decision.Parse(raw); err != nil || len(raw) < sig.SignatureSize {
		return fmt.Errorf("the decision %s does not read: %v", digest, err)
	}
	room.manifest, room.decisionBytes, room.manifestBytes = m, len(raw), len(m)
	room.msg = append([]byte(decision.SignedPrefix), raw[:len(raw)-sig.SignatureSize]...)
	return nil
}

// steer measures the server: at each count of connections saturated in
// turns with the signing floor (and the plain server, when given, at the
// least count), then paced at half the rate at the least count, and the
// signing floor and the durable floor at that offered rate; with
// records, the records phases.
func (b *bencher) steer(ctx context.Context, s *benchReal, floors map[int]*benchServer, durable, plain *benchServer, records bool) (*benchRealRun, error) {
	run := &benchRealRun{n: len(s.r.ids), engine: s.engine, storeFile: s.storeFile(), dir: s.dir, path: s.r.path, sat: map[int]*benchServed{}, cores: 1, procs: s.c.procs}
	hc := b.o.halfConns()
	g0, _ := benchGroups(s.c.addr)
	for _, conns := range b.o.Conns {
		turns := []*benchServer{s.loads[conns], floors[conns]}
		if plain != nil && conns == hc {
			turns = append(turns, plain)
		}
		if err := b.saturate(ctx, b.o.Duration, turns...); err != nil {
			return nil, err
		}
		sat, err := b.served(s.loads[conns])
		if err != nil {
			return nil, err
		}
		run.sat[conns] = &sat
		b.logf("%d conns: %s decisions/s, %s of CPU each, core busy %.2f; p50 %s, p99 %s", conns, benchRate(sat.rate), benchDur(sat.cpu), sat.busy, benchDur(sat.pct[0]), benchDur(sat.pct[1]))
	}
	run.groupSize = benchGroupSize(s.c.addr, g0)
	var err error
	if run.stages, err = b.profiledTurn(ctx, s, run); err != nil {
		return nil, err
	}
	if run.half, err = b.pace(ctx, s.loads[hc], run.sat[hc].rate/2); err != nil {
		return nil, err
	}
	b.logf("at half rate (%s/s): p50 %s, p99 %s", benchRate(run.half.rate), benchDur(run.half.pct[0]), benchDur(run.half.pct[1]))
	// Issue 30: the floor's p99 at the same offered rate, right after.
	if run.floorHalf, err = b.pace(ctx, floors[hc], run.sat[hc].rate/2); err != nil {
		return nil, fmt.Errorf("the signing floor at the same offered rate: %w", err)
	}
	b.logf("(c) at the same offered rate: p50 %s, p99 %s", benchDur(run.floorHalf.pct[0]), benchDur(run.floorHalf.pct[1]))
	if run.durableHalf, err = b.pace(ctx, durable, run.sat[hc].rate/2); err != nil {
		return nil, fmt.Errorf("the durable floor at the same offered rate: %w", err)
	}
	b.logf("(d) at the same offered rate: p50 %s, p99 %s", benchDur(run.durableHalf.pct[0]), benchDur(run.durableHalf.pct[1]))
	if records {
		run.ingest, err = b.records(ctx, s, run)
		if err != nil {
			return nil, err
		}
		if run.paced, err = b.recordsPaced(ctx, s, plain); err != nil {
			return nil, err
		}
		run.profiled = append(run.profiled, run.paced.profiled...)
	}
	run.peakRSS = s.c.peakRSS()
	return run, nil
}

func benchFileName(engine string) string {
	return string(bytes.ReplaceAll([]byte(engine), []byte("/"), []byte("")))
}

// records runs the records phases: old periods, so that the evidence the
// decisions state stays as it is; each hop's in the order of time; one
// record per POST, then 64.
func (b *bencher) records(ctx context.Context, s *benchReal, run *benchRealRun) ([]benchIngest, error) {
	r, p := s.r, s.r.sc.Policy
	end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
	first := end - p.WindowUs - 4*p.PeriodUs - uint64(b.o.IngestPool[0]+b.o.IngestPool[1]+2*len(r.hops))/uint64(len(r.hops))*p.PeriodUs
	var out []benchIngest
	for k, batch := range []int{1, 64} {
		pool := b.o.IngestPool[k]
		b.logf("records: signing %d, %d per POST", pool, batch)
		var bodies [][]byte
		var body []byte
		for x := range pool {
			h := x % len(r.hops)
			body = append(body, r.record(h, first+uint64(x/len(r.hops))*p.PeriodUs, nil)...)
			if (x+1)%batch == 0 {
				bodies = append(bodies, body)
				body = nil
			}
		}
		first += uint64(pool/len(r.hops)+1) * p.PeriodUs
		wait := b.profile(s.c, fmt.Sprintf("ingest-%d-%d", run.n, batch), b.o.Ingest, false)
		in := b.ingestPhase(ctx, s.c, r.recordsPath(), batch, bodies)
		run.profiled = append(run.profiled, wait()...)
		b.logf("records, %d per POST: %s records/s", batch, benchRate(in.rate))
		out = append(out, in)
	}
	return out, ctx.Err()
}

// finish stops the server and reads its store: the decisions it holds
// beside those its steering route answered.
func (s *benchReal) finish(run *benchRealRun) error {
	if counts, ok := settledCounts(s.c.addr); ok {
		run.answered = counts.answered
	}
	for _, l := range s.loads {
		run.received += l.l.answered.Load()
	}
	s.hopsDone()
	<-s.hops
	s.hopsDone = nil
	for _, l := range s.loads {
		l.l.close()
	}
	err := s.c.stop()
	s.c = nil
	if err != nil {
		return err
	}
	run.fileSize = benchFileSize(s.storeFile())
	run.stored, run.bytesInUse, run.leaves, err = benchStoredLogged(s.storeFile())
	if err != nil {
		return err
	}
	if run.stored > 0 {
		run.bytesInUse /= float64(run.stored)
		run.fileBytes = float64(run.fileSize-s.fileBefore) / float64(run.stored)
	}
	return nil
}

// ingestPhase posts the bodies from many hops at once until they are all
// posted or the phase's time is up.
func (b *bencher) ingestPhase(ctx context.Context, c *benchChild, path string, batch int, bodies [][]byte) benchIngest {
	in := benchIngest{batch: batch}
	var next, records, failed atomic.Uint64
	var firstErr atomic.Pointer[error]
	c0, ok0 := c.cpu()
	start := time.Now()
	deadline := start.Add(b.o.Ingest)
	var wg sync.WaitGroup
	for range b.o.IngestHops {
		wg.Go(func() {
			conn := &benchConn{addr: c.addr}
			defer conn.close()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				k := next.Add(1) - 1
				if k >= uint64(len(bodies)) {
					return
				}
				status, body, err := benchPost(conn, path, bodies[k])
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("status %d: %s", status, bytes.TrimSpace(body))
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				records.Add(uint64(batch))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	c1, ok1 := c.cpu()
	in.records, in.failed = records.Load(), failed.Load()
	if e := firstErr.Load(); e != nil {
		in.err = *e
	}
	in.rate = float64(in.records) / elapsed.Seconds()
	if ok0 && ok1 && in.records > 0 {
		in.cpu = (c1 - c0) / time.Duration(in.records)
	}
	return in
}

// startPlain starts `bench plain`, answering the fixed manifest, and with
// msg signing it per request.
func (b *bencher) startPlain(ctx context.Context, manifest, msg []byte, durable bool) (*benchChild, error) {
	dir, err := os.MkdirTemp(b.tmp, "plain-")
	if err != nil {
		return nil, err
	}
	mf := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(mf, manifest, 0o600); err != nil {
		return nil, err
	}
	args := []string{"bench", "plain", "-manifest", mf}
	if msg != nil {
		sf := filepath.Join(dir, "message")
		if err := os.WriteFile(sf, msg, 0o600); err != nil {
			return nil, err
		}
		args = append(args, "-sign", sf)
		if durable {
			args = append(args, "-durable", filepath.Join(dir, "durable"))
		}
	}
	return b.start(ctx, args...)
}

// plainServer is a load of conns connections on a plain server, primed
// and warmed up.
func (b *bencher) plainServer(ctx context.Context, name string, c *benchChild, manifest []byte, conns int) (*benchServer, error) {
	// The players read the fixed manifest's first pathway: its id is
	// whatever the manifest names.
	var ids []string
	if i := bytes.Index(manifest, benchPriorityKey); i >= 0 {
		id := manifest[i+len(benchPriorityKey):]
		ids = append(ids, string(id[:max(bytes.IndexByte(id, '"'), 0)]))
	}
	l := newBenchLoad(c.addr, "/v1/steer", ids, 0, conns, b.o.Players)
	if err := l.prime(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s, err := b.newServer(name, c, l, false)
	if err != nil {
		return nil, err
	}
	return s, b.warm(ctx, s)
}
