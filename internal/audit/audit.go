package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

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

// Immutable is the Cache-Control of bytes named by their digest.
const Immutable = "public, max-age=31536000, immutable"

// A Room is a room the server steers, as it stands.
type Room struct {
	Key        sig.PrivateKey // the steering key, which signs the room's checkpoints
	Descriptor []byte
	Head       []byte // the key log's head; nil for a room with no origin, which has none
	Seq        uint64 // the head's seq
}

// Rooms are the rooms the server holds.
type Rooms interface {
	// Steered is a room the server steers, with its current state.
	Steered(id sig.Hash) (Room, bool)
	// Archived is a room the store holds and the server does not steer.
	Archived(id sig.Hash) (store.Room, bool)
	// Find is the room a {room} path segment names, by id or by name
	// (web.RoomOf).
	Find(segment string) (sig.Hash, *api.Error)
}

// Deps is what the audit reads and does not own.
type Deps struct {
	Store store.Store
	Rooms Rooms
	// Policies caches policies by digest (→ *policy.Policy), shared with
	// the rooms that steer by them.
	Policies *sync.Map
	Fails    *web.StoreFailures
	Log      *slog.Logger
}

// Audit answers the auditors' routes and the log's.
type Audit struct {
	st       store.Store
	rooms    Rooms
	policies *sync.Map
	fails    *web.StoreFailures
	log      *slog.Logger

	checkpoints sync.Map // logKey → *atomic.Pointer[signedCheckpoint]
}

// New serves the audit of the rooms d.Rooms holds from d.Store.
func New(d Deps) *Audit {
	return &Audit{st: d.Store, rooms: d.Rooms, policies: d.Policies, fails: d.Fails, log: d.Log}
}

// Routes are the auditors' routes and the log's.
func (a *Audit) Routes() []web.Route {
	get := http.MethodGet
	return []web.Route{
		{Method: get, Pattern: "/v1/policies/{digest}", Family: "policy", Serve: a.servePolicy},
		{Method: get, Pattern: "/v1/records/{digest}", Family: "record", Serve: a.serveRecord},
		{Method: get, Pattern: "/v1/rooms/{room}/descriptor", Family: "descriptor", Serve: a.serveDescriptor},
		{Method: get, Pattern: "/v1/rooms/{room}/keylog", Family: "keylog", Serve: a.serveKeyLog},
		{Method: get, Pattern: "/v1/rooms/{room}/keylog/{seq}", Family: "log", Serve: a.serveKeyLogAt},
		{Method: get, Pattern: "/v1/rooms/{room}/log/checkpoint", Family: "log", Serve: a.serveCheckpoint},
		{Method: get, Pattern: "/v1/rooms/{room}/log/epochs", Family: "log", Serve: a.serveEpochs},
		{Method: get, Pattern: "/v1/rooms/{room}/log/tile/{path...}", Family: "log", Serve: a.serveTile},
		{Method: get, Pattern: "/v1/rooms/{room}/log/inclusion/{digest}", Family: "log", Serve: a.serveInclusion},
		{Method: get, Pattern: "/v1/rooms/{room}/log/consistency", Family: "log", Serve: a.serveConsistency},
		// Each of a room's logs (issue 31), log 0 included, as /log/
		// serves log 0.
		{Method: get, Pattern: "/v1/rooms/{room}/logs", Family: "log", Serve: a.serveLogs},
		{Method: get, Pattern: "/v1/rooms/{room}/logs/{n}/checkpoint", Family: "log", Serve: a.serveCheckpoint},
		{Method: get, Pattern: "/v1/rooms/{room}/logs/{n}/epochs", Family: "log", Serve: a.serveEpochs},
		{Method: get, Pattern: "/v1/rooms/{room}/logs/{n}/tile/{path...}", Family: "log", Serve: a.serveTile},
		{Method: get, Pattern: "/v1/rooms/{room}/logs/{n}/inclusion/{digest}", Family: "log", Serve: a.serveInclusion},
		{Method: get, Pattern: "/v1/rooms/{room}/logs/{n}/consistency", Family: "log", Serve: a.serveConsistency},
	}
}

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

// ServeDecision answers GET of a decision's URI (§8.4), the digest being
// what follows a decision prefix: the exact WSD1 bytes, rebuilt from the
// store's compact row and served only when their digest is the one asked
// for (store.Rebuild checks it, §7.3). The server finds the prefix (a
// policy's decision_uri, or /v1/decisions/) and counts the request.
func (a *Audit) ServeDecision(w http.ResponseWriter, r *http.Request, hexDigest string) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.Allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	digest, aerr := web.Digest(hexDigest)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	b, aerr := a.DecisionBytes(r.Context(), digest)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	writeSigned(w, b, Immutable)
}

// DecisionBytes rebuilds a stored decision's WSD1 bytes.
func (a *Audit) DecisionBytes(ctx context.Context, digest sig.Hash) ([]byte, *api.Error) {
	row, err := a.st.Decision(ctx, digest)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.NotFound, "no decision %s", digest)
	}
	if err != nil {
		return nil, a.fails.Failed(fmt.Sprintf("reading decision %s", digest), err)
	}
	p, err := a.PolicyOf(ctx, row.Policy)
	if err != nil {
		return nil, a.fails.Failed(fmt.Sprintf("decision %s: its policy %s", digest, row.Policy), err)
	}
	body, err := a.st.EvidenceSnapshot(ctx, row.Evidence)
	if err != nil {
		return nil, a.fails.Failed(fmt.Sprintf("decision %s: its evidence snapshot %s", digest, row.Evidence), err)
	}
	b, err := store.Rebuild(p, row.Policy, row, body)
	if err != nil {
		// Never served: bytes whose digest is not the one stored would
		// not be the decision the manifest named.
		a.log.Error("a stored decision does not rebuild", "digest", digest.String(), "err", err)
		return nil, api.Errorf(api.Internal, "decision %s does not rebuild to its digest", digest)
	}
	return b, nil
}

// PolicyOf returns the policy with the given digest, read once.
func (a *Audit) PolicyOf(ctx context.Context, digest sig.Hash) (*policy.Policy, error) {
	if p, ok := a.policies.Load(digest); ok {
		return p.(*policy.Policy), nil
	}
	raw, err := a.st.Policy(ctx, digest)
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
	a.policies.Store(digest, p)
	return p, nil
}

// serveStored answers GET of stored signed bytes by digest.
func (a *Audit) serveStored(w http.ResponseWriter, r *http.Request, what string, get func(context.Context, sig.Hash) ([]byte, error)) {
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
		web.Refuse(w, a.fails.Failed(fmt.Sprintf("reading %s %s", what, digest), err))
	default:
		writeSigned(w, b, Immutable)
	}
}

// servePolicy answers GET /v1/policies/{digest}: a policy's WSP1 bytes,
// the active one or any earlier (§3.4's digest).
func (a *Audit) servePolicy(w http.ResponseWriter, r *http.Request) {
	a.serveStored(w, r, "policy", a.st.Policy)
}

// serveRecord answers GET /v1/records/{digest}: a record's WMH1 bytes
// (live-metering §3.5's digest).
func (a *Audit) serveRecord(w http.ResponseWriter, r *http.Request) {
	a.serveStored(w, r, "record", a.st.Record)
}

// roomBytes finds a room's descriptor and head: a steered room's current
// ones, or those the store holds of a room no longer configured.
func (a *Audit) roomBytes(r *http.Request) (desc, head []byte, aerr *api.Error) {
	id, aerr := a.rooms.Find(r.PathValue("room"))
	if aerr != nil {
		return nil, nil, aerr
	}
	if rm, ok := a.rooms.Steered(id); ok {
		return rm.Descriptor, rm.Head, nil
	}
	if ar, ok := a.rooms.Archived(id); ok {
		return ar.Descriptor, ar.KeyLogHead, nil
	}
	return nil, nil, api.Errorf(api.RoomNotFound, "the server holds no room %s", id)
}

// serveDescriptor answers GET /v1/rooms/{room}/descriptor: the room's
// descriptor (COMPANION §4), whose digest of its body is the room id, so
// it never changes.
func (a *Audit) serveDescriptor(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return
	}
	desc, _, aerr := a.roomBytes(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	writeSigned(w, desc, Immutable)
}

// serveKeyLog answers GET /v1/rooms/{room}/keylog with the current head of
// the room's key log (COMPANION §4), which an operator may replace
// (no-cache, and PUT on the same path, which the server answers); 404 for
// a room with no origin, which has none.
func (a *Audit) serveKeyLog(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return
	}
	_, head, aerr := a.roomBytes(r)
	if aerr == nil && head == nil {
		aerr = api.Errorf(api.NoKeyLog, "the room names no origin, and so has no key log (COMPANION §4)")
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	writeSigned(w, head, "no-cache")
}
