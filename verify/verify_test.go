package verify_test

import (
	"testing"

	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
)

func TestAcceptDefault(t *testing.T) {
	sc, err := scenario.Build(scenario.Spec{Periods: 10})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sc.Decide(scenario.Request{T: 8*scenario.Period + 10_000_000, Report: report.Report{}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := verify.Verify(verify.Input{
		Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes,
		Policy: sc.PolicyBytes, Decision: m.Bytes, Records: sc.Records, Manifest: m.Manifest,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", f)
}
