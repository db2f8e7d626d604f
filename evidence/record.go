package evidence

import (
	"crypto/sha256"
	"errors"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/wire"
)

// MaxTracks is the most track entries a record that is valid holds
// (COMPANION §5). The count is a u8, so up to 255 can be written, and read.
const MaxTracks = 32

// Sizes of a record's parts (COMPANION §5): the fixed fields up to and
// including the tracks count, one track entry, and subscriber_us with sig.
const (
	recordHead  = 4 + 1 + 32 + 32 + 8 + 8 + 1 + 8 + 4 + 1 // 99
	trackLen    = 1 + 1 + 8
	recordTail  = 8*8 + sig.SignatureSize // 128
	countOffset = recordHead - 1          // the tracks count n
	// bodyMax is the length of the signed bytes of a record of 32 tracks:
	// a buffer of it on the stack holds any valid record's.
	bodyMax = recordHead + trackLen*MaxTracks + 8*8
)

// recordLen is the length of a record of n tracks: 227 + 10n.
func recordLen(n int) int { return recordHead + trackLen*n + recordTail }

// ParseRecord reads a per-hop session record, WMH1, and applies its rules
// in the order of COMPANION §5 (live-metering §3.6), the first that applies:
// COMPANION §1's codes (truncated, malformed, unknown_version); then
// energy_invalid; then record_invalid. The room and the signature are left
// to Check, which needs the room id.
//
// The record returned shares no memory with b.
func ParseRecord(b []byte) (*Record, error) {
	rd, err := wire.Open(b, RecordMagic) // COMPANION §1 checks 1 to 3
	if err != nil {
		return nil, err
	}
	r := new(Record)
	rd.Copy(r.Room[:])
	rd.Copy(r.Hop[:])
	r.Start = rd.U64()
	r.End = rd.U64()
	r.Class = Class(rd.U8())
	r.Joules = rd.U64()
	r.Sessions = rd.U32()
	n := int(rd.U8())
	// COMPANION §1 check 4: the n entries the count announces must all be
	// there, even when n is above 32 and the record will be refused for it:
	// the layout is read before any rule.
	if n <= MaxTracks {
		if n > 0 && !rd.Short() {
			r.Tracks = make([]Track, n)
		}
		for i := range r.Tracks {
			r.Tracks[i] = Track{Kind: rd.U8(), Direction: rd.U8(), Bytes: rd.U64()}
		}
	} else {
		rd.Bytes(trackLen * n)
	}
	for c := range r.SubscriberUs {
		r.SubscriberUs[c] = rd.U64()
	}
	rd.Copy(r.Sig[:])
	if err := rd.Finish("record"); err != nil { // checks 4 and 5
		return nil, err
	}
	// A count above 32 has kept no entries: the rules are given the count.
	if err := r.validate(n); err != nil {
		return nil, err
	}
	return r, nil
}

// Validate applies a record's rules after reading (COMPANION §5), the first
// that applies: energy_invalid, then record_invalid. Each detail starts with
// the field it is about, as the layout names it. A record that has to be
// signed is validated the same way first (a hop signs only what a verifier
// would read).
func (r *Record) Validate() error { return r.validate(len(r.Tracks)) }

// validate is Validate with the tracks count given: ParseRecord keeps no
// entries of a count above 32, which the count alone refuses.
func (r *Record) validate(n int) error {
	// energy_invalid (COMPANION §5): the tag is the marker or a class (§3);
	// the marker carries no joules; a class carries some, which keeps every
	// figure's J above 0 (extension §7.2).
	switch {
	case r.Class != Unmetered && !r.Class.IsClass():
		return reason.New(reason.EnergyInvalid, "class %d is not 0, 2, 3, 4 or 5", r.Class)
	case r.Class == Unmetered && r.Joules != 0:
		return reason.New(reason.EnergyInvalid, "joules %d with class 0, the unmetered marker, which carries none", r.Joules)
	case r.Class != Unmetered && r.Joules == 0:
		return reason.New(reason.EnergyInvalid, "joules 0 with class %d (%s): a metered hop spends energy", r.Class, r.Class.Label())
	}
	// record_invalid (COMPANION §5).
	if r.End <= r.Start {
		return reason.New(reason.RecordInvalid, "end %d is not after start %d", r.End, r.Start)
	}
	if n > MaxTracks {
		return reason.New(reason.RecordInvalid, "tracks count %d is above %d", n, MaxTracks)
	}
	for i, t := range r.Tracks {
		if t.Kind != KindMedia && t.Kind != KindOther {
			return reason.New(reason.RecordInvalid, "tracks[%d].kind is %d, not 1 (media) or 2 (other)", i, t.Kind)
		}
		if t.Direction != DirIn && t.Direction != DirOut {
			return reason.New(reason.RecordInvalid, "tracks[%d].direction is %d, not 1 (in) or 2 (out)", i, t.Direction)
		}
	}
	return nil
}

// Check runs the steps of reading a record that need the room (COMPANION §5,
// after ParseRecord's): wrong_room when the record's room is not room, then
// its signature by its hop over the domain wai:hop-record (COMPANION §2):
// bad_key or bad_signature. It first runs Validate, so that a record built
// by hand is refused in the same order as one read.
//
// Whether the hop may sign the record (live-metering §5.2, COMPANION §4.2)
// is the room's question, not the record's: Check does not ask it.
func (r *Record) Check(room sig.Hash) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Room != room {
		return reason.New(reason.WrongRoom, "room is %s, not the room id %s", r.Room, room)
	}
	var buf [bodyMax]byte
	return sig.Verify(r.Hop, sig.DomainRecord, AppendRecordBody(buf[:0], r), r.Sig)
}

// writtenTracks is how many track entries the layout can carry of r's: all
// of them up to 255, the most a u8 count can announce.
func (r *Record) writtenTracks() []Track {
	return r.Tracks[:min(len(r.Tracks), 255)]
}

// AppendRecordBody appends the bytes of r that its digest and its signature
// cover: all but sig (COMPANION §5, live-metering §3.5). A record with more
// than 255 tracks cannot be written; only its first 255 are, so that the
// bytes always have the layout their count announces.
func AppendRecordBody(dst []byte, r *Record) []byte {
	tracks := r.writtenTracks()
	dst = append(dst, RecordMagic...)
	dst = append(dst, 1) // version
	dst = append(dst, r.Room[:]...)
	dst = append(dst, r.Hop[:]...)
	dst = wire.AppendU64(dst, r.Start)
	dst = wire.AppendU64(dst, r.End)
	dst = append(dst, byte(r.Class))
	dst = wire.AppendU64(dst, r.Joules)
	dst = wire.AppendU32(dst, r.Sessions)
	dst = append(dst, byte(len(tracks)))
	for _, t := range tracks {
		dst = append(dst, t.Kind, t.Direction)
		dst = wire.AppendU64(dst, t.Bytes)
	}
	for _, us := range r.SubscriberUs {
		dst = wire.AppendU64(dst, us)
	}
	return dst
}

// AppendRecord appends r's bytes, sig included: the inverse of ParseRecord.
func AppendRecord(dst []byte, r *Record) []byte {
	dst = AppendRecordBody(dst, r)
	return append(dst, r.Sig[:]...)
}

// SignRecord makes k the record's hop, signs the record over the domain
// wai:hop-record (COMPANION §2), sets its Sig and returns its bytes.
// It signs what it is given: call Validate first.
func SignRecord(r *Record, k sig.PrivateKey) []byte {
	r.Hop = k.Public()
	b := AppendRecordBody(make([]byte, 0, recordLen(len(r.writtenTracks()))), r)
	r.Sig = k.Sign(sig.DomainRecord, b)
	return append(b, r.Sig[:]...)
}

// Digest is the record's digest (live-metering §3.5): SHA-256 over its bytes
// before sig. For a record read by ParseRecord these are the bytes read.
func (r *Record) Digest() sig.Hash {
	var buf [bodyMax]byte
	return sha256.Sum256(AppendRecordBody(buf[:0], r))
}

// NamedDigest is how a verifier finds a record named by digest among the
// bytes it is given (COMPANION §6, "Finding a named record"): SHA-256 over
// all of raw but its last 64 bytes, over no bytes when raw has 64 or fewer.
// For bytes that read as a record it equals the record's Digest; for bytes
// that do not, it still names them, so that a named record that does not
// read is found and refused with its reading code.
func NamedDigest(raw []byte) sig.Hash {
	return sha256.Sum256(raw[:max(len(raw)-sig.SignatureSize, 0)])
}

// RecordLen is the length of the record at the start of b, found from its
// layout alone (COMPANION §5: 227 + 10n bytes for n tracks): the magic, the
// version and the tracks count. It trusts nothing else of b, and returns
// COMPANION §1's code when b does not hold that much: truncated, malformed
// (the magic), or unknown_version.
func RecordLen(b []byte) (int, error) {
	if _, err := wire.Open(b, RecordMagic); err != nil { // checks 1 to 3
		return 0, err
	}
	if len(b) < recordHead {
		return 0, reason.New(reason.Truncated, "%d bytes end before the record's tracks count", len(b))
	}
	n := recordLen(int(b[countOffset]))
	if len(b) < n {
		return 0, reason.New(reason.Truncated, "%d bytes, fewer than the %d of a record of %d tracks", len(b), n, b[countOffset])
	}
	return n, nil
}

// SplitRecords cuts b, one or more records written back to back (a hop's
// POST body), into the records it holds, each by RecordLen. The records
// returned are subslices of b, each of them capped at its own end. When the
// bytes after the last whole record are not one, SplitRecords returns the
// records before them and the code RecordLen gives the rest, which is the
// code ParseRecord would give it too. Empty b holds no record and is no
// error. Each record returned still has to be read with ParseRecord: only
// its length is known.
func SplitRecords(b []byte) ([][]byte, error) {
	var records [][]byte
	for off := 0; off < len(b); {
		n, err := RecordLen(b[off:])
		if err != nil {
			var e *reason.Error
			if errors.As(err, &e) {
				return records, reason.New(e.Code, "at byte %d: %s", off, e.Detail)
			}
			return records, err
		}
		records = append(records, b[off:off+n:off+n])
		off += n
	}
	return records, nil
}
