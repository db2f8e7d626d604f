// Package demo is `waisteer demo`, the README's first command: on a machine
// with no files it makes a room, its key log, a signed policy of three
// pathways and their hops, serves the room on localhost with the real server
// and store (internal/serve), has the hops post a signed record every period
// with drifting energy, steers a client, verifies the decision from its URL
// (internal/client, verify), and prints what to try. Offline does the same
// without a server, into files.
package demo

// `waisteer demo` is the README's first command: on a machine with no files
// it makes a room, its key log, a signed policy of three pathways and their
// hops, serves the room on localhost with the real server, has the hops
// post a signed record every period with drifting energy, steers a client,
// verifies the decision from its URL, and prints what to try.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/files"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/verify"
)

// The demo's timing, short so that something visibly happens: a record
// every 10 s, a window of a minute, 2 s for a record to arrive.
const (
	demoPeriod = 10 * time.Second
	demoWindow = 60 * time.Second
	demoLag    = 2 * time.Second
	// demoCycle is the period of the energy's drift: over a few minutes
	// cdn-b and its clone take turns at being the cheaper.
	demoCycle = 4 * time.Minute
	// demoThroughput is what the demo's client reports (§4.2): tier 2 of
	// the policy's tiers, above its floor, so that the client is moved
	// for its evidence (§6.4).
	demoThroughput = 6_000_000
)

// Options are the demo's settings (`waisteer demo -h`).
type Options struct {
	Listen string // the address to serve on; port 0 picks a free one
	Seed   string // derive every key from it, so that a run can be repeated; "" for fresh keys
	Dir    string // write the room's files, keys and a serve.toml there and keep the store there; "" for a store in a temporary directory
	// EdgeStop is when the demo stops one of its pool's edges; 0 is
	// DefaultEdgeStop.
	EdgeStop time.Duration
	// For is how long the demo serves before it stops by itself (-for); 0
	// serves until ctx ends (Ctrl-C).
	For time.Duration
	// Prog is how the operator runs waisteer, for the commands the demo
	// prints ("waisteer", "./waisteer", "go run ./cmd/waisteer"); "" is
	// "waisteer".
	Prog string
}

// errForPassed ends a demo whose -for has passed.
var errForPassed = errors.New("-for has passed")

func (o Options) prog() string {
	if o.Prog == "" {
		return "waisteer"
	}
	return o.Prog
}

// Serve serves a fresh room until ctx ends, printing to w what to try; stop,
// when not nil, is called when the server starts shutting down (a second
// signal then ends the process at once).
func Serve(ctx context.Context, stop func(), w io.Writer, logger *slog.Logger, o Options) error {
	ln, err := net.Listen("tcp", o.Listen)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is in use (another demo?): stop it, or give -listen 127.0.0.1:0 for any free port", o.Listen)
	}
	if err != nil {
		return err
	}
	base := "http://" + urlHost(ln.Addr())
	r, err := NewRoom(o.Seed, base)
	if err != nil {
		ln.Close()
		return err
	}
	pc, edges, err := demoPool()
	if err != nil {
		ln.Close()
		return err
	}
	defer stopEdges(edges)
	if o.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.For, errForPassed)
		defer cancel()
	}
	start := time.Now()
	cfg := &serve.Config{HTTP: serve.DefaultLimits()}
	// The earlier runs' rooms, with -dir, are kept (keepEarlierRooms).
	cfg.Server = server.Config{Rooms: []server.RoomConfig{r.RoomConfig()}, Pools: []pool.Config{pc}, OperatorToken: r.Token, Logger: logger, KeepForeignRooms: true}
	dataDir := ""
	if o.Dir != "" {
		dataDir = filepath.Join(o.Dir, "data")
		if _, err := r.writeFiles(o.Dir, ln.Addr().String(), "data", keepEarlierRooms); err != nil {
			ln.Close()
			return err
		}
	}
	storeDir := dataDir
	if storeDir == "" {
		// The demo runs on the embedded store, as serve does, in a
		// directory of its own that it removes: an in-memory store kept
		// every decision on the heap, and under load its garbage
		// collection grew with them (issue 14).
		tmp, err := os.MkdirTemp("", "waisteer-demo-")
		if err != nil {
			ln.Close()
			return err
		}
		defer os.RemoveAll(tmp)
		storeDir = tmp
	}
	st, loads, err := serve.OpenStore(ctx, serve.StoreConfig{Engine: serve.StoreBolt}, storeDir, slog.New(slog.DiscardHandler))
	if err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if stop == nil {
		stop = func() {}
	}
	served := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		served <- serve.Serve(ctx, func() { stop(); cancel() }, logger, ln, cfg, st, loads, func(string) { close(ready) })
	}()
	select {
	case err := <-served:
		return err
	case <-ready:
	}

	edgeStop := o.EdgeStop
	if edgeStop <= 0 {
		edgeStop = DefaultEdgeStop
	}
	lw := &lockedWriter{w: w}
	err = run(ctx, lw, logger, r, dataDir, demoRun{pool: pc, edges: edges, edgeStop: edgeStop, start: start, stopAt: stopAt(start, o.For), prog: o.prog()})
	if err != nil {
		cancel() // a failed demo stops its server too
	}
	// Wait for the server to finish its requests and write its pending
	// decisions.
	<-ctx.Done()
	err = errors.Join(err, <-served)
	if err == nil {
		// Issue 29: the demo says when it stops, and why.
		why := "stopped (interrupted)"
		if errors.Is(context.Cause(ctx), errForPassed) {
			why = fmt.Sprintf("stopped: -for %s has passed", o.For)
		}
		fmt.Fprintf(lw, "%s  %s; the server finished its requests and its pending decisions.\n", time.Now().Format(time.TimeOnly), why)
	}
	return err
}

// stopAt is when a demo started at start with -for d stops; zero for none.
func stopAt(start time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return start.Add(d)
}

// run backfills a window of records, has the hops post a record every
// period, makes and verifies the first decision, prints what to try, and
// then asks again each period for the same session until ctx is done.
func run(ctx context.Context, w io.Writer, logger *slog.Logger, r *Room, dataDir string, dp demoRun) error {
	prog := dp.prog
	c := client.New()
	hopCtx, hopsDone := context.WithCancel(ctx)
	defer hopsDone()
	base := r.Base()
	if err := r.Backfill(ctx, c, base, time.Now()); err != nil {
		return err
	}
	var hops sync.WaitGroup
	defer hops.Wait()
	defer hopsDone()
	for h := range r.Hops {
		hops.Go(func() { r.RunHop(hopCtx, c, base, h, logger) })
	}

	first, err := c.Steer(ctx, r.Policy.ServerURI+"?_HLS_pathway=%22cdn-a%22&_HLS_throughput=6000000")
	if err != nil {
		return err
	}
	in, err := c.FetchInput(ctx, first.Decision, &r.AuthorityPub)
	if err != nil {
		return err
	}
	in.Manifest = first.Raw
	facts, verr := verify.Verify(in)

	p := r.Policy
	fmt.Fprintf(w, "waisteer demo: room %q (%s), served at %s\n\n", r.Name, r.ID, base)
	fmt.Fprintln(w, "Three pathways, each with its own hops, which sign a per-hop record every 10 s")
	fmt.Fprintln(w, "with energy that drifts over minutes (a window of 60 s was backfilled):")
	for i := range p.Pathways {
		pw := &p.Pathways[i]
		note := ""
		if pw.IsClone() {
			note = fmt.Sprintf("; a clone of %s with HOST %s and PARAMS %s=%s", p.Pathways[pw.Base].ID, pw.Host, pw.Params[0].Name, pw.Params[0].Value)
		}
		if pw.MinSharePPM > 0 {
			note += fmt.Sprintf("; %d%% of sessions by its share (§6.3)", pw.MinSharePPM/10_000)
		}
		fmt.Fprintf(w, "  %-12s %-14s %d hops%s\n", pw.ID, r.ClassOf(i).Label(), len(pw.Hops), note)
	}
	fmt.Fprintln(w, "Figures are compared only within a class: the OnChipCounter pathways rank before the")
	fmt.Fprintln(w, "ModelBased one whatever their joules (§6.2).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The content description carries the policy (§8.2, §8.3):")
	fmt.Fprintf(w, "  HLS   %s\n", decision.HLSTag(p))
	fmt.Fprintf(w, "  DASH  %s\n", decision.DASHElement(p))
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The steering manifest's URL (server_uri): %s\n", p.ServerURI)
	fmt.Fprintln(w, "Ask for a manifest as an HLS player on cdn-a at 6 Mbit/s would:")
	fmt.Fprintf(w, "  curl '%s?_HLS_pathway=%%22cdn-a%%22&_HLS_throughput=%d'\n", p.ServerURI, demoThroughput)
	fmt.Fprintln(w, "The demo did; the manifest it got (§8.1):")
	fmt.Fprintf(w, "  %s\n", first.Raw)
	if verr != nil {
		return fmt.Errorf("the demo's own decision %s does not verify: %w", first.Decision, verr)
	}
	fmt.Fprintf(w, "Its decision: %s first (reason %s), ttl %d s; the evidence over the window:\n", facts.Priority[0], facts.Reason, facts.TTL)
	for _, f := range facts.Pathways {
		fmt.Fprintf(w, "  %-12s %-7s class %d  J %s µJ  D %s B\n", f.ID, f.Status, f.Class, f.Joules, f.Delivery)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Verify it from its URL alone, pinning the room's authority key (the demo just did: accept):")
	fmt.Fprintf(w, "  %s verify -url %s -authority %s\n", prog, first.Decision, r.AuthorityPub)
	fmt.Fprintln(w, "Audit the room's whole log of decisions: the tree, each decision (§9), the loads and shares (§9.2):")
	fmt.Fprintf(w, "  %s audit -url %s -room %s\n", prog, base, r.ID)
	fmt.Fprintln(w, "The room's state, on the operator's route:")
	fmt.Fprintf(w, "  curl -H 'Authorization: Bearer %s' %s/v1/rooms/%s/status\n", r.Token, base, r.ID)
	fmt.Fprintln(w, "The operator's dashboard, in a browser (sign in with the token):")
	fmt.Fprintf(w, "  %s/dashboard  token %s\n", base, r.Token)
	if dataDir != "" {
		fmt.Fprintf(w, "The room's files and a configuration for `%s serve -c %s` are in %s.\n", prog,
			filepath.Join(filepath.Dir(dataDir), "serve.toml"), filepath.Dir(dataDir))
	}
	fmt.Fprintln(w)
	hc := &http.Client{Timeout: 10 * time.Second}
	reloads, firsts, err := introPool(ctx, w, hc, base, r.Token, dp.pool, dp.edgeStop, dp.stopAt)
	if err != nil {
		return fmt.Errorf("the demo's pool: %w", err)
	}
	until := "until Ctrl-C"
	if !dp.stopAt.IsZero() {
		until = fmt.Sprintf("for %s, until %s (-for; Ctrl-C stops it sooner)", dp.stopAt.Sub(dp.start), dp.stopAt.Format(time.TimeOnly))
	}
	fmt.Fprintf(w, "Serving %s. Each period the room's session asks again from its RELOAD-URI:\n", until)
	poolErr := make(chan error, 1)
	go func() { poolErr <- runPool(ctx, w, hc, dp.pool, dp.edges, reloads, firsts, dp.edgeStop) }()
	defer func() {
		if perr := <-poolErr; perr != nil && ctx.Err() == nil {
			fmt.Fprintf(w, "pool: %v\n", perr)
		}
	}()

	// Each period, once its records are due (§5.1's lag), the session asks
	// again from its current first pathway, and the decision is verified.
	last := first
	period := p.PeriodUs
	for {
		t := uint64(time.Now().UnixMicro())
		next := (t/period+1)*period + p.LagUs + 500_000
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(next-t) * time.Microsecond):
		}
		m, err := c.Steer(ctx, fmt.Sprintf("%s&_HLS_pathway=%%22%s%%22&_HLS_throughput=%d", last.Reload, last.Priority[0], demoThroughput))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		line := demoLine(ctx, c, r, m)
		fmt.Fprintln(w, line)
		last = m
	}
}

// demoRun is the pool part of the demo's run.
type demoRun struct {
	pool     pool.Config
	edges    []*demoEdge
	edgeStop time.Duration
	start    time.Time // when the demo started
	stopAt   time.Time // when -for ends it; zero for Ctrl-C only
	prog     string    // how the operator runs waisteer
}

// demoLine describes one decision on one line, with each figure as µJ per
// byte (for the eye only: the decision states J and D, never a quotient,
// §5.3) and the verifier's outcome.
func demoLine(ctx context.Context, c *client.Client, r *Room, m *client.Manifest) string {
	in, err := c.FetchInput(ctx, m.Decision, &r.AuthorityPub)
	if err != nil {
		return fmt.Sprintf("%s  %s: %v", time.Now().Format(time.TimeOnly), m.Decision, err)
	}
	in.Manifest = m.Raw
	facts, verr := verify.Verify(in)
	if verr != nil {
		return fmt.Sprintf("%s  %s: refused: %v", time.Now().Format(time.TimeOnly), m.Decision, verr)
	}
	var figs []string
	for _, f := range facts.Pathways {
		s := f.Status
		if f.Status == evidence.StatusFigure.String() {
			j, _ := new(big.Rat).SetString(f.Joules)
			d, _ := new(big.Rat).SetString(f.Delivery)
			s = j.Quo(j, d).FloatString(3)
		}
		figs = append(figs, f.ID+" "+s)
	}
	return fmt.Sprintf("%s  %-31s %-5s ttl %2d  µJ/B: %s  verified",
		time.Now().Format(time.TimeOnly), strings.Join(facts.Priority, " > "), facts.Reason, facts.TTL, strings.Join(figs, ", "))
}

// urlHost is the host and port of a listening address as a URL writes it:
// an unspecified address (":8080") is reached on the loopback.
func urlHost(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Room is a complete room: its keys, descriptor, key log head, signed
// policy, and the hops that sign its records. The demo serves it; the
// server's tests use it with a fixed seed.
type Room struct {
	Name                     string
	Authority, Origin, Steer sig.PrivateKey
	AuthorityPub             sig.PublicKey
	Descriptor, Head         []byte
	PolicyBytes              []byte
	Policy                   *policy.Policy
	ID                       sig.Hash
	Token                    string // the operator's token
	Hops                     []Hop
}

// Hop is one hop of one pathway and what it states per period.
type Hop struct {
	pathway int
	index   int // its index among the pathway's hops
	key     sig.PrivateKey
	class   evidence.Class
	edge    bool
	joules  uint64  // µJ per period, before the drift
	phase   float64 // of the drift, in cycles
	bytes   uint64  // media bytes out per period
}

// NewRoom makes the demo's room with its URIs under base
// ("http://127.0.0.1:8080"). Keys are fresh from crypto/rand, or derived
// from seed when it is not empty.
func NewRoom(seed, base string) (*Room, error) {
	key := func(label string) (sig.PrivateKey, error) {
		if seed == "" {
			return sig.GenerateKey(nil)
		}
		return sig.NewPrivateKey(sig.Digest([]byte("waisteer demo " + seed + ": " + label))), nil
	}
	r := &Room{Name: "demo"}
	var err error
	for _, k := range []struct {
		dst   *sig.PrivateKey
		label string
	}{{&r.Authority, "room authority"}, {&r.Origin, "room origin"}, {&r.Steer, "steering key"}} {
		if *k.dst, err = key(k.label); err != nil {
			return nil, err
		}
	}
	r.AuthorityPub = r.Authority.Public()
	if seed == "" {
		var t [16]byte
		if _, err := rand.Read(t[:]); err != nil {
			return nil, err
		}
		r.Token = hex.EncodeToString(t[:])
	} else {
		d := sig.Digest([]byte("waisteer demo " + seed + ": operator token"))
		r.Token = hex.EncodeToString(d[:16])
	}

	// Three pathways (§3.2): cdn-a read by a model, cdn-b by on-chip
	// counters, and cdn-b-edge2, the same content as cdn-b through
	// another host, with its own hops of cdn-b's class. cdn-b and its
	// clone drift in opposite phase, so that the order between them
	// changes over minutes; cdn-a spends least but ranks after them by its
	// class, and keeps a tenth of the sessions by its share so that its
	// evidence stays fresh (§6.3).
	type hopSpec struct {
		edge   bool
		joules uint64
		bytes  uint64
	}
	specs := []struct {
		pw    policy.Pathway
		class evidence.Class
		phase float64
		hops  []hopSpec
	}{
		{policy.Pathway{ID: "cdn-a", Base: policy.NoBase, TopTier: 2, LatencyMs: 120, Capacity: policy.Unlimited, MinSharePPM: 100_000},
			evidence.ModelBased, 0.25, []hopSpec{{true, 1_900_000_000, 250_000_000}, {false, 900_000_000, 240_000_000}}},
		{policy.Pathway{ID: "cdn-b", Base: policy.NoBase, TopTier: 2, LatencyMs: 80, Capacity: policy.Unlimited},
			evidence.OnChipCounter, 0, []hopSpec{{true, 2_600_000_000, 250_000_000}, {false, 1_200_000_000, 240_000_000}}},
		{policy.Pathway{ID: "cdn-b-edge2", Base: 1, Host: "edge2.cdn-b.example", Params: []policy.Param{{Name: "via", Value: "edge2"}},
			TopTier: 2, LatencyMs: 60, Capacity: policy.Unlimited},
			evidence.OnChipCounter, 0.5, []hopSpec{{true, 2_500_000_000, 250_000_000}, {false, 1_300_000_000, 240_000_000}}},
	}
	entries := []room.Entry{
		// The authority is listed (COMPANION §4.1 step 6); the steering
		// key states figures of both classes (§3.5).
		room.SteerEntry(r.AuthorityPub, evidence.ModelBased, evidence.OnChipCounter),
		room.SteerEntry(r.Steer.Public(), evidence.ModelBased, evidence.OnChipCounter),
	}
	p := &policy.Policy{
		PeriodUs: uint64(demoPeriod.Microseconds()), WindowUs: uint64(demoWindow.Microseconds()), LagUs: uint64(demoLag.Microseconds()),
		Basis: policy.PerByte, Floor: 1, Tiers: []uint64{800_000, 2_500_000, 6_000_000},
		LatencyCeilingMs: 500, MinBufferMs: 4000, HysteresisPPM: 50_000, TTLs: 30, MinTTLs: 10,
		Initial:   1, // cdn-b: the first of the order (§8.2)
		ServerURI: base + "/v1/steer", ReloadURI: base + "/v1/steer", DecisionURI: base + "/v1/decisions/",
	}
	for i, s := range specs {
		pw := s.pw
		for j, h := range s.hops {
			k, err := key(fmt.Sprintf("hop %s/%d", pw.ID, j))
			if err != nil {
				return nil, err
			}
			place := policy.Interior
			if h.edge {
				place = policy.Edge
			}
			pw.Hops = append(pw.Hops, policy.Hop{Key: k.Public(), Place: place})
			entries = append(entries, room.HopEntry(k.Public(), s.class))
			r.Hops = append(r.Hops, Hop{pathway: i, index: j, key: k, class: s.class, edge: h.edge, joules: h.joules, phase: s.phase, bytes: h.bytes})
		}
		p.Pathways = append(p.Pathways, pw)
	}
	origin := r.Origin.Public()
	if r.Descriptor, err = room.NewDescriptor(r.Authority, &origin, r.Name); err != nil {
		return nil, err
	}
	if r.Head, err = room.NewKeyLogHead(r.Origin, 1, entries); err != nil {
		return nil, err
	}
	rm, err := room.Open(r.Descriptor, r.Head)
	if err != nil {
		return nil, err
	}
	r.ID = rm.ID()
	p.Room = r.ID
	if r.PolicyBytes, err = policy.Sign(p, r.Steer); err != nil {
		return nil, err
	}
	if r.Policy, err = policy.Parse(r.PolicyBytes); err != nil {
		return nil, err
	}
	return r, nil
}

// base is the scheme and host of the room's URIs.
func (r *Room) Base() string { return strings.TrimSuffix(r.Policy.ServerURI, "/v1/steer") }

func (r *Room) RoomConfig() server.RoomConfig {
	return server.RoomConfig{Descriptor: r.Descriptor, KeyLogHead: r.Head, Policy: r.PolicyBytes, SteeringKey: r.Steer}
}

// classOf is the class of pathway i's hops.
func (r *Room) ClassOf(i int) evidence.Class {
	for _, h := range r.Hops {
		if h.pathway == i {
			return h.class
		}
	}
	return evidence.Unmetered
}

// record signs hop h's record of the period that starts at start (µs on the
// room clock): its joules drift by up to a quarter either way over
// demoCycle, as a function of the period alone, so that a record signed
// twice is the same bytes. edit, when not nil, changes it before signing.
func (r *Room) Record(h int, start uint64, edit func(*evidence.Record)) []byte {
	hp := &r.Hops[h]
	cycle := float64(demoCycle.Microseconds())
	drift := 1 + 0.25*math.Sin(2*math.Pi*(float64(start)/cycle+hp.phase))
	rec := &evidence.Record{
		Room: r.ID, Hop: hp.key.Public(), Start: start, End: start + r.Policy.PeriodUs,
		Class: hp.class, Joules: max(1, uint64(float64(hp.joules)*drift)), Sessions: 40,
		Tracks: []evidence.Track{{Kind: evidence.KindMedia, Direction: evidence.DirOut, Bytes: hp.bytes}},
	}
	if hp.edge {
		// Its sessions' time at tier 2, the top (live-metering §3.3).
		rec.SubscriberUs[2] = uint64(rec.Sessions) * r.Policy.PeriodUs
	}
	if edit != nil {
		edit(rec)
	}
	return evidence.SignRecord(rec, hp.key)
}

// recordsURL is the route a room's hops post their records to, on the
// server at base.
func (r *Room) RecordsURL(base string) string {
	return base + "/v1/rooms/" + r.ID.String() + "/records"
}

// backfill posts, for every hop, the records of the periods that the window
// at now needs and the one period after (§5.1), each hop's in one body, so
// that the first decision already has figures.
func (r *Room) Backfill(ctx context.Context, c *client.Client, base string, now time.Time) error {
	p := r.Policy
	end := uint64(now.UnixMicro()) / p.PeriodUs * p.PeriodUs // the last period over
	from := end - p.WindowUs - p.PeriodUs
	for h := range r.Hops {
		var body []byte
		for s := from; s < end; s += p.PeriodUs {
			body = append(body, r.Record(h, s, nil)...)
		}
		if err := postRecords(ctx, c, r.RecordsURL(base), body); err != nil {
			return fmt.Errorf("backfilling the records: %w", err)
		}
	}
	return nil
}

// runHop is one simulated hop: at the end of each period it signs its record
// of the period and posts it, within the policy's lag (§5.1).
func (r *Room) RunHop(ctx context.Context, c *client.Client, base string, h int, logger *slog.Logger) {
	p := r.Policy
	delay := time.Duration(100+150*h) * time.Millisecond // hops do not all post at once
	for {
		t := uint64(time.Now().UnixMicro())
		end := (t/p.PeriodUs + 1) * p.PeriodUs
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(end-t)*time.Microsecond + delay):
		}
		if err := postRecords(ctx, c, r.RecordsURL(base), r.Record(h, end-p.PeriodUs, nil)); err != nil && ctx.Err() == nil {
			logger.Warn("a hop's record was not accepted", "hop", r.Hops[h].key.Public(), "err", err)
		}
	}
}

// WriteFiles writes the room's files, its keys and a configuration for
// `waisteer serve` into dir, and returns the configuration's path. dataDir is
// the configuration's data_dir, relative to dir.
func (r *Room) WriteFiles(dir, listen, dataDir string) (string, error) {
	return r.writeFiles(dir, listen, dataDir, "")
}

// keepEarlierRooms is the demo's table of its serve.toml: a demo run with
// -dir again makes a new room (fresh keys, unless -seed) on the store it
// keeps there, whose earlier rooms are served beside it for audit rather
// than refused as another deployment's (issue 26).
const keepEarlierRooms = `
# The store keeps the rooms of the demo's earlier runs in this directory.
[store]
keep_foreign_rooms = true
`

// writeFiles is WriteFiles with extra at the end of the configuration's
// top-level keys.
func (r *Room) writeFiles(dir, listen, dataDir, extra string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	written := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"room.cbor", r.Descriptor, 0o644},
		{"keylog.cbor", r.Head, 0o644},
		{"policy.wsp1", r.PolicyBytes, 0o644},
		{"authority.key", sig.MarshalPrivateKey(r.Authority), 0o600},
		{"origin.key", sig.MarshalPrivateKey(r.Origin), 0o600},
		{"steer.key", sig.MarshalPrivateKey(r.Steer), 0o600},
		{"operator.token", []byte(r.Token + "\n"), 0o600},
		{"serve.toml", fmt.Appendf(nil, `# waisteer serve -c serve.toml: the demo's room %s
listen = %q
data_dir = %q
operator_token_file = "operator.token"
%s
[[room]]
descriptor = "room.cbor"
keylog = "keylog.cbor"
policy = "policy.wsp1"
steering_key = "steer.key"
`, r.ID, listen, dataDir, extra), 0o644},
	}
	for _, f := range written {
		if err := files.Write(filepath.Join(dir, f.name), f.data, f.mode, true); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "serve.toml"), nil
}

// postRecords posts records back to back and requires every one accepted (or
// a duplicate).
func postRecords(ctx context.Context, c *client.Client, target string, body []byte) error {
	_, err := c.PostRecords(ctx, target, body)
	return err
}
