package store

import (
	"bytes"
	"slices"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

func wantCode(t *testing.T, what string, err error, code reason.Code) {
	t.Helper()
	if got := reason.Of(err); got != code {
		t.Errorf("%s: %v (%s), want %s", what, err, got, code)
	}
}

func sameEvidence(a, b []evidence.Pathway) bool {
	return slices.EqualFunc(a, b, func(x, y evidence.Pathway) bool {
		return x.Status == y.Status && x.Class == y.Class && x.Joules == y.Joules &&
			x.Delivery == y.Delivery && slices.Equal(x.Records, y.Records)
	})
}

// evidenceSeeds are snapshot bodies of every status (§5.3): a full window
// of figures, and pathways unmetered, mixed, stale and empty, by hand.
func evidenceSeeds(t testing.TB) [][]byte {
	sc := pathwaysScenario(t, 3, 12)
	m := makeDecisions(t, sc, 20, 1, 7*scenario.Period, 0)[0]
	hand := []evidence.Pathway{
		{Status: evidence.StatusFigure, Class: evidence.CalibratedInstrument, Joules: num.U128{Lo: 1, Hi: 1}, Delivery: num.U128{Lo: 1<<64 - 1, Hi: 1<<64 - 1}, Records: []sig.Hash{hash("r1")}},
		{Status: evidence.StatusUnmetered, Records: []sig.Hash{hash("r2"), hash("r3")}},
		{Status: evidence.StatusMixed, Records: []sig.Hash{hash("r4")}},
		{Status: evidence.StatusStale},
		{Status: evidence.StatusEmpty, Records: []sig.Hash{hash("r5")}},
	}
	return [][]byte{m.ev.Body, EncodeEvidence(hand).Body, EncodeEvidence(nil).Body}
}

// TestEvidenceRoundTrip_7_1: a snapshot holds exactly the per-pathway
// evidence a decision states (§7.1: status, class, J, D, the digests), and
// its key is SHA-256 of its body.
func TestEvidenceRoundTrip_7_1(t *testing.T) {
	for _, body := range evidenceSeeds(t) {
		ev, err := DecodeEvidence(body)
		if err != nil {
			t.Fatal(err)
		}
		e := EncodeEvidence(ev)
		if !bytes.Equal(e.Body, body) || e.Key != sig.Digest(body) {
			t.Errorf("snapshot of %d bytes does not write back", len(body))
		}
		if EvidenceSize(ev) != len(body) {
			t.Errorf("EvidenceSize %d, body %d", EvidenceSize(ev), len(body))
		}
		again, err := DecodeEvidence(e.Body)
		if err != nil || !sameEvidence(ev, again) {
			t.Errorf("decoding twice differs: %v", err)
		}
	}
}

// TestDecodeEvidenceRefuses: the store's layout is read as COMPANION §1
// reads a record (truncated, malformed, unknown_version), and an entry §7.2
// forbids is decision_invalid.
func TestDecodeEvidenceRefuses(t *testing.T) {
	body := evidenceSeeds(t)[1]
	wantCode(t, "no bytes", errOf(DecodeEvidence(nil)), reason.Truncated)
	for n := 1; n < len(body); n++ {
		wantCode(t, "cut", errOf(DecodeEvidence(body[:n])), reason.Truncated)
	}
	wantCode(t, "a byte more", errOf(DecodeEvidence(append(slices.Clone(body), 0))), reason.Malformed)
	v2 := slices.Clone(body)
	v2[0] = 2
	wantCode(t, "version 2", errOf(DecodeEvidence(v2)), reason.UnknownVersion)

	edit := func(name string, f func(ev []evidence.Pathway)) {
		ev, err := DecodeEvidence(body)
		if err != nil {
			t.Fatal(err)
		}
		f(ev)
		wantCode(t, name, errOf(DecodeEvidence(EncodeEvidence(ev).Body)), reason.DecisionInvalid)
	}
	edit("status 5", func(ev []evidence.Pathway) { ev[3].Status = 5 })
	edit("a figure of class 0", func(ev []evidence.Pathway) { ev[0].Class = 0 })
	edit("a figure of class 1", func(ev []evidence.Pathway) { ev[0].Class = 1 })
	edit("a figure with J 0", func(ev []evidence.Pathway) { ev[0].Joules = num.U128{} })
	edit("a figure with D 0", func(ev []evidence.Pathway) { ev[0].Delivery = num.U128{} })
	edit("stale with a class", func(ev []evidence.Pathway) { ev[3].Class = evidence.ModelBased })
	edit("unmetered with J", func(ev []evidence.Pathway) { ev[1].Joules = num.U128{Lo: 1} })
	edit("mixed with D", func(ev []evidence.Pathway) { ev[2].Delivery = num.U128{Hi: 1} })

	// A count of digests announcing more than remain is truncated.
	short := EncodeEvidence([]evidence.Pathway{{Status: evidence.StatusStale}}).Body
	short[len(short)-1] = 3
	wantCode(t, "3 digests announced, none given", errOf(DecodeEvidence(short)), reason.Truncated)
}

func errOf[T any](_ T, err error) error { return err }

// rowSeeds are rows of every shape of report (§7.1's present bits).
func rowSeeds() [][]byte {
	var out [][]byte
	for present := range uint8(8) {
		r := row{context: uint64(present) << 20, protocol: report.DASH, snapshot: 1<<64 - 1, loads: []uint32{0, 127, 128, 1<<32 - 1}, logIndex: -1}
		r.session[3] = present
		r.sig[63] = 9
		r.report.Present = present
		if present&report.HasPathway != 0 {
			r.report.Pathway = 2
		}
		if present&report.HasThroughput != 0 {
			r.report.Throughput = 1<<64 - 1
		}
		if present&report.HasBuffer != 0 {
			r.report.Buffer = 4000
		}
		out = append(out, appendRow(nil, &r))
	}
	// A row of no log, and rows that name their leaf (boltlog.go).
	return append(out, appendRow(nil, &row{logIndex: -1}), appendRow(nil, &row{}), appendRow(nil, &row{context: 3, logIndex: 1<<63 - 1}))
}

// TestRowRoundTrip: a row writes back exactly what it read.
func TestRowRoundTrip(t *testing.T) {
	for _, b := range rowSeeds() {
		r, err := parseRow(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendRow(nil, &r); !bytes.Equal(got, b) {
			t.Errorf("row %x writes back as %x", b, got)
		}
	}
}

// TestRowRefuses: a row is read exactly (COMPANION §1's codes for the
// store's layout): a cut, a byte more, another version, a uvarint not in
// its shortest form, a load above u32, a present bit above 2.
func TestRowRefuses(t *testing.T) {
	b := rowSeeds()[7]
	wantCode(t, "no bytes", errOf(parseRow(nil)), reason.Truncated)
	for n := 1; n < len(b); n++ {
		wantCode(t, "cut", errOf(parseRow(b[:n])), reason.Truncated)
	}
	wantCode(t, "a byte more", errOf(parseRow(append(slices.Clone(b), 0))), reason.Malformed)
	v := slices.Clone(b)
	v[0] = 0
	wantCode(t, "version 0", errOf(parseRow(v)), reason.UnknownVersion)

	r := row{loads: []uint32{5}, logIndex: -1}
	canon := appendRow(nil, &r)
	// version, context 0, session 16, protocol, present, n 1, load 5, ...
	long := slices.Concat(canon[:1], []byte{0x80, 0x00}, canon[2:])
	wantCode(t, "context 0 in two bytes", errOf(parseRow(long)), reason.Malformed)
	big := slices.Concat(canon[:21], []byte{0x80, 0x80, 0x80, 0x80, 0x10}, canon[22:]) // 2^32
	wantCode(t, "a load of 2^32", errOf(parseRow(big)), reason.Malformed)
	over := slices.Concat(canon[:21], bytes.Repeat([]byte{0xff}, 10), []byte{0x01}, canon[22:])
	wantCode(t, "a uvarint past 64 bits", errOf(parseRow(over)), reason.Malformed)
	bit3 := slices.Clone(canon)
	bit3[19] = 8
	wantCode(t, "present bit 3", errOf(parseRow(bit3)), reason.Malformed)

	// A row that names its leaf: version 2, then the index in its
	// shortest form, at most 2^63 - 1.
	logged := appendRow(nil, &row{loads: []uint32{5}, logIndex: 5})
	if logged[0] != 2 || logged[1] != 5 || !bytes.Equal(logged[2:], canon[1:]) {
		t.Errorf("a row naming leaf 5 is %x, not 02 05 and the row of no leaf", logged)
	}
	wantCode(t, "leaf 5 in two bytes", errOf(parseRow(slices.Concat(logged[:1], []byte{0x85, 0x00}, logged[2:]))), reason.Malformed)
	wantCode(t, "leaf 2^63", errOf(parseRow(slices.Concat(logged[:1], []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, logged[2:]))), reason.Malformed)
	v = slices.Clone(logged)
	v[0] = 3
	wantCode(t, "version 3", errOf(parseRow(v)), reason.UnknownVersion)
}

// FuzzDecodeEvidence: no input panics, and whatever reads writes back to
// exactly the same bytes.
func FuzzDecodeEvidence(f *testing.F) {
	for _, b := range evidenceSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvidence(b)
		if err != nil {
			if reason.Of(err) == "" {
				t.Fatalf("an error with no code: %v", err)
			}
			return
		}
		if got := AppendEvidence(nil, ev); !bytes.Equal(got, b) {
			t.Fatalf("%x reads and writes back as %x", b, got)
		}
	})
}

// FuzzParseRow: no input panics, and whatever reads writes back to exactly
// the same bytes.
func FuzzParseRow(f *testing.F) {
	for _, b := range rowSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRow(b)
		if err != nil {
			if reason.Of(err) == "" {
				t.Fatalf("an error with no code: %v", err)
			}
			return
		}
		if got := appendRow(nil, &r); !bytes.Equal(got, b) {
			t.Fatalf("%x reads and writes back as %x", b, got)
		}
		// A shared backend's row (context and snapshot 0) reads into a
		// decision that writes back the same bytes; another is refused.
		var d Decision
		err = ParseDecisionRow(b, &d)
		if (err == nil) != (r.context == 0 && r.snapshot == 0 && r.logIndex < 0) {
			t.Fatalf("%x (context %d, snapshot %d): ParseDecisionRow %v", b, r.context, r.snapshot, err)
		}
		if err == nil {
			if got, err := AppendDecisionRow(nil, &d); err != nil || !bytes.Equal(got, b) {
				t.Fatalf("%x reads as a shared backend's row and writes back as %x, %v", b, got, err)
			}
		}
	})
}

// FuzzRebuild: a stored row and snapshot, however damaged, never panic
// Rebuild, and bytes it returns are a decision (§7.1) whose digest is the
// row's (§7.3) and which compacts back to the row.
func FuzzRebuild(f *testing.F) {
	// One period of records and one decision whose window holds it
	// (§5.1: b = P at t = L + P): each process builds its seeds in a few
	// signatures, and a snapshot of six digests is short to mutate and to
	// minimize.
	sc := pathwaysScenario(f, 3, 1)
	m := makeDecisions(f, sc, 21, 1, sc.Policy.LagUs+sc.Policy.PeriodUs, 0)[0]
	fixed := m.row
	rb := appendRow(nil, &row{session: m.row.Session, protocol: m.row.Protocol, report: m.row.Report,
		loads: m.row.Loads, sig: m.row.Sig})
	other := m.row.Session
	other[0] ^= 1
	p, pd := sc.Policy, sc.Policy.Digest()
	for _, s := range []struct {
		rb, body []byte
		rebuilds bool
	}{
		{rb, m.ev.Body, true},
		{appendRow(nil, &row{session: other, protocol: m.row.Protocol, report: m.row.Report,
			loads: m.row.Loads, sig: m.row.Sig}), m.ev.Body, false}, // another session: ErrMismatch
		{rb, EncodeEvidence(nil).Body, false}, // a snapshot of no pathways
	} {
		r, err := parseRow(s.rb)
		if err != nil {
			f.Fatal(err)
		}
		d := fixed
		d.Session = r.session
		if _, err := Rebuild(p, pd, d, s.body); (err == nil) != s.rebuilds {
			f.Fatalf("a seed rebuilds %t: %v", s.rebuilds, err)
		}
		f.Add(s.rb, s.body)
	}
	f.Fuzz(func(t *testing.T, rb, body []byte) {
		r, err := parseRow(rb)
		if err != nil {
			return
		}
		d := fixed
		d.Session, d.Protocol, d.Report, d.Loads, d.Sig = r.session, r.protocol, r.report, r.loads, r.sig
		out, err := Rebuild(p, pd, d, body)
		if err != nil {
			return
		}
		dec, err := decision.Parse(out)
		if err != nil {
			t.Fatalf("rebuilt bytes do not read: %v", err)
		}
		if dec.Digest() != d.Digest {
			t.Fatalf("rebuilt digest %s, row %s", dec.Digest(), d.Digest)
		}
		ev := make([]evidence.Pathway, len(dec.Pathways))
		for i := range ev {
			ev[i] = dec.Pathways[i].Pathway
		}
		if back := Compact(dec, d.Digest, d.Evidence); !sameDecision(back, d) || !bytes.Equal(AppendEvidence(nil, ev), body) {
			t.Fatalf("rebuilt decision compacts to another row")
		}
	})
}
