package storetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// These helpers are those of package store's own tests (helpers_test.go,
// store_test.go), which cannot import this package: a test of package store
// importing a package that imports store is a cycle.

func hash(label string) sig.Hash { return sig.Digest([]byte(label)) }

func sameRoom(a, b store.Room) bool {
	return a.ID == b.ID && bytes.Equal(a.Descriptor, b.Descriptor) &&
		bytes.Equal(a.KeyLogHead, b.KeyLogHead) && (a.KeyLogHead == nil) == (b.KeyLogHead == nil)
}

func sameDecision(a, b store.Decision) bool {
	return a.Digest == b.Digest && a.Room == b.Room && a.Policy == b.Policy && a.T == b.T &&
		a.Session == b.Session && a.Protocol == b.Protocol && a.Report == b.Report &&
		slices.Equal(a.Loads, b.Loads) && a.Evidence == b.Evidence && a.Signer == b.Signer && a.Sig == b.Sig
}

// testRecord is a record of room with the given span; the store reads no
// record, so its bytes need only be distinct.
func testRecord(room sig.Hash, hop byte, start, end uint64) store.Record {
	raw := fmt.Appendf(nil, "WMH1 %s %d %d %d", room, hop, start, end)
	return store.Record{Digest: sig.Digest(raw), Room: room, Hop: sig.PublicKey{0: hop}, Start: start, End: end, Raw: raw}
}

// made is one signed decision as the server has it: its WSD1 bytes, its
// store row and its evidence snapshot.
type made struct {
	bytes []byte
	row   store.Decision
	ev    store.Evidence
}

// pathwaysScenario builds a scenario of n pathways of the default shapes
// (two hops each, one edge) with records for periods periods, and the
// default window of 5 periods (§5.1).
func pathwaysScenario(t testing.TB, n, periods int) *scenario.Scenario {
	t.Helper()
	var pws []scenario.Pathway
	for i := range n {
		pw := scenario.DefaultPathways()[i%3]
		pw.ID = fmt.Sprintf("cdn-%02d", i)
		pw.Hops[0].Joules += uint64(i) * 1000
		pws = append(pws, pw)
	}
	sc, err := scenario.Build(scenario.Spec{Name: fmt.Sprintf("room-%d", n), Pathways: pws, Periods: periods, Policy: func(p *policy.Policy) {
		if n > 1 {
			p.Pathways[1].MinSharePPM = 100_000 // a band, so that §6.3 places some sessions
		}
		if n > 2 {
			p.Pathways[2].Capacity = 3 // a capacity, so that the loads change the limits (§6.1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// randomRequest is a request at t with a report, session and loads drawn
// from rng: every present bit, both protocols (§4, §7.1).
func randomRequest(rng *rand.Rand, n int, t uint64) scenario.Request {
	req := scenario.Request{T: t, Protocol: report.Protocol(1 + rng.IntN(2))}
	for i := range req.Session {
		req.Session[i] = byte(rng.Uint32())
	}
	if rng.IntN(3) > 0 {
		req.Report.Present |= report.HasPathway
		req.Report.Pathway = uint8(rng.IntN(n))
	}
	if rng.IntN(3) > 0 {
		req.Report.Present |= report.HasThroughput
		req.Report.Throughput = []uint64{0, 400_000, 1_000_000, 5_000_000, 1<<64 - 1}[rng.IntN(5)]
	}
	if rng.IntN(3) > 0 {
		req.Report.Present |= report.HasBuffer
		req.Report.Buffer = []uint64{0, 3999, 4000, 30_000, 1 << 40}[rng.IntN(5)]
	}
	req.Loads = make([]uint32, n)
	for i := range req.Loads {
		req.Loads[i] = []uint32{0, 1, 3, 4, 200, 1<<32 - 1}[rng.IntN(6)]
	}
	return req
}

// makeDecisions makes count decisions of sc, signed, at instants from
// first, step µs apart: with records for the periods before, each has a
// full window (§5.1) while t stays within them.
func makeDecisions(t testing.TB, sc *scenario.Scenario, seed uint64, count int, first, step uint64) []made {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	n := len(sc.Policy.Pathways)
	out := make([]made, 0, count)
	var last store.Evidence
	for i := range count {
		m, err := sc.Decide(randomRequest(rng, n, first+uint64(i)*step))
		if err != nil {
			t.Fatal(err)
		}
		ev := make([]evidence.Pathway, n)
		for j := range ev {
			ev[j] = m.Decision.Pathways[j].Pathway
		}
		e := store.EncodeEvidence(ev)
		if e.Key == last.Key {
			e = last // share the body, as a server shares its ranking's
		}
		last = e
		out = append(out, made{bytes: m.Bytes, row: store.Compact(m.Decision, m.Digest, e.Key), ev: e})
	}
	return out
}

// evidenceOf is the distinct snapshots of ms.
func evidenceOf(ms []made) []store.Evidence {
	seen := map[sig.Hash]bool{}
	var ev []store.Evidence
	for _, m := range ms {
		if !seen[m.ev.Key] {
			seen[m.ev.Key] = true
			ev = append(ev, m.ev)
		}
	}
	return ev
}

func rowsOf(ms []made) []store.Decision {
	ds := make([]store.Decision, len(ms))
	for i := range ms {
		ds[i] = ms[i].row
	}
	return ds
}

// putAll stores ms in groups of size.
func putAll(t testing.TB, s store.Store, ms []made, size int) {
	t.Helper()
	for i := 0; i < len(ms); i += size {
		g := ms[i:min(i+size, len(ms))]
		if err := s.PutDecisions(bg, evidenceOf(g), rowsOf(g)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRebuild reads m back from s and rebuilds its bytes.
func checkRebuild(t *testing.T, s store.Store, sc *scenario.Scenario, m made) {
	t.Helper()
	row, err := s.Decision(bg, m.row.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if !sameDecision(row, m.row) {
		t.Fatalf("decision %s: got %+v, want %+v", m.row.Digest, row, m.row)
	}
	body, err := s.EvidenceSnapshot(bg, row.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Rebuild(sc.Policy, sc.Policy.Digest(), row, body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, m.bytes) {
		t.Fatalf("decision %s: rebuilt %d bytes differ from the %d signed", m.row.Digest, len(got), len(m.bytes))
	}
}
