package policy

import "github.com/waisteer/waisteer/internal/sig"

// Magic opens every policy (§3.1).
const Magic = "WSP1"

// NoBase is the base of a pathway that is not a clone (§3.2).
const NoBase = 255

// Unlimited is the capacity of a pathway with no limit (§3.2).
const Unlimited = 1<<32 - 1

// Basis says what a pathway's delivery D counts (§3.1, §5.3).
type Basis uint8

const (
	PerByte   Basis = 1 // joules per delivered media byte
	PerSecond Basis = 2 // joules per delivered second at or above the floor tier
)

// Place is a hop's place in its pathway (§3.2).
type Place uint8

const (
	Edge     Place = 1
	Interior Place = 2
)

// FlagQueryBeforeStart is flags bit 0: DASH queryBeforeStart (§3.1, §8.3).
const FlagQueryBeforeStart = 1

// Hop is one hop of a pathway: its key and place.
type Hop struct {
	Key   sig.PublicKey
	Place Place
}

// Param is one of a clone's PARAMS (§3.2, §8.1).
type Param struct {
	Name, Value string
}

// Pathway is one pathway entry (§3.2).
type Pathway struct {
	ID          string
	Base        uint8 // NoBase, or the index of the pathway this one clones
	Host        string
	Params      []Param
	TopTier     uint8
	LatencyMs   uint32
	Capacity    uint32
	MinSharePPM uint32
	Hops        []Hop
}

// IsClone reports whether the pathway clones another (§3.2).
func (p *Pathway) IsClone() bool { return p.Base != NoBase }

// Policy is a steering policy, WSP1 (§3.1). One that Parse or Sign returned
// keeps its bytes and digest, is read-only, and is safe for concurrent use.
type Policy struct {
	Room             sig.Hash
	Signer           sig.PublicKey
	PeriodUs         uint64 // P
	WindowUs         uint64 // W
	LagUs            uint64 // L
	Basis            Basis
	Floor            uint8 // F
	LatencyCeilingMs uint32
	MinBufferMs      uint32
	HysteresisPPM    uint32 // h
	TTLs             uint32
	MinTTLs          uint32
	Flags            uint8
	Initial          uint8
	Tiers            []uint64 // bits per second, tier 0 first
	ServerURI        string
	ReloadURI        string
	DecisionURI      string
	Pathways         []Pathway
	Sig              sig.Signature

	// raw and digest are kept by Parse and Sign, so that the bytes a server
	// serves and the digest every decision names (§3.4, §7.1) cost nothing
	// after the policy is read. A policy built by hand has neither, and
	// Bytes and Digest compute them on each call.
	raw    []byte
	digest sig.Hash
}
