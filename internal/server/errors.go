package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/waisteer/waisteer/internal/reason"
)

// code names why a request is refused: one of the text's refusal codes
// (reason.Code, for the bytes a request carries) or one of the server's own
// below (for the request itself). statusOf is the one mapping from codes to
// HTTP statuses (STYLE.md habit 5).
type code string

// The server's own codes.
const (
	codeNotFound         code = "not_found"              // no such route, or no such digest
	codeUnknownRoom      code = "unknown_room"           // a room id the server does not steer
	codeNoKeyLog         code = "no_key_log"             // a room with no origin has no key log (COMPANION §4)
	codeBadDigest        code = "bad_digest"             // a path segment that is not 64 lowercase hex digits
	codeQueryNotAllowed  code = "query_not_allowed"      // a query on a route that reads none
	codeMethod           code = "method_not_allowed"     //
	codeEmptyBody        code = "empty_body"             // a body that must hold something holds nothing
	codeBadBody          code = "body_unreadable"        // the body could not be read to its end
	codeBodyTooLarge     code = "body_too_large"         // over the route's limit
	codeMediaType        code = "unsupported_media_type" // a Content-Type or Content-Encoding the route does not read
	codeTargetTooLong    code = "target_too_long"        // a steering request target over maxTarget
	codeRoomAmbiguous    code = "room_not_identified"    // a steering path several rooms share, and a query that names none of them
	codeTokenMissing     code = "token_missing"          // an operator route without Authorization: Bearer
	codeTokenInvalid     code = "token_invalid"          // a token that is not the operator's
	codeOperatorDisabled code = "operator_disabled"      // no operator token is configured
	codeKeyLogStale      code = "key_log_stale"          // a key log head whose seq is not greater than the current one's
	codeNoOrigin         code = "no_origin"              // a key log head for a room with no origin
	codeSteeringKey      code = "steering_key_not_authorised"
	codePolicySigner     code = "policy_signer_not_authorised"
	codeRouteConflict    code = "route_conflict" // a policy whose URIs' paths another room or route holds
	codeRouteUnusable    code = "route_unusable" // a policy URI with no absolute path the server could answer
	codeStore            code = "store_unavailable"
	codeClosing          code = "closing"
	codeInternal         code = "internal"
)

// statusOf is the HTTP status of a refusal with code c.
func statusOf(c code) int {
	switch c {
	// Bytes that do not read (COMPANION §1): the request is malformed.
	case code(reason.Truncated), code(reason.Malformed), code(reason.UnknownVersion),
		codeBadDigest, codeQueryNotAllowed, codeEmptyBody, codeBadBody, codeRoomAmbiguous:
		return http.StatusBadRequest
	// Signatures and authority (COMPANION §2, §4.2): what is signed is
	// not signed by whom the room lets sign it.
	case code(reason.BadKey), code(reason.BadSignature),
		code(reason.SignerNotAuthorised), code(reason.SignerRevoked),
		code(reason.HopNotAuthorised), code(reason.HopRevoked),
		codeOperatorDisabled:
		return http.StatusForbidden
	case codeTokenMissing, codeTokenInvalid:
		return http.StatusUnauthorized
	case codeNotFound, codeUnknownRoom, codeNoKeyLog:
		return http.StatusNotFound
	case codeMethod:
		return http.StatusMethodNotAllowed
	case codeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case codeTargetTooLong:
		return http.StatusRequestURITooLong
	case codeMediaType:
		return http.StatusUnsupportedMediaType
	case codeKeyLogStale, codeNoOrigin, codeSteeringKey, codePolicySigner, codeRouteConflict, codeRouteUnusable:
		return http.StatusConflict
	case codeStore, codeClosing:
		return http.StatusServiceUnavailable
	case codeInternal:
		return http.StatusInternalServerError
	}
	// Every other refusal code of the text: bytes that read and break a
	// rule (policy_invalid, record_invalid, wrong_room, room_invalid, ...).
	return http.StatusUnprocessableEntity
}

// apiError is a refusal as a handler returns it.
type apiError struct {
	Code   code
	Detail string
}

func (e *apiError) Error() string { return string(e.Code) + ": " + e.Detail }

func fail(c code, format string, args ...any) *apiError {
	return &apiError{Code: c, Detail: fmt.Sprintf(format, args...)}
}

// refusal turns an error from a reader or a check into an apiError: a
// refusal keeps its code (reason.Of) and its detail; anything else is
// internal.
func refusal(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var re *reason.Error
	if errors.As(err, &re) {
		return &apiError{Code: code(re.Code), Detail: re.Detail}
	}
	return &apiError{Code: codeInternal, Detail: err.Error()}
}

// errorBody is what a refused request's body holds: its code and why.
type errorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// writeError answers a refused request with its status and a JSON body
// naming the reason. Headers already set (CORS, Cache-Control, Retry-After)
// are kept.
func writeError(w http.ResponseWriter, e *apiError) {
	if sw, ok := w.(*statusWriter); ok {
		sw.refusal = e
	}
	writeJSON(w, statusOf(e.Code), errorBody{Error: string(e.Code), Detail: e.Detail})
}

// writeJSON writes v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only types of this package are written; none fails
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
