package decision

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

// testKey is a fixed signing key: tests are deterministic.
func testKey(b byte) sig.PrivateKey {
	var seed [32]byte
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return sig.NewPrivateKey(seed)
}

// digestN is a digest no other test digest equals.
func digestN(n int) sig.Hash {
	h := sha256.Sum256(binary.LittleEndian.AppendUint64([]byte("test record"), uint64(n)))
	return h
}

// validDecision is a decision that keeps every rule of §7.2, with a pathway
// of each kind: a figure, a stale one and an unmetered one.
func validDecision() *Decision {
	d := &Decision{
		T:        1_700_000_000_000_000,
		Draw:     123_456,
		Protocol: report.HLS,
		Report: report.Report{
			Present:    report.HasPathway | report.HasThroughput | report.HasBuffer,
			Pathway:    1,
			Throughput: 6_000_000,
			Buffer:     12_000,
		},
		Pathways: []PathwayState{
			{Load: 10, Limits: Within, Pathway: evidence.Pathway{
				Records: []sig.Hash{digestN(1), digestN(2), digestN(3)},
				Status:  evidence.StatusFigure, Class: evidence.OnChipCounter,
				Joules: num.From64(5_000_000), Delivery: num.U128{Lo: 7, Hi: 1},
			}},
			{Load: 0, Limits: LimitLatency | LimitQuality, Pathway: evidence.Pathway{
				Records: []sig.Hash{digestN(4)},
				Status:  evidence.StatusStale,
			}},
			{Load: 3, Limits: Within, Pathway: evidence.Pathway{
				Records: []sig.Hash{digestN(5), digestN(6)},
				Status:  evidence.StatusUnmetered,
			}},
		},
		TTL:      300,
		Reason:   Rank,
		Priority: []uint8{0, 2, 1},
	}
	for i := range d.Room {
		d.Room[i] = 0xa0 + byte(i%16)
		d.Policy[i] = 0x50 + byte(i%7)
	}
	for i := range d.Session {
		d.Session[i] = byte(i * 17)
	}
	d.Signer = testKey(1).Public()
	for i := range d.Sig {
		d.Sig[i] = byte(i)
	}
	return d
}

// randomDecision is a decision that keeps every rule of §7.2, with n
// pathways each naming k records.
func randomDecision(rng *rand.Rand, n, k int) *Decision {
	d := &Decision{
		T:        rng.Uint64(),
		Draw:     rng.Uint32N(DrawRange),
		Protocol: report.Protocol(1 + rng.IntN(2)),
		TTL:      1 + rng.Uint32N(1<<31),
		Reason:   Reason(1 + rng.IntN(6)),
	}
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
	}
	fill(d.Room[:])
	fill(d.Signer[:])
	fill(d.Policy[:])
	fill(d.Session[:])
	fill(d.Sig[:])
	base := rng.IntN(1 << 30)
	if n > 0 {
		d.Pathways = make([]PathwayState, n)
	}
	for i := range d.Pathways {
		p := &d.Pathways[i]
		p.Load = rng.Uint32()
		p.Limits = Limits(rng.UintN(8))
		p.Status = evidence.Status(rng.UintN(5))
		if p.Status == evidence.StatusFigure {
			p.Class = evidence.Class(2 + rng.UintN(4))
			p.Joules = num.U128{Lo: rng.Uint64() | 1, Hi: rng.Uint64() >> rng.UintN(65)}
			p.Delivery = num.U128{Lo: rng.Uint64() | 1, Hi: rng.Uint64() >> rng.UintN(65)}
		}
		if k > 0 {
			p.Records = make([]sig.Hash, k)
			for j := range p.Records {
				p.Records[j] = digestN(base + i*MaxCount + j)
			}
		}
	}
	if n > 0 {
		d.Priority = make([]uint8, n)
		for i, j := range rng.Perm(n) {
			d.Priority[i] = uint8(j)
		}
	}
	d.Report.Present = uint8(rng.UintN(8))
	if n == 0 {
		d.Report.Present &^= report.HasPathway
	}
	if d.Report.Present&report.HasPathway != 0 {
		d.Report.Pathway = uint8(rng.IntN(n))
	}
	if d.Report.Present&report.HasThroughput != 0 {
		d.Report.Throughput = rng.Uint64()
	}
	if d.Report.Present&report.HasBuffer != 0 {
		d.Report.Buffer = rng.Uint64()
	}
	return d
}

// §7.1: the layout, field by field, checked at fixed offsets against bytes
// written here with encoding/binary rather than by AppendBody.
func TestLayout_7_1(t *testing.T) {
	d := validDecision()
	b := Append(nil, d)

	var want []byte
	want = append(want, "WSD1"...)
	want = append(want, 1)
	want = append(want, d.Room[:]...)
	want = append(want, d.Signer[:]...)
	want = append(want, d.Policy[:]...)
	want = binary.LittleEndian.AppendUint64(want, d.T)
	want = append(want, d.Session[:]...)
	want = binary.LittleEndian.AppendUint32(want, d.Draw)
	want = append(want, 1)        // protocol
	want = append(want, 0b111, 1) // present, pathway
	want = binary.LittleEndian.AppendUint64(want, 6_000_000)
	want = binary.LittleEndian.AppendUint64(want, 12_000)
	want = append(want, 3) // count of pathways
	u128 := func(lo, hi uint64) {
		want = binary.LittleEndian.AppendUint64(want, lo)
		want = binary.LittleEndian.AppendUint64(want, hi)
	}
	want = binary.LittleEndian.AppendUint32(want, 10)
	want = append(want, 7, 0, 4) // limits, status, class
	u128(5_000_000, 0)
	u128(7, 1)
	want = append(want, 3)
	for _, n := range []int{1, 2, 3} {
		h := digestN(n)
		want = append(want, h[:]...)
	}
	want = binary.LittleEndian.AppendUint32(want, 0)
	want = append(want, 3, 3, 0)
	u128(0, 0)
	u128(0, 0)
	want = append(want, 1)
	h := digestN(4)
	want = append(want, h[:]...)
	want = binary.LittleEndian.AppendUint32(want, 3)
	want = append(want, 7, 1, 0)
	u128(0, 0)
	u128(0, 0)
	want = append(want, 2)
	for _, n := range []int{5, 6} {
		h := digestN(n)
		want = append(want, h[:]...)
	}
	want = binary.LittleEndian.AppendUint32(want, 300)
	want = append(want, 5)          // reason: rank
	want = append(want, 3, 0, 2, 1) // priority
	body := len(want)
	want = append(want, d.Sig[:]...)

	if !bytes.Equal(b, want) {
		t.Fatalf("Append wrote\n%x\nwant\n%x", b, want)
	}
	if got := d.BodySize(); got != body {
		t.Errorf("BodySize = %d, want %d", got, body)
	}
	if got := d.Size(); got != len(want) {
		t.Errorf("Size = %d, want %d", got, len(want))
	}
	// §7.1: the report is 18 bytes.
	if ReportSize != 18 {
		t.Errorf("ReportSize = %d, want 18", ReportSize)
	}
}

// §7.1, §7.2: what Append writes Parse reads back to the same decision, and
// what Parse reads Append writes back to the same bytes.
func TestRoundTrip_7_1(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []*Decision{validDecision()}
	for _, nk := range [][2]int{{0, 0}, {1, 0}, {1, 1}, {3, 36}, {32, 3}, {32, 255}, {255, 1}} {
		cases = append(cases, randomDecision(rng, nk[0], nk[1]))
	}
	for range 200 {
		cases = append(cases, randomDecision(rng, rng.IntN(40), rng.IntN(8)))
	}
	for i, d := range cases {
		b := Append(nil, d)
		got, err := Parse(b)
		if err != nil {
			t.Fatalf("case %d: Parse(Append(d)): %v", i, err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("case %d: Parse(Append(d)) = %+v, want %+v", i, got, d)
		}
		if again := Append(nil, got); !bytes.Equal(again, b) {
			t.Fatalf("case %d: Append(Parse(b)) differs from b", i)
		}
		if !bytes.Equal(got.Bytes(), b) {
			t.Fatalf("case %d: Bytes differs from the bytes read", i)
		}
		// §7.3: the digest is SHA-256 over the bytes before sig.
		if got.Digest() != sha256.Sum256(b[:len(b)-64]) {
			t.Fatalf("case %d: Digest is not SHA-256 of the bytes before sig", i)
		}
	}
}

// Parse keeps nothing of its input: changing the bytes after the read does
// not change the decision.
func TestParseCopies(t *testing.T) {
	b := Append(nil, validDecision())
	d, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Append(nil, d)
	for i := range b {
		b[i] ^= 0xff
	}
	if !bytes.Equal(Append(nil, d), want) {
		t.Fatal("the decision changed with the bytes it was read from")
	}
}

func wantCode(t *testing.T, err error, code reason.Code, detail string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	if reason.Of(err) != code {
		t.Fatalf("error %v, want %s", err, code)
	}
	if detail != "" && !strings.Contains(err.Error(), detail) {
		t.Fatalf("error %q does not name %q", err, detail)
	}
}

// COMPANION §1: checks 1 to 3 run in order before any field, check 4 is
// truncated, check 5 malformed, and only a decision that reads is checked
// against §7.2.
func TestReading_COMPANION_1(t *testing.T) {
	valid := Append(nil, validDecision())
	withVersion := func(v byte) []byte {
		b := bytes.Clone(valid)
		b[4] = v
		return b
	}
	cases := []struct {
		name string
		b    []byte
		code reason.Code
	}{
		{"check 1: no bytes", nil, reason.Truncated},
		{"check 1: 3 bytes", []byte("WSD"), reason.Truncated},
		{"check 1: 3 bytes of another magic", []byte("XYZ"), reason.Truncated},
		{"check 2: WSP1's magic", append([]byte("WSP1"), valid[4:]...), reason.Malformed},
		{"check 2: lower case", append([]byte("wsd1"), valid[4:]...), reason.Malformed},
		{"check 2 before 3: 4 bytes of another magic", []byte("WSD2"), reason.Malformed},
		{"check 3: no version byte", []byte("WSD1"), reason.Truncated},
		{"check 3: version 0", withVersion(0), reason.UnknownVersion},
		{"check 3: version 2", withVersion(2), reason.UnknownVersion},
		{"check 3 before 4: version 2 and nothing else", []byte("WSD1\x02"), reason.UnknownVersion},
		{"check 4: only the version", []byte("WSD1\x01"), reason.Truncated},
		{"check 5: a byte after sig", append(bytes.Clone(valid), 0), reason.Malformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.b)
			wantCode(t, err, c.code, "")
		})
	}

	// Check 4: every proper prefix that has its header ends before a field.
	for n := 5; n < len(valid); n++ {
		if _, err := Parse(valid[:n]); reason.Of(err) != reason.Truncated {
			t.Fatalf("prefix of %d of %d bytes: %v, want truncated", n, len(valid), err)
		}
	}
}

// COMPANION §1 check 4: a count that announces more than remains is
// truncated, even when the bytes that remain are many.
func TestCountsTruncated_COMPANION_1(t *testing.T) {
	d := validDecision()
	valid := Append(nil, d)
	pathwaysAt := headerSize
	firstEvidence := pathwaysAt + 1 + pathwayFixed - 1
	priorityAt := len(valid) - 64 - 1 - len(d.Priority)
	for _, c := range []struct {
		name string
		at   int
	}{
		{"count of pathways", pathwaysAt},
		{"count of evidence", firstEvidence},
		{"count of priority", priorityAt},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(valid)
			b[c.at] = 255
			_, err := Parse(b)
			wantCode(t, err, reason.Truncated, "")
		})
	}
	// The offsets are the fields named: the values there are the counts.
	if valid[pathwaysAt] != 3 || valid[firstEvidence] != 3 || valid[priorityAt] != 3 {
		t.Fatalf("offsets do not hold the counts: %d %d %d", valid[pathwaysAt], valid[firstEvidence], valid[priorityAt])
	}
}

// COMPANION §1: "Only a record that reads is checked against its rules": a
// decision that breaks §7.2 and does not read is truncated or malformed.
func TestReadingBeforeRules_COMPANION_1(t *testing.T) {
	d := validDecision()
	d.Protocol = 9
	b := Append(nil, d)
	if _, err := Parse(b); reason.Of(err) != reason.DecisionInvalid {
		t.Fatalf("whole: %v, want decision_invalid", err)
	}
	_, err := Parse(b[:len(b)-1])
	wantCode(t, err, reason.Truncated, "")
	_, err = Parse(append(b, 1))
	wantCode(t, err, reason.Malformed, "")
}

// §7.2: each rule, broken alone in an otherwise valid decision, is
// decision_invalid with a detail naming it.
func TestRules_7_2(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(d *Decision)
		detail string
	}{
		{"§7.2 protocol is 1 or 2: 0", func(d *Decision) { d.Protocol = 0 }, "protocol is 0"},
		{"§7.2 protocol is 1 or 2: 3", func(d *Decision) { d.Protocol = 3 }, "protocol is 3"},
		{"§7.2 draw below 1000000: 1000000", func(d *Decision) { d.Draw = 1_000_000 }, "draw is 1000000"},
		{"§7.2 draw below 1000000: max u32", func(d *Decision) { d.Draw = 1<<32 - 1 }, "draw is 4294967295"},
		{"§7.2 ttl at least 1: 0", func(d *Decision) { d.TTL = 0 }, "ttl is 0"},
		{"§7.2 reason 1 to 6: 0", func(d *Decision) { d.Reason = 0 }, "reason is 0"},
		{"§7.2 reason 1 to 6: 7", func(d *Decision) { d.Reason = 7 }, "reason is 7"},
		{"§7.2 present has no bit above 2: bit 3", func(d *Decision) { d.Report.Present |= 1 << 3 }, "present is"},
		{"§7.2 present has no bit above 2: bit 7", func(d *Decision) { d.Report.Present = 1 << 7 }, "present is"},
		{"§7.2 an absent value is 0: pathway", func(d *Decision) { d.Report.Present &^= report.HasPathway }, "pathway is absent but 1"},
		{"§7.2 an absent value is 0: throughput", func(d *Decision) { d.Report.Present &^= report.HasThroughput }, "throughput is absent"},
		{"§7.2 an absent value is 0: buffer", func(d *Decision) { d.Report.Present &^= report.HasBuffer }, "buffer is absent"},
		{"§7.2 a present pathway is below the count", func(d *Decision) { d.Report.Pathway = 3 }, "present pathway 3"},
		{"§7.2 a present pathway is below the count: 255", func(d *Decision) { d.Report.Pathway = 255 }, "present pathway 255"},
		{"§7.2 limits has no bit above 2", func(d *Decision) { d.Pathways[1].Limits |= 1 << 3 }, "pathway 1: limits"},
		{"§7.2 limits has no bit above 2: bit 7", func(d *Decision) { d.Pathways[0].Limits = 1 << 7 }, "pathway 0: limits"},
		{"§7.2 status is 0 to 4: 5", func(d *Decision) { d.Pathways[1].Status = 5 }, "pathway 1: status is 5"},
		{"§7.2 status 0: class 2 to 5: 0", func(d *Decision) { d.Pathways[0].Class = 0 }, "status 0 with class 0"},
		{"§7.2 status 0: class 2 to 5: 1", func(d *Decision) { d.Pathways[0].Class = 1 }, "status 0 with class 1"},
		{"§7.2 status 0: class 2 to 5: 6", func(d *Decision) { d.Pathways[0].Class = 6 }, "status 0 with class 6"},
		{"§7.2 status 0: joules above 0", func(d *Decision) { d.Pathways[0].Joules = num.U128{} }, "status 0 with joules 0"},
		{"§7.2 status 0: delivery above 0", func(d *Decision) { d.Pathways[0].Delivery = num.U128{} }, "status 0 with delivery 0"},
		{"§7.2 other status: class 0", func(d *Decision) { d.Pathways[1].Class = evidence.ModelBased }, "status 3 with class 2"},
		{"§7.2 other status: joules 0", func(d *Decision) { d.Pathways[2].Joules = num.U128{Hi: 1} }, "status 1 with joules"},
		{"§7.2 other status: delivery 0", func(d *Decision) { d.Pathways[1].Delivery = num.From64(1) }, "status 3 with delivery"},
		{"§7.2 other status: empty with delivery", func(d *Decision) {
			d.Pathways[1].Status = evidence.StatusEmpty
			d.Pathways[1].Delivery = num.From64(1)
		}, "status 4 with delivery"},
		{"§7.2 no digest named twice: in one pathway", func(d *Decision) {
			d.Pathways[0].Records[2] = d.Pathways[0].Records[0]
		}, "named twice"},
		{"§7.2 no digest named twice: in two pathways", func(d *Decision) {
			d.Pathways[2].Records[1] = d.Pathways[0].Records[1]
		}, "named twice"},
		{"§7.2 priority: m is the count: fewer", func(d *Decision) { d.Priority = d.Priority[:2] }, "priority names 2 indices"},
		{"§7.2 priority: m is the count: more", func(d *Decision) { d.Priority = append(d.Priority, 1) }, "priority names 4 indices"},
		{"§7.2 priority: m is the count: none", func(d *Decision) { d.Priority = nil }, "priority names 0 indices"},
		{"§7.2 priority: a permutation: index out of range", func(d *Decision) { d.Priority[1] = 3 }, "priority index 3"},
		{"§7.2 priority: a permutation: index twice", func(d *Decision) { d.Priority[2] = 0 }, "names pathway 0 twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := validDecision()
			if err := d.Validate(); err != nil {
				t.Fatalf("the control does not validate: %v", err)
			}
			c.break_(d)
			_, err := Parse(Append(nil, d))
			wantCode(t, err, reason.DecisionInvalid, c.detail)
			wantCode(t, d.Validate(), reason.DecisionInvalid, c.detail)
		})
	}
}

// §7.2: the bounds of each rule are inside it.
func TestRulesBounds_7_2(t *testing.T) {
	cases := []struct {
		name string
		set  func(d *Decision)
	}{
		{"protocol 2", func(d *Decision) { d.Protocol = report.DASH }},
		{"draw 0", func(d *Decision) { d.Draw = 0 }},
		{"draw 999999", func(d *Decision) { d.Draw = 999_999 }},
		{"ttl 1", func(d *Decision) { d.TTL = 1 }},
		{"ttl max", func(d *Decision) { d.TTL = 1<<32 - 1 }},
		{"reason 1", func(d *Decision) { d.Reason = Buffer }},
		{"reason 6", func(d *Decision) { d.Reason = None }},
		{"nothing present", func(d *Decision) { d.Report = report.Report{} }},
		{"present pathway 2, the last", func(d *Decision) { d.Report.Pathway = 2 }},
		{"present pathway 0 and no other", func(d *Decision) {
			d.Report = report.Report{Present: report.HasPathway}
		}},
		{"present zero throughput", func(d *Decision) { d.Report.Throughput = 0 }},
		{"limits 0", func(d *Decision) { d.Pathways[0].Limits = 0 }},
		{"class 2", func(d *Decision) { d.Pathways[0].Class = evidence.ModelBased }},
		{"class 5", func(d *Decision) { d.Pathways[0].Class = evidence.CalibratedInstrument }},
		{"status 2 and 4", func(d *Decision) {
			d.Pathways[1].Status = evidence.StatusMixed
			d.Pathways[2].Status = evidence.StatusEmpty
		}},
		{"a pathway with no records", func(d *Decision) { d.Pathways[1].Records = nil }},
		{"two digests that differ only after their first 8 bytes", func(d *Decision) {
			h := d.Pathways[0].Records[0]
			h[31] ^= 1
			d.Pathways[2].Records[0] = h
		}},
		{"joules and delivery of 128 bits", func(d *Decision) {
			d.Pathways[0].Joules = num.U128{Lo: 1<<64 - 1, Hi: 1<<64 - 1}
			d.Pathways[0].Delivery = num.U128{Hi: 1}
		}},
		{"another permutation", func(d *Decision) { d.Priority = []uint8{2, 1, 0} }},
		{"no pathways", func(d *Decision) {
			d.Pathways, d.Priority = nil, nil
			d.Report.Present &^= report.HasPathway
			d.Report.Pathway = 0
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := validDecision()
			c.set(d)
			if _, err := Parse(Append(nil, d)); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// §7.1: a count is a u8, so Validate refuses a decision Append could not
// write.
func TestCountsAboveU8_7_1(t *testing.T) {
	d := randomDecision(rand.New(rand.NewPCG(3, 4)), 255, 0)
	if err := d.Validate(); err != nil {
		t.Fatalf("255 pathways: %v", err)
	}
	d.Pathways = append(d.Pathways, PathwayState{Pathway: evidence.Pathway{Status: evidence.StatusEmpty}})
	d.Priority = append(d.Priority, 255)
	wantCode(t, d.Validate(), reason.DecisionInvalid, "more than a u8 count holds")

	d = validDecision()
	for i := range 256 {
		d.Pathways[1].Records = append(d.Pathways[1].Records, digestN(1000+i))
	}
	wantCode(t, d.Validate(), reason.DecisionInvalid, "pathway 1 names 257 records")
}

// §7.3: the signature is Ed25519 by signer over the 22 bytes
// `wai:steering-decision` and 0x01, then the bytes before sig. Checked with
// the standard library's Ed25519 over a message built here.
func TestSignature_7_3(t *testing.T) {
	if len(SignedPrefix) != 22 {
		t.Fatalf("the prefix is %d bytes, not §7.3's 22", len(SignedPrefix))
	}
	k := testKey(7)
	d := validDecision()
	b := Sign(d, k)
	if d.Signer != k.Public() {
		t.Fatal("Sign did not set the signer")
	}
	pub := k.Public()
	msg := append([]byte("wai:steering-decision\x01"), b[:len(b)-64]...)
	if !ed25519.Verify(pub[:], msg, b[len(b)-64:]) {
		t.Fatal("the signature does not verify over §7.3's message")
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.VerifySignature(); err != nil {
		t.Fatalf("VerifySignature: %v", err)
	}
	if err := sig.Verify(got.Signer, sig.DomainDecision, AppendBody(nil, got), got.Sig); err != nil {
		t.Fatalf("sig.Verify: %v", err)
	}
	// Ed25519 is deterministic: AppendSigned into a buffer with bytes
	// before it writes the same record and the digest of its body.
	dst := []byte("before")
	rec, dg := AppendSigned(dst, validDecision(), k)
	if !bytes.Equal(rec, b) {
		t.Fatal("AppendSigned and Sign differ")
	}
	if dg != sha256.Sum256(b[:len(b)-64]) || dg != got.Digest() {
		t.Fatal("AppendSigned's digest is not SHA-256 of the bytes before sig")
	}
}

// §7.3: any byte changed after signing fails: bad_signature, or bad_key
// when the change is in the signer and makes it no key.
func TestFlippedByte_7_3(t *testing.T) {
	k := testKey(9)
	b := Sign(validDecision(), k)
	signerAt := 5 + 32
	parsed := 0
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x01
		d, err := Parse(c)
		if err != nil {
			continue // this byte's change breaks the reading or a rule
		}
		parsed++
		err = d.VerifySignature()
		code := reason.Of(err)
		if i >= signerAt && i < signerAt+32 {
			if code != reason.BadSignature && code != reason.BadKey {
				t.Fatalf("byte %d (signer): %v", i, err)
			}
			continue
		}
		if code != reason.BadSignature {
			t.Fatalf("byte %d: %v, want bad_signature", i, err)
		}
	}
	if parsed < len(b)/2 {
		t.Fatalf("only %d of %d changed copies read", parsed, len(b))
	}
}

// §7.3, COMPANION §2 steps 1 and 2: a signer of small order, or one that
// is no curve point, is bad_key whatever the signature.
func TestBadKey_7_3(t *testing.T) {
	for _, h := range []string{
		"0100000000000000000000000000000000000000000000000000000000000000", // identity, small order
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p: no point
	} {
		d := validDecision()
		Sign(d, testKey(2))
		hex.Decode(d.Signer[:], []byte(h))
		got, err := Parse(Append(nil, d))
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, got.VerifySignature(), reason.BadKey, "")
	}
}

// AppendBody allocates nothing given room, and AppendSigned writes the
// record in place in the buffer it is given.
func TestAppendInPlace(t *testing.T) {
	d := randomDecision(rand.New(rand.NewPCG(5, 6)), 32, 36)
	buf := make([]byte, 0, d.BodySize())
	if n := testing.AllocsPerRun(100, func() { buf = AppendBody(buf[:0], d) }); n != 0 {
		t.Errorf("AppendBody: %v allocations, want 0", n)
	}
	wbuf := make([]byte, 0, len(SignedPrefix)+d.Size())
	rec, _ := AppendSigned(wbuf, d, testKey(3))
	if &rec[0] != &wbuf[:len(SignedPrefix)+1][len(SignedPrefix)] {
		t.Error("AppendSigned did not write into the buffer it was given")
	}
	if string(wbuf[:len(SignedPrefix)]) != "wai:steering-decision\x01" {
		t.Errorf("the buffer begins %q", wbuf[:len(SignedPrefix)])
	}
	if !bytes.Equal(rec, Append(nil, d)) {
		t.Error("the record is not the decision's bytes")
	}
}

// benchDecision is a decision of n pathways each naming k records: k = 36
// is 3 hops over a window of an hour cut in periods of 5 minutes; 255 is
// the most a u8 count names.
func benchDecision(n, k int) *Decision {
	return randomDecision(rand.New(rand.NewPCG(uint64(n), uint64(k))), n, k)
}

var benchSizes = [][2]int{{3, 36}, {32, 36}, {32, 255}}

func BenchmarkAppendSigned(b *testing.B) {
	k := testKey(4)
	for _, nk := range benchSizes {
		d := benchDecision(nk[0], nk[1])
		b.Run(fmt.Sprintf("%dx%d", nk[0], nk[1]), func(b *testing.B) {
			buf := make([]byte, 0, len(SignedPrefix)+d.Size())
			b.SetBytes(int64(d.Size()))
			b.ReportAllocs()
			for b.Loop() {
				AppendSigned(buf[:0], d, k)
			}
		})
	}
}

// BenchmarkSignature is the Ed25519 signature alone over the message
// AppendSigned signs, to tell what share of it is the signature.
func BenchmarkSignature(b *testing.B) {
	k := testKey(4)
	for _, nk := range benchSizes {
		d := benchDecision(nk[0], nk[1])
		msg := AppendBody([]byte(SignedPrefix), d)
		b.Run(fmt.Sprintf("%dx%d", nk[0], nk[1]), func(b *testing.B) {
			b.SetBytes(int64(d.Size()))
			b.ReportAllocs()
			for b.Loop() {
				k.SignRaw(msg)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, nk := range benchSizes {
		rec := Append(nil, benchDecision(nk[0], nk[1]))
		b.Run(fmt.Sprintf("%dx%d", nk[0], nk[1]), func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
