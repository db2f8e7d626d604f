package decision

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/ruleref"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// fuzzBytes hands out the fuzzer's bytes, zeros once they run out.
type fuzzBytes []byte

func (f *fuzzBytes) take(n int) []byte {
	out := make([]byte, n)
	copy(out, *f)
	*f = (*f)[min(n, len(*f)):]
	return out
}
func (f *fuzzBytes) u8() uint8   { return f.take(1)[0] }
func (f *fuzzBytes) u32() uint32 { return binary.LittleEndian.Uint32(f.take(4)) }
func (f *fuzzBytes) u64() uint64 { return binary.LittleEndian.Uint64(f.take(8)) }

// fuzzRequest builds a policy, its evidence, a report, a session and loads
// from the fuzzer's bytes.
func fuzzRequest(data []byte) (*policy.Policy, []evidence.Pathway, uint64, report.Report, report.Session, []uint32) {
	f := fuzzBytes(data)
	p := rulePolicy()
	p.Floor = f.u8() % 4
	p.LatencyCeilingMs = uint32(f.u8())
	p.MinBufferMs = uint32(f.u8()) * 10
	p.HysteresisPPM = f.u32() % 1_000_001
	p.MinTTLs = 1 + uint32(f.u8())
	p.TTLs = p.MinTTLs + uint32(f.u8())
	n := 1 + int(f.u8())%MaxPathways
	var shares uint32
	ev := make([]evidence.Pathway, n)
	for i := range n {
		pw := policy.Pathway{ID: string([]byte{'a' + byte(i)%26, 'a' + byte(i)/26}), Base: policy.NoBase,
			LatencyMs: uint32(f.u8()), TopTier: f.u8() % 4, Capacity: policy.Unlimited,
			Hops: []policy.Hop{{Key: sig.PublicKey{byte(i)}, Place: policy.Edge}}}
		if c := f.u8(); c < 200 {
			pw.Capacity = uint32(c % 8)
		}
		if s := uint32(f.u8()) * 4000; shares+s <= 1_000_000 {
			pw.MinSharePPM, shares = s, shares+s
		}
		p.Pathways = append(p.Pathways, pw)

		switch st := evidence.Status(f.u8() % 8); {
		case st <= evidence.StatusEmpty && st != evidence.StatusFigure:
			ev[i] = evidence.Pathway{Status: st}
		default:
			j := num.U128{Lo: f.u64(), Hi: f.u64() >> (f.u8() % 65 & 63)}
			d := num.U128{Lo: f.u64(), Hi: f.u64() >> (f.u8() % 65 & 63)}
			j.Lo |= 1
			d.Lo |= 1
			ev[i] = evidence.Pathway{Status: evidence.StatusFigure, Class: []evidence.Class{2, 3, 4, 5}[f.u8()%4], Joules: j, Delivery: d}
		}
	}
	t := uint64(f.u8())
	rp := report.Report{Present: f.u8() & 7}
	if rp.Present&report.HasPathway != 0 {
		rp.Pathway = f.u8() % uint8(n)
	}
	if rp.Present&report.HasThroughput != 0 {
		rp.Throughput = uint64(f.u32() % 10_000)
	}
	if rp.Present&report.HasBuffer != 0 {
		rp.Buffer = uint64(f.u32() % 5000)
	}
	var s report.Session
	copy(s[:], f.take(16))
	loads := make([]uint32, n)
	for i := range loads {
		loads[i] = uint32(f.u8() % 10)
	}
	return p, ev, t, rp, s, loads
}

// FuzzDecide: for any policy, evidence, report, session and loads, the rule
// never panics and gives what internal/ruleref, the reference written from
// §6 alone, gives; the priority names every pathway once, the first first,
// the pathways within the limits before the others (§6.5); the reason is one
// §6.4 allows; a first pathway with no figure is never preferred by rank or
// hold to one with a figure within the limits (§12); and the decision built
// from the outcome reads back (§7.2) and recomputes (§9.1 step 6).
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 100, 20, 0, 0, 0, 0, 9, 9, 2, 50, 3, 255, 0, 0, 60, 2, 1, 0, 8, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 0})
	f.Add(slices.Repeat([]byte{3, 7, 250, 1}, 200))
	f.Add(slices.Repeat([]byte{0xff, 0, 0x80, 0x11, 0x42}, 300))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, ev, tt, rp, s, loads := fuzzRequest(data)
		n := len(p.Pathways)
		a, b := evidence.PolicyWindow(p, tt)
		r, err := NewRanking(p, ruleDigest, a, b, ev)
		if err != nil {
			t.Fatal(err)
		}
		o, err := r.Decide(rp, s, loads)
		if err != nil {
			t.Fatal(err)
		}
		want, order := refOutcome(t, p, ev, rp, ruleref.Draw(ruleDigest, s), loads)
		if o != want || !slices.Equal(toInts(r.order), order) {
			t.Fatalf("the rule gives %+v (order %v), the reference %+v (order %v)", o, r.order, want, order)
		}
		c := -1
		if rp.Present&report.HasPathway != 0 {
			c = int(rp.Pathway)
		}
		within := func(i int) bool { return o.Limits[i] == Within }
		anyWithin, w := false, -1
		for _, i := range r.order {
			if within(int(i)) && w < 0 {
				w, anyWithin = int(i), true
			}
		}

		// §6.5: a permutation, the first first, within before the others.
		pr := o.Priority[:n]
		if pr[0] != o.First {
			t.Fatal("the priority does not begin with the first")
		}
		sorted := slices.Sorted(slices.Values(slices.Clone(pr)))
		for i, v := range sorted {
			if int(v) != i {
				t.Fatalf("priority %v is not a permutation", pr)
			}
		}
		for k := 2; k < n; k++ {
			if within(int(pr[k])) && !within(int(pr[k-1])) {
				t.Fatalf("priority %v: a pathway within the limits after one outside", pr)
			}
		}

		// §6.4: what each reason requires.
		first := int(o.First)
		switch o.Reason {
		case Buffer, Floor, Hold:
			if first != c || !within(c) {
				t.Fatalf("reason %d for %d, c %d", o.Reason, first, c)
			}
		case Share:
			if e, ok := Band(p, o.Draw); !ok || e != first || !within(e) {
				t.Fatalf("share for %d, draw %d", first, o.Draw)
			}
		case None:
			if anyWithin || (c >= 0 && first != c) || (c < 0 && first != int(r.order[0])) {
				t.Fatalf("none for %d, c %d", first, c)
			}
		case Rank:
			if first != w {
				t.Fatalf("rank for %d, w %d", first, w)
			}
		default:
			t.Fatalf("reason %d", o.Reason)
		}
		// §12: by rank or hold, no pathway with no figure is preferred to
		// one with a figure within the limits.
		if (o.Reason == Rank || o.Reason == Hold) && r.rank[first] == NoFigure {
			for i := range n {
				if within(i) && r.rank[i] != NoFigure {
					t.Fatalf("pathway %d has a figure and is within the limits, %d has none and is first", i, first)
				}
			}
		}

		// The decision reads back and recomputes.
		d, err := r.Decision(sig.PublicKey{1}, tt, report.HLS, rp, s, loads)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(Append(nil, d))
		if err != nil {
			t.Fatalf("the decision does not read: %v", err)
		}
		if err := CheckOutput(p, ruleDigest, back); err != nil {
			t.Fatalf("the decision does not recompute: %v", err)
		}
		// A decision with another first is refused.
		if n > 1 {
			back.Priority[0], back.Priority[1] = back.Priority[1], back.Priority[0]
			if code := reason.Of(CheckOutput(p, ruleDigest, back)); code != reason.DecisionMismatch && code != reason.UnknownPreferred {
				t.Fatalf("another first: %q", code)
			}
		}
	})
}

// FuzzCheckOutput: §9.1 step 6 never panics on a decision that reads; it
// accepts exactly the decisions whose draw, limits, priority, TTL and reason
// are what internal/ruleref gives for the evidence, report, session and loads
// they state (§9.2), and refuses the others decision_mismatch, or
// unknown_preferred when the stated first has no figure while the
// reference's first has one; a decision of another count of pathways is
// decision_invalid (§9.1 step 3).
func FuzzCheckOutput(f *testing.F) {
	p := rulePolicy("a", "b", "c")
	p.Pathways[1].MinSharePPM = 250_000
	p.Pathways[2].Capacity = 2
	ev := []evidence.Pathway{fig(4, 3, 1), fig(4, 2, 1), noFig(evidence.StatusStale)}
	r, err := NewRanking(p, ruleDigest, 10, 40, ev)
	if err != nil {
		f.Fatal(err)
	}
	for k, rp := range []report.Report{rep(-1, -1, -1), rep(0, 3000, 100), rep(2, 9000, 9000), rep(1, -1, 9000)} {
		d, err := r.Decision(sig.PublicKey{1}, 45, report.DASH, rp, report.Session{byte(k)}, []uint32{0, 1, 2})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(Append(nil, d))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err != nil {
			return
		}
		err = CheckOutput(p, ruleDigest, d)
		if len(d.Pathways) != len(p.Pathways) {
			if reason.Of(err) != reason.DecisionInvalid {
				t.Fatalf("%d pathways of %d: %v", len(d.Pathways), len(p.Pathways), err)
			}
			return
		}
		ev := make([]evidence.Pathway, len(d.Pathways))
		loads := make([]uint32, len(d.Pathways))
		for i := range d.Pathways {
			ev[i], loads[i] = d.Pathways[i].Pathway, d.Pathways[i].Load
		}
		want, _ := refOutcome(t, p, ev, d.Report, ruleref.Draw(ruleDigest, d.Session), loads)
		same := d.Draw == want.Draw && d.TTL == want.TTL && d.Reason == want.Reason &&
			slices.Equal(d.Priority, want.Priority[:want.N])
		for i := range d.Pathways {
			same = same && d.Pathways[i].Limits == want.Limits[i]
		}
		unknownFirst := d.Pathways[d.Priority[0]].Status != evidence.StatusFigure &&
			ev[want.First].Status == evidence.StatusFigure
		switch code := reason.Of(err); {
		case same:
			if err != nil {
				t.Fatalf("the reference's output refused: %v", err)
			}
		case unknownFirst:
			if code != reason.UnknownPreferred {
				t.Fatalf("no figure preferred to the reference's first: %v", err)
			}
		default:
			if code != reason.DecisionMismatch {
				t.Fatalf("not the reference's output: %v", err)
			}
		}
	})
}
