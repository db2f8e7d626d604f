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

// A room's logs of decisions as an auditor reads them (issue 16, internal/
// declog): a checkpoint the room's steering key signs, the tiles of C2SP
// tlog-tiles (immutable, so that a CDN may keep them), proofs, and the key
// log heads the room has had with the log's size at each (epochs), so that
// each decision is checked against the head in force when the log took it.
//
// A room has one log per server on a shared store (issue 31), each served
// under /v1/rooms/{room}/logs/{n}/ as /v1/rooms/{room}/log/ serves log 0,
// which it still does; /v1/rooms/{room}/logs lists them.

// checkpointEvery is how often a growing log's checkpoint is signed again:
// an auditor asking more often gets the last one, a prefix of the log.
const checkpointEvery = time.Second

type signedCheckpoint struct {
	size int64
	b    []byte
	at   time.Time
}

// logKey names one log of one room, for the latest checkpoint signed.
type logKey struct {
	room sig.Hash
	n    int64
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

// logAt is the log a route serves, as it stands.
type logAt struct {
	room sig.Hash
	rm   *Room // nil for a room no longer steered here
	info store.LogInfo
	// path is the log's routes' prefix, for messages and redirects:
	// /v1/rooms/<id>/log or /v1/rooms/<id>/logs/<n>.
	path string
}

// logOf finds the room and the log a route names and reads its size: log
// 0 for the routes under /log/, and the log {n} under /logs/{n}/, which
// must be one of the room's, read alone (store.LogOf).
func (a *Audit) logOf(r *http.Request) (logAt, *api.Error) {
	id, rm, aerr := a.logRoom(r)
	if aerr != nil {
		return logAt{}, aerr
	}
	l := logAt{room: id, rm: rm, path: "/v1/rooms/" + id.String() + "/log"}
	ns := r.PathValue("n")
	if ns == "" {
		// issue 16's routes: log 0, whatever logs the room has.
		size, err := a.st.LogSize(r.Context(), id, 0)
		if err != nil {
			return l, a.fails.Failed("the room's log", err)
		}
		l.info = store.LogInfo{N: 0, Size: size}
		return l, nil
	}
	n, err := declog.ParseLogNumber(ns)
	if err != nil {
		return l, api.Errorf(api.BadLogRequest, "%v", err)
	}
	li, err := store.LogOf(r.Context(), a.st, id, n)
	switch {
	case err == nil:
		l.info, l.path = li, "/v1/rooms/"+id.String()+"/logs/"+ns
		return l, nil
	case !errors.Is(err, store.ErrNotFound):
		return l, a.fails.Failed("the room's log", err)
	}
	return l, api.Errorf(api.NotFound, "room %s has no log %d (its logs are listed at /v1/rooms/%s/logs)", id, n, id)
}

// logGet begins a log route that reads no query: the log it names, or
// false once it has answered.
func (a *Audit) logGet(w http.ResponseWriter, r *http.Request) (logAt, bool) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return logAt{}, false
	}
	l, aerr := a.logOf(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return l, false
	}
	return l, true
}

// epochOf is the epoch a checkpoint of log n of the room, of size leaves,
// names: the latest head with a start in that log at or before its size
// (issue 31: each log has its own start of each head); nil for a room with
// no origin.
func (a *Audit) epochOf(ctx context.Context, id sig.Hash, rm Room, n, size int64) (*declog.Epoch, error) {
	if rm.Head == nil {
		return nil, nil
	}
	es, err := a.st.KeyEpochs(ctx, id)
	if err != nil {
		return nil, err
	}
	var in *declog.Epoch
	for _, e := range es { // by seq
		if e.Log == n && e.From <= size {
			in = &declog.Epoch{Seq: e.Seq, From: e.From}
		}
	}
	if in == nil {
		return nil, fmt.Errorf("%w: log %d", errNoStart, n)
	}
	return in, nil
}

// errNoStart is a log with no start of any of the room's heads: none of
// its decisions is signed under any, so it has none (KeepEpoch starts the
// head in force in a server's log before its first decision there), or it
// is not one of the room's (log 0 on a shared store made after issue 31).
var errNoStart = errors.New("the room has a key log, and no head of it starts in the log")

// signCheckpoint signs the checkpoint of log n of the room, of size leaves,
// naming epoch; server is the log's (store.LogInfo.Server).
func (a *Audit) signCheckpoint(ctx context.Context, id sig.Hash, key sig.PrivateKey, n int64, server string, size int64, epoch *declog.Epoch) ([]byte, error) {
	root, err := tlog.TreeHash(size, declog.HashReader(ctx, a.st, id, n))
	if err != nil {
		return nil, err
	}
	if n == 0 {
		server = "" // issue 16's log names no server
	}
	return declog.Sign(declog.Checkpoint{Room: id, Log: n, Server: server, Size: size, Root: root, Keys: epoch}, key)
}

// lastCheckpoint is where the latest checkpoint signed of a room's log is
// kept.
func (a *Audit) lastCheckpoint(k logKey) *atomic.Pointer[signedCheckpoint] {
	if p, ok := a.checkpoints.Load(k); ok {
		return p.(*atomic.Pointer[signedCheckpoint])
	}
	p, _ := a.checkpoints.LoadOrStore(k, new(atomic.Pointer[signedCheckpoint]))
	return p.(*atomic.Pointer[signedCheckpoint])
}

// checkpoint is the log's latest checkpoint: signed again when the log
// has grown and the last is checkpointEvery old, and at once for a sealed
// log, whose size is final.
func (a *Audit) checkpoint(ctx context.Context, id sig.Hash, rm Room, info store.LogInfo) ([]byte, error) {
	size := info.Size
	last := a.lastCheckpoint(logKey{id, info.N})
	if c := last.Load(); c != nil && (c.size == size || c.size < size && !info.Sealed && time.Since(c.at) < checkpointEvery) {
		return c.b, nil
	}
	epoch, err := a.epochOf(ctx, id, rm, info.N, size)
	if err != nil {
		return nil, err
	}
	b, err := a.signCheckpoint(ctx, id, rm.Key, info.N, info.Server, size, epoch)
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

// KeepEpoch stores the room's key log head in rm as an epoch of the log
// this server appends the room's decisions to (store.Log.OwnLog), when
// that log has no start of it yet: from the log's size now, with the
// handover checkpoint of the log so far signed under the head before it in
// that log. The server calls it for a room's configured head when it
// starts, for the operator's before it is installed, and for a head
// another server of a shared store installed before it signs under it
// here (issue 31: each log has a start for every head its decisions are
// signed under).
func (a *Audit) KeepEpoch(ctx context.Context, id sig.Hash, rm Room) error {
	if rm.Head == nil {
		return nil
	}
	own, err := a.st.OwnLog(ctx, id)
	if err != nil {
		return err
	}
	es, err := a.st.KeyEpochs(ctx, id)
	if err != nil {
		return err
	}
	var last *store.KeyEpoch
	for i := range es {
		if es[i].Log == own.N {
			last = &es[i]
		}
	}
	if last != nil && last.Seq >= rm.Seq {
		return nil
	}
	size, err := a.st.LogSize(ctx, id, own.N)
	if err != nil {
		return err
	}
	e := store.KeyEpoch{Seq: rm.Seq, Log: own.N, From: size, Head: rm.Head}
	if last != nil {
		// Signed whatever the size, an empty log's too, so that every
		// start of a log but its first has a handover (issue 16's check).
		if e.Handover, err = a.signCheckpoint(ctx, id, rm.Key, own.N, own.Server, size, &declog.Epoch{Seq: last.Seq, From: last.From}); err != nil {
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

// serveLogs answers GET /v1/rooms/{room}/logs: the room's logs by number,
// each with its server, its size and whether it is sealed (issue 31).
func (a *Audit) serveLogs(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return
	}
	id, _, aerr := a.logRoom(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	logs, err := a.st.Logs(r.Context(), id)
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's logs", err))
		return
	}
	out := make([]view.Log, 0, len(logs))
	for _, l := range logs {
		out = append(out, view.Log{Log: l.N, Server: l.Server, Size: l.Size, Sealed: l.Sealed})
	}
	b, _ := json.Marshal(out)
	writeLog(w, "application/json", append(b, '\n'), "no-cache")
}

// serveCheckpoint answers GET /v1/rooms/{room}/log/checkpoint and
// /v1/rooms/{room}/logs/{n}/checkpoint: the signed note
// (declog.Checkpoint), at most checkpointEvery old.
func (a *Audit) serveCheckpoint(w http.ResponseWriter, r *http.Request) {
	l, ok := a.logGet(w, r)
	if !ok {
		return
	}
	if l.rm == nil {
		web.Refuse(w, api.Errorf(api.RoomNotFound, "room %s is no longer steered here: no key of this server signs its checkpoint", l.room))
		return
	}
	b, err := a.checkpoint(r.Context(), l.room, *l.rm, l.info)
	if errors.Is(err, errNoStart) && l.info.Size == 0 {
		web.Refuse(w, api.Errorf(api.NotFound, "room %s has no decision in log %d: its logs are listed at /v1/rooms/%s/logs", l.room, l.info.N, l.room))
		return
	}
	if err != nil {
		web.Refuse(w, a.fails.Failed(fmt.Sprintf("the checkpoint of log %d", l.info.N), err))
		return
	}
	writeLog(w, "text/plain; charset=utf-8", b, "no-cache")
}

// serveEpochs answers GET /v1/rooms/{room}/log/epochs and
// /v1/rooms/{room}/logs/{n}/epochs: the heads with a start in the log, by
// seq, each fetched at /v1/rooms/{room}/keylog/{seq}.
func (a *Audit) serveEpochs(w http.ResponseWriter, r *http.Request) {
	l, ok := a.logGet(w, r)
	if !ok {
		return
	}
	es, err := a.st.KeyEpochs(r.Context(), l.room)
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's epochs", err))
		return
	}
	out := make([]view.Epoch, 0, len(es))
	for _, e := range es {
		if e.Log == l.info.N {
			out = append(out, view.Epoch{Seq: e.Seq, From: e.From, Handover: string(e.Handover)})
		}
	}
	b, _ := json.Marshal(out)
	writeLog(w, "application/json", append(b, '\n'), "no-cache")
}

// serveKeyLogAt answers GET /v1/rooms/{room}/keylog/{seq}: a head the
// room has had, which never changes.
func (a *Audit) serveKeyLogAt(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if !web.NoQuery(w, r) {
		return
	}
	id, _, aerr := a.logRoom(r)
	if aerr != nil {
		web.Refuse(w, aerr)
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

// serveTile answers GET /v1/rooms/{room}/log/tile/... and
// /v1/rooms/{room}/logs/{n}/tile/...: a tile within the log's size, full
// or partial, which never changes.
func (a *Audit) serveTile(w http.ResponseWriter, r *http.Request) {
	l, ok := a.logGet(w, r)
	if !ok {
		return
	}
	t, err := declog.ParseTilePath("tile/" + r.PathValue("path"))
	if err != nil {
		web.Refuse(w, api.Errorf(api.BadLogRequest, "%v", err))
		return
	}
	size := l.info.Size
	b, err := declog.ReadTile(r.Context(), a.st, l.room, l.info.N, t, size)
	switch {
	case errors.Is(err, declog.ErrBeyond):
		web.Refuse(w, api.Errorf(api.NotFound, "tile %s is past the %d leaves of log %d", declog.TilePath(t), size, l.info.N))
	case err != nil:
		web.Refuse(w, a.fails.Failed(fmt.Sprintf("tile %s of log %d", declog.TilePath(t), l.info.N), err))
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

// logProof begins a proof's route: the log it names, or false once it
// has answered; the query may name only params.
func (a *Audit) logProof(w http.ResponseWriter, r *http.Request, params ...string) (logAt, bool) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if aerr := onlyParams(r, params...); aerr != nil {
		// The room first, as issue 16's routes answer.
		if _, _, rerr := a.logRoom(r); rerr != nil {
			aerr = rerr
		}
		web.Refuse(w, aerr)
		return logAt{}, false
	}
	l, aerr := a.logOf(r)
	if aerr != nil {
		web.Refuse(w, aerr)
		return l, false
	}
	return l, true
}

// serveInclusion answers GET /v1/rooms/{room}/log/inclusion/{digest} and
// /v1/rooms/{room}/logs/{n}/inclusion/{digest} [?size=N]: the decision's
// index and its inclusion proof in the log's tree of N leaves (the log's
// size when N is not given). A decision in another log of the room is
// not found here, and the answer names the route of its log; under /log/
// (issue 16's route, which knows no other log) with no size, which could
// only be log 0's, the answer is a redirect there (307): a proof in the
// log as it stands is the same question of whichever log holds it.
func (a *Audit) serveInclusion(w http.ResponseWriter, r *http.Request) {
	l, ok := a.logProof(w, r, "size")
	if !ok {
		return
	}
	digest, aerr := web.Digest(r.PathValue("digest"))
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	ctx := r.Context()
	n, at, err := a.st.LogRef(ctx, l.room, digest)
	if errors.Is(err, store.ErrNotFound) {
		web.Refuse(w, api.Errorf(api.NotFound, "the logs of room %s hold no decision %s, or its decision is pruned", l.room, digest))
		return
	}
	if err != nil {
		web.Refuse(w, a.fails.Failed("the room's log", err))
		return
	}
	if n != l.info.N {
		there := fmt.Sprintf("/v1/rooms/%s/logs/%d/inclusion/%s", l.room, n, digest)
		if r.PathValue("n") == "" && !r.URL.Query().Has("size") {
			w.Header().Set("Location", there)
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		web.Refuse(w, api.Errorf(api.NotFound, "decision %s is in log %d of the room, not log %d: its proof is at %s", digest, n, l.info.N, there))
		return
	}
	size := l.info.Size
	m, aerr := sizeParam(r, "size", size, size)
	if aerr == nil && m <= at {
		aerr = api.Errorf(api.NotFound, "decision %s is leaf %d, not in the tree of %d", digest, at, m)
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	p, err := tlog.ProveRecord(m, at, declog.HashReader(ctx, a.st, l.room, n))
	if err != nil {
		web.Refuse(w, a.fails.Failed(fmt.Sprintf("proving leaf %d of log %d", at, n), err))
		return
	}
	if p == nil {
		p = tlog.RecordProof{} // [] in JSON, as a reader takes it
	}
	b, _ := json.Marshal(declog.Inclusion{Log: n, Index: at, Size: m, Proof: p})
	writeLog(w, "application/json", append(b, '\n'), proofCache(r, "size"))
}

// serveConsistency answers GET /v1/rooms/{room}/log/consistency and
// /v1/rooms/{room}/logs/{n}/consistency ?from=M[&size=N]: the proof that
// the log's tree of N leaves extends that of M.
func (a *Audit) serveConsistency(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("from") {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		web.Refuse(w, api.Errorf(api.BadLogRequest, "from= is required: the size of the tree to prove from"))
		return
	}
	l, ok := a.logProof(w, r, "from", "size")
	if !ok {
		return
	}
	ctx := r.Context()
	size := l.info.Size
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
		if p, err = tlog.ProveTree(n, m, declog.HashReader(ctx, a.st, l.room, l.info.N)); err != nil {
			web.Refuse(w, a.fails.Failed(fmt.Sprintf("proving %d from %d in log %d", n, m, l.info.N), err))
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
