package demo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
)

// Offline is the demo without a server: a room, a policy and signed
// records from internal/scenario's fixed keys, one decision, written to
// files in dir and verified; prog is how the operator runs waisteer, for
// the verify command it prints.
func Offline(w io.Writer, dir, prog string) error {
	if prog == "" {
		prog = "waisteer"
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "waisteer-demo-")
		if err != nil {
			return err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pws := scenario.DefaultPathways()
	pws = append(pws, scenario.Pathway{
		ID: "b-edge2", CloneOf: "b", Host: "edge2.cdn-b.example", Params: []policy.Param{{Name: "via", Value: "edge2"}},
		TopTier: 2, LatencyMs: 80, Capacity: policy.Unlimited, Hops: []scenario.Hop{pws[1].Hops[0]},
	})
	pws[2].Hops[0].Class, pws[2].Hops[1].Class = evidence.OnChipCounter, evidence.OnChipCounter
	sc, err := scenario.Build(scenario.Spec{Name: "demo", Pathways: pws, Periods: 10})
	if err != nil {
		return err
	}
	sess, err := report.NewSession(nil)
	if err != nil {
		return err
	}
	t := uint64(8*scenario.Period + 10_000_000)
	target := "/v1/steer?_HLS_pathway=%22a%22&_HLS_throughput=6000000"
	proto, rep := report.Read(target, nil, sc.Policy.IDs())
	m, err := sc.Decide(scenario.Request{T: t, Protocol: proto, Report: rep, Session: sess})
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"room.cbor": sc.Room.DescriptorBytes, "keylog.cbor": sc.Room.HeadBytes,
		"policy.wsp1": sc.PolicyBytes, "decision.wsd1": m.Bytes, "manifest.json": m.Manifest,
	}
	var records []byte
	for _, r := range sc.Records {
		records = append(records, r...)
	}
	files["records.wmh1"] = records
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	facts, err := verify.Verify(verify.Input{Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes,
		Policy: sc.PolicyBytes, Decision: m.Bytes, Records: sc.Records, Manifest: m.Manifest})
	if err != nil {
		return fmt.Errorf("the demo's own decision does not verify: %w", err)
	}
	fmt.Fprintf(w, "room %s with %d pathways; %d signed per-hop records\n", sc.Room.ID(), len(sc.Policy.Pathways), len(sc.Records))
	fmt.Fprintf(w, "request  %s\n", target)
	fmt.Fprintf(w, "decision %s: %s first (%s), ttl %d s\n", m.Digest, facts.Priority[0], facts.Reason, facts.TTL)
	for _, p := range facts.Pathways {
		fmt.Fprintf(w, "  %-8s %-7s class %d  J %s µJ  D %s B\n", p.ID, p.Status, p.Class, p.Joules, p.Delivery)
	}
	fmt.Fprintf(w, "manifest %s\n", m.Manifest)
	fmt.Fprintf(w, "HLS      %s\n", decision.HLSTag(sc.Policy))
	fmt.Fprintf(w, "DASH     %s\n", decision.DASHElement(sc.Policy))
	fmt.Fprintf(w, "\nfiles in %s; check the decision yourself:\n", dir)
	fmt.Fprintf(w, "  %[2]s verify -room %[1]s/room.cbor -keylog %[1]s/keylog.cbor -policy %[1]s/policy.wsp1 -decision %[1]s/decision.wsd1 -records %[1]s/records.wmh1 -manifest %[1]s/manifest.json\n", dir, prog)
	return nil
}
