package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// Offsets of the fields the tests alter (COMPANION §5).
const (
	offVersion  = 4
	offRoom     = 5
	offHop      = 37
	offStart    = 69
	offEnd      = 77
	offClass    = 85
	offJoules   = 86
	offSessions = 94
	offCount    = 98
	offTracks   = 99
)

var testRoom = sig.Digest([]byte("a room descriptor's body"))

func testKey(b byte) sig.PrivateKey {
	var seed [sig.SeedSize]byte
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return sig.NewPrivateKey(seed)
}

// testRecord is a record that is valid in every rule of COMPANION §5.
func testRecord() *Record {
	return &Record{
		Room:     testRoom,
		Start:    1_700_000_000_000_000,
		End:      1_700_000_060_000_000,
		Class:    OnChipCounter,
		Joules:   12_500_000,
		Sessions: 3,
		Tracks: []Track{
			{Kind: KindMedia, Direction: DirIn, Bytes: 1 << 20},
			{Kind: KindMedia, Direction: DirOut, Bytes: 3 << 20},
			{Kind: KindOther, Direction: DirOut, Bytes: 4096},
		},
		SubscriberUs: [8]uint64{0, 0, 60_000_000, 120_000_000, 0, 0, 0, 1},
	}
}

// signed returns r signed by testKey(1) and its bytes.
func signed(r *Record) []byte { return SignRecord(r, testKey(1)) }

func wantCode(t *testing.T, err error, code reason.Code) {
	t.Helper()
	if got := reason.Of(err); got != code {
		t.Fatalf("got %v (code %q), want %q", err, got, code)
	}
}

// with returns a copy of b with f applied.
func with(b []byte, f func(b []byte) []byte) []byte {
	return f(bytes.Clone(b))
}

func TestRecordLengthIsCompanion5Layout(t *testing.T) {
	// COMPANION §5: 4+1+32+32+8+8+1+8+4+1 + 10n + 64 + 64.
	for _, n := range []int{0, 1, 3, 32, 33, 255} {
		r := testRecord()
		r.Tracks = make([]Track, n)
		b := AppendRecord(nil, r)
		if len(b) != 227+10*n || recordLen(n) != len(b) {
			t.Errorf("n=%d: %d bytes, recordLen %d, want %d", n, len(b), recordLen(n), 227+10*n)
		}
	}
	b := signed(testRecord())
	if string(b[:4]) != "WMH1" || b[offVersion] != 1 || b[offCount] != 3 ||
		!bytes.Equal(b[offRoom:offRoom+32], testRoom[:]) ||
		binary.LittleEndian.Uint64(b[offStart:]) != testRecord().Start ||
		binary.LittleEndian.Uint64(b[offEnd:]) != testRecord().End ||
		b[offClass] != byte(OnChipCounter) ||
		binary.LittleEndian.Uint64(b[offJoules:]) != 12_500_000 ||
		binary.LittleEndian.Uint32(b[offSessions:]) != 3 ||
		b[offTracks] != KindMedia || b[offTracks+1] != DirIn ||
		binary.LittleEndian.Uint64(b[offTracks+2:]) != 1<<20 ||
		binary.LittleEndian.Uint64(b[offTracks+30+16:]) != 60_000_000 {
		t.Errorf("fields not at COMPANION §5's places:\n%s", hex.Dump(b))
	}
}

func TestParseRecordRoundTrip(t *testing.T) {
	cases := map[string]func(r *Record){
		"three tracks": func(r *Record) {},
		"no tracks":    func(r *Record) { r.Tracks = nil },
		"unmetered":    func(r *Record) { r.Class, r.Joules = Unmetered, 0 },
		"32 tracks": func(r *Record) {
			r.Tracks = make([]Track, MaxTracks)
			for i := range r.Tracks {
				r.Tracks[i] = Track{Kind: uint8(1 + i%2), Direction: uint8(1 + i/2%2), Bytes: uint64(i) << 40}
			}
		},
		"extremes": func(r *Record) {
			r.Start, r.End, r.Joules, r.Sessions = 0, 1<<64-1, 1<<64-1, 1<<32-1
			r.Class = CalibratedInstrument
			r.SubscriberUs = [8]uint64{1<<64 - 1, 1, 2, 3, 4, 5, 6, 1<<64 - 1}
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			r := testRecord()
			f(r)
			b := signed(r)
			got, err := ParseRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Errorf("read %+v\nsigned %+v", got, r)
			}
			if out := AppendRecord(nil, got); !bytes.Equal(out, b) {
				t.Errorf("AppendRecord does not give back the bytes read")
			}
			if err := got.Check(testRoom); err != nil {
				t.Errorf("Check: %v", err)
			}
			// live-metering §3.5: the digest is over the bytes before sig;
			// COMPANION §6: NamedDigest gives the same for a record that reads.
			want := sha256.Sum256(b[:len(b)-64])
			if got.Digest() != want || NamedDigest(b) != want {
				t.Errorf("Digest %s, NamedDigest %s, want %x", got.Digest(), NamedDigest(b), want)
			}
			// The record read shares no memory with the bytes.
			clear(b)
			if !reflect.DeepEqual(got, r) {
				t.Errorf("the record read changed with the bytes it was read from")
			}
		})
	}
}

func TestSignRecordSetsHopAndSig(t *testing.T) {
	r := testRecord()
	k := testKey(9)
	b := SignRecord(r, k)
	if r.Hop != k.Public() {
		t.Errorf("hop %s, want the signing key %s", r.Hop, k.Public())
	}
	if !bytes.Equal(b[len(b)-64:], r.Sig[:]) || !bytes.Equal(b[offHop:offHop+32], r.Hop[:]) {
		t.Errorf("bytes do not carry the hop and sig set")
	}
	// COMPANION §2: the signature covers "wai:hop-record" ‖ 0x01 ‖ the body.
	msg := append([]byte("wai:hop-record\x01"), b[:len(b)-64]...)
	if err := sig.VerifyRaw(r.Hop, msg, r.Sig); err != nil {
		t.Errorf("signature over the domain-separated body: %v", err)
	}
	if !bytes.Equal(AppendRecordBody(nil, r), b[:len(b)-64]) {
		t.Errorf("AppendRecordBody is not the bytes before sig")
	}
}

// COMPANION §1 check 1, 3 and 4 (COMPANION §5 reading, first code): every
// prefix of a record, at each stage, is truncated.
func TestParseRecordCompanion5Truncated(t *testing.T) {
	b := signed(testRecord())
	stages := map[string]int{
		"no bytes":             0,
		"fewer than 4 bytes":   3,
		"no version byte":      4,
		"mid room":             20,
		"mid hop":              offHop + 31,
		"mid start":            offStart + 4,
		"before class":         offClass,
		"mid joules":           offJoules + 7,
		"mid sessions":         offSessions + 2,
		"before the count":     offCount,
		"before the tracks":    offTracks,
		"mid the tracks":       offTracks + 15,
		"before subscriber_us": offTracks + 30,
		"mid subscriber_us":    offTracks + 30 + 33,
		"mid sig":              len(b) - 1,
	}
	for name, n := range stages {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRecord(b[:n])
			wantCode(t, err, reason.Truncated)
		})
	}
	for n := range len(b) {
		if _, err := ParseRecord(b[:n]); reason.Of(err) != reason.Truncated {
			t.Fatalf("prefix of %d bytes: %v, want truncated", n, err)
		}
	}
	// COMPANION §1 check 1 runs before check 2: three bytes of a wrong magic.
	_, err := ParseRecord([]byte("XYZ"))
	wantCode(t, err, reason.Truncated)
}

// COMPANION §1 check 4 for a count above 32 (COMPANION §5): the entries the
// count announces must be there before the count is refused.
func TestParseRecordCompanion5CountAbove32AnnouncesContent(t *testing.T) {
	r := testRecord()
	r.Tracks = make([]Track, 33)
	b := AppendRecord(nil, r)
	_, err := ParseRecord(b[:offTracks+10*32])
	wantCode(t, err, reason.Truncated)
	_, err = ParseRecord(b[:len(b)-1])
	wantCode(t, err, reason.Truncated)
	_, err = ParseRecord(b)
	wantCode(t, err, reason.RecordInvalid)
}

// COMPANION §1 checks 2 and 5.
func TestParseRecordCompanion5Malformed(t *testing.T) {
	b := signed(testRecord())
	cases := map[string][]byte{
		"magic WMH2":           with(b, func(b []byte) []byte { b[3] = '2'; return b }),
		"magic wmh1":           with(b, func(b []byte) []byte { copy(b, "wmh1"); return b }),
		"magic of a policy":    with(b, func(b []byte) []byte { copy(b, "WSP1"); return b }),
		"only a wrong magic":   []byte("WMHX"),
		"wrong magic, version": []byte("XMH1\x01"),
		"a trailing byte":      append(bytes.Clone(b), 0),
		"a second record":      append(bytes.Clone(b), b...),
		// The layout is read before the rules (COMPANION §1): a record that
		// breaks them and has bytes left over is malformed.
		"trailing bytes after a record breaking its rules": append(with(b, func(b []byte) []byte { b[offClass] = 1; return b }), 0),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRecord(in)
			wantCode(t, err, reason.Malformed)
		})
	}
}

// COMPANION §1 check 3.
func TestParseRecordCompanion5UnknownVersion(t *testing.T) {
	b := signed(testRecord())
	for _, v := range []byte{0, 2, 255} {
		in := with(b, func(b []byte) []byte { b[offVersion] = v; return b })
		_, err := ParseRecord(in)
		wantCode(t, err, reason.UnknownVersion)
		// Check 3 runs before any other field is read.
		_, err = ParseRecord(in[:5])
		wantCode(t, err, reason.UnknownVersion)
	}
}

// COMPANION §5: energy_invalid, each case, and before record_invalid.
func TestParseRecordCompanion5EnergyInvalid(t *testing.T) {
	cases := map[string]func(r *Record){
		"class 1 is not a class":     func(r *Record) { r.Class = 1 },
		"class 6 is not a class":     func(r *Record) { r.Class = 6 },
		"class 255 is not a class":   func(r *Record) { r.Class = 255 },
		"the marker with joules":     func(r *Record) { r.Class, r.Joules = Unmetered, 1 },
		"ModelBased with no joules":  func(r *Record) { r.Class, r.Joules = ModelBased, 0 },
		"Estimator with no joules":   func(r *Record) { r.Class, r.Joules = Estimator, 0 },
		"OnChipCounter, no joules":   func(r *Record) { r.Class, r.Joules = OnChipCounter, 0 },
		"Calibrated with no joules":  func(r *Record) { r.Class, r.Joules = CalibratedInstrument, 0 },
		"before record_invalid: end": func(r *Record) { r.Class, r.End = 1, r.Start },
		"before record_invalid: n": func(r *Record) {
			r.Joules = 0
			r.Tracks = make([]Track, 40)
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			r := testRecord()
			f(r)
			_, err := ParseRecord(signed(r))
			wantCode(t, err, reason.EnergyInvalid)
			wantCode(t, r.Validate(), reason.EnergyInvalid)
		})
	}
}

// COMPANION §5: record_invalid, each case.
func TestParseRecordCompanion5RecordInvalid(t *testing.T) {
	cases := map[string]func(r *Record){
		"end equal to start":  func(r *Record) { r.End = r.Start },
		"end before start":    func(r *Record) { r.End = r.Start - 1 },
		"end 0":               func(r *Record) { r.Start, r.End = 0, 0 },
		"33 tracks":           func(r *Record) { r.Tracks = append(r.Tracks, make([]Track, 30)...) },
		"255 tracks":          func(r *Record) { r.Tracks = make([]Track, 255) },
		"kind 0":              func(r *Record) { r.Tracks[1].Kind = 0 },
		"kind 3":              func(r *Record) { r.Tracks[2].Kind = 3 },
		"direction 0":         func(r *Record) { r.Tracks[0].Direction = 0 },
		"direction 255":       func(r *Record) { r.Tracks[2].Direction = 255 },
		"count before kinds":  func(r *Record) { r.Tracks = make([]Track, 33) },
		"unmetered, no spans": func(r *Record) { r.Class, r.Joules, r.End = 0, 0, r.Start },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			r := testRecord()
			f(r)
			_, err := ParseRecord(signed(r))
			wantCode(t, err, reason.RecordInvalid)
			wantCode(t, r.Validate(), reason.RecordInvalid)
		})
	}
}

// The limits of COMPANION §5's rules are valid: 32 tracks, end one after
// start, the marker with no joules, every class with 1 µJ.
func TestParseRecordCompanion5Limits(t *testing.T) {
	cases := map[string]func(r *Record){
		"32 tracks":     func(r *Record) { r.Tracks = append(r.Tracks, make([]Track, 29)...); fillTracks(r) },
		"a span of 1µs": func(r *Record) { r.End = r.Start + 1 },
		"the marker":    func(r *Record) { r.Class, r.Joules = Unmetered, 0 },
	}
	for _, c := range []Class{ModelBased, Estimator, OnChipCounter, CalibratedInstrument} {
		cases["1 µJ of "+c.Label()] = func(r *Record) { r.Class, r.Joules = c, 1 }
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			r := testRecord()
			f(r)
			if _, err := ParseRecord(signed(r)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func fillTracks(r *Record) {
	for i := range r.Tracks {
		r.Tracks[i] = Track{Kind: KindOther, Direction: DirIn}
	}
}

// COMPANION §5: wrong_room, after the rules and before the signature.
func TestCheckRecordCompanion5WrongRoom(t *testing.T) {
	r, err := ParseRecord(signed(testRecord()))
	if err != nil {
		t.Fatal(err)
	}
	other := testRoom
	other[31] ^= 1
	wantCode(t, r.Check(other), reason.WrongRoom)
	// Before the signature: a record with a bad signature in another room.
	r.Sig[0] ^= 1
	wantCode(t, r.Check(other), reason.WrongRoom)
	// After the rules: a record built by hand is refused in reading order.
	r.End = r.Start
	wantCode(t, r.Check(other), reason.RecordInvalid)
}

// COMPANION §5 then §2 steps 1 and 2: a hop key that does not decode, or of
// small order, is bad_key whatever the signature.
func TestCheckRecordCompanion5BadKey(t *testing.T) {
	keys := map[string]string{
		"identity, small order":   "0100000000000000000000000000000000000000000000000000000000000000",
		"order 2":                 "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"all zero, order 4":       "0000000000000000000000000000000000000000000000000000000000000000",
		"order 8":                 "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"y = p, does not decode":  "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"x = 0 with the sign bit": "0100000000000000000000000000000000000000000000000000000000000080",
	}
	for name, h := range keys {
		t.Run(name, func(t *testing.T) {
			r := testRecord()
			signed(r)
			k, err := sig.ParsePublicKey(h)
			if err != nil {
				t.Fatal(err)
			}
			r.Hop = k
			b := AppendRecord(nil, r)
			got, err := ParseRecord(b) // the key is not read against a rule
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, got.Check(testRoom), reason.BadKey)
		})
	}
}

// COMPANION §5 then §2 steps 3 to 6.
func TestCheckRecordCompanion5BadSignature(t *testing.T) {
	b := signed(testRecord())
	sigAt := len(b) - 64
	other := testRecord()
	other.Hop = testKey(1).Public()
	otherDomain := testKey(1).Sign(sig.DomainPolicy, AppendRecordBody(nil, other))
	byOther := testRecord()
	SignRecord(byOther, testKey(2))
	cases := map[string][]byte{
		"a bit of R flipped":   with(b, func(b []byte) []byte { b[sigAt] ^= 1; return b }),
		"a bit of S flipped":   with(b, func(b []byte) []byte { b[sigAt+40] ^= 1; return b }),
		"S not below L":        with(b, func(b []byte) []byte { b[len(b)-1] |= 0xf0; return b }),
		"R the identity":       with(b, func(b []byte) []byte { clear(b[sigAt : sigAt+32]); b[sigAt] = 1; return b }),
		"a field changed":      with(b, func(b []byte) []byte { b[offSessions] ^= 1; return b }),
		"a track changed":      with(b, func(b []byte) []byte { b[offTracks+2] ^= 1; return b }),
		"the policy's domain":  with(b, func(b []byte) []byte { copy(b[sigAt:], otherDomain[:]); return b }),
		"another key's sig":    with(b, func(b []byte) []byte { copy(b[sigAt:], byOther.Sig[:]); return b }),
		"all-zero signature":   with(b, func(b []byte) []byte { clear(b[sigAt:]); return b }),
		"subscriber_us change": with(b, func(b []byte) []byte { b[sigAt-1] ^= 0x80; return b }),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := ParseRecord(in)
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, r.Check(testRoom), reason.BadSignature)
		})
	}
}

// COMPANION §6, "Finding a named record": SHA-256 over all but the last 64
// bytes, over none for 64 bytes or fewer, for bytes that do not read too.
func TestNamedDigestCompanion6(t *testing.T) {
	empty := sha256.Sum256(nil)
	for _, n := range []int{0, 1, 63, 64} {
		if got := NamedDigest(make([]byte, n)); got != empty {
			t.Errorf("%d bytes: %s, want the digest of no bytes", n, got)
		}
	}
	b := []byte("not a record at all, but a verifier is given it and has to name it so: seventy+ bytes")
	if got, want := NamedDigest(b), sha256.Sum256(b[:len(b)-64]); got != want {
		t.Errorf("got %s, want %x", got, want)
	}
	r := testRecord()
	rb := signed(r)
	if NamedDigest(rb) != r.Digest() {
		t.Errorf("NamedDigest is not the digest of a record that reads")
	}
	// A record refused for its rules still has its name.
	bad := with(rb, func(b []byte) []byte { b[offClass] = 1; return b })
	if NamedDigest(bad) != sha256.Sum256(bad[:len(bad)-64]) {
		t.Errorf("NamedDigest of a record that does not read")
	}
}

func TestSplitRecords(t *testing.T) {
	var recs [][]byte
	for i := range 5 {
		r := testRecord()
		r.Tracks = r.Tracks[:i%4]
		r.Start += uint64(i) * 60_000_000
		r.End += uint64(i) * 60_000_000
		recs = append(recs, signed(r))
	}
	// A record refused by its rules still splits: only its layout counts.
	r := testRecord()
	r.Tracks = make([]Track, 200)
	recs = append(recs, AppendRecord(nil, r))
	for n := 0; n <= len(recs); n++ {
		body := bytes.Join(recs[:n], nil)
		got, err := SplitRecords(body)
		if err != nil {
			t.Fatalf("%d records: %v", n, err)
		}
		if len(got) != n {
			t.Fatalf("%d records split into %d", n, len(got))
		}
		for i := range got {
			if !bytes.Equal(got[i], recs[i]) || cap(got[i]) != len(got[i]) {
				t.Errorf("%d records: record %d is not the one written, or not capped", n, i)
			}
		}
	}
	whole := bytes.Join(recs[:3], nil)
	tails := map[string]struct {
		tail []byte
		code reason.Code
	}{
		"3 bytes":                 {[]byte("WMH"), reason.Truncated},
		"a magic only":            {[]byte("WMH1"), reason.Truncated},
		"a wrong magic":           {[]byte("XXXX\x01"), reason.Malformed},
		"a version 2":             {[]byte("WMH1\x02"), reason.UnknownVersion},
		"no tracks count":         {recs[0][:offCount], reason.Truncated},
		"a record cut mid-tracks": {recs[3][:offTracks+12], reason.Truncated},
		"a record cut in sig":     {recs[1][:len(recs[1])-1], reason.Truncated},
		"a count announcing more": {recs[5][:len(recs[5])-1], reason.Truncated},
	}
	for name, c := range tails {
		t.Run(name, func(t *testing.T) {
			body := append(bytes.Clone(whole), c.tail...)
			got, err := SplitRecords(body)
			wantCode(t, err, c.code)
			if len(got) != 3 {
				t.Fatalf("kept %d records before the tail, want 3", len(got))
			}
			for i := range got {
				if !bytes.Equal(got[i], recs[i]) {
					t.Errorf("record %d is not the one written", i)
				}
			}
			// The code is the one ParseRecord gives the tail (COMPANION §1).
			_, perr := ParseRecord(c.tail)
			wantCode(t, perr, c.code)
		})
	}
}

func BenchmarkParseRecord(b *testing.B) {
	rb := signed(testRecord())
	b.ReportAllocs()
	b.SetBytes(int64(len(rb)))
	for b.Loop() {
		if _, err := ParseRecord(rb); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseAndCheckRecord(b *testing.B) {
	rb := signed(testRecord())
	b.ReportAllocs()
	b.SetBytes(int64(len(rb)))
	for b.Loop() {
		r, err := ParseRecord(rb)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Check(testRoom); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecordDigest(b *testing.B) {
	r := testRecord()
	signed(r)
	b.ReportAllocs()
	for b.Loop() {
		r.Digest()
	}
}

// A u8 count announces at most 255 entries (COMPANION §5): AppendRecord
// writes no more, so that its bytes always have the layout they announce,
// and a reader refuses them for the count, not for their length.
func TestAppendRecordWritesAtMost255Tracks(t *testing.T) {
	r := testRecord()
	r.Tracks = make([]Track, 300)
	fillTracks(r)
	b := AppendRecord(nil, r)
	if len(b) != recordLen(255) || b[offCount] != 255 {
		t.Fatalf("%d bytes, count %d", len(b), b[offCount])
	}
	_, err := ParseRecord(b)
	wantCode(t, err, reason.RecordInvalid)
}
