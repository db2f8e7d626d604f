package decision

// Whole rankings and decisions: window (§5.1), refusals (§7.2), recompute (§9.1).

import (
	"fmt"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/ruleref"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

// TestWindowEdges_5_1 builds rankings at instants with b < W and with t < L
// (§5.1): with t < L no record is in the window and every pathway is stale;
// with b < W the window is [0, b).
func TestWindowEdges_5_1(t *testing.T) {
	p := rulePolicy("a", "b")
	x := evidence.NewIndex()
	add := func(hop byte, s, e uint64, c evidence.Class) *evidence.Record {
		r := &evidence.Record{Hop: sig.PublicKey{0: hop}, Start: s, End: e, Class: c, Joules: 7,
			Tracks: []evidence.Track{{Kind: evidence.KindMedia, Direction: evidence.DirOut, Bytes: 3}}}
		x.Add(evidence.Entry{Digest: r.Digest(), Record: r})
		return r
	}
	add(1, 0, 10, 4)
	add(2, 0, 10, 4)
	add(2, 10, 20, 4)

	r, err := RankAt(p, ruleDigest, 4, x) // t < L
	if err != nil {
		t.Fatal(err)
	}
	if a, b := r.Window(); a != 0 || b != 0 {
		t.Fatalf("t < L: window [%d, %d)", a, b)
	}
	for i := range 2 {
		if ev := r.Evidence(i); ev.Status != evidence.StatusStale || len(ev.Records) != 0 {
			t.Fatalf("t < L: pathway %d %+v", i, ev)
		}
	}

	r, err = RankAt(p, ruleDigest, 15, x) // b = 10 < W = 30: [0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := r.Window(); a != 0 || b != 10 {
		t.Fatalf("b < W: window [%d, %d)", a, b)
	}
	for i := range 2 {
		if ev := r.Evidence(i); ev.Status != evidence.StatusFigure || len(ev.Records) != 1 {
			t.Fatalf("b < W: pathway %d %+v", i, ev)
		}
	}
	// [0, 20) at t = 25: a is stale, b has a figure and comes first.
	r, err = RankAt(p, ruleDigest, 25, x)
	if err != nil {
		t.Fatal(err)
	}
	if r.Evidence(0).Status != evidence.StatusStale || r.Evidence(1).Status != evidence.StatusFigure || r.Order()[0] != 1 {
		t.Fatalf("[0, 20): %+v %+v", r.Evidence(0), r.Evidence(1))
	}
	// A record for a arrives: Refresh recomputes a alone.
	rec := add(1, 10, 20, 4)
	r2, err := r.Refresh(x, rec)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Evidence(0).Status != evidence.StatusFigure || r.Evidence(0).Status != evidence.StatusStale {
		t.Fatal("Refresh did not recompute the pathway, or changed the old ranking")
	}
	if r2.Order()[0] != 0 { // a: 14/3 = b: 14/3, by id
		t.Fatalf("order after Refresh %v", r2.Order())
	}
	// A record outside the window, or of no pathway, changes nothing.
	if r3, _ := r2.Refresh(x, add(1, 20, 30, 4)); r3 != r2 {
		t.Fatal("a record outside the window made a new ranking")
	}
	if r3, _ := r2.Refresh(x, add(9, 0, 10, 4)); r3 != r2 {
		t.Fatal("a record of no pathway made a new ranking")
	}
	if !r2.Covers(25) || !r2.Covers(34) || r2.Covers(35) || r2.Covers(24) {
		t.Fatal("Covers")
	}
}

// TestDecisionAndRecompute_9_1: the decision the server builds (§7.1) is what
// the verifier recomputes (§9.1 step 6); a changed output is
// decision_mismatch, or unknown_preferred when it puts first a pathway with
// no figure while the rule's first has one.
func TestDecisionAndRecompute_9_1(t *testing.T) {
	p := rulePolicy("a", "b", "c")
	p.Pathways[2].MinSharePPM = 300_000
	ev := []evidence.Pathway{fig(5, 5, 1), fig(5, 2, 1), noFig(evidence.StatusUnmetered)}
	ev[0].Records = []sig.Hash{{1}, {2}}
	r := mustRank(t, p, ev...)
	signer := sig.PublicKey{0xab}
	for k := range 200 {
		s := report.Session{0: byte(k), 1: 0x77}
		reports := []report.Report{rep(-1, -1, -1), rep(0, 8000, 5000), rep(2, 100, 100), rep(1, -1, 3000)}
		rp := reports[k%len(reports)]
		loads := []uint32{uint32(k), 3, 0}
		d, err := r.Decision(signer, 45, report.DASH, rp, s, loads)
		if err != nil {
			t.Fatal(err)
		}
		if d.Room != p.Room || d.Signer != signer || d.Policy != ruleDigest || d.T != 45 || d.Session != s ||
			d.Protocol != report.DASH || d.Report != rp || len(d.Pathways) != 3 || d.Pathways[1].Load != 3 ||
			!slices.Equal(d.Pathways[0].Records, ev[0].Records) {
			t.Fatalf("decision fields %+v", d)
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("the decision breaks §7.2: %v", err)
		}
		// What it states is the reference's output, not only what the
		// verifier's copy of the rule recomputes.
		want, _ := refOutcome(t, p, ev, rp, ruleref.Draw(ruleDigest, s), loads)
		if d.Draw != want.Draw || d.TTL != want.TTL || d.Reason != want.Reason || !slices.Equal(d.Priority, want.Priority[:3]) {
			t.Fatalf("session %x: the decision states %d %d %v %v, the reference %+v", s, d.Draw, d.TTL, d.Reason, d.Priority, want)
		}
		if err := CheckOutput(p, ruleDigest, d); err != nil {
			t.Fatalf("session %x: %v", s, err)
		}
		o, err := Recompute(p, ruleDigest, d)
		if err != nil || o.Draw != d.Draw || o.Reason != d.Reason || o.TTL != d.TTL || !slices.Equal(o.Priority[:3], d.Priority) {
			t.Fatalf("Recompute %+v, %v", o, err)
		}

		// Every change of the output is refused.
		for _, mutate := range []func(*Decision){
			func(d *Decision) { d.Draw = (d.Draw + 1) % 1_000_000 },
			func(d *Decision) { d.TTL++ },
			func(d *Decision) { d.Reason = d.Reason%6 + 1 },
			func(d *Decision) { d.Pathways[1].Limits ^= LimitCapacity },
			func(d *Decision) { d.Priority[1], d.Priority[2] = d.Priority[2], d.Priority[1] },
		} {
			m := *d
			m.Pathways = slices.Clone(d.Pathways)
			m.Priority = slices.Clone(d.Priority)
			mutate(&m)
			if code := reason.Of(CheckOutput(p, ruleDigest, &m)); code != reason.DecisionMismatch && code != reason.UnknownPreferred {
				t.Fatalf("a changed output: %q", code)
			}
		}
		// A changed input is refused when the rule gives another output
		// for it: another session, another draw.
		m := *d
		m.Session[3]++
		if Draw(ruleDigest, m.Session) != d.Draw {
			if code := reason.Of(CheckOutput(p, ruleDigest, &m)); code != reason.DecisionMismatch && code != reason.UnknownPreferred {
				t.Fatalf("another session: %q", code)
			}
		}
	}

	// unknown_preferred: the stated first is c (no figure) when the rule's
	// first is b (a figure).
	outside, _ := sessionDrawing(300_000) // past c's band [0, 300 000)
	d, err := r.Decision(signer, 45, report.HLS, rep(-1, -1, -1), outside, []uint32{0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if d.Reason != Rank || d.Priority[0] != 1 {
		t.Fatalf("reason %d first %d, want b by rank", d.Reason, d.Priority[0])
	}
	d.Priority = []uint8{2, 1, 0}
	if code := reason.Of(CheckOutput(p, ruleDigest, d)); code != reason.UnknownPreferred {
		t.Fatalf("no figure preferred: %q, want unknown_preferred", code)
	}
	d.Priority = []uint8{0, 1, 2}
	if code := reason.Of(CheckOutput(p, ruleDigest, d)); code != reason.DecisionMismatch {
		t.Fatalf("a figure preferred wrongly: %q, want decision_mismatch", code)
	}
	// A decision of another count of pathways, or stating a figure with D 0.
	d.Pathways = d.Pathways[:2]
	if code := reason.Of(CheckOutput(p, ruleDigest, d)); code != reason.DecisionInvalid {
		t.Fatalf("2 pathways of 3: %q", code)
	}
	// t outside the ranking's window.
	if _, err := r.Decision(signer, 55, report.HLS, rep(-1, -1, -1), report.Session{}, []uint32{0, 0, 0}); err == nil {
		t.Fatal("a decision at t of another window")
	}
}

// TestRankingRefuses_7_2: evidence a decision could not state (§7.2), loads and
// reports the rule cannot take.
func TestRankingRefuses_7_2(t *testing.T) {
	p := rulePolicy("a", "b")
	bad := []evidence.Pathway{
		fig(5, 1, 0), fig(5, 0, 1), fig(0, 1, 1), fig(1, 1, 1), fig(6, 1, 1),
		{Status: 5}, {Status: evidence.StatusStale, Class: 5}, {Status: evidence.StatusMixed, Joules: num.From64(1)},
		{Status: evidence.StatusEmpty, Delivery: num.From64(1)},
	}
	for _, ev := range bad {
		if _, err := NewRanking(p, ruleDigest, 0, 0, []evidence.Pathway{fig(5, 1, 1), ev}); err == nil {
			t.Errorf("evidence %+v accepted", ev)
		}
		r := mustRank(t, p, fig(5, 1, 1), fig(5, 1, 1))
		if _, err := r.With(1, ev); err == nil {
			t.Errorf("With %+v accepted", ev)
		}
	}
	if _, err := NewRanking(p, ruleDigest, 0, 0, []evidence.Pathway{fig(5, 1, 1)}); err == nil {
		t.Error("evidence for 1 pathway of 2")
	}
	if _, err := NewRanking(rulePolicy(), ruleDigest, 0, 0, nil); err == nil {
		t.Error("a policy of no pathways")
	}
	ids := make([]string, 33)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	if _, err := NewRanking(rulePolicy(ids...), ruleDigest, 0, 0, make([]evidence.Pathway, 33)); err == nil {
		t.Error("a policy of 33 pathways")
	}
	r := mustRank(t, p, fig(5, 1, 1), fig(5, 1, 1))
	for _, c := range []struct {
		rp    report.Report
		loads []uint32
	}{
		{rep(-1, -1, -1), []uint32{0}},
		{rep(2, -1, -1), []uint32{0, 0}},
		{report.Report{Present: 8}, []uint32{0, 0}},
	} {
		if _, err := r.Decide(c.rp, report.Session{}, c.loads); err == nil {
			t.Errorf("report %+v loads %v decided", c.rp, c.loads)
		}
	}
	if _, err := r.With(2, fig(5, 1, 1)); err == nil {
		t.Error("With pathway 2 of 2")
	}
}
