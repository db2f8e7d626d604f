package decision_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// dayScenario is a policy of n pathways of 3 hops each, with a day's window
// of hourly records (§5.1: W = 24 P), so each pathway names 72 records.
func dayScenario(b *testing.B, n int) *scenario.Scenario {
	var pws []scenario.Pathway
	for i := range n {
		pw := scenario.DefaultPathways()[i%3]
		pw.ID = fmt.Sprintf("cdn-%02d", i)
		pw.Hops = append(pw.Hops, pw.Hops[1])
		pw.Hops[0].Joules += uint64(i) * 1000
		pws = append(pws, pw)
	}
	sc, err := scenario.Build(scenario.Spec{Name: "day", Pathways: pws, Periods: 26, Policy: func(p *policy.Policy) {
		p.WindowUs = 24 * p.PeriodUs
	}})
	if err != nil {
		b.Fatal(err)
	}
	return sc
}

// BenchmarkWholeDecision is one request's work on a server (issue 3): read
// the report, decide (§6), build the decision (§7), sign it with its digest,
// write the manifest (§8.1), beside a bare Ed25519 signature of the same
// bytes. The ranking (evidence, ranks, order) is per window and built once.
func BenchmarkWholeDecision(b *testing.B) {
	for _, n := range []int{3, 32} {
		sc := dayScenario(b, n)
		t := uint64(25*scenario.Period + 10_000_000)
		rk, err := decision.RankAt(sc.Policy, sc.Policy.Digest(), t, sc.Index)
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if rk.Evidence(i).Status != evidence.StatusFigure {
				b.Fatalf("pathway %d is %s", i, rk.Evidence(i).Status)
			}
		}
		mw := decision.NewManifestWriter(sc.Policy)
		ids := sc.Policy.IDs()
		loads := make([]uint32, n)
		target := "/v1/steer?_HLS_pathway=%22cdn-01%22&_HLS_throughput=5400000&wai_session=00112233445566778899aabbccddeeff&CMCD=bl%3D21300%2Cmtp%3D48100"
		h := http.Header{}
		buf := make([]byte, 0, 1<<20)
		var out []byte
		var size int
		b.Run(fmt.Sprintf("decision/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				q := report.ParseQuery(target)
				sess, _ := q.Session()
				proto, rep := q.Report(h, ids)
				d, err := rk.Decision(sc.SteerKey.Public(), t, proto, rep, sess, loads)
				if err != nil {
					b.Fatal(err)
				}
				raw, digest := decision.AppendSigned(buf[:0], d, sc.SteerKey)
				out = mw.Append(out[:0], d.TTL, sess, d.Priority, digest)
				size = len(raw)
			}
			b.ReportMetric(float64(size), "WSD1-bytes")
		})
		msg := make([]byte, len(decision.SignedPrefix)+size-64)
		b.Run(fmt.Sprintf("signature/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = sc.SteerKey.SignRaw(msg)
			}
		})
	}
}
