// Package scenario builds complete, deterministic steering scenarios: a room
// with its key log, a signed policy, the pathways' hops and their signed
// per-hop records, and decisions made from them. Tests, the conformance
// corpus and the demo use it; every key is room.TestKey of a label, so the
// same spec gives the same bytes.
package scenario

import (
	"fmt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// Hop describes one hop of a pathway and what each of its records states per
// period.
type Hop struct {
	Place        policy.Place
	Class        evidence.Class // the class of its records; 0 for unmetered
	Joules       uint64         // µJ per period (ignored when unmetered)
	Bytes        uint64         // media bytes out per period
	SubscriberUs [8]uint64      // per period
}

// Pathway describes one pathway.
type Pathway struct {
	ID          string
	CloneOf     string // the base pathway's ID; "" for a pathway of the content description
	Host        string
	Params      []policy.Param
	TopTier     uint8
	LatencyMs   uint32
	Capacity    uint32
	MinSharePPM uint32
	Hops        []Hop
}

// Spec describes a scenario. Policy fields left zero take the defaults of
// Default.
type Spec struct {
	Name     string // the room's name
	Pathways []Pathway
	// Policy is applied to the policy before signing, for fields the spec
	// does not name (limits, TTLs, URIs, basis, floor, tiers, timing).
	Policy func(p *policy.Policy)
	// NoOrigin builds a room with no origin and so no key log.
	NoOrigin bool
	// Entries, when given, edits the key log's entries before the head is
	// signed (to revoke a key, or add or drop one).
	Entries func([]room.Entry) []room.Entry
	// Periods is how many periods of records each hop signs, from 0.
	Periods int
}

// Scenario is a built spec.
type Scenario struct {
	Room        *room.TestRoom
	SteerKey    sig.PrivateKey
	HopKeys     [][]sig.PrivateKey // by pathway, then hop
	Policy      *policy.Policy
	PolicyBytes []byte
	Records     [][]byte // every record signed, in signing order
	Index       *evidence.Index
	spec        Spec
}

// Period is the default policy's P: one minute.
const Period = 60_000_000

// DefaultPathways are three pathways with figures of one class (ModelBased)
// on one edge hop and one interior hop each, the cheapest "b".
func DefaultPathways() []Pathway {
	mk := func(id string, joules uint64) Pathway {
		return Pathway{
			ID: id, TopTier: 2, LatencyMs: 100, Capacity: policy.Unlimited,
			Hops: []Hop{
				{Place: policy.Edge, Class: evidence.ModelBased, Joules: joules, Bytes: 1_000_000_000, SubscriberUs: [8]uint64{0, 0, 60_000_000, 0, 0, 0, 0, 0}},
				{Place: policy.Interior, Class: evidence.ModelBased, Joules: joules / 2, Bytes: 900_000_000},
			},
		}
	}
	return []Pathway{mk("a", 30_000_000), mk("b", 20_000_000), mk("c", 40_000_000)}
}

// defaults fills the policy fields a spec leaves to Default.
func defaults(p *policy.Policy) {
	p.PeriodUs = Period
	p.WindowUs = 5 * Period
	p.LagUs = 10_000_000
	p.Basis = policy.PerByte
	p.Floor = 1
	p.LatencyCeilingMs = 500
	p.MinBufferMs = 4000
	p.HysteresisPPM = 50_000
	p.TTLs = 300
	p.MinTTLs = 30
	p.Tiers = []uint64{500_000, 1_500_000, 4_000_000}
	p.ServerURI = "https://steer.example/v1/steer"
	p.ReloadURI = "https://steer.example/v1/steer"
	p.DecisionURI = "https://steer.example/v1/decisions/"
}

// HopKey is the fixed key of hop j of the pathway with the given ID.
func HopKey(pathway string, j int) sig.PrivateKey {
	return room.TestKey(fmt.Sprintf("hop %s/%d", pathway, j))
}

// SteerKey is the fixed steering key.
func SteerKey() sig.PrivateKey { return room.TestKey("steering key") }

// Build builds the room, the policy and the records of s.
func Build(s Spec) (*Scenario, error) {
	if s.Name == "" {
		s.Name = "scenario"
	}
	if s.Pathways == nil {
		s.Pathways = DefaultPathways()
	}
	sc := &Scenario{SteerKey: SteerKey(), Index: evidence.NewIndex(), spec: s}
	p := &policy.Policy{}
	defaults(p)
	ids := map[string]int{}
	var entries []room.Entry
	allClasses := []evidence.Class{evidence.ModelBased, evidence.Estimator, evidence.OnChipCounter, evidence.CalibratedInstrument}
	entries = append(entries, room.SteerEntry(sc.SteerKey.Public(), allClasses...))
	for i, ps := range s.Pathways {
		pw := policy.Pathway{
			ID: ps.ID, Base: policy.NoBase, Host: ps.Host, Params: ps.Params,
			TopTier: ps.TopTier, LatencyMs: ps.LatencyMs, Capacity: ps.Capacity, MinSharePPM: ps.MinSharePPM,
		}
		if ps.CloneOf != "" {
			b, ok := ids[ps.CloneOf]
			if !ok {
				return nil, fmt.Errorf("scenario: pathway %q clones %q, not a pathway before it", ps.ID, ps.CloneOf)
			}
			pw.Base = uint8(b)
		}
		ids[ps.ID] = i
		keys := make([]sig.PrivateKey, len(ps.Hops))
		for j, h := range ps.Hops {
			keys[j] = HopKey(ps.ID, j)
			pw.Hops = append(pw.Hops, policy.Hop{Key: keys[j].Public(), Place: h.Place})
			if h.Class == evidence.Unmetered {
				entries = append(entries, room.HopEntry(keys[j].Public()))
			} else {
				entries = append(entries, room.HopEntry(keys[j].Public(), h.Class))
			}
		}
		sc.HopKeys = append(sc.HopKeys, keys)
		p.Pathways = append(p.Pathways, pw)
	}
	var err error
	if s.Entries != nil {
		entries = s.Entries(entries)
	}
	if s.NoOrigin {
		sc.Room, err = room.NewTestRoomNoOrigin(s.Name)
	} else {
		sc.Room, err = room.NewTestRoom(s.Name, entries...)
	}
	if err != nil {
		return nil, err
	}
	p.Room = sc.Room.ID()
	if s.Policy != nil {
		s.Policy(p)
	}
	if sc.PolicyBytes, err = policy.Sign(p, sc.SteerKey); err != nil {
		return nil, err
	}
	if sc.Policy, err = policy.Parse(sc.PolicyBytes); err != nil {
		return nil, err
	}
	for k := range s.Periods {
		start := uint64(k) * p.PeriodUs
		for i, ps := range s.Pathways {
			for j := range ps.Hops {
				if _, err := sc.AddRecord(i, j, start, start+p.PeriodUs, nil); err != nil {
					return nil, err
				}
			}
		}
	}
	return sc, nil
}

// Record is the record hop j of pathway i states for [start, end) by its
// spec, before signing.
func (sc *Scenario) Record(i, j int, start, end uint64) *evidence.Record {
	h := sc.spec.Pathways[i].Hops[j]
	scale := func(v uint64) uint64 { // per period, scaled to the span
		return v / sc.Policy.PeriodUs * (end - start)
	}
	r := &evidence.Record{
		Room: sc.Policy.Room, Hop: sc.HopKeys[i][j].Public(), Start: start, End: end,
		Class: h.Class, Sessions: 10,
		Tracks: []evidence.Track{{Kind: evidence.KindMedia, Direction: evidence.DirOut, Bytes: h.Bytes}},
	}
	if (end-start)%sc.Policy.PeriodUs == 0 {
		scale = func(v uint64) uint64 { return v * ((end - start) / sc.Policy.PeriodUs) }
	}
	if h.Class != evidence.Unmetered {
		r.Joules = max(1, scale(h.Joules))
	}
	r.Tracks[0].Bytes = scale(h.Bytes)
	for c := range r.SubscriberUs {
		r.SubscriberUs[c] = scale(h.SubscriberUs[c])
	}
	return r
}

// AddRecord signs the record of hop j of pathway i for [start, end), after
// edit changes it when given, and adds it to the scenario's records and
// index. It returns the record's bytes.
func (sc *Scenario) AddRecord(i, j int, start, end uint64, edit func(r *evidence.Record)) ([]byte, error) {
	r := sc.Record(i, j, start, end)
	if edit != nil {
		edit(r)
	}
	raw := evidence.SignRecord(r, sc.HopKeys[i][j])
	parsed, err := evidence.ParseRecord(raw)
	if err != nil {
		return nil, err
	}
	sc.Records = append(sc.Records, raw)
	sc.Index.Add(evidence.Entry{Digest: parsed.Digest(), Record: parsed})
	return raw, nil
}

// Request is a decision's inputs besides the policy and the evidence.
type Request struct {
	T        uint64
	Protocol report.Protocol
	Report   report.Report
	Session  report.Session
	Loads    []uint32 // nil: all 0
}

// Made is a signed decision with its bytes and manifest.
type Made struct {
	Decision *decision.Decision
	Bytes    []byte
	Digest   sig.Hash
	Manifest []byte
}

// Decide makes and signs the decision the rule gives for req over the
// scenario's records, with the steering key.
func (sc *Scenario) Decide(req Request) (*Made, error) {
	rk, err := decision.RankAt(sc.Policy, sc.Policy.Digest(), req.T, sc.Index)
	if err != nil {
		return nil, err
	}
	loads := req.Loads
	if loads == nil {
		loads = make([]uint32, len(sc.Policy.Pathways))
	}
	if req.Protocol == 0 {
		req.Protocol = report.HLS
	}
	d, err := rk.Decision(sc.SteerKey.Public(), req.T, req.Protocol, req.Report, req.Session, loads)
	if err != nil {
		return nil, err
	}
	return sc.Sign(d, sc.SteerKey), nil
}

// Sign signs d with k and writes its manifest.
func (sc *Scenario) Sign(d *decision.Decision, k sig.PrivateKey) *Made {
	raw, digest := decision.AppendSigned(nil, d, k)
	return &Made{Decision: d, Bytes: raw, Digest: digest, Manifest: decision.Manifest(sc.Policy, d, digest)}
}
