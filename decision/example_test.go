package decision_test

import (
	"encoding/hex"
	"fmt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/report"
)

// A steering server ranks a room's pathways by the records their hops
// signed, decides for one client's request, signs the decision, WSD1, and
// answers with the steering manifest that names it (§6 to §8). The room, its
// keys and its records come from internal/scenario's fixed seeds: three
// pathways "a", "b" and "c", each an edge and an interior hop of ModelBased
// figures, b the cheapest, a policy of P = 1 min, W = 5 P and L = 10 s, and
// five minutes of records from every hop.
func Example() {
	sc, err := scenario.Build(scenario.Spec{Name: "example room", Periods: 5})
	if err != nil {
		panic(err)
	}
	p := sc.Policy

	// At t = 310 s the window is [0 s, 300 s) (§5.1), which every hop's five
	// records tile: each pathway has a figure, and the order is by figure
	// (§6.2).
	const t = 310_000_000
	rk, err := decision.RankAt(p, p.Digest(), t, sc.Index)
	if err != nil {
		panic(err)
	}
	for _, i := range rk.Order() {
		ev := rk.Evidence(int(i))
		fmt.Printf("%s: %s J=%s D=%s\n", p.Pathways[i].ID, ev.Class.Label(), ev.Joules, ev.Delivery)
	}

	// The client is on "a" with 5 Mbit/s and 12 s of buffer (§4.2, §4.4).
	target := `/v1/steer?wai_session=00112233445566778899aabbccddeeff&_HLS_pathway="a"&_HLS_throughput=5000000&CMCD=bl%3D12000`
	protocol, rep := report.Read(target, nil, p.IDs())
	session, _ := report.SessionOf(target)
	loads := []uint32{10, 4, 0} // the sessions the server steers to each first

	d, err := rk.Decision(sc.SteerKey.Public(), t, protocol, rep, session, loads)
	if err != nil {
		panic(err)
	}
	raw, digest := decision.AppendSigned(nil, d, sc.SteerKey)

	// Anyone reads it back and checks its signature and its output (§7.2,
	// §7.3, §9.1 step 6).
	back, err := decision.Parse(raw)
	if err != nil {
		panic(err)
	}
	if err := back.VerifySignature(); err != nil {
		panic(err)
	}
	if err := decision.CheckOutput(p, p.Digest(), back); err != nil {
		panic(err)
	}

	// The layout of §7.1, checked by hand: 148 bytes from magic to report,
	// the pathway count 1, three entries of 4 + 1 + 1 + 1 + 16 + 16 + 1 = 40
	// bytes and ten digests (two hops, five records each) of 32, ttl 4,
	// reason 1, the priority 1 + 3 and sig 64: 148 + 1 + 3 × 360 + 4 + 1 + 4
	// + 64 = 1302, opening with "WSD1" and the version 1. A separate script
	// read these bytes once against §7.1, recomputed the draw from §6.3's
	// hash, hashed all but the last 64 bytes, checked the signature over
	// "wai:steering-decision" ‖ 0x01 ‖ them, wrote the manifest from §8.1,
	// and agreed with the lines below. J and D are by hand too: b's hops
	// spend 20 J and 10 J a minute, over five minutes 150 000 000 µJ, and
	// its edge hop sends 10^9 bytes a minute. b's figure, 0.03 µJ a byte,
	// beats a's 0.045 by more than the 5 % margin, so the client leaves a by
	// rank (§6.4 step 6).
	fmt.Println("bytes:", len(raw))
	fmt.Println("magic and version:", hex.EncodeToString(raw[:5]))
	fmt.Printf("first %s, reason %s, TTL %d s, draw %d\n", p.Pathways[back.Priority[0]].ID, back.Reason, back.TTL, back.Draw)
	fmt.Println("digest:", digest)

	// The steering manifest (§8.1), and the policy's tag and element in the
	// content description (§8.2, §8.3).
	fmt.Println(string(decision.Manifest(p, back, digest)))
	fmt.Println(decision.HLSTag(p))
	fmt.Println(decision.DASHElement(p))

	// Output:
	// b: ModelBased J=150000000 D=5000000000
	// a: ModelBased J=225000000 D=5000000000
	// c: ModelBased J=300000000 D=5000000000
	// bytes: 1302
	// magic and version: 5753443101
	// first b, reason rank, TTL 300 s, draw 71376
	// digest: 0a0b4a3a4b2f859dd47b5f038d19d960a20fa97d9831e957e273ee8cb785d35c
	// {"VERSION":1,"TTL":300,"RELOAD-URI":"https://steer.example/v1/steer?wai_session=00112233445566778899aabbccddeeff","PATHWAY-PRIORITY":["b","a","c"],"science.transaction.wai-decision":"https://steer.example/v1/decisions/0a0b4a3a4b2f859dd47b5f038d19d960a20fa97d9831e957e273ee8cb785d35c"}
	// #EXT-X-CONTENT-STEERING:SERVER-URI="https://steer.example/v1/steer",PATHWAY-ID="a"
	// <ContentSteering defaultServiceLocation="a" queryBeforeStart="false">https://steer.example/v1/steer</ContentSteering>
}
