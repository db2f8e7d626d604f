package evidence

import (
	"bytes"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
)

// recordSeeds are valid records and near misses of each refusal of
// COMPANION §5.
func recordSeeds() [][]byte {
	var seeds [][]byte
	add := func(f func(r *Record)) {
		r := testRecord()
		f(r)
		seeds = append(seeds, signed(r))
	}
	add(func(r *Record) {})
	add(func(r *Record) { r.Tracks = nil })
	add(func(r *Record) { r.Class, r.Joules = Unmetered, 0 })
	add(func(r *Record) { r.Tracks = make([]Track, MaxTracks); fillTracks(r) })
	add(func(r *Record) { r.Tracks = make([]Track, MaxTracks+1) })
	add(func(r *Record) { r.Class = 1 })
	add(func(r *Record) { r.End = r.Start })
	add(func(r *Record) { r.Tracks[0].Kind = 3 })
	b := seeds[0]
	seeds = append(seeds, b[:len(b)-1], append(bytes.Clone(b), 0), []byte("WMH1"), []byte("WMH1\x02"), nil)
	return seeds
}

// FuzzParseRecord: ParseRecord never panics, refuses only with a code of
// COMPANION §5's reading, and whatever it reads appends back to exactly the
// bytes read, whose digest is their NamedDigest (COMPANION §6).
func FuzzParseRecord(f *testing.F) {
	for _, s := range recordSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRecord(b)
		if err != nil {
			switch reason.Of(err) {
			case reason.Truncated, reason.Malformed, reason.UnknownVersion,
				reason.EnergyInvalid, reason.RecordInvalid:
			default:
				t.Fatalf("refused with %v, not a reading code of COMPANION §5", err)
			}
			if r != nil {
				t.Fatalf("a record with the refusal %v", err)
			}
			return
		}
		if out := AppendRecord(nil, r); !bytes.Equal(out, b) {
			t.Fatalf("read %x\nappended %x", b, out)
		}
		if r.Digest() != NamedDigest(b) {
			t.Fatalf("Digest and NamedDigest differ for a record that reads")
		}
		switch code := reason.Of(r.Check(testRoom)); code {
		case "", reason.WrongRoom, reason.BadKey, reason.BadSignature:
		default:
			t.Fatalf("Check refused with %q", code)
		}
	})
}

// FuzzSplitRecords: SplitRecords never panics; the records it returns are
// the body's leading bytes, each of the length its layout gives; ParseRecord
// refuses none of them for its layout; and a tail it refuses is refused with
// the code ParseRecord gives that tail.
func FuzzSplitRecords(f *testing.F) {
	seeds := recordSeeds()
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(bytes.Join(seeds[:4], nil))
	f.Add(bytes.Join(seeds, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := SplitRecords(b)
		off := 0
		for _, rec := range recs {
			if !bytes.Equal(rec, b[off:off+len(rec)]) || cap(rec) != len(rec) {
				t.Fatalf("record at %d is not the body's bytes, or not capped", off)
			}
			if n, lerr := RecordLen(rec); lerr != nil || n != len(rec) {
				t.Fatalf("record at %d: RecordLen %d, %v; length %d", off, n, lerr, len(rec))
			}
			switch code := reason.Of(func() error { _, e := ParseRecord(rec); return e }()); code {
			case "", reason.EnergyInvalid, reason.RecordInvalid:
			default:
				t.Fatalf("record at %d refused for its layout: %q", off, code)
			}
			off += len(rec)
		}
		if err == nil {
			if off != len(b) {
				t.Fatalf("%d bytes split into %d", len(b), off)
			}
			return
		}
		if off >= len(b) {
			t.Fatalf("refused %v with no tail left", err)
		}
		_, perr := ParseRecord(b[off:])
		if reason.Of(err) != reason.Of(perr) {
			t.Fatalf("tail refused %v by SplitRecords, %v by ParseRecord", err, perr)
		}
	})
}
