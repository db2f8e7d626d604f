package decision

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"slices"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/wire"
	"github.com/waisteer/waisteer/report"
)

// Sizes of the fixed parts of the layout (§7.1).
const (
	// headerSize is magic, version, room, signer, policy, t, session, draw,
	// protocol and report: everything before the count of pathways.
	headerSize = 4 + 1 + 32 + 32 + 32 + 8 + 16 + 4 + 1 + ReportSize
	// ReportSize is the report's 18 bytes: present, pathway, throughput,
	// buffer.
	ReportSize = 1 + 1 + 8 + 8
	// pathwayFixed is one pathway entry before its digests: load, limits,
	// status, class, joules, delivery and the count of evidence.
	pathwayFixed = 4 + 1 + 1 + 1 + 16 + 16 + 1
	// MaxCount is the most a u8 count can announce: pathways, the records
	// named under one pathway, and the priority's indices.
	MaxCount = 255
)

// SignedPrefix is what a decision's signature covers before its bytes: the
// 22 bytes of the domain `wai:steering-decision` and 0x01 (§7.3,
// COMPANION §2).
const SignedPrefix = string(sig.DomainDecision) + "\x01"

// DrawRange is the bound of the draw (§6.3, §7.2): d < 1 000 000.
const DrawRange = 1_000_000

// Parse reads a WSD1 decision from exactly b: COMPANION §1's codes
// (truncated, malformed, unknown_version) for bytes that do not read, then
// decision_invalid for a decision that breaks a rule of §7.2. It never
// retains b.
func Parse(b []byte) (*Decision, error) {
	r, err := wire.Open(b, Magic) // COMPANION §1 checks 1 to 3
	if err != nil {
		return nil, err
	}
	d := new(Decision)
	r.Copy(d.Room[:])
	r.Copy(d.Signer[:])
	r.Copy(d.Policy[:])
	d.T = r.U64()
	r.Copy(d.Session[:])
	d.Draw = r.U32()
	d.Protocol = report.Protocol(r.U8())
	d.Report.Present = r.U8()
	d.Report.Pathway = r.U8()
	d.Report.Throughput = r.U64()
	d.Report.Buffer = r.U64()

	n := int(r.U8())
	if n > 0 && !r.Short() {
		d.Pathways = make([]PathwayState, n)
	}
	// Every digest named lives in one array: the bytes left bound how many
	// there can be, so it is allocated once and each pathway's list is a
	// window of it.
	var all []sig.Hash
	if n > 0 {
		all = make([]sig.Hash, 0, r.Len()/sig.HashSize)
	}
	for i := 0; i < n && !r.Short(); i++ {
		p := &d.Pathways[i]
		p.Load = r.U32()
		p.Limits = Limits(r.U8())
		var ok bool
		if all, ok = evidence.ReadPathway(r, &p.Pathway, all); !ok {
			break // the count announces more than remains: check 4
		}
	}

	d.TTL = r.U32()
	d.Reason = Reason(r.U8())
	m := int(r.U8())
	if pr := r.Bytes(m); m > 0 && pr != nil {
		d.Priority = slices.Clone(pr)
	}
	r.Copy(d.Sig[:])
	if err := r.Finish("decision"); err != nil { // COMPANION §1 checks 4 and 5
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// invalid is a §7.2 refusal naming the rule broken.
func invalid(format string, args ...any) error {
	return reason.New(reason.DecisionInvalid, "§7.2: "+format, args...)
}

// Validate checks the rules of §7.2, each refused as decision_invalid with a
// detail naming the rule. Parse runs it on every decision that reads; a
// server may run it before signing. It also refuses a count above 255,
// which §7.1's u8 counts cannot write and so no read decision has.
func (d *Decision) Validate() error {
	// §7.1: every count is a u8.
	if len(d.Pathways) > MaxCount {
		return invalid("%d pathways, more than a u8 count holds", len(d.Pathways))
	}
	if len(d.Priority) > MaxCount {
		return invalid("a priority of %d indices, more than a u8 count holds", len(d.Priority))
	}
	for i := range d.Pathways {
		if k := len(d.Pathways[i].Records); k > MaxCount {
			return invalid("pathway %d names %d records, more than a u8 count holds", i, k)
		}
	}

	// §7.2: protocol is 1 or 2.
	if d.Protocol != report.HLS && d.Protocol != report.DASH {
		return invalid("protocol is %d, not 1 or 2", d.Protocol)
	}
	// §7.2: draw < 1 000 000.
	if d.Draw >= DrawRange {
		return invalid("draw is %d, not below 1000000", d.Draw)
	}
	// §7.2: ttl ≥ 1.
	if d.TTL < 1 {
		return invalid("ttl is 0, not at least 1")
	}
	// §7.2: reason is 1 to 6.
	if d.Reason < Buffer || d.Reason > None {
		return invalid("reason is %d, not 1 to 6", d.Reason)
	}

	rp := &d.Report
	// §7.2: present has no bit above 2.
	if rp.Present&^(report.HasPathway|report.HasThroughput|report.HasBuffer) != 0 {
		return invalid("present is %#02x, which has a bit above 2", rp.Present)
	}
	// §7.2: an absent value is 0.
	if rp.Present&report.HasPathway == 0 && rp.Pathway != 0 {
		return invalid("pathway is absent but %d, not 0", rp.Pathway)
	}
	if rp.Present&report.HasThroughput == 0 && rp.Throughput != 0 {
		return invalid("throughput is absent but %d, not 0", rp.Throughput)
	}
	if rp.Present&report.HasBuffer == 0 && rp.Buffer != 0 {
		return invalid("buffer is absent but %d, not 0", rp.Buffer)
	}
	// §7.2: a present pathway is below the count of pathways.
	if rp.Present&report.HasPathway != 0 && int(rp.Pathway) >= len(d.Pathways) {
		return invalid("present pathway %d is not below the count of pathways, %d", rp.Pathway, len(d.Pathways))
	}

	for i := range d.Pathways {
		p := &d.Pathways[i]
		// §7.2: each pathway's limits has no bit above 2.
		if p.Limits&^Within != 0 {
			return invalid("pathway %d: limits is %#02x, which has a bit above 2", i, uint8(p.Limits))
		}
		// §7.2: its status is 0 to 4.
		if p.Status > evidence.StatusEmpty {
			return invalid("pathway %d: status is %d, not 0 to 4", i, p.Status)
		}
		if p.Status == evidence.StatusFigure {
			// §7.2: with status 0 its class is 2 to 5 and its joules and
			// delivery are above 0.
			if !p.Class.IsClass() {
				return invalid("pathway %d: status 0 with class %d, not 2 to 5", i, p.Class)
			}
			if p.Joules.IsZero() {
				return invalid("pathway %d: status 0 with joules 0, not above 0", i)
			}
			if p.Delivery.IsZero() {
				return invalid("pathway %d: status 0 with delivery 0, not above 0", i)
			}
		} else {
			// §7.2: with any other status its class, joules and delivery
			// are 0.
			if p.Class != 0 {
				return invalid("pathway %d: status %d with class %d, not 0", i, p.Status, p.Class)
			}
			if !p.Joules.IsZero() {
				return invalid("pathway %d: status %d with joules %s, not 0", i, p.Status, p.Joules)
			}
			if !p.Delivery.IsZero() {
				return invalid("pathway %d: status %d with delivery %s, not 0", i, p.Status, p.Delivery)
			}
		}
	}

	// §7.2: no digest is named twice in the decision, under one pathway or
	// under two.
	if h, ok := d.repeatedDigest(); ok {
		return invalid("digest %s is named twice", h)
	}

	// §7.2: priority names each pathway once: m is the count of pathways
	// and its indices are a permutation of 0 to m − 1.
	if len(d.Priority) != len(d.Pathways) {
		return invalid("priority names %d indices, not the count of pathways, %d", len(d.Priority), len(d.Pathways))
	}
	var seen [MaxCount + 1]bool
	for _, j := range d.Priority {
		if int(j) >= len(d.Pathways) {
			return invalid("priority index %d is not below the count of pathways, %d", j, len(d.Pathways))
		}
		if seen[j] {
			return invalid("priority names pathway %d twice", j)
		}
		seen[j] = true
	}
	return nil
}

// repeatedDigest returns a digest named twice in d, if any.
func (d *Decision) repeatedDigest() (sig.Hash, bool) {
	total := 0
	for i := range d.Pathways {
		total += len(d.Pathways[i].Records)
	}
	if total < 2 {
		return sig.Hash{}, false
	}
	// Digests are SHA-256 outputs, so their first 8 bytes almost never
	// agree: sorting those as integers settles the common case at a
	// fraction of the cost of sorting whole digests, which is done only
	// when two prefixes agree.
	prefixes := make([]uint64, 0, total)
	for i := range d.Pathways {
		for j := range d.Pathways[i].Records {
			prefixes = append(prefixes, binary.BigEndian.Uint64(d.Pathways[i].Records[j][:8]))
		}
	}
	slices.Sort(prefixes)
	clash := false
	for i := 1; i < len(prefixes); i++ {
		if prefixes[i] == prefixes[i-1] {
			clash = true
			break
		}
	}
	if !clash {
		return sig.Hash{}, false
	}
	all := make([]sig.Hash, 0, total)
	for i := range d.Pathways {
		all = append(all, d.Pathways[i].Records...)
	}
	slices.SortFunc(all, func(a, b sig.Hash) int { return bytes.Compare(a[:], b[:]) })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return all[i], true
		}
	}
	return sig.Hash{}, false
}

// BodySize is the length of d's bytes before sig: what AppendBody writes.
func (d *Decision) BodySize() int {
	n := headerSize + 1 + len(d.Pathways)*pathwayFixed + 4 + 1 + 1 + len(d.Priority)
	for i := range d.Pathways {
		n += len(d.Pathways[i].Records) * sig.HashSize
	}
	return n
}

// Size is the length of d's WSD1 bytes, sig included.
func (d *Decision) Size() int { return d.BodySize() + sig.SignatureSize }

// AppendBody appends d's bytes before sig (§7.1): the bytes its digest and
// its signature cover (§7.3). It allocates nothing when dst has room for
// d.BodySize() more bytes. A count above 255 (which Validate refuses) is
// written as its low 8 bits, so d should satisfy Validate.
func AppendBody(dst []byte, d *Decision) []byte {
	dst = append(dst, Magic...)
	dst = append(dst, 1) // version
	dst = append(dst, d.Room[:]...)
	dst = append(dst, d.Signer[:]...)
	dst = append(dst, d.Policy[:]...)
	dst = wire.AppendU64(dst, d.T)
	dst = append(dst, d.Session[:]...)
	dst = wire.AppendU32(dst, d.Draw)
	dst = append(dst, uint8(d.Protocol))
	dst = append(dst, d.Report.Present, d.Report.Pathway)
	dst = wire.AppendU64(dst, d.Report.Throughput)
	dst = wire.AppendU64(dst, d.Report.Buffer)
	dst = append(dst, uint8(len(d.Pathways)))
	for i := range d.Pathways {
		p := &d.Pathways[i]
		dst = wire.AppendU32(dst, p.Load)
		dst = append(dst, uint8(p.Limits))
		dst = evidence.AppendPathway(dst, &p.Pathway)
	}
	dst = wire.AppendU32(dst, d.TTL)
	dst = append(dst, uint8(d.Reason))
	dst = append(dst, uint8(len(d.Priority)))
	return append(dst, d.Priority...)
}

// Append appends d's WSD1 bytes, sig included (§7.1).
func Append(dst []byte, d *Decision) []byte {
	dst = slices.Grow(dst, d.Size())
	dst = AppendBody(dst, d)
	return append(dst, d.Sig[:]...)
}

// Bytes returns d's WSD1 bytes. For a decision Parse returned they are the
// bytes it read.
func (d *Decision) Bytes() []byte { return Append(nil, d) }

// Digest is SHA-256 over d's bytes before sig (§7.3). For a decision Parse
// returned it is the digest of the bytes it read, since Append writes back
// exactly the bytes Parse reads.
func (d *Decision) Digest() sig.Hash {
	return sha256.Sum256(AppendBody(make([]byte, 0, d.BodySize()), d))
}

// AppendSigned signs d with k and returns its WSD1 bytes and its digest
// (§7.3). It sets d.Signer to k's public key and d.Sig to the signature.
//
// It writes SignedPrefix and the body once, into dst's spare capacity, and
// signs them where they lie: the record returned is the bytes after the
// prefix and aliases dst's array when dst has room for
// len(SignedPrefix)+d.Size() more bytes, in which case nothing is copied or
// allocated but the signature itself. A server that reuses one buffer per
// request passes buf[:0].
func AppendSigned(dst []byte, d *Decision, k sig.PrivateKey) (record []byte, digest sig.Hash) {
	d.Signer = k.Public()
	dst = slices.Grow(dst, len(SignedPrefix)+d.Size())
	start := len(dst)
	dst = append(dst, SignedPrefix...)
	dst = AppendBody(dst, d)
	body := dst[start+len(SignedPrefix):]
	digest = sha256.Sum256(body)
	d.Sig = k.SignRaw(dst[start:])
	dst = append(dst, d.Sig[:]...)
	return dst[start+len(SignedPrefix):], digest
}

// Sign signs d with k (§7.3), setting d.Signer and d.Sig, and returns its
// WSD1 bytes.
func Sign(d *Decision, k sig.PrivateKey) []byte {
	record, _ := AppendSigned(nil, d, k)
	return record
}

// VerifySignature checks d.Sig by d.Signer over SignedPrefix and d's bytes
// before sig, by COMPANION §2's strict rule (§7.3): bad_key for a signer
// that is not a usable key, bad_signature otherwise. Who may sign is §3.5's
// question, not this one.
func (d *Decision) VerifySignature() error {
	msg := make([]byte, 0, len(SignedPrefix)+d.BodySize())
	msg = append(msg, SignedPrefix...)
	msg = AppendBody(msg, d)
	return sig.VerifyRaw(d.Signer, msg, d.Sig)
}
