package verify_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
)

// An auditor holds a room's descriptor and key log head, a policy, a
// decision, the per-hop records it names and the manifest a player was
// served, and checks that the manifest is what the rule gives for what the
// hops signed (§9). The inputs come from internal/scenario's fixed seeds:
// three pathways "a", "b" and "c" of ModelBased figures, b the cheapest, and
// five minutes of records; the decision is for a client with no report.
func Example() {
	sc, err := scenario.Build(scenario.Spec{Name: "example room", Periods: 5})
	if err != nil {
		panic(err)
	}
	made, err := sc.Decide(scenario.Request{
		T: 310_000_000, Protocol: report.HLS,
		Session: report.Session{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff},
		Loads:   []uint32{10, 4, 0},
	})
	if err != nil {
		panic(err)
	}

	in := verify.Input{
		Descriptor: sc.Room.DescriptorBytes,
		KeyLogHead: sc.Room.HeadBytes,
		Policy:     sc.PolicyBytes,
		Decision:   made.Bytes,
		Records:    sc.Records, // in any order: the verifier finds them by digest
		Manifest:   made.Manifest,
	}
	f, err := verify.Verify(in)
	if err != nil {
		panic(err)
	}
	// The facts of §9.3. b's J over D is 150 000 000 / 5 000 000 000, the
	// lowest; with no report and no shares no step before 6 applies, so b is
	// first by rank with ttl_s, then a and c by figure (§6.4, §6.5). Every
	// pathway is within its limits: latency 100 ≤ 500 ms, top tier 2 ≥ F = 1,
	// no capacity. The digest is SHA-256 of the decision's first 1238 bytes
	// (all but sig), which a separate script recomputed once; its report is
	// 18 zero bytes (§7.1: nothing present).
	fmt.Println("decision:", len(made.Bytes), "bytes")
	fmt.Println("digest:", f.Digest)
	fmt.Println("priority:", f.Priority, "TTL:", f.TTL, "reason:", f.Reason)
	for _, pw := range f.Pathways {
		fmt.Printf("%s: %s class %d J=%s D=%s limits %+v\n", pw.ID, pw.Status, pw.Class, pw.Joules, pw.Delivery, pw.Limits)
	}
	fmt.Println("record:", f.RecordURI)

	// A manifest that names the pathways in another order is not the one
	// §8.1 writes from the decision (§9.1 step 7).
	in.Manifest = bytes.Replace(made.Manifest, []byte(`["b","a","c"]`), []byte(`["a","b","c"]`), 1)
	_, err = verify.Verify(in)
	var refusal *reason.Error
	if errors.As(err, &refusal) {
		fmt.Println("refused:", refusal.Code, "at", refusal.Place)
	}

	// Output:
	// decision: 1302 bytes
	// digest: 26c60651c574f86f96deed15573e2b6804af9e5406a011e9dcf6578d2187e2cd
	// priority: [b a c] TTL: 300 reason: rank
	// a: figure class 2 J=225000000 D=5000000000 limits {Latency:true Quality:true Capacity:true}
	// b: figure class 2 J=150000000 D=5000000000 limits {Latency:true Quality:true Capacity:true}
	// c: figure class 2 J=300000000 D=5000000000 limits {Latency:true Quality:true Capacity:true}
	// record: https://steer.example/v1/decisions/26c60651c574f86f96deed15573e2b6804af9e5406a011e9dcf6578d2187e2cd
	// refused: manifest_mismatch at manifest
}
