package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// An auditor holding a manifest fetches the decision at the URI it names
// (§8.4), then what verification needs (§9.1): the room's descriptor and
// key log head, the policy and the records the decision names, each by the
// id or digest the decision states, from the /v1/ routes of the same host.
// Signed bytes are served exactly as they were signed.

// immutable is the Cache-Control of bytes named by their digest.
const immutable = "public, max-age=31536000, immutable"

// writeSigned answers with signed bytes.
func writeSigned(w http.ResponseWriter, b []byte, cache string) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", cache)
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// serveDecision answers GET of a decision's URI (§8.4): the exact WSD1
// bytes, rebuilt from the store's compact row and served only when their
// digest is the one asked for (store.Rebuild checks it, §7.3).
func (s *Server) serveDecision(w http.ResponseWriter, r *http.Request, hexDigest string) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.Allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	digest, aerr := web.Digest(hexDigest)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	b, aerr := s.decisionBytes(r.Context(), digest)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	writeSigned(w, b, immutable)
}

// decisionBytes rebuilds a stored decision's WSD1 bytes.
func (s *Server) decisionBytes(ctx context.Context, digest sig.Hash) ([]byte, *api.Error) {
	row, err := s.st.Decision(ctx, digest)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.NotFound, "no decision %s", digest)
	}
	if err != nil {
		return nil, s.fails.Failed(fmt.Sprintf("reading decision %s", digest), err)
	}
	p, err := s.policyOf(ctx, row.Policy)
	if err != nil {
		return nil, s.fails.Failed(fmt.Sprintf("decision %s: its policy %s", digest, row.Policy), err)
	}
	body, err := s.st.EvidenceSnapshot(ctx, row.Evidence)
	if err != nil {
		return nil, s.fails.Failed(fmt.Sprintf("decision %s: its evidence snapshot %s", digest, row.Evidence), err)
	}
	b, err := store.Rebuild(p, row.Policy, row, body)
	if err != nil {
		// Never served: bytes whose digest is not the one stored would
		// not be the decision the manifest named.
		s.log.Error("a stored decision does not rebuild", "digest", digest.String(), "err", err)
		return nil, api.Errorf(api.Internal, "decision %s does not rebuild to its digest", digest)
	}
	return b, nil
}

// policyOf returns the policy with the given digest, read once.
func (s *Server) policyOf(ctx context.Context, digest sig.Hash) (*policy.Policy, error) {
	if p, ok := s.policies.Load(digest); ok {
		return p.(*policy.Policy), nil
	}
	raw, err := s.st.Policy(ctx, digest)
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse(raw)
	if err != nil {
		return nil, err
	}
	if p.Digest() != digest {
		return nil, errors.New("the stored policy's digest is not its key")
	}
	s.policies.Store(digest, p)
	return p, nil
}

// serveStored answers GET of stored signed bytes by digest.
func (s *Server) serveStored(w http.ResponseWriter, r *http.Request, what string, get func(context.Context, sig.Hash) ([]byte, error)) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return
	}
	digest, aerr := web.Digest(r.PathValue("digest"))
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	b, err := get(r.Context(), digest)
	switch {
	case errors.Is(err, store.ErrNotFound):
		web.Refuse(w, api.Errorf(api.NotFound, "no %s %s", what, digest))
	case err != nil:
		web.Refuse(w, s.fails.Failed(fmt.Sprintf("reading %s %s", what, digest), err))
	default:
		writeSigned(w, b, immutable)
	}
}

// servePolicy answers GET /v1/policies/{digest}: a policy's WSP1 bytes,
// the active one or any earlier (§3.4's digest).
func (s *Server) servePolicy(w http.ResponseWriter, r *http.Request) {
	s.serveStored(w, r, "policy", s.st.Policy)
}

// serveRecord answers GET /v1/records/{digest}: a record's WMH1 bytes
// (live-metering §3.5's digest).
func (s *Server) serveRecord(w http.ResponseWriter, r *http.Request) {
	s.serveStored(w, r, "record", s.st.Record)
}

// roomBytes finds a room's descriptor and head: a steered room's current
// ones, or those the store holds of a room no longer configured.
func (s *Server) roomBytes(r *http.Request) (desc, head []byte, aerr *api.Error) {
	id, aerr := web.Digest(r.PathValue("room"))
	if aerr != nil {
		return nil, nil, aerr
	}
	if h, ok := s.hubs[id]; ok {
		st := h.State()
		return st.Descriptor(), st.Head(), nil
	}
	if a, ok := s.archived[id]; ok {
		return a.Descriptor, a.KeyLogHead, nil
	}
	return nil, nil, api.Errorf(api.UnknownRoom, "the server holds no room %s", id)
}

// serveDescriptor answers GET /v1/rooms/{room}/descriptor: the room's
// descriptor (COMPANION §4), whose digest of its body is the room id, so
// it never changes.
func (s *Server) serveDescriptor(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return
	}
	desc, _, aerr := s.roomBytes(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	writeSigned(w, desc, immutable)
}

// serveKeyLog answers GET /v1/rooms/{room}/keylog with the current head of
// the room's key log (COMPANION §4), which an operator may replace (no-cache);
// 404 for a room with no origin, which has none. PUT installs a newer one
// (serveKeyLogPut).
func (s *Server) serveKeyLog(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return
	}
	_, head, aerr := s.roomBytes(r)
	if aerr == nil && head == nil {
		aerr = api.Errorf(api.NoKeyLog, "the room names no origin, and so has no key log (COMPANION §4)")
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	writeSigned(w, head, "no-cache")
}
