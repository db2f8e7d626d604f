package store

import (
	"encoding/binary"
	"fmt"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

// A row is a decision as a Bolt file holds it (the package doc's layout):
// its room, policy and signer by the id of their context, and its evidence
// by the id of its snapshot. Its t and digest are its key.
type row struct {
	context  uint64
	session  report.Session
	protocol report.Protocol
	report   report.Report
	loads    []uint32
	snapshot uint64
	sig      sig.Signature
	// logIndex is the decision's leaf in its room's log (boltlog.go), or
	// -1 in a row written before the log, or by a shared backend, which
	// keeps it elsewhere.
	logIndex int64
}

// rowLogged is the version byte of a row that names its leaf in the log:
// formatVersion's layout with the leaf's index, a uvarint, after it.
const rowLogged = formatVersion + 1

// reportBits are the bits of present that §7.1 defines.
const reportBits = report.HasPathway | report.HasThroughput | report.HasBuffer

// checkRow refuses a decision the row layout cannot write back exactly: a
// report with a bit above 2 or an absent value that is not 0 (§7.2), or
// more loads than a u8 counts (§7.1).
func checkRow(d *Decision) error {
	rp := &d.Report
	switch {
	case rp.Present&^reportBits != 0:
		return fmt.Errorf("store: decision %s: report present %#02x has a bit above 2", d.Digest, rp.Present)
	case rp.Present&report.HasPathway == 0 && rp.Pathway != 0,
		rp.Present&report.HasThroughput == 0 && rp.Throughput != 0,
		rp.Present&report.HasBuffer == 0 && rp.Buffer != 0:
		return fmt.Errorf("store: decision %s: an absent report value is not 0", d.Digest)
	case len(d.Loads) > 255:
		return fmt.Errorf("store: decision %s: %d loads, more than a u8 counts", d.Digest, len(d.Loads))
	}
	return nil
}

// rowKey is a row's key: t big-endian, then the digest.
func rowKey(t uint64, digest sig.Hash) []byte {
	return appendRowKey(make([]byte, 0, rowKeySize), t, digest)
}

// rowKeySize is the length of a row's key.
const rowKeySize = 8 + sig.HashSize

// appendRowKey appends a row's key (rowKey) to dst.
func appendRowKey(dst []byte, t uint64, digest sig.Hash) []byte {
	return append(binary.BigEndian.AppendUint64(dst, t), digest[:]...)
}

// appendRow appends r's row value.
func appendRow(dst []byte, r *row) []byte {
	if r.logIndex >= 0 {
		dst = append(dst, rowLogged)
		dst = binary.AppendUvarint(dst, uint64(r.logIndex))
	} else {
		dst = append(dst, formatVersion)
	}
	dst = binary.AppendUvarint(dst, r.context)
	dst = append(dst, r.session[:]...)
	dst = append(dst, uint8(r.protocol), r.report.Present)
	if r.report.Present&report.HasPathway != 0 {
		dst = append(dst, r.report.Pathway)
	}
	if r.report.Present&report.HasThroughput != 0 {
		dst = binary.AppendUvarint(dst, r.report.Throughput)
	}
	if r.report.Present&report.HasBuffer != 0 {
		dst = binary.AppendUvarint(dst, r.report.Buffer)
	}
	dst = append(dst, uint8(len(r.loads)))
	for _, l := range r.loads {
		dst = binary.AppendUvarint(dst, uint64(l))
	}
	dst = binary.AppendUvarint(dst, r.snapshot)
	return append(dst, r.sig[:]...)
}

// rowReader reads a row value; like wire.Reader it is sticky, and err holds
// the first refusal.
type rowReader struct {
	b   []byte
	err error
}

func (r *rowReader) fail(code reason.Code, format string, args ...any) {
	if r.err == nil {
		r.err = reason.New(code, format, args...)
	}
	r.b = nil
}

func (r *rowReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.fail(reason.Truncated, "a decision row ends before its last field")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *rowReader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

// uvarint reads a uvarint in its shortest form, at most max.
func (r *rowReader) uvarint(max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		r.fail(reason.Truncated, "a decision row ends inside a uvarint")
		return 0
	case n < 0:
		r.fail(reason.Malformed, "a decision row's uvarint overflows 64 bits")
		return 0
	case n != uvarintLen(v):
		r.fail(reason.Malformed, "a decision row's uvarint is not in its shortest form")
		return 0
	case v > max:
		r.fail(reason.Malformed, "a decision row's value %d is above %d", v, max)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// parseRow reads exactly one row value: truncated, malformed or
// unknown_version as COMPANION §1 reads a record, for the store's layout.
// The loads are a new slice; nothing retains b.
func parseRow(b []byte) (row, error) {
	r := row{logIndex: -1}
	if len(b) < 1 {
		return r, reason.New(reason.Truncated, "a decision row of 0 bytes has no version")
	}
	if b[0] != formatVersion && b[0] != rowLogged {
		return r, reason.New(reason.UnknownVersion, "decision row version %d, not %d or %d", b[0], formatVersion, rowLogged)
	}
	rd := &rowReader{b: b[1:]}
	if b[0] == rowLogged {
		r.logIndex = int64(rd.uvarint(1<<63 - 1))
	}
	r.context = rd.uvarint(1<<64 - 1)
	copy(r.session[:], rd.take(len(r.session)))
	r.protocol = report.Protocol(rd.u8())
	r.report.Present = rd.u8()
	if rd.err == nil && r.report.Present&^reportBits != 0 {
		rd.fail(reason.Malformed, "a decision row's present %#02x has a bit above 2", r.report.Present)
	}
	if r.report.Present&report.HasPathway != 0 {
		r.report.Pathway = rd.u8()
	}
	if r.report.Present&report.HasThroughput != 0 {
		r.report.Throughput = rd.uvarint(1<<64 - 1)
	}
	if r.report.Present&report.HasBuffer != 0 {
		r.report.Buffer = rd.uvarint(1<<64 - 1)
	}
	n := int(rd.u8())
	if rd.err == nil && n > 0 {
		if len(rd.b) < n { // each load is at least one byte
			rd.fail(reason.Truncated, "a decision row's %d loads do not fit in %d bytes", n, len(rd.b))
		} else {
			r.loads = make([]uint32, n)
		}
	}
	for i := 0; i < n && rd.err == nil; i++ {
		r.loads[i] = uint32(rd.uvarint(1<<32 - 1))
	}
	r.snapshot = rd.uvarint(1<<64 - 1)
	copy(r.sig[:], rd.take(len(r.sig)))
	if rd.err == nil && len(rd.b) != 0 {
		rd.fail(reason.Malformed, "%d bytes remain after a decision row's sig", len(rd.b))
	}
	if rd.err != nil {
		return row{}, rd.err
	}
	return r, nil
}

// AppendDecisionRow appends d's row as a shared backend keeps it (the
// PostgreSQL store): the Bolt row's layout with context and snapshot 0,
// since such a backend keeps a decision's room, policy, signer, evidence,
// t and digest in columns of their own. It refuses what checkRow refuses.
func AppendDecisionRow(dst []byte, d *Decision) ([]byte, error) {
	if err := checkRow(d); err != nil {
		return dst, err
	}
	return appendRow(dst, &row{session: d.Session, protocol: d.Protocol, report: d.Report, loads: d.Loads, sig: d.Sig, logIndex: -1}), nil
}

// ParseDecisionRow reads a row AppendDecisionRow wrote into d's session,
// protocol, report, loads (a new slice) and sig, refusing one whose
// context or snapshot is not 0.
func ParseDecisionRow(b []byte, d *Decision) error {
	r, err := parseRow(b)
	if err != nil {
		return err
	}
	if r.context != 0 || r.snapshot != 0 || r.logIndex >= 0 {
		return reason.New(reason.Malformed, "a shared backend's decision row names context %d, snapshot %d or a leaf of the log", r.context, r.snapshot)
	}
	d.Session, d.Protocol, d.Report, d.Loads, d.Sig = r.session, r.protocol, r.report, r.loads, r.sig
	return nil
}
