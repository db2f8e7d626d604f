package conformance

import (
	"fmt"
	"slices"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// Case is one vector before its outcome is written: the verifier's input and,
// for a refusal, the code and place the text gives it.
type Case struct {
	Name       string
	Descriptor []byte
	KeyLogHead []byte // nil: none given
	Policy     []byte
	Decision   []byte
	Records    [][]byte
	Manifest   []byte // nil: none given
	// Want is the refusal's code and Where its place; "" for an accepted
	// vector.
	Want  reason.Code
	Where string

	// keep leaves Records as they are: the case gives records no decision
	// names on purpose. Other cases give only the records their decision
	// names (trim).
	keep bool
}

// t0 is the instant of the cases' decisions: with the default window of five
// periods it is [3P, 8P).
const t0 = 8*scenario.Period + 10_000_000

// roomName is the name of the corpus's room (extension §11: "a room with its
// key log"). Every scenario with an origin is built in it, so that most
// vectors share the file's room and carry none of their own.
const roomName = "wai steering conformance"

// corpusEntries are the entries of the corpus room's key log (COMPANION §4):
// the steering key with every energy authority, and each hop of every
// scenario with live/hop and the classes the corpus has it state, no more,
// so that a hop stating another class is hop_not_authorised. NewTestRoom adds
// the authority's entry.
func corpusEntries() []room.Entry {
	es := []room.Entry{room.SteerEntry(scenario.SteerKey().Public(),
		evidence.ModelBased, evidence.Estimator, evidence.OnChipCounter, evidence.CalibratedInstrument)}
	hop := func(id string, j int, classes ...evidence.Class) {
		es = append(es, room.HopEntry(scenario.HopKey(id, j).Public(), classes...))
	}
	mb, ci, oc := evidence.ModelBased, evidence.CalibratedInstrument, evidence.OnChipCounter
	hop("a", 0, mb, ci) // "mixed classes": a's hops are calibrated
	hop("a", 1, mb, ci)
	hop("b", 0, mb)
	hop("b", 1, mb, oc) // "hops of two classes in one pathway"
	hop("c", 0, mb, oc) // "mixed classes": c's hops are on-chip counters
	hop("c", 1, mb, oc)
	hop("a-clone", 0, mb)
	hop("b-host", 0, mb)
	hop("c-params", 0, mb)
	for _, id := range idsPathways {
		hop(id, 0, evidence.Estimator)
		hop(id, 1, evidence.Estimator)
	}
	return es
}

// idsPathways are the ids of the scenario whose ids use every character
// §3.3 allows.
var idsPathways = [3]string{"CDN-A", "cdn_b.2", "edge.c"}

func session(b byte) report.Session { return report.Session{0: b, 15: 0x5a} }

// build builds a scenario in the corpus room: its name and key log are the
// corpus's, the key log edited by spec.Entries when given (the descriptor,
// and so the room id, stays the same). A room with no origin keeps its own
// name. Periods 0 means 10; -1 means no records.
func build(spec scenario.Spec) *scenario.Scenario {
	if spec.Periods == 0 {
		spec.Periods = 10
	}
	if !spec.NoOrigin {
		spec.Name = roomName
		edit := spec.Entries
		spec.Entries = func([]room.Entry) []room.Entry {
			es := corpusEntries()
			if edit != nil {
				es = edit(es)
			}
			return es
		}
	}
	sc, err := scenario.Build(spec)
	if err != nil {
		panic(fmt.Sprintf("conformance: %v", err)) // the cases are fixed: a failure is a bug here
	}
	return sc
}

func decide(sc *scenario.Scenario, req scenario.Request) *scenario.Made {
	if req.T == 0 {
		req.T = t0
	}
	m, err := sc.Decide(req)
	if err != nil {
		panic(fmt.Sprintf("conformance: %v", err))
	}
	return m
}

// decideWith makes the decision the rule gives for req under policy p (which
// Parse returned) over the records of x, signed by k: for a policy the
// scenario did not sign.
func decideWith(sc *scenario.Scenario, p *policy.Policy, x *evidence.Index, k sig.PrivateKey, req scenario.Request) *scenario.Made {
	if req.T == 0 {
		req.T = t0
	}
	if req.Protocol == 0 {
		req.Protocol = report.HLS
	}
	if req.Loads == nil {
		req.Loads = make([]uint32, len(p.Pathways))
	}
	rk := must(decision.RankAt(p, p.Digest(), req.T, x))
	d := must(rk.Decision(k.Public(), req.T, req.Protocol, req.Report, req.Session, req.Loads))
	raw, digest := decision.AppendSigned(nil, d, k)
	return &scenario.Made{Decision: d, Bytes: raw, Digest: digest, Manifest: decision.Manifest(p, d, digest)}
}

func accepted(name string, sc *scenario.Scenario, m *scenario.Made) Case {
	return trim(Case{
		Name: name, Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes,
		Policy: sc.PolicyBytes, Decision: m.Bytes, Records: sc.Records, Manifest: m.Manifest,
	})
}

// trim keeps, of a case's records, those whose digest (as a verifier finds
// it, COMPANION §6) its decision names, in their order and with any given
// twice: the others cannot change what the verifier gives (§9.1 step 4
// finds records by digest alone). A decision that does not read is left
// with the records it has.
func trim(c Case) Case {
	if c.keep {
		return c
	}
	d, err := decision.Parse(c.Decision)
	if err != nil {
		return c
	}
	named := map[sig.Hash]bool{}
	for i := range d.Pathways {
		for _, h := range d.Pathways[i].Records {
			named[h] = true
		}
	}
	c.Records = slices.DeleteFunc(slices.Clone(c.Records), func(raw []byte) bool { return !named[evidence.NamedDigest(raw)] })
	return c
}

// reportOf is a report with c, T and B where given (negative: absent).
func reportOf(c int, T, B int64) report.Report {
	var r report.Report
	if c >= 0 {
		r.Present |= report.HasPathway
		r.Pathway = uint8(c)
	}
	if T >= 0 {
		r.Present |= report.HasThroughput
		r.Throughput = uint64(T)
	}
	if B >= 0 {
		r.Present |= report.HasBuffer
		r.Buffer = uint64(B)
	}
	return r
}

// sessionInBand finds a session whose draw falls in pathway i's band, or
// outside every band when i < 0.
func sessionInBand(p *policy.Policy, i int) report.Session {
	for k := 0; k < 1<<16; k++ {
		s := report.Session{0: byte(k), 1: byte(k >> 8), 15: 0xb0}
		j, ok := decision.Band(p, decision.Draw(p.Digest(), s))
		if (i < 0 && !ok) || (ok && j == i) {
			return s
		}
	}
	panic("conformance: no session found for the band")
}

// The scenarios whose policies the requests also use (requests.go).
func oneClassSpec() scenario.Spec { return scenario.Spec{} }

func clonesSpec() scenario.Spec {
	pws := scenario.DefaultPathways()
	pws = append(pws,
		cloneOf(pws[0], "a-clone", "edge2.example", []policy.Param{{Name: "cdn", Value: "two"}, {Name: "tok", Value: "x%20y"}}, 10_000_000),
		cloneOf(pws[1], "b-host", "edge3.example", nil, 50_000_000),
		cloneOf(pws[2], "c-params", "", []policy.Param{{Name: "via", Value: "c"}}, 60_000_000),
	)
	return scenario.Spec{Pathways: pws}
}

func idsSpec() scenario.Spec {
	pws := scenario.DefaultPathways()
	for i := range pws {
		pws[i].ID = idsPathways[i]
		for j := range pws[i].Hops {
			pws[i].Hops[j].Class = evidence.Estimator
		}
	}
	return scenario.Spec{Pathways: pws, Policy: func(p *policy.Policy) {
		p.ServerURI = "https://steer.example/v1/steer?room=ids&v=2"
		p.ReloadURI = "https://steer.example/v1/steer?room=ids"
		p.Initial = 1
	}}
}

// Accepted returns the accepted vectors §11 lists.
func Accepted() []Case {
	var cs []Case
	add := func(name string, sc *scenario.Scenario, m *scenario.Made) { cs = append(cs, accepted(name, sc, m)) }

	sc := build(oneClassSpec())
	add("three pathways, one class", sc, decide(sc, scenario.Request{Session: session(1)}))

	// Mixed classes: the calibrated pathway is dearer but ranks first (§6.2).
	pws := scenario.DefaultPathways()
	pws[0].Hops[0].Class, pws[0].Hops[1].Class = evidence.CalibratedInstrument, evidence.CalibratedInstrument
	pws[2].Hops[0].Class, pws[2].Hops[1].Class = evidence.OnChipCounter, evidence.OnChipCounter
	sc = build(scenario.Spec{Pathways: pws})
	add("mixed classes, ordered by class", sc, decide(sc, scenario.Request{Session: session(2)}))

	// An unmetered hop: the cheapest metered hops, ranked last (§5.4, §6.2).
	pws = scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.Unmetered
	pws[1].Hops[0].Joules = 1_000
	sc = build(scenario.Spec{Pathways: pws})
	add("unmetered hop ranked after figures", sc, decide(sc, scenario.Request{Session: session(3)}))

	// Stale: the cheapest pathway's edge hop lacks a period of the window.
	sc = build(scenario.Spec{Periods: 5})
	for k := uint64(5); k < 10; k++ {
		for i := range 3 {
			for j := range 2 {
				if i == 1 && j == 0 && k == 6 {
					continue
				}
				must(sc.AddRecord(i, j, k*scenario.Period, (k+1)*scenario.Period, nil))
			}
		}
	}
	add("stale evidence", sc, decide(sc, scenario.Request{Session: session(4)}))

	sc = build(scenario.Spec{})
	// At its floor: T sustains tier 1 = F (§6.4 step 2).
	add("client at its floor held", sc, decide(sc, scenario.Request{Session: session(5), Report: reportOf(2, 1_600_000, -1)}))
	// A short buffer (§6.4 step 1).
	add("client with a short buffer held", sc, decide(sc, scenario.Request{Session: session(6), Report: reportOf(2, 9_000_000, 1_000)}))

	// Hysteresis: b is within the margin of a, then a period later beyond it.
	pws = scenario.DefaultPathways()[:2]
	sc = build(scenario.Spec{Pathways: pws, Periods: -1})
	for k := uint64(0); k < 10; k++ {
		for i := range 2 {
			for j := range 2 {
				edit := func(r *evidence.Record) {
					a := scenario.DefaultPathways()[0].Hops[j].Joules
					if i == 1 {
						r.Joules = a * 99 / 100
						if k >= 8 {
							r.Joules = a / 2
						}
					}
				}
				must(sc.AddRecord(i, j, k*scenario.Period, (k+1)*scenario.Period, edit))
			}
		}
	}
	add("hysteresis holds", sc, decide(sc, scenario.Request{Session: session(7), Report: reportOf(0, 9_000_000, 20_000)}))
	add("hysteresis moves a period later", sc, decide(sc, scenario.Request{T: t0 + scenario.Period, Session: session(7), Report: reportOf(0, 9_000_000, 20_000)}))

	// Clones: with HOST and PARAMS, HOST only, PARAMS only.
	sc = build(clonesSpec())
	add("pathway clones", sc, decide(sc, scenario.Request{Session: session(8)}))

	// A session placed by its band, and one outside every band (§6.3).
	pws = scenario.DefaultPathways()
	pws[2].MinSharePPM = 300_000
	pws[0].Hops[1].Class = evidence.Unmetered
	pws[0].MinSharePPM = 100_000
	sc = build(scenario.Spec{Pathways: pws})
	add("session placed by its band", sc, decide(sc, scenario.Request{Session: sessionInBand(sc.Policy, 2)}))
	add("session outside the bands, unmetered last", sc, decide(sc, scenario.Request{Session: sessionInBand(sc.Policy, -1)}))

	// Capacity and latency (§6.1).
	pws = scenario.DefaultPathways()
	pws[1].Capacity = 40
	pws[2].LatencyMs = 800
	sc = build(scenario.Spec{Pathways: pws})
	add("pathway at its capacity and one past the latency ceiling", sc,
		decide(sc, scenario.Request{Session: session(9), Loads: []uint32{12, 40, 3}}))
	add("client on the pathway at its capacity", sc,
		decide(sc, scenario.Request{Session: session(10), Report: reportOf(1, 9_000_000, 20_000), Loads: []uint32{12, 40, 3}}))

	// The per-second basis (§5.3).
	pws = scenario.DefaultPathways()
	pws[0].Hops[0].SubscriberUs = [8]uint64{30_000_000, 50_000_000, 90_000_000}
	pws[1].Hops[0].SubscriberUs = [8]uint64{0, 10_000_000, 20_000_000}
	sc = build(scenario.Spec{Pathways: pws, Policy: func(p *policy.Policy) { p.Basis = policy.PerSecond }})
	add("per-second basis", sc, decide(sc, scenario.Request{Session: session(11)}))

	// DASH, with queryBeforeStart and an & in the server URI.
	sc = build(scenario.Spec{Policy: func(p *policy.Policy) {
		p.Flags = policy.FlagQueryBeforeStart
		p.ServerURI = "https://steer.example/v1/steer?room=1&x=2"
		p.ReloadURI = "https://steer.example/v1/steer?room=1"
	}})
	add("DASH", sc, decide(sc, scenario.Request{Session: session(12), Protocol: report.DASH, Report: reportOf(1, 5_000_000, -1)}))

	// No pathway within the limits.
	pws = scenario.DefaultPathways()
	for i := range pws {
		pws[i].LatencyMs = 900
	}
	sc = build(scenario.Spec{Pathways: pws})
	add("no pathway within the limits", sc, decide(sc, scenario.Request{Session: session(13), Report: reportOf(2, -1, -1)}))

	// Hops of two classes in one pathway: mixed, no figure.
	pws = scenario.DefaultPathways()
	pws[1].Hops[1].Class = evidence.OnChipCounter
	sc = build(scenario.Spec{Pathways: pws})
	add("hops of two classes in one pathway", sc, decide(sc, scenario.Request{Session: session(14)}))

	// Empty: a pathway whose edge hops delivered nothing.
	pws = scenario.DefaultPathways()
	pws[1].Hops[0].Bytes = 0
	sc = build(scenario.Spec{Pathways: pws})
	add("empty pathway", sc, decide(sc, scenario.Request{Session: session(15)}))
	return cs
}

// Extra returns accepted vectors beyond §11's list: the base each refused
// vector is a control of, the room with no origin, a vector with no
// manifest, records given in another order, twice or beside records no
// decision names, and ids of every character §3.3 allows.
func Extra() []Case {
	var cs []Case
	f := newFixture(refusalSpec())
	cs = append(cs, f.accept("base of the refused vectors"))

	// No manifest given: §9.1 step 7 does not run, and the facts still
	// hold the manifest §8.1 writes (§9.3).
	c := f.accept("no manifest given")
	c.Manifest = nil
	cs = append(cs, c)

	// The records in the reverse order, and beside them records the
	// decision does not name: found by digest (§9.1 step 4.1, COMPANION §8
	// "in any order").
	c = f.accept("records in reverse order, beside records not named")
	c.Records = slices.Clone(c.Records)
	slices.Reverse(c.Records)
	c.Records = append(c.Records, f.sc.Records[0], f.sc.Records[len(f.sc.Records)-1])
	c.keep = true
	cs = append(cs, c)

	// A record given twice, the second copy with a broken signature: of two
	// records with one digest the first is used (COMPANION §6).
	c = f.accept("a record given twice, the first used")
	c.Records = append(slices.Clone(c.Records), flipLast(f.record(1, 0)))
	cs = append(cs, trim(c))

	// A room with no origin has no key log: only its authority signs, and
	// no hop, so no pathway has a figure (§3.5, COMPANION §4.2). A client
	// on b stays, b having a's rank (4): §6.4 step 5.
	no := newNoOrigin()
	cs = append(cs, no.accept("room with no origin: no figure, client held"))
	c = no.accept("room with no origin: a key log head given is not read")
	c.KeyLogHead = []byte{0x82, 0x40}
	cs = append(cs, c)

	// A client with a short buffer held on b, which has no figure (its hops
	// of two classes), a with none either (unmetered): §6.4 step 1 holds it
	// whatever its pathway's evidence (§12). The base of two refusals at
	// §9.1 step 6.
	cs = append(cs, newHeld().accept("client with a short buffer held on a pathway with no figure"))

	// Ids of capitals, digits, dots, dashes and underscores, figures of
	// class Estimator, and a DASH report read from a request of the corpus
	// ("dash: ids with dots, dashes and underscores").
	sc := build(idsSpec())
	cs = append(cs, accepted("ids of every allowed character, Estimator figures, DASH", sc,
		decide(sc, scenario.Request{Session: session(16), Protocol: report.DASH, Report: reportOf(2, 6_000_000, -1)})))
	return cs
}

// noOrigin is a room with no origin and a policy its authority signed, with
// the records its hops signed (which no key log authorises).
type noOrigin struct {
	sc     *scenario.Scenario
	policy []byte
	p      *policy.Policy
	m      *scenario.Made
}

func newNoOrigin() noOrigin {
	sc := build(scenario.Spec{Name: "wai steering conformance, no origin", NoOrigin: true})
	p := must(policy.Parse(sc.PolicyBytes))
	raw := signPolicy(p, sc.Room.AuthorityKey)
	p = must(policy.Parse(raw))
	m := decideWith(sc, p, evidence.NewIndex(), sc.Room.AuthorityKey, scenario.Request{Session: session(0x50), Report: reportOf(1, -1, -1)})
	return noOrigin{sc: sc, policy: raw, p: p, m: m}
}

func (n noOrigin) accept(name string) Case {
	return trim(Case{Name: name, Descriptor: n.sc.Room.DescriptorBytes, Policy: n.policy,
		Decision: n.m.Bytes, Manifest: n.m.Manifest, Records: n.sc.Records})
}

func cloneOf(base scenario.Pathway, id, host string, params []policy.Param, joules uint64) scenario.Pathway {
	c := base
	c.ID, c.CloneOf, c.Host, c.Params = id, base.ID, host, params
	c.Hops = []scenario.Hop{base.Hops[0]}
	c.Hops[0].Joules = joules
	return c
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("conformance: %v", err))
	}
	return v
}
