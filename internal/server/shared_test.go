package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/pgtest"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/store/postgres"
	"github.com/waisteer/waisteer/verify/audit"
	"github.com/waisteer/waisteer/verify/recount"
)

// The package's PostgreSQL, started by the first test that needs one and
// stopped by TestMain.
var (
	pgOnce   sync.Once
	pgServer *pgtest.Server
	pgErr    error
)

func sharedPG(t testing.TB) *pgtest.Server {
	t.Helper()
	pgOnce.Do(func() { pgServer, pgErr = pgtest.New() })
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	return pgServer
}

func closePG() {
	if pgServer != nil {
		pgServer.Close()
	}
}

// openShared opens the PostgreSQL store at dsn for a server of the test,
// migrating it first when it is the first; it closes when the test ends.
func openShared(t *testing.T, dsn string, first bool) *postgres.Store {
	t.Helper()
	var opts []postgres.Option
	if first {
		opts = append(opts, postgres.WithMigrate())
	}
	st, err := postgres.Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// sharedEnvs starts n servers of one scenario, each on its own connection
// to one fresh PostgreSQL database, on one clock.
func sharedEnvs(t *testing.T, spec scenario.Spec, n int) []*env {
	t.Helper()
	clock := newClock(t0)
	clocks := make([]*atomic.Uint64, n)
	for i := range clocks {
		clocks[i] = clock
	}
	return sharedEnvsOn(t, spec, clocks, nil)
}

// sharedEnvsOn is sharedEnvs with a clock for each server, and the lines
// each logs at info level and above in logs[i] when logs is given.
func sharedEnvsOn(t *testing.T, spec scenario.Spec, clocks []*atomic.Uint64, logs []*lineLog) []*env {
	t.Helper()
	dsn := sharedPG(t).Database(t)
	sc, err := scenario.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	var es []*env
	for i, clock := range clocks {
		st := openShared(t, dsn, i == 0)
		var log *slog.Logger
		if logs != nil {
			log = slog.New(logs[i])
		}
		loads, err := postgres.NewLoads(context.Background(), st, log)
		if err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, sc: sc, mem: store.NewMemory(), shared: st, sharedLoads: loads, loads: store.NewLoads(), clock: clock}
		e.st = &failStore{Store: e.mem}
		e.start(func(c *Config) {
			c.Name = fmt.Sprintf("server-%d", i)
			if log != nil {
				c.Logger = log
			}
		})
		es = append(es, e)
	}
	return es
}

// within polls cond every 10 ms for up to d and says how long it took.
func within(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// Issue 15 item 2: a record posted to one server is in the evidence of
// every other within one second; a policy or a key log head put to one is
// active on all within one second; any server answers any decision by
// digest.
func TestSharedStoreOneRoom(t *testing.T) {
	es := sharedEnvs(t, scenario.Spec{Periods: 6}, 3)
	a, b, c := es[0], es[1], es[2]

	// The scenario's records, each posted to one of the three.
	for i, r := range a.sc.Records {
		es[i%3].postRecords([][]byte{r}, http.StatusOK)
	}
	n := uint64(len(a.sc.Records))
	for _, e := range es {
		took := within(t, 2*time.Second, "every record in every server's evidence", func() bool {
			st := e.status()
			return st.Records.Accepted+st.Records.FromPeers == n
		})
		if took > time.Second {
			t.Errorf("the records reached a server in %v, over a second", took)
		}
	}
	// The operator's routes say which server answered (issue 15 item 5).
	names := map[string]bool{}
	for _, e := range es {
		resp, _ := e.do("GET", "/v1/rooms/"+e.room()+"/status", nil, http.Header{"Authorization": {"Bearer " + testToken}})
		name := resp.Header.Get("Waisteer-Server")
		if name == "" || e.status().Server != name {
			t.Errorf("status answered by %q, header Waisteer-Server %q", e.status().Server, name)
		}
		names[name] = true
	}
	if len(names) != 3 {
		t.Errorf("three servers answered as %v", names)
	}
	// With the same evidence, the servers rank alike (§6.2).
	order := a.status().Order
	for _, e := range es[1:] {
		if got := e.status().Order; !slices.Equal(got, order) {
			t.Fatalf("orders %v and %v from the same records", order, got)
		}
	}

	// A decision made by one is answered, and verifies (§9), from another.
	m := b.steer("/v1/steer", nil)
	if _, facts := c.audit(m); facts == nil {
		t.Fatal("the decision did not verify from another server")
	}

	// A policy put to one steers every one.
	next := resign(t, a.sc, a.sc.SteerKey, func(p *policy.Policy) { p.TTLs = 120 })
	if resp, body := a.put("policy", next); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT policy: %d %s", resp.StatusCode, body)
	}
	want, err := policy.Parse(next)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		took := within(t, 2*time.Second, "the new policy active everywhere", func() bool { return e.status().Policy.Digest == want.Digest().String() })
		if took > time.Second {
			t.Errorf("the policy reached a server in %v, over a second", took)
		}
		if m := e.steer("/v1/steer", nil); m.TTL != 120 {
			t.Errorf("a manifest under the new policy has TTL %d, want 120", m.TTL)
		}
	}

	// A key log head put to another is the head of every one.
	seq := *a.status().KeyLogSeq + 1
	if resp, body := c.put("keylog", head(t, a.sc, seq, nil)); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT keylog: %d %s", resp.StatusCode, body)
	}
	for _, e := range es {
		within(t, 2*time.Second, fmt.Sprintf("key log seq %d everywhere", seq), func() bool {
			st := e.status()
			return st.KeyLogSeq != nil && *st.KeyLogSeq == seq
		})
	}
}

// Issue 15 item 3 (§6, §9.2): each server's sessions count in every
// server's loads, and a decision states the loads of all.
func TestSharedStoreLoads(t *testing.T) {
	es := sharedEnvs(t, scenario.Spec{Periods: 6}, 3)
	es[0].postRecords(es[0].sc.Records, http.StatusOK)
	const each = 10
	for _, e := range es {
		for range each {
			e.steer("/v1/steer", nil)
		}
	}
	sum := func(ls []uint32) (n uint32) {
		for _, l := range ls {
			n += l
		}
		return n
	}
	for i, e := range es {
		took := within(t, 2*time.Second, fmt.Sprintf("server %d counting every server's sessions", i), func() bool { return sum(statusLoads(e.status())) == 3*each })
		if took > time.Second {
			t.Errorf("server %d counted the others' sessions after %v, over a second", i, took)
		}
	}
	// A new session's decision, on any server, states them all.
	for i, e := range es {
		d, _ := e.audit(e.steer("/v1/steer", nil))
		var stated uint32
		for _, p := range d.Pathways {
			stated += p.Load
		}
		if stated < 3*each {
			t.Errorf("server %d's decision states loads summing to %d, want the %d sessions of all three at least", i, stated, 3*each)
		}
	}
}

// Issue 15 item 3: the overshoot of a pathway's capacity (§6.1) with three
// servers placing new sessions at once, measured against the bound
// SPEC-NOTES states: min((N − 1) × R × δ, (N − 1) × capacity), with R the
// rate at which one server places sessions and δ the staleness of the
// loads it reads (flush and follow, 50 ms each, and the round trips: 200 ms
// is taken). Each server paces its new sessions at rate; the sessions stay
// below the pathways' capacities in all, so that each is placed within the
// limits when the loads are exact.
func TestSharedStoreCapacityOvershoot(t *testing.T) {
	for _, c := range []struct {
		name                    string
		capacity, sessions, per int
		rate                    float64 // new sessions a second, each server; 0: at once
	}{
		{"paced", 200, 450, 150, 150},
		{"burst", 20, 45, 15, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := withPolicy(scenario.Spec{Periods: 6}, func(p *policy.Policy) {
				for i := range p.Pathways {
					p.Pathways[i].Capacity = uint32(c.capacity)
				}
			})
			es := sharedEnvs(t, spec, 3)
			es[0].postRecords(es[0].sc.Records, http.StatusOK)
			start := time.Now()
			var wg sync.WaitGroup
			for _, e := range es {
				for k := range c.per {
					wg.Go(func() {
						if c.rate > 0 {
							time.Sleep(time.Until(start.Add(time.Duration(float64(k) / c.rate * float64(time.Second)))))
						}
						resp, err := e.ts.Client().Get(e.ts.URL + "/v1/steer")
						if err != nil {
							t.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							t.Errorf("status %d", resp.StatusCode)
						}
					})
				}
			}
			wg.Wait()
			elapsed := time.Since(start)
			// Once the servers have read each other, they agree on the loads.
			var loads []uint32
			within(t, 2*time.Second, "the three agreeing on the loads", func() bool {
				loads = statusLoads(es[0].status())
				var n uint32
				for _, l := range loads {
					n += l
				}
				return n == uint32(c.sessions) && slices.Equal(statusLoads(es[1].status()), loads) && slices.Equal(statusLoads(es[2].status()), loads)
			})
			over := 0
			for _, l := range loads {
				over = max(over, int(l)-c.capacity)
			}
			r := float64(c.per) / elapsed.Seconds()
			bound := min(2*r*0.2, 2*float64(c.capacity))
			t.Logf("%d new sessions on 3 servers in %v (R = %.0f/s a server): loads %v, capacity %d each: overshoot %d (%.1f%% of the capacity; the bound %.1f)",
				c.sessions, elapsed.Round(time.Millisecond), r, loads, c.capacity, over, 100*float64(over)/float64(c.capacity), bound)
			if float64(over) > bound {
				t.Errorf("overshoot %d over the bound %.1f", over, bound)
			}
		})
	}
}

// Issue 15 items 2 and 5: a pool's session minted by one server is
// honoured by another on the same database (the pools' key is the store's
// secret), and rendezvous hashing gives it the same order there, with no
// state shared but the key.
func TestSharedStorePoolSessions(t *testing.T) {
	dsn := sharedPG(t).Database(t)
	var es []*poolEnv
	for i := range 2 {
		st := openShared(t, dsn, i == 0)
		es = append(es, newPoolEnvOn(t, st, store.NewLoads(), "", seedPool(nil, nil)))
	}
	a, b := es[0], es[1]
	for range 20 {
		m := a.steer(pool.DefaultPath)
		again := b.steer(strings.Replace(m.Reload, a.ts.URL, "", 1))
		if got, want := again.session(t), m.session(t); got != want {
			t.Fatalf("the other server minted %s for the session %s", got, want)
		}
		if !slices.Equal(again.Priority, m.Priority) {
			t.Fatalf("one session ordered %v by one server, %v by the other", m.Priority, again.Priority)
		}
	}
}

// Issue 15 item 4: with the database gone, steering answers 503 with
// Retry-After (never a manifest without a durable decision, never a 404,
// 410 or 429) and records 503; once it is back, the server steers again
// without a restart, and every manifest that went out names a decision the
// database holds.
func TestSharedStoreOutage(t *testing.T) {
	srv := pgtest.Start(t) // this test's own: it stops it
	dsn := srv.Database(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, postgres.WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sc, err := scenario.Build(scenario.Spec{Periods: 6})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, sc: sc, mem: store.NewMemory(), shared: st, loads: store.NewLoads(), clock: newClock(t0)}
	e.st = &failStore{Store: e.mem}
	e.start(nil)
	e.postRecords(sc.Records, http.StatusOK)
	retry := strconv.FormatUint(uint64(sc.Policy.MinTTLs), 10)

	var mu sync.Mutex
	var sent []string // the decision URIs of the manifests that went out
	counts := map[int]int{}
	var bad []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := e.ts.Client().Get(e.ts.URL + "/v1/steer")
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				counts[resp.StatusCode]++
				switch resp.StatusCode {
				case http.StatusOK:
					var m manifest
					if err := json.Unmarshal(body, &m); err != nil {
						bad = append(bad, "a 200 that is no manifest: "+string(body))
					}
					sent = append(sent, m.Decision)
				case http.StatusServiceUnavailable:
					if got := resp.Header.Get("Retry-After"); got != retry {
						bad = append(bad, fmt.Sprintf("a 503 with Retry-After %q, want min_ttl_s %s", got, retry))
					}
				default:
					bad = append(bad, fmt.Sprintf("status %d: %s", resp.StatusCode, body))
				}
				mu.Unlock()
			}
		})
	}
	count := func(code int) int {
		mu.Lock()
		defer mu.Unlock()
		return counts[code]
	}
	within(t, 5*time.Second, "manifests before the outage", func() bool { return count(http.StatusOK) >= 20 })
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	before := count(http.StatusOK)
	within(t, 10*time.Second, "503s while the database is gone", func() bool { return count(http.StatusServiceUnavailable) >= 20 })
	// Records are refused too, with Retry-After.
	resp, body := e.do("POST", "/v1/rooms/"+e.room()+"/records", sc.Records[0], http.Header{"Content-Type": {"application/octet-stream"}})
	if resp.StatusCode == http.StatusOK {
		// The record is held already: a duplicate needs no write. A new
		// one must be refused.
		rec, err := sc.AddRecord(0, 0, 5*scenario.Period, 6*scenario.Period, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, body = e.do("POST", "/v1/rooms/"+e.room()+"/records", rec, http.Header{"Content-Type": {"application/octet-stream"}})
	}
	wantError(t, "a record while the database is gone", resp, body, http.StatusServiceUnavailable, "store_unavailable")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("a refused record names no Retry-After")
	}
	during := count(http.StatusOK) - before
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	back := count(http.StatusOK)
	took := within(t, 15*time.Second, "steering again once the database is back", func() bool { return count(http.StatusOK) >= back+20 })
	close(stop)
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("%d manifests, %d 503s; %d manifests went out in the outage (decisions committed just before it); steering again %v after the database was back",
		count(http.StatusOK), count(http.StatusServiceUnavailable), during, took.Round(time.Millisecond))
	for _, uri := range sent {
		d, err := sig.ParseHash(uri[len(uri)-64:])
		if err != nil {
			t.Fatalf("decision URI %q: %v", uri, err)
		}
		if _, err := st.Decision(ctx, d); err != nil {
			t.Fatalf("the decision of a manifest that went out, %s: %v", d, err)
		}
	}
}

// TestSharedLog (issue 16 item 7; issue 31, SPEC-NOTES "One log per server
// and room"): servers on one database keep a log each of the room, so that
// no server's commit waits for another's: every server lists the same
// logs, one a server, whose leaves add up to the decisions made, each
// log's checkpoint is the same tree whichever server signs it and names
// its server, and an audit through any one server merges the logs and
// holds, the loads accepted within the staleness of the shared loads.
func TestSharedLog(t *testing.T) {
	es := sharedEnvs(t, scenario.Spec{Periods: 6}, 3)
	es[0].postRecords(es[0].sc.Records, http.StatusOK)
	n := uint64(len(es[0].sc.Records))
	for _, e := range es {
		within(t, 2*time.Second, "every record in every server's evidence", func() bool {
			st := e.status()
			return st.Records.Accepted+st.Records.FromPeers == n
		})
	}
	// The room clock runs with the wall's, as a server's does, so that a
	// staleness in µs of it is one in time (a clock that stands still
	// would put every server's decisions at one instant).
	began, done := time.Now(), make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Microsecond):
				es[0].clock.Store(t0 + uint64(time.Since(began)/time.Microsecond))
			}
		}
	}()
	var reloads []string
	decided := map[string]bool{} // a decision two servers made alike is one
	byServer := make([]map[string]bool, len(es))
	for i := range 90 {
		e := es[i%3]
		target := "/v1/steer"
		if i%2 == 1 && len(reloads) > 0 {
			target = path(t, reloads[(i*7)%len(reloads)])
		}
		m := e.steer(target, nil)
		reloads = append(reloads, m.Reload)
		digest := m.Decision[len(m.Decision)-64:]
		decided[digest] = true
		if byServer[i%3] == nil {
			byServer[i%3] = map[string]bool{}
		}
		byServer[i%3][digest] = true
		if i%10 == 9 {
			time.Sleep(60 * time.Millisecond) // the shared loads' flush and follow
		}
	}
	room := es[0].sc.Room.ID()
	keys := []sig.PublicKey{es[0].sc.SteerKey.Public()}
	var listed []view.Log
	for i, e := range es {
		var ls []view.Log
		if err := json.Unmarshal(e.fetchAny("/v1/rooms/"+e.room()+"/logs"), &ls); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			listed = ls
		} else if !slices.Equal(ls, listed) {
			t.Errorf("server %d lists the room's logs %+v, server 0 %+v", i, ls, listed)
		}
	}
	// A log a server, numbered from 1 (a database made after issue 31 has
	// no log 0), each as long as the decisions its server made.
	if len(listed) != 3 {
		t.Fatalf("the room's logs %+v: want one for each of the 3 servers", listed)
	}
	// (The servers here are one process: their "host pid" is one.)
	sizes := map[int64]bool{}
	total := int64(0)
	for i, l := range listed {
		if l.Log != int64(i)+1 || l.Server == "" || l.Sealed {
			t.Errorf("the log %+v: want number %d, its server named, open", l, i+1)
		}
		sizes[l.Size] = true
		total += l.Size
	}
	for i := range es {
		if !sizes[int64(len(byServer[i]))] {
			t.Errorf("no log is as long as server %d's %d decisions: %+v", i, len(byServer[i]), listed)
		}
	}
	if total != int64(len(decided)) {
		t.Errorf("the logs hold %d leaves of %d decisions", total, len(decided))
	}
	// Each log's checkpoint is one tree whichever server signs it.
	for _, l := range listed {
		var first declog.Checkpoint
		for i, e := range es {
			c, _, err := declog.OpenLog(e.fetchAny(fmt.Sprintf("/v1/rooms/%s/logs/%d/checkpoint", e.room(), l.Log)), room, l.Log, keys)
			if err != nil {
				t.Fatal(err)
			}
			if c.Size != l.Size || c.Server != l.Server || i > 0 && c.Root != first.Root {
				t.Errorf("server %d's checkpoint of log %d: %d leaves of server %q, root %v; want %d of %q, server 0's root %v", i, l.Log, c.Size, c.Server, c.Root, l.Size, l.Server, first.Root)
			}
			if i == 0 {
				first = c
			}
		}
	}
	rep, err := audit.Run(context.Background(), client.New(), es[1].ts.URL, room, audit.Options{Workers: 4,
		Recount: recount.Options{Staleness: 200_000}})
	if err != nil || !rep.OK() || rep.Fetched != len(decided) || len(rep.Logs) != 3 {
		t.Errorf("the audit through server 1: %v\n%v", err, rep)
	}
}

// §6, §9.2 (SPEC-NOTES "A decision comes after the sessions it counts"):
// a decision is ordered after every other server's decision whose session
// it counts, whatever the servers' clocks say, so that the auditor's
// recount, which replays a room's decisions by (t, log, index), counts what
// it stated. Here the room clock stands still, as two servers' clocks
// disagree: b places ten new sessions at t0, t0+1, …, t0+9; a, once it
// counts them, decides its first. On 9909ed0 a's decision had t0, before
// all of b's in the recount's order, and stated the ten (the recount: 0).
func TestSharedStoreDecisionAfterCounted(t *testing.T) {
	es := sharedEnvs(t, scenario.Spec{Periods: 6}, 2)
	a, b := es[0], es[1]
	a.postRecords(a.sc.Records, http.StatusOK)
	const theirs = 10
	var last uint64
	for range theirs {
		d, _ := b.audit(b.steer("/v1/steer", nil))
		last = max(last, d.T)
	}
	within(t, 2*time.Second, "a counting b's sessions", func() bool { return sessionsIn(statusLoads(a.status())) == theirs })
	d, _ := a.audit(a.steer("/v1/steer", nil))
	var stated uint32
	for _, p := range d.Pathways {
		stated += p.Load
	}
	if stated != theirs || d.T <= last {
		t.Errorf("a's decision at t %d states %d sessions; want b's %d, after b's last t %d", d.T, stated, theirs, last)
	}
	rep, err := audit.Run(context.Background(), client.New(), a.ts.URL, a.sc.Room.ID(), audit.Options{Workers: 4,
		Recount: recount.Options{Staleness: 200_000}})
	if err != nil || !rep.OK() || rep.Fetched != theirs+1 {
		t.Errorf("the audit: %v\n%v", err, rep)
	}
}

// SPEC-NOTES "A decision comes after the sessions it counts": server b's
// clock runs ahead of a's. Half a second ahead, a's decision is put just
// after b's latest (waisteer_pg_loads_after_others_total); three seconds
// ahead, beyond store.MergeLead, it is not (its window would move with b's
// clock): a counts b's sessions all the same, says so in
// waisteer_pg_loads_clock_behind_total and in one warning, and the audit
// reports the loads it stated.
func TestSharedStoreClockAhead(t *testing.T) {
	ca, cb := newClock(t0), newClock(t0+500_000)
	logs := []*lineLog{{}, {}}
	es := sharedEnvsOn(t, scenario.Spec{Periods: 6}, []*atomic.Uint64{ca, cb}, logs)
	a, b := es[0], es[1]
	a.postRecords(a.sc.Records, http.StatusOK)
	steerB := func(k int) (last uint64) {
		for range k {
			d, _ := b.audit(b.steer("/v1/steer", nil))
			last = max(last, d.T)
		}
		return last
	}
	last := steerB(3)
	within(t, 2*time.Second, "a counting b's 3 sessions", func() bool { return sessionsIn(statusLoads(a.status())) == 3 })
	d, _ := a.audit(a.steer("/v1/steer", nil))
	if d.T != last+1 {
		t.Errorf("a's decision with b half a second ahead: t %d, want b's latest %d + 1", d.T, last)
	}
	if got := metricLine(t, a, "waisteer_pg_loads_after_others_total"); got != "1" {
		t.Errorf("waisteer_pg_loads_after_others_total %s, want 1", got)
	}
	// A second later on a's clock (past δ of every decision so far), b's
	// is 3 s ahead of it.
	ca.Store(t0 + 1_000_000)
	cb.Store(t0 + 4_000_000)
	steerB(3)
	within(t, 2*time.Second, "a counting b's 6 sessions and its own", func() bool { return sessionsIn(statusLoads(a.status())) == 7 })
	d, _ = a.audit(a.steer("/v1/steer", nil))
	// (Its own clock's instant, one µs on: a's status read the table at
	// that instant.)
	if d.T != t0+1_000_001 {
		t.Errorf("a's decision with b 3 s ahead: t %d, want its own clock's %d + 1", d.T, t0+1_000_000)
	}
	if got := metricLine(t, a, "waisteer_pg_loads_clock_behind_total"); got != "1" {
		t.Errorf("waisteer_pg_loads_clock_behind_total %s, want 1", got)
	}
	within(t, 2*time.Second, "a's warning", func() bool {
		var n int
		for _, l := range logs[0].since(0) {
			if strings.Contains(l, "clock is a second or more ahead") {
				n++
			}
		}
		return n == 1
	})
	rep, err := audit.Run(context.Background(), client.New(), a.ts.URL, a.sc.Room.ID(), audit.Options{Workers: 4,
		Recount: recount.Options{Staleness: 200_000}})
	// The audit reports a's last decision, which counted b's sessions
	// of 3 s later; b's next decisions look late to it by as much, so
	// that it may report them too.
	reported := false
	if err == nil && rep.Recount != nil {
		for _, m := range rep.Recount.Loads {
			reported = reported || m.Log == 1 && m.T == d.T
		}
	}
	if err != nil || rep.OK() || !reported {
		t.Errorf("the audit: want a's last decision's loads reported: %v\n%v", err, rep)
	}
}
