package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/store"
)

// A room's log of decisions as an auditor reads it (issue 16, internal/
// declog): a checkpoint the room's steering key signs, the tiles of C2SP
// tlog-tiles (immutable, so that a CDN may keep them), proofs, and the key
// log heads the room has had with the log's size at each (epochs), so that
// each decision is checked against the head in force when the log took it.

// checkpointEvery is how often a growing log's checkpoint is signed again:
// an auditor asking more often gets the last one, a prefix of the log.
const checkpointEvery = time.Second

type signedCheckpoint struct {
	size int64
	b    []byte
	at   time.Time
}

// logRoom finds the room of a log route: a steered room, or one the store
// holds of a room no longer configured (whose tiles and proofs are still
// served, but whose checkpoint no key of this server signs).
func (a *Audit) logRoom(r *http.Request) (sig.Hash, *Room, *api.Error) {
	id, aerr := a.rooms.Find(r.PathValue("room"))
	if aerr != nil {
		return id, nil, aerr
	}
	if rm, ok := a.rooms.Steered(id); ok {
		return id, &rm, nil
	}
	if _, ok := a.rooms.Archived(id); ok {
		return id, nil, nil
	}
	return id, nil, api.Errorf(api.RoomNotFound, "the server holds no room %s", id)
}

// logGet begins a log route that reads no query: the room it names, or
// false once it has answered.
func (a *Audit) logGet(w http.ResponseWriter, r *http.Request) (sig.Hash, bool) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return sig.Hash{}, false
	}
	id, _, aerr := a.logRoom(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return id, false
	}
	return id, true
}

// epochOf is the epoch a checkpoint of the room names: the latest head the
// room has had (nil for a room with no origin).
func (a *Audit) epochOf(ctx context.Context, id sig.Hash, rm Room) (*declog.Epoch, error) {
	if rm.Head == nil {
		return nil, nil
	}
	es, err := a.st.KeyEpochs(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, errors.New("the room has a key log and no epoch of it is stored")
	}
	last := es[len(es)-1]
	return &declog.Epoch{Seq: last.Seq, From: last.From}, nil
}

// signCheckpoint signs the checkpoint of the room's log of size leaves,
// naming epoch.
func (a *Audit) signCheckpoint(ctx context.Context, id sig.Hash, key sig.PrivateKey, size int64, epoch *declog.Epoch) ([]byte, error) {
	root, err := tlog.TreeHash(size, declog.HashReader(ctx, a.st, id, 0))
	if err != nil {
		return nil, err
	}
	return declog.Sign(declog.Checkpoint{Room: id, Size: size, Root: root, Keys: epoch}, key)
}

// lastCheckpoint is where the room's latest checkpoint signed is kept.
func (a *Audit) lastCheckpoint(id sig.Hash) *atomic.Pointer[signedCheckpoint] {
	if p, ok := a.checkpoints.Load(id); ok {
		return p.(*atomic.Pointer[signedCheckpoint])
	}
	p, _ := a.checkpoints.LoadOrStore(id, new(atomic.Pointer[signedCheckpoint]))
	return p.(*atomic.Pointer[signedCheckpoint])
}

// checkpoint is the room's latest checkpoint: signed again when the log
// has grown and the last is checkpointEvery old.
func (a *Audit) checkpoint(ctx context.Context, id sig.Hash, rm Room) ([]byte, error) {
	size, err := a.st.LogSize(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	last := a.lastCheckpoint(id)
	if c := last.Load(); c != nil && (c.size == size || c.size < size && time.Since(c.at) < checkpointEvery) {
		return c.b, nil
	}
	epoch, err := a.epochOf(ctx, id, rm)
	if err != nil {
		return nil, err
	}
	b, err := a.signCheckpoint(ctx, id, rm.Key, size, epoch)
	if err != nil {
		return nil, err
	}
	c := &signedCheckpoint{size: size, b: b, at: time.Now()}
	for {
		old := last.Load()
		if old != nil && old.size > size || last.CompareAndSwap(old, c) {
			break
		}
	}
	return b, nil
}

// KeepEpoch stores the room's key log head in rm as an epoch when the store
// has it not: from the log's size now, with the handover checkpoint of the
// log so far signed under the head before it. The server calls it for a
// room's configured head when it starts, and for the operator's before it
// is installed.
func (a *Audit) KeepEpoch(ctx context.Context, id sig.Hash, rm Room) error {
	if rm.Head == nil {
		return nil
	}
	es, err := a.st.KeyEpochs(ctx, id)
	if err != nil {
		return err
	}
	if len(es) > 0 && es[len(es)-1].Seq >= rm.Seq {
		return nil
	}
	size, err := a.st.LogSize(ctx, id, 0)
	if err != nil {
		return err
	}
	e := store.KeyEpoch{Seq: rm.Seq, From: size, Head: rm.Head}
	if len(es) > 0 {
		last := es[len(es)-1]
		if e.Handover, err = a.signCheckpoint(ctx, id, rm.Key, size, &declog.Epoch{Seq: last.Seq, From: last.From}); err != nil {
			return err
		}
	}
	return a.st.PutKeyEpoch(ctx, id, e)
}

// writeLog answers with a log route's bytes.
func writeLog(w http.ResponseWriter, contentType string, b []byte, cache string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", cache)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// serveCheckpoint answers GET /v1/rooms/{room}/log/checkpoint: the signed
// note (declog.Checkpoint), at most checkpointEvery old.
func (a *Audit) serveCheckpoint(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return
	}
	id, rm, aerr := a.logRoom(r)
	if aerr == nil && rm == nil {
		aerr = api.Errorf(api.RoomNotFound, "room %s is no longer steered here: no key of this server signs its checkpoint", id)
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	b, err := a.checkpoint(r.Context(), id, *rm)
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's checkpoint", err))
		return
	}
	writeLog(w, "text/plain; charset=utf-8", b, "no-cache")
}

// serveEpochs answers GET /v1/rooms/{room}/log/epochs: the heads the room
// has had, by seq, each fetched at /v1/rooms/{room}/keylog/{seq}.
func (a *Audit) serveEpochs(w http.ResponseWriter, r *http.Request) {
	id, ok := a.logGet(w, r)
	if !ok {
		return
	}
	es, err := a.st.KeyEpochs(r.Context(), id)
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's epochs", err))
		return
	}
	out := make([]view.Epoch, 0, len(es))
	for _, e := range es {
		out = append(out, view.Epoch{Seq: e.Seq, From: e.From, Handover: string(e.Handover)})
	}
	b, _ := json.Marshal(out)
	writeLog(w, "application/json", append(b, '\n'), "no-cache")
}

// serveKeyLogAt answers GET /v1/rooms/{room}/keylog/{seq}: a head the
// room has had, which never changes.
func (a *Audit) serveKeyLogAt(w http.ResponseWriter, r *http.Request) {
	id, ok := a.logGet(w, r)
	if !ok {
		return
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || strconv.FormatUint(seq, 10) != r.PathValue("seq") {
		web.Refuse(w, api.Errorf(api.BadLogRequest, "%q is not a key log head's seq in decimal", r.PathValue("seq")))
		return
	}
	es, err := a.st.KeyEpochs(r.Context(), id)
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's epochs", err))
		return
	}
	for _, e := range es {
		if e.Seq == seq {
			writeSigned(w, e.Head, Immutable)
			return
		}
	}
	web.Refuse(w, api.Errorf(api.NotFound, "room %s has had no key log head of seq %d here", id, seq))
}

// serveTile answers GET /v1/rooms/{room}/log/tile/...: a tile within the
// log's size, full or partial, which never changes.
func (a *Audit) serveTile(w http.ResponseWriter, r *http.Request) {
	id, ok := a.logGet(w, r)
	if !ok {
		return
	}
	t, err := declog.ParseTilePath("tile/" + r.PathValue("path"))
	if err != nil {
		web.Refuse(w, api.Errorf(api.BadLogRequest, "%v", err))
		return
	}
	size, err := a.st.LogSize(r.Context(), id, 0)
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's log", err))
		return
	}
	b, err := declog.ReadTile(r.Context(), a.st, id, 0, t, size)
	switch {
	case errors.Is(err, declog.ErrBeyond):
		web.Refuse(w, api.Errorf(api.NotFound, "tile %s is past the log's %d leaves", declog.TilePath(t), size))
	case err != nil:
		web.Refuse(w, a.fails.Failed(fmt.Sprintf("tile %s", declog.TilePath(t)), err))
	default:
		writeLog(w, "application/octet-stream", b, Immutable)
	}
}

// sizeParam reads a tree size from the query: def when absent; at most
// max (the log's size).
func sizeParam(r *http.Request, name string, def, max int64) (int64, *api.Error) {
	v, ok := r.URL.Query()[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	switch {
	case len(v) != 1 || err != nil || n < 0 || strconv.FormatInt(n, 10) != v[0]:
		return 0, api.Errorf(api.BadLogRequest, "%s=%q is not a tree size in decimal", name, v[0])
	case n > max:
		return 0, api.Errorf(api.NotFound, "%s=%d is past the log's %d leaves", name, n, max)
	}
	return n, nil
}

// onlyParams refuses a query with parameters other than names.
func onlyParams(r *http.Request, names ...string) *api.Error {
	for k := range r.URL.Query() {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			return api.Errorf(api.BadLogRequest, "the query parameter %q is not one of %v", k, names)
		}
	}
	return nil
}

// logProof begins a proof's route: the room it names and its log's size,
// or false once it has answered; the query may name only params.
func (a *Audit) logProof(w http.ResponseWriter, r *http.Request, params ...string) (sig.Hash, int64, bool) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	id, _, aerr := a.logRoom(r)
	if aerr == nil {
		aerr = onlyParams(r, params...)
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return id, 0, false
	}
	size, err := a.st.LogSize(r.Context(), id, 0)
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's log", err))
		return id, 0, false
	}
	return id, size, true
}

// serveInclusion answers GET /v1/rooms/{room}/log/inclusion/{digest}
// [?size=N]: the decision's index and its inclusion proof in the tree of
// N leaves (the log's size when N is not given).
func (a *Audit) serveInclusion(w http.ResponseWriter, r *http.Request) {
	id, size, ok := a.logProof(w, r, "size")
	if !ok {
		return
	}
	digest, aerr := web.Digest(r.PathValue("digest"))
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	ctx := r.Context()
	log, at, err := a.st.LogRef(ctx, id, digest)
	if err == nil && log != 0 {
		err = store.ErrNotFound // (in another log: issue 31's routes are not built yet)
	}
	if errors.Is(err, store.ErrNotFound) {
		web.Refuse(w, api.Errorf(api.NotFound, "the log of room %s holds no decision %s, or its decision is pruned", id, digest))
		return
	}
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's log", err))
		return
	}
	n, aerr := sizeParam(r, "size", size, size)
	if aerr == nil && n <= at {
		aerr = api.Errorf(api.NotFound, "decision %s is leaf %d, not in the tree of %d", digest, at, n)
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	p, err := tlog.ProveRecord(n, at, declog.HashReader(ctx, a.st, id, 0))
	if err != nil {
		web.Refuse(w, a.fails.Failed(fmt.Sprintf("proving leaf %d", at), err))
		return
	}
	if p == nil {
		p = tlog.RecordProof{} // [] in JSON, as a reader takes it
	}
	b, _ := json.Marshal(declog.Inclusion{Index: at, Size: n, Proof: p})
	writeLog(w, "application/json", append(b, '\n'), proofCache(r, "size"))
}

// serveConsistency answers GET /v1/rooms/{room}/log/consistency?from=M
// [&size=N]: the proof that the tree of N leaves extends that of M.
func (a *Audit) serveConsistency(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("from") {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		web.Refuse(w, api.Errorf(api.BadLogRequest, "from= is required: the size of the tree to prove from"))
		return
	}
	id, size, ok := a.logProof(w, r, "from", "size")
	if !ok {
		return
	}
	ctx := r.Context()
	n, aerr := sizeParam(r, "size", size, size)
	var m int64
	if aerr == nil {
		m, aerr = sizeParam(r, "from", 0, n)
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	p := tlog.TreeProof{} // from no leaves, nothing to prove
	if m > 0 {
		var err error
		if p, err = tlog.ProveTree(n, m, declog.HashReader(ctx, a.st, id, 0)); err != nil {
			web.Refuse(w, a.fails.Failed(fmt.Sprintf("proving %d from %d", n, m), err))
			return
		}
	}
	b, _ := json.Marshal(declog.Consistency{From: m, Size: n, Proof: p})
	writeLog(w, "application/json", append(b, '\n'), proofCache(r, "size"))
}

// proofCache is a proof's Cache-Control: immutable when the query names
// the tree's size, and otherwise of the log as it stands.
func proofCache(r *http.Request, name string) string {
	if r.URL.Query().Has(name) {
		return Immutable
	}
	return "no-cache"
}
