package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/web"
)

// operator checks the request's bearer token against the operator's, in
// constant time (of the two tokens' SHA-256, so that not even the length
// is compared in variable time).
func (s *Server) operator(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Waisteer-Server", s.name) // which of several servers on one store answered
	if len(s.token) == 0 {
		web.Refuse(w, api.Errorf(api.OperatorDisabled, "the server has no operator token: operator routes are disabled"))
		return false
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="waisteer operator"`)
		web.Refuse(w, api.Errorf(api.TokenMissing, "operator routes need Authorization: Bearer TOKEN"))
		return false
	}
	got, want := sha256.Sum256([]byte(tok)), sha256.Sum256(s.token)
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="waisteer operator", error="invalid_token"`)
		web.Refuse(w, api.Errorf(api.TokenInvalid, "the bearer token is not the operator's"))
		return false
	}
	return true
}

// operatorBody runs the checks every operator write shares and reads its
// body: the method, no query, the token, the room, a binary body within
// limit.
func (s *Server) operatorBody(w http.ResponseWriter, r *http.Request, limit int64) (*roomsteer.Room, []byte, bool) {
	if !web.NoQuery(w, r) || !s.operator(w, r) {
		return nil, nil, false
	}
	h, aerr := s.hubOf(r)
	if aerr == nil {
		aerr = web.OctetStream(r)
	}
	var body []byte
	if aerr == nil {
		body, aerr = web.ReadBody(w, r, limit)
	}
	if aerr == nil && len(body) == 0 {
		aerr = api.Errorf(api.EmptyBody, "the body is empty")
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return nil, nil, false
	}
	return h, body, true
}

// servePolicyPut replaces a room's policy (PUT /v1/rooms/{room}/policy,
// operator): roomsteer.Room.PutPolicy.
func (s *Server) servePolicyPut(w http.ResponseWriter, r *http.Request) {
	h, body, ok := s.operatorBody(w, r, maxPolicyBody)
	if !ok {
		return
	}
	ans, aerr := h.PutPolicy(r.Context(), body)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	api.WriteJSON(w, http.StatusOK, ans)
}

// serveKeyLogPut installs a newer head of the room's key log (PUT
// /v1/rooms/{room}/keylog, operator): roomsteer.Room.PutKeyLog.
func (s *Server) serveKeyLogPut(w http.ResponseWriter, r *http.Request) {
	h, body, ok := s.operatorBody(w, r, maxKeyLogBody)
	if !ok {
		return
	}
	ans, aerr := h.PutKeyLog(r.Context(), body)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	api.WriteJSON(w, http.StatusOK, ans)
}

// serveStatus answers a room's status as JSON.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) || !s.operator(w, r) {
		return
	}
	h, aerr := s.hubOf(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	out, aerr := h.Status(r.Context(), s.clock())
	out.Server = s.name
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}
