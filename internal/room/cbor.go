package room

import (
	"bytes"
	"errors"
	"math"

	"github.com/fxamacker/cbor/v2"
)

// The deterministic encoding of RFC 8949 §4.2.1 (COMPANION §4): shortest
// arguments, definite lengths, map keys sorted bytewise by their encodings.
// A nil slice encodes as an empty one, so a missing array or byte string
// never re-encodes as the null it would otherwise become.
var encMode, encModeErr = cbor.EncOptions{
	Sort:          cbor.SortCoreDeterministic,
	IndefLength:   cbor.IndefLengthForbidden,
	NilContainers: cbor.NilContainerAsEmpty,
	ShortestFloat: cbor.ShortestFloat16,
}.EncMode()

// The decoder refuses what it can name (COMPANION §4: a duplicate key, an
// indefinite length, a key the shape does not have, a wrong type); the
// re-encoding in decodeExact refuses the rest (order, non-shortest forms).
// The text bounds no array, so neither does the reader beyond what the CBOR
// library allows: every count is checked against the bytes before anything
// is allocated.
var decMode, decModeErr = cbor.DecOptions{
	DupMapKey:         cbor.DupMapKeyEnforcedAPF,
	IndefLength:       cbor.IndefLengthForbidden,
	TagsMd:            cbor.TagsForbidden,
	ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	UTF8:              cbor.UTF8RejectInvalid,
	FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
	MaxArrayElements:  math.MaxInt32,
	MaxNestedLevels:   8, // the deepest shape, a key log head, nests 4
}.DecMode()

var errNotDeterministic = errors.New("not the deterministic encoding (RFC 8949 §4.2.1) of the shape: a key missing or out of order, or an argument not in its shortest form")

// decodeExact decodes b into v, a pointer to one of the shapes below, and
// requires that v encodes back to exactly b (COMPANION §4: "re-encoding what
// was decoded and comparing bytes").
func decodeExact(b []byte, v any) error {
	if decModeErr != nil {
		return decModeErr
	}
	if err := decMode.Unmarshal(b, v); err != nil {
		return err
	}
	again, err := marshal(v)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, b) {
		return errNotDeterministic
	}
	return nil
}

func marshal(v any) ([]byte, error) {
	if encModeErr != nil {
		return nil, encModeErr
	}
	return encMode.Marshal(v)
}

// signedShape is [body, sig], the outer array of both structures.
type signedShape struct {
	_    struct{} `cbor:",toarray"`
	Body []byte
	Sig  []byte
}

// descriptorShape is a room descriptor's body (COMPANION §4).
type descriptorShape struct {
	Version   uint64 `cbor:"1,keyasint"`
	Authority []byte `cbor:"2,keyasint"`
	Origin    []byte `cbor:"3,keyasint,omitempty"` // absent: no origin
	Name      string `cbor:"4,keyasint"`
}

// headShape is a key log head's body (COMPANION §4).
type headShape struct {
	Version uint64       `cbor:"1,keyasint"`
	Origin  []byte       `cbor:"2,keyasint"`
	Seq     uint64       `cbor:"3,keyasint"`
	Entries []entryShape `cbor:"4,keyasint"`
}

// entryShape is one entry of a key log head; all three keys are present.
type entryShape struct {
	Key     []byte   `cbor:"1,keyasint"`
	MaySign []string `cbor:"2,keyasint"`
	Revoked bool     `cbor:"3,keyasint"`
}
