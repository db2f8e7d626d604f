package room

import (
	"bytes"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// COMPANION §4: ParseDescriptor never panics, refuses with room_invalid
// alone, and what it reads encodes back to exactly the bytes read, both by
// the package (Bytes) and by this file's independent writer.
func FuzzParseDescriptor(f *testing.F) {
	for _, o := range []*sig.PublicKey{nil, &originPub} {
		for _, name := range []string{"r", "a room", "\u00e9t\u00e9"} {
			b, err := NewDescriptor(authKey, o, name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add(ar(bs(descBody(authPub[:], nil, "")), bs(zeroSig)))
	f.Add(cat([]byte{0x9f}, bs(descBody(authPub[:], nil, "r")), bs(zeroSig), []byte{0xff}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDescriptor(b)
		if err != nil {
			if reason.Of(err) != reason.RoomInvalid {
				t.Fatalf("refused with %v", err)
			}
			return
		}
		again, err := d.Bytes()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("read %x, encodes back to %x (%v)", b, again, err)
		}
		var origin []byte
		if d.Origin != nil {
			origin = d.Origin[:]
		}
		body := descBody(d.Authority[:], origin, d.Name)
		if !bytes.Equal(ar(bs(body), bs(d.Sig[:])), b) || !bytes.Equal(d.Body, body) {
			t.Fatalf("read %x, but the shape's encoding is %x", b, body)
		}
		if len(d.Name) < 1 || len(d.Name) > 64 || d.ID() != sig.Digest(body) {
			t.Fatalf("read %+v", d)
		}
	})
}

// COMPANION §4: ParseKeyLogHead never panics, refuses with key_log_invalid
// alone, and what it reads encodes back to exactly the bytes read, both by
// the package (Bytes) and by this file's independent writer.
func FuzzParseKeyLogHead(f *testing.F) {
	k := sortedKeys(3)
	for _, entries := range [][]Entry{
		nil,
		{HopEntry(k[0], evidence.ModelBased)},
		{SteerEntry(k[0], evidence.CalibratedInstrument, evidence.Estimator), {Key: k[1], MaySign: []string{"live/hop", " ~"}, Revoked: true}, HopEntry(k[2])},
	} {
		b, err := NewKeyLogHead(originKey, uint64(len(entries))*1000, entries)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(ar(bs(headBodyBytes(originPub[:], 1, entry(k[1][:], false, "live/hop"), entry(k[0][:], false, "live/hop"))), bs(zeroSig)))
	f.Add(ar(bs(headBodyBytes(originPub[:], 1, entry(k[0][:], false, "live/hop", "live/hop"))), bs(zeroSig)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseKeyLogHead(b)
		if err != nil {
			if reason.Of(err) != reason.KeyLogInvalid {
				t.Fatalf("refused with %v", err)
			}
			return
		}
		again, err := h.Bytes()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("read %x, encodes back to %x (%v)", b, again, err)
		}
		entries := make([][]byte, len(h.Entries))
		for i, e := range h.Entries {
			entries[i] = entry(e.Key[:], e.Revoked, e.MaySign...)
			if h.Entry(e.Key) != &h.Entries[i] {
				t.Fatalf("entry %d is not found by its key", i)
			}
		}
		body := headBodyBytes(h.Origin[:], h.Seq, entries...)
		if !bytes.Equal(ar(bs(body), bs(h.Sig[:])), b) || !bytes.Equal(h.Body, body) {
			t.Fatalf("read %x, but the shape's encoding is %x", b, body)
		}
	})
}
