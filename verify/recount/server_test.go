package recount

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// The server's own table of loads (store.MemLoads) and rule
// (decision.Ranking), driven as internal/server drives them: the recount,
// which shares no code with them, must agree with every load they state.

// serverGrace is the server's default session_grace.
const serverGrace = 20_000_000

// simServer is one server: its table, and how far it has read the others'
// decisions.
type simServer struct {
	loads *store.MemLoads
	read  int
}

// made is a decision as the sim's shared store holds it.
type made struct {
	server  int
	session report.Session
	n       int
	first   int
	expires uint64
	t       uint64
}

// simSpec says what a simulated run does.
type simSpec struct {
	policies []*policy.Policy // in the order the operator installs them
	servers  int
	decide   int    // decisions in all
	sessions int    // the pool of sessions that return
	gap      int    // the mean µs between decisions
	lag      uint64 // the most a server reads the others' decisions late, µs
	sign     bool
}

// simulate runs the servers. Each decision goes to a random server, which
// first reads the others' decisions made more than a random lag of at most
// spec.lag before (Merge, as store/postgres does), then decides under the
// room's lock (Steer), as internal/server's decide does. The operator
// installs the next policy now and then; the table is emptied when its ids
// differ (internal/server/roomhealth.go).
func simulate(t testing.TB, rng *rand.Rand, spec simSpec) []Entry {
	t.Helper()
	ctx := context.Background()
	key := scenario.SteerKey()
	servers := make([]simServer, spec.servers)
	for i := range servers {
		servers[i].loads = store.NewLoads()
	}
	var shared []made
	var out []Entry
	var tNow uint64 = 1_000_000
	pol := 0
	p := spec.policies[0]
	var rk *decision.Ranking
	last := map[report.Session]int{} // a session's last first pathway, for its report
	equal := false                   // whether the previous decision's T is the one before's
	for range spec.decide {
		if len(spec.policies) > 1 && rng.IntN(spec.decide/len(spec.policies)+1) == 0 {
			next := spec.policies[(pol+1)%len(spec.policies)]
			if !slices.Equal(next.IDs(), p.IDs()) {
				for i := range servers {
					if err := servers[i].loads.Reset(ctx, p.Room); err != nil {
						t.Fatal(err)
					}
				}
				clear(last)
			}
			pol = (pol + 1) % len(spec.policies)
			p, rk = next, nil
		}
		// One server's Ts strictly increase; two servers' may be equal.
		srv := rng.IntN(spec.servers)
		s := sessionNo(rng.IntN(spec.sessions))
		// Two decisions at most share a T, of two servers and sessions.
		gap := uint64(rng.ExpFloat64() * float64(spec.gap))
		if spec.servers > 1 && rng.IntN(30) == 0 {
			gap = 0
		}
		if len(shared) > 0 {
			prev := shared[len(shared)-1]
			if gap == 0 && (equal || prev.server == srv || prev.session == s) {
				gap = 1
			}
		}
		tNow += gap
		equal = gap == 0
		if rk == nil || !rk.Covers(tNow) {
			var err error
			if rk, err = decision.RankAt(p, p.Digest(), tNow, evidence.NewIndex()); err != nil {
				t.Fatal(err)
			}
		}

		sv := &servers[srv]
		lag := uint64(rng.Float64() * float64(spec.lag))
		for sv.read < len(shared) && shared[sv.read].t+lag < tNow {
			if m := shared[sv.read]; m.server != srv {
				sv.loads.Merge(p.Room, m.n, m.session, m.first, m.t, m.expires, tNow)
			}
			sv.read++
		}

		var rep report.Report
		if c, ok := last[s]; ok && rng.IntN(2) == 0 {
			rep.Present, rep.Pathway = report.HasPathway, uint8(c)
			if rng.IntN(4) == 0 {
				rep.Present |= report.HasBuffer
				rep.Buffer = uint64(rng.IntN(8000))
			}
		}
		draw := decision.Draw(p.Digest(), s)
		var o decision.Outcome
		var loads []uint32
		n := len(p.Pathways)
		// The decision's T is the instant the table read its loads at,
		// as the server takes it (steer.go's decideLoads).
		err := sv.loads.Steer(ctx, p.Room, n, s, tNow, func(l []uint32, at uint64) (int, uint64, error) {
			var err error
			if o, err = rk.DecideDrawn(rep, draw, l); err != nil {
				return 0, 0, err
			}
			loads = slices.Clone(l)
			tNow = at
			return int(o.First), at + uint64(o.TTL)*1_000_000 + serverGrace, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		d := new(decision.Decision)
		if err := rk.Fill(d, &o, key.Public(), tNow, report.HLS, rep, s, loads); err != nil {
			t.Fatal(err)
		}
		if spec.sign {
			d, err = decision.Parse(decision.Sign(d, key))
			if err != nil {
				t.Fatal(err)
			}
		}
		last[s] = int(o.First)
		shared = append(shared, made{server: srv, session: s, n: n, first: int(o.First), expires: tNow + uint64(o.TTL)*1_000_000 + serverGrace, t: tNow})
		out = append(out, Entry{Index: int64(len(out)), Decision: d, Policy: p})
	}
	return out
}

// simPolicies are the operator's policies of a sim: abc with capacities of
// 20, the same ids with b's capacity 0 (the health policy), then bca.
func simPolicies(t testing.TB, room string) []*policy.Policy {
	abc := pathways("a", "b", "c")
	for i := range abc {
		abc[i].Capacity = 20
	}
	abc[1].MinSharePPM = 100_000
	health := slices.Clone(abc)
	health[1].Capacity = 0
	bca := []scenario.Pathway{abc[1], abc[2], abc[0]}
	return []*policy.Policy{build(t, room, abc, nil), build(t, room, health, nil), build(t, room, bca, nil)}
}

// TestOneServer_9_2: the loads one server states, decided with its own
// table and rule under policies that keep and that reset the table, are
// the recount's, and so are its draws and share placements; one load one
// higher than it is caught at its decision, and nowhere else.
func TestOneServer_9_2(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	entries := simulate(t, rng, simSpec{
		policies: simPolicies(t, "one server"), servers: 1, decide: 3000, sessions: 150, gap: 150_000, sign: true,
	})
	for k := range entries {
		if err := entries[k].Decision.VerifySignature(); err != nil {
			t.Fatal(err)
		}
	}
	r := mustRecount(t, entries, Options{})
	if !r.OK() || r.LoadsMatch != len(entries) || r.Resets == 0 {
		t.Fatalf("not every load matches, or no reset: %s", r)
	}
	// The stream has loads to count, capacities reached, and share
	// placements.
	var loaded, full, share int
	for _, e := range entries {
		for _, ps := range e.Decision.Pathways {
			loaded += b2i(ps.Load > 0)
			full += b2i(ps.Load >= 20)
		}
		share += b2i(e.Decision.Reason == decision.Share)
	}
	if loaded == 0 || full == 0 || share == 0 {
		t.Fatalf("a stream with %d loads above 0, %d at capacity, %d shares", loaded, full, share)
	}

	k := 2222
	d := entries[k].Decision
	i := int(d.Priority[0])
	was := d.Pathways[i].Load
	d.Pathways[i].Load++
	r = mustRecount(t, entries, Options{})
	want := LoadMismatch{At: At{Index: int64(k), Digest: d.Digest(), T: d.T}, Pathway: i, ID: entries[k].Policy.Pathways[i].ID, Stated: was + 1, Recount: was}
	if r.LoadsMismatch != 1 || len(r.Loads) != 1 || r.Loads[0] != want {
		t.Errorf("one load one higher: %d mismatches %+v, want %+v", r.LoadsMismatch, r.Loads, want)
	}
}

// TestServers_9_2 is SPEC-NOTES "Loads across servers": three servers that
// read each other's decisions up to 100 ms late state loads the recount
// accepts with δ = 100 ms, and not all exactly. The policy's TTLs are
// equal, so that a server's Merge (the later expiry wins) and the recount
// (the later T wins) agree on which decision is a session's latest.
func TestServers_9_2(t *testing.T) {
	ps := pathways("a", "b", "c")
	for i := range ps {
		ps[i].Capacity = 25
	}
	p := build(t, "servers", ps, func(p *policy.Policy) { p.MinTTLs = p.TTLs })
	rng := rand.New(rand.NewPCG(21, 22))
	const delta = 100_000
	entries := simulate(t, rng, simSpec{
		policies: []*policy.Policy{p}, servers: 3, decide: 4000, sessions: 200, gap: 30_000, lag: delta,
	})
	// The log's order is the commit order, close to T order.
	for k := 1; k < len(entries); k++ {
		if rng.IntN(8) == 0 {
			entries[k-1].Index, entries[k].Index = entries[k].Index, entries[k-1].Index
		}
	}
	r := mustRecount(t, entries, Options{Staleness: delta})
	if !r.OK() || r.LoadsStale == 0 || r.EqualT == 0 {
		t.Fatalf("with δ: %s", r)
	}
	if r := mustRecount(t, entries, Options{}); r.LoadsMismatch == 0 {
		t.Errorf("exactly, every load of three servers matches: %s", r)
	}
}

// BenchmarkRecount recounts 100 000 decisions of one server.
func BenchmarkRecount(b *testing.B) {
	rng := rand.New(rand.NewPCG(31, 32))
	entries := simulate(b, rng, simSpec{
		policies: simPolicies(b, "bench"), servers: 1, decide: 100_000, sessions: 5000, gap: 5_000,
	})
	runs := 0
	for b.Loop() {
		r, err := Recount(entries, Options{})
		if err != nil || !r.OK() {
			b.Fatal(err, r)
		}
		runs++
	}
	b.ReportMetric(float64(len(entries)*runs)/b.Elapsed().Seconds(), "decisions/s")
}
