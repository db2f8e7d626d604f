package decision

import (
	"strconv"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/report"
)

// Magic opens every decision (§7.1).
const Magic = "WSD1"

// Reason is why the first pathway is first (§6.4), as §7.1 numbers it.
type Reason uint8

const (
	Buffer Reason = 1
	Floor  Reason = 2
	Share  Reason = 3
	Hold   Reason = 4
	Rank   Reason = 5
	None   Reason = 6
)

// Limits are the bits of §7.1's limits: each set when its clause of §6.1
// holds.
type Limits uint8

const (
	LimitLatency  Limits = 1 << 0
	LimitQuality  Limits = 1 << 1
	LimitCapacity Limits = 1 << 2
	// Within is all three: the pathway is within the limits.
	Within = LimitLatency | LimitQuality | LimitCapacity
)

// PathwayState is one pathway's entry in a decision (§7.1): its load, its
// limits and its evidence.
type PathwayState struct {
	Load   uint32
	Limits Limits
	evidence.Pathway
}

// Decision is a steering decision, WSD1 (§7.1).
type Decision struct {
	Room     sig.Hash
	Signer   sig.PublicKey
	Policy   sig.Hash // the policy's digest
	T        uint64   // µs on the room clock
	Session  report.Session
	Draw     uint32
	Protocol report.Protocol
	Report   report.Report
	Pathways []PathwayState // in the policy's order
	TTL      uint32
	Reason   Reason
	Priority []uint8 // pathway indices, the first first
	Sig      sig.Signature
}

// String is the reason's name in the corpus (COMPANION §8).
func (r Reason) String() string {
	switch r {
	case Buffer:
		return "buffer"
	case Floor:
		return "floor"
	case Share:
		return "share"
	case Hold:
		return "hold"
	case Rank:
		return "rank"
	case None:
		return "none"
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}
