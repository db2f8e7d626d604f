package evidence

import (
	"strconv"

	"github.com/waisteer/waisteer/internal/num"
	"github.com/waisteer/waisteer/internal/sig"
)

// RecordMagic opens every per-hop session record (COMPANION §5).
const RecordMagic = "WMH1"

// Class is an acquisition class by its tag (extension §2, COMPANION §3).
type Class uint8

const (
	Unmetered            Class = 0 // the unmetered marker, in a record only
	ModelBased           Class = 2
	Estimator            Class = 3
	OnChipCounter        Class = 4
	CalibratedInstrument Class = 5
)

// Track kinds and directions (COMPANION §5).
const (
	KindMedia = 1
	KindOther = 2
	DirIn     = 1
	DirOut    = 2
)

// Track is one track entry of a record.
type Track struct {
	Kind      uint8
	Direction uint8
	Bytes     uint64
}

// Record is a per-hop session record, WMH1 (COMPANION §5).
type Record struct {
	Room         sig.Hash
	Hop          sig.PublicKey
	Start        uint64 // µs on the room clock
	End          uint64 // the µs after the span's last
	Class        Class
	Joules       uint64 // µJ; 0 with the unmetered marker
	Sessions     uint32
	Tracks       []Track
	SubscriberUs [8]uint64 // per layer class 0 to 7
	Sig          sig.Signature
}

// Status is a pathway's evidence status (§5.3), as §7.1 numbers it.
type Status uint8

const (
	StatusFigure    Status = 0
	StatusUnmetered Status = 1
	StatusMixed     Status = 2
	StatusStale     Status = 3
	StatusEmpty     Status = 4
)

// Pathway is one pathway's evidence (§5): the records named for it, grouped
// by hop in the pathway's hop order and each hop's by ascending start, and
// what they give.
type Pathway struct {
	Records  []sig.Hash
	Status   Status
	Class    Class    // the records' common class with StatusFigure; 0 otherwise
	Joules   num.U128 // J, µJ; 0 without a figure
	Delivery num.U128 // D; 0 without a figure
}

// Label is the class's name (COMPANION §3), as key log authorities
// `energy/<label>` spell it; "" for a tag that is not a class.
func (c Class) Label() string {
	switch c {
	case ModelBased:
		return "ModelBased"
	case Estimator:
		return "Estimator"
	case OnChipCounter:
		return "OnChipCounter"
	case CalibratedInstrument:
		return "CalibratedInstrument"
	}
	return ""
}

// IsClass reports whether c is one of the four classes (not the marker).
func (c Class) IsClass() bool { return c.Label() != "" }

// Rank is the class's rank in extension §6.2: 0 CalibratedInstrument,
// 1 OnChipCounter, 2 ModelBased, 3 Estimator; 4 (no figure) for anything else.
func (c Class) Rank() uint8 {
	switch c {
	case CalibratedInstrument:
		return 0
	case OnChipCounter:
		return 1
	case ModelBased:
		return 2
	case Estimator:
		return 3
	}
	return 4
}

// String is the status's name in the corpus (COMPANION §8).
func (s Status) String() string {
	switch s {
	case StatusFigure:
		return "figure"
	case StatusUnmetered:
		return "unmetered"
	case StatusMixed:
		return "mixed"
	case StatusStale:
		return "stale"
	case StatusEmpty:
		return "empty"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}
