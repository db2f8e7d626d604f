// Package api is what the steering server and its clients share of the HTTP
// interface: a refusal as one typed error, carrying its reason code, that the
// server writes and a client reads back (sigsum-go's pkg/api is the model),
// and the JSON shapes of the answers both sides read.
//
// A refused request is answered with the status StatusOf gives its code and
// a JSON body:
//
//	{"error":"<code>","detail":"<why, in words>"}
//
// The code is one of the text's refusal codes (extension §10, COMPANION §1 to
// §5: bytes that do not read or do not check) or one of the server's own
// below (the request itself). A client that reads such an answer gets the
// same *Error back (Read), so it reports the server's reason rather than a
// status line.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/waisteer/waisteer/internal/reason"
)

// Code names why a request is refused.
type Code string

// The server's own codes; the text's are reason.Code values, converted.
const (
	NotFound         Code = "not_found"              // no such route, or no such digest
	RoomNotFound     Code = "room_not_found"         // a room, by id or name, the server does not hold (issue 29)
	NoKeyLog         Code = "no_key_log"             // a room with no origin has no key log (COMPANION §4)
	BadDigest        Code = "bad_digest"             // a path segment that is not 64 lowercase hex digits
	BadPath          Code = "bad_path"               // a path with a dot segment or an empty segment
	QueryNotAllowed  Code = "query_not_allowed"      // a query on a route that reads none
	MethodNotAllowed Code = "method_not_allowed"     //
	EmptyBody        Code = "empty_body"             // a body that must hold something holds nothing
	BadBody          Code = "body_unreadable"        // the body could not be read to its end
	BodyTooLarge     Code = "body_too_large"         // over the route's limit
	MediaType        Code = "unsupported_media_type" // a Content-Type or Content-Encoding the route does not read
	TargetTooLong    Code = "target_too_long"        // a steering request target over the server's limit
	RoomAmbiguous    Code = "room_not_identified"    // a steering path several rooms share, and a query that names none of them
	TokenMissing     Code = "token_missing"          // an operator route without Authorization: Bearer
	TokenInvalid     Code = "token_invalid"          // a token that is not the operator's
	OperatorDisabled Code = "operator_disabled"      // no operator token is configured
	KeyLogStale      Code = "key_log_stale"          // a key log head whose seq is not greater than the current one's
	NoOrigin         Code = "no_origin"              // a key log head for a room with no origin
	SteeringKey      Code = "steering_key_not_authorised"
	PolicySigner     Code = "policy_signer_not_authorised"
	RouteConflict    Code = "route_conflict" // a policy whose URIs' paths another room or route holds
	RouteUnusable    Code = "route_unusable" // a policy URI with no absolute path the server could answer
	StoreUnavailable Code = "store_unavailable"
	Closing          Code = "closing"
	Internal         Code = "internal"
	BadQuery         Code = "bad_query"          // a query byte no request target may hold
	Canceled         Code = "canceled"           // the front's fetch ended with its player's request
	BadLogRequest    Code = "bad_log_request"    // a tile path or proof query of the log (issue 16) that does not read
	BadReport        Code = "report_unreadable"  // a CMCD event report (issue 17) of which no line reads
	ReportFlood      Code = "too_many_reports"   // a player or an address over its rate of reports
	BadInspect       Code = "inspect_unreadable" // the dashboard inspector's input is no digest, decision URL or decision
	OverBudget       Code = "over_budget"        // a steering request over its address's or network's budget, with no manifest to answer again (issue 26)
)

// StatusOf is the HTTP status of a refusal with code c: the one mapping from
// codes to statuses (STYLE.md habit 5).
func StatusOf(c Code) int {
	switch c {
	// Bytes that do not read (COMPANION §1): the request is malformed.
	case Code(reason.Truncated), Code(reason.Malformed), Code(reason.UnknownVersion),
		BadDigest, BadPath, QueryNotAllowed, EmptyBody, BadBody, RoomAmbiguous:
		return http.StatusBadRequest
	// Signatures and authority (COMPANION §2, §4.2): what is signed is not
	// signed by whom the room lets sign it.
	case Code(reason.BadKey), Code(reason.BadSignature),
		Code(reason.SignerNotAuthorised), Code(reason.SignerRevoked),
		Code(reason.HopNotAuthorised), Code(reason.HopRevoked):
		return http.StatusForbidden
	case TokenMissing, TokenInvalid:
		return http.StatusUnauthorized
	case NotFound, RoomNotFound, NoKeyLog:
		return http.StatusNotFound
	case MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case BodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case TargetTooLong:
		return http.StatusRequestURITooLong
	case MediaType:
		return http.StatusUnsupportedMediaType
	case KeyLogStale, NoOrigin, SteeringKey, PolicySigner, RouteConflict, RouteUnusable:
		return http.StatusConflict
	// No operator token: the operator's service is not there to ask (the
	// station seed's edges route answers 503 while no key is set).
	case StoreUnavailable, Closing, OperatorDisabled, OverBudget:
		return http.StatusServiceUnavailable
	case Internal:
		return http.StatusInternalServerError
	case BadQuery, BadLogRequest, BadReport, BadInspect:
		return http.StatusBadRequest
	case ReportFlood:
		return http.StatusTooManyRequests
	case Canceled:
		return http.StatusBadGateway
	}
	// The front's origin failing, timing out, or answering what is no
	// playlist (internal/front/origin): a bad gateway, never a playlist
	// without variants.
	if strings.HasPrefix(string(c), "origin_") {
		return http.StatusBadGateway
	}
	// Every other refusal code of the text: bytes that read and break a
	// rule (policy_invalid, record_invalid, wrong_room, room_invalid, ...).
	return http.StatusUnprocessableEntity
}

// Error is a refusal: its code and why. On the server it is what a handler
// answers with; on a client, what Read gives back from the answer, with the
// status it came with.
type Error struct {
	Code   Code   `json:"error"`
	Detail string `json:"detail,omitempty"`
	// Status is the HTTP status: StatusOf(Code) on the server; on a client,
	// the status the answer came with.
	Status int `json:"-"`
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Detail
}

// Errorf makes a refusal with code c.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Detail: fmt.Sprintf(format, args...), Status: StatusOf(c)}
}

// From turns an error from a reader or a check into a refusal: an *Error is
// kept, a *reason.Error keeps its code and detail, and anything else is
// internal.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var re *reason.Error
	if errors.As(err, &re) {
		return &Error{Code: Code(re.Code), Detail: re.Detail, Status: StatusOf(Code(re.Code))}
	}
	return &Error{Code: Internal, Detail: err.Error(), Status: http.StatusInternalServerError}
}

// WriteError answers a refused request with its status and its JSON body.
// Headers already set (CORS, Cache-Control, Retry-After) are kept.
func WriteError(w http.ResponseWriter, e *Error) {
	WriteJSON(w, StatusOf(e.Code), e)
}

// WriteJSON writes v as JSON with the given status, typed and not sniffable.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only this package's and the server's types are written; none fails
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal"}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b)
}

// Read is a client's reading of an answer that is not a success: the
// server's refusal when the body is one, else an *Error of code
// "http_<status>" holding the start of whatever the body held (a proxy's
// page, a plain-text 404), so that the status is never all a client has.
func Read(status int, contentType string, body []byte) *Error {
	if strings.HasPrefix(contentType, "application/json") {
		var e Error
		d := json.NewDecoder(bytes.NewReader(body))
		if d.Decode(&e) == nil && e.Code != "" {
			e.Status = status
			return &e
		}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return &Error{Code: Code("http_" + strconv.Itoa(status)), Detail: text, Status: status}
}

// IsNotFound reports whether err is a refusal of code not_found (or an
// answer 404 that was not the server's JSON).
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == NotFound || e.Status == http.StatusNotFound)
}

// RecordResult is one record's answer to a hop's POST of records
// (POST /v1/rooms/{room}/records): its digest and outcome, or its index in
// the body and the code that refused it.
type RecordResult struct {
	Index   int    `json:"index"`
	Digest  string `json:"digest,omitempty"`
	Outcome string `json:"outcome,omitempty"` // accepted, duplicate
	Refused Code   `json:"refused,omitempty"` // a refusal code
	// Pathway is the id of the pathway of the active policy whose hop
	// signed the record, which it is evidence for (§5.2).
	Pathway string `json:"pathway,omitempty"`
	// Warning is set for a record that is stored but is evidence for no
	// pathway yet: HopNotInPolicy.
	Warning Code   `json:"warning,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// HopNotInPolicy is the warning of a record whose hop is in no pathway of
// the room's active policy: it is stored, since a later policy may name the
// hop, but no decision reads it until one does (§3.2: a pathway's evidence is
// the records of its hops).
const HopNotInPolicy Code = "hop_not_in_policy"

// RecordsAnswer is the answer to a hop's POST of records: one result per
// record, in the body's order, and one more for bytes after the last whole
// record.
type RecordsAnswer struct {
	Results []RecordResult `json:"results"`
}

// The most each thing the interface carries may be, beside the text's own
// bounds: each is above the largest the text lets that thing be, so that an
// honest answer always fits and a hostile one cannot exhaust its reader.
const (
	MaxDescriptorBytes = 64 << 10 // a name of at most 64 bytes and two keys (COMPANION §4)
	MaxKeyLogBytes     = 16 << 20 // COMPANION §4 bounds no count of entries
	MaxPolicyBytes     = 4 << 20  // 32 pathways of 255 params and 255 hops (§3.1, §3.2)
	MaxDecisionBytes   = 1 << 20  // 32 pathways of 255 digests (§7.1)
	MaxRecordBytes     = 4 << 10  // 227 + 10 × 255 (COMPANION §5)
)
