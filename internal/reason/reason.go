// Package reason holds the refusal codes of the energy-aware steering
// extension (§10) and of the texts it reuses (COMPANION §1, §2, §4, §5), and
// the one error type that carries a code, and for a verifier its place
// (COMPANION §7).
//
// Every reader of outside bytes in this module returns an *Error whose Code is
// one of the constants below; callers switch on the code, never on the text.
package reason

import (
	"errors"
	"fmt"
)

// Code is a refusal code, spelled as the text spells it.
type Code string

// Reading a binary record (COMPANION §1).
const (
	Truncated      Code = "truncated"
	Malformed      Code = "malformed"
	UnknownVersion Code = "unknown_version"
)

// Signatures (COMPANION §2).
const (
	BadKey       Code = "bad_key"
	BadSignature Code = "bad_signature"
)

// The room step (COMPANION §4.1).
const (
	RoomInvalid         Code = "room_invalid"
	KeyLogMissing       Code = "key_log_missing"
	KeyLogInvalid       Code = "key_log_invalid"
	AuthorityNotListed  Code = "authority_not_listed"
	AuthorityRevoked    Code = "authority_revoked"
	SignerNotAuthorised Code = "signer_not_authorised"
	SignerRevoked       Code = "signer_revoked"
	HopNotAuthorised    Code = "hop_not_authorised"
	HopRevoked          Code = "hop_revoked"
)

// Live-metering's codes that the extension reuses (§10, COMPANION §5).
const (
	WrongRoom     Code = "wrong_room"
	EnergyInvalid Code = "energy_invalid"
	RecordInvalid Code = "record_invalid"
	RecordMissing Code = "record_missing"
	ClassesSummed Code = "classes_summed"
)

// The codes the extension adds (§10).
const (
	PolicyInvalid         Code = "policy_invalid"
	CloneUnknown          Code = "clone_unknown"
	DecisionInvalid       Code = "decision_invalid"
	EvidenceNotOnPathway  Code = "evidence_not_on_pathway"
	EvidenceOutsideWindow Code = "evidence_outside_window"
	EvidenceMismatch      Code = "evidence_mismatch"
	UnmeteredAsZero       Code = "unmetered_as_zero"
	UnknownPreferred      Code = "unknown_preferred"
	DecisionMismatch      Code = "decision_mismatch"
	ManifestMismatch      Code = "manifest_mismatch"
)

// Extension lists the codes of the extension's own table (§10), in its order.
var Extension = []Code{
	PolicyInvalid, CloneUnknown, DecisionInvalid, EvidenceNotOnPathway,
	EvidenceOutsideWindow, EvidenceMismatch, UnmeteredAsZero, UnknownPreferred,
	DecisionMismatch, ManifestMismatch,
}

// Reused lists the codes §10 says a verifier also raises, from the texts the
// extension reads (COMPANION §1, §2, §4.1, §4.2, §5).
var Reused = []Code{
	Truncated, Malformed, UnknownVersion, BadKey, BadSignature, WrongRoom,
	ClassesSummed, SignerNotAuthorised, SignerRevoked, RecordMissing,
	EnergyInvalid, RecordInvalid, HopNotAuthorised, HopRevoked,
	RoomInvalid, KeyLogMissing, KeyLogInvalid, AuthorityNotListed, AuthorityRevoked,
}

// Error is a refusal: its code, where a verifier raised it (empty outside a
// verifier) and a human-readable detail that names the cause.
type Error struct {
	Code   Code
	Place  string
	Detail string
}

func (e *Error) Error() string {
	s := string(e.Code)
	if e.Place != "" {
		s += " at " + e.Place
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// New returns a refusal with the given code and a formatted detail.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Of returns the code carried by err, or "" when err carries none.
func Of(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// At returns err placed at place (COMPANION §7). An error that is not a
// refusal is returned unchanged.
func At(place string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Place = place
	return &c
}
