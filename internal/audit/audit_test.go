package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

var bg = context.Background()

// rooms is a Rooms of fixed rooms.
type rooms struct {
	mu       sync.Mutex
	steered  map[sig.Hash]Room
	archived map[sig.Hash]store.Room
}

func (r *rooms) Steered(id sig.Hash) (Room, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rm, ok := r.steered[id]
	return rm, ok
}

func (r *rooms) Find(segment string) (sig.Hash, *api.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ns []web.RoomName
	for id, rm := range r.steered {
		d, _ := room.ParseDescriptor(rm.Descriptor)
		ns = append(ns, web.RoomName{ID: id, Name: d.Name})
	}
	for id, rm := range r.archived {
		d, _ := room.ParseDescriptor(rm.Descriptor)
		ns = append(ns, web.RoomName{ID: id, Name: d.Name})
	}
	return web.RoomOf(segment, ns)
}

func (r *rooms) Archived(id sig.Hash) (store.Room, bool) {
	rm, ok := r.archived[id]
	return rm, ok
}

// env is an Audit over a memory store, steering the default scenario's
// room, and holding an archived room of no origin.
type env struct {
	t        *testing.T
	sc       *scenario.Scenario
	st       *store.Memory
	rooms    *rooms
	policies *sync.Map
	a        *Audit
	mux      *http.ServeMux
	archived *room.TestRoom
	decided  []*scenario.Made
}

func newEnv(t *testing.T) *env {
	t.Helper()
	sc, err := scenario.Build(scenario.Spec{Periods: 8})
	if err != nil {
		t.Fatal(err)
	}
	old, err := room.NewTestRoomNoOrigin("no longer steered")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, sc: sc, st: store.NewMemory(), policies: new(sync.Map), archived: old}
	id := sc.Room.ID()
	seq := sc.Room.Head().Seq
	e.rooms = &rooms{
		steered:  map[sig.Hash]Room{id: {Key: sc.SteerKey, Descriptor: sc.Room.DescriptorBytes, Head: sc.Room.HeadBytes, Seq: seq}},
		archived: map[sig.Hash]store.Room{old.ID(): {ID: old.ID(), Descriptor: old.DescriptorBytes}},
	}
	if err := e.st.PutPolicy(bg, id, sc.Policy.Digest(), sc.PolicyBytes, true); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.a = New(Deps{Store: e.st, Rooms: e.rooms, Policies: e.policies, Fails: web.NewStoreFailures(e.st, log), Log: log})
	e.mux = http.NewServeMux()
	for _, rt := range e.a.Routes() {
		e.mux.HandleFunc(rt.Method+" "+rt.Pattern, rt.Serve)
	}
	if err := e.a.KeepEpoch(bg, id, e.rooms.steered[id]); err != nil {
		t.Fatal(err)
	}
	return e
}

// decide stores n more decisions of the room, each its own commit.
func (e *env) decide(n int) {
	e.t.Helper()
	for range n {
		m, err := e.sc.Decide(scenario.Request{T: 6*scenario.Period + uint64(len(e.decided)+1)*1000})
		if err != nil {
			e.t.Fatal(err)
		}
		ev := make([]evidence.Pathway, len(m.Decision.Pathways))
		for j := range ev {
			ev[j] = m.Decision.Pathways[j].Pathway
		}
		snap := store.EncodeEvidence(ev)
		if err := e.st.PutDecisions(bg, []store.Evidence{snap}, []store.Decision{store.Compact(m.Decision, m.Digest, snap.Key)}); err != nil {
			e.t.Fatal(err)
		}
		e.decided = append(e.decided, m)
	}
}

// get answers a GET of target.
func (e *env) get(target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w
}

// refusal is the code of a refusal's body.
func refusal(w *httptest.ResponseRecorder) api.Code {
	var b struct {
		Error api.Code `json:"error"`
	}
	json.Unmarshal(w.Body.Bytes(), &b)
	return b.Error
}

// TestDecisionBytes: a stored decision is rebuilt to the exact bytes that
// were signed, its policy read once into the cache; ServeDecision serves
// them immutable, and refuses a digest the store does not hold.
func TestDecisionBytes(t *testing.T) {
	e := newEnv(t)
	e.decide(3)
	for _, m := range e.decided {
		b, aerr := e.a.DecisionBytes(bg, m.Digest)
		if aerr != nil || !bytes.Equal(b, m.Bytes) {
			t.Fatalf("decision %s: %v, rebuilt bytes equal: %v", m.Digest, aerr, bytes.Equal(b, m.Bytes))
		}
	}
	if p, ok := e.policies.Load(e.sc.Policy.Digest()); !ok || p.(*policy.Policy).Digest() != e.sc.Policy.Digest() {
		t.Fatal("the decision's policy is not in the cache")
	}
	m := e.decided[0]
	w := httptest.NewRecorder()
	e.a.ServeDecision(w, httptest.NewRequest(http.MethodGet, "/v1/decisions/"+m.Digest.String(), nil), m.Digest.String())
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), m.Bytes) || w.Header().Get("Cache-Control") != Immutable ||
		w.Header().Get("Content-Type") != "application/octet-stream" || w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("ServeDecision: %d %v", w.Code, w.Header())
	}
	none := sig.Digest([]byte("no decision"))
	w = httptest.NewRecorder()
	e.a.ServeDecision(w, httptest.NewRequest(http.MethodGet, "/v1/decisions/"+none.String(), nil), none.String())
	if w.Code != 404 || refusal(w) != api.NotFound {
		t.Fatalf("a decision not held: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	e.a.ServeDecision(w, httptest.NewRequest(http.MethodGet, "/v1/decisions/xyz", nil), "xyz")
	if w.Code != 400 || refusal(w) != api.BadDigest {
		t.Fatalf("a digest that is none: %d %s", w.Code, w.Body)
	}
}

// TestRoomRoutes: a steered room's descriptor and head, an archived room's
// descriptor and no head (it has no origin), and an unknown room.
func TestRoomRoutes(t *testing.T) {
	e := newEnv(t)
	id, old := e.sc.Room.ID().String(), e.archived.ID().String()
	for _, c := range []struct {
		target string
		status int
		body   []byte
		cache  string
		code   api.Code
	}{
		{"/v1/rooms/" + id + "/descriptor", 200, e.sc.Room.DescriptorBytes, Immutable, ""},
		{"/v1/rooms/" + id + "/keylog", 200, e.sc.Room.HeadBytes, "no-cache", ""},
		{"/v1/rooms/" + id + "/keylog/1", 200, e.sc.Room.HeadBytes, Immutable, ""},
		{"/v1/rooms/" + old + "/descriptor", 200, e.archived.DescriptorBytes, Immutable, ""},
		{"/v1/rooms/" + old + "/keylog", 404, nil, "", api.NoKeyLog},
		{"/v1/rooms/" + old + "/log/checkpoint", 404, nil, "", api.RoomNotFound},
		{"/v1/rooms/" + strings.Repeat("ab", 32) + "/descriptor", 404, nil, "", api.RoomNotFound},
		{"/v1/rooms/" + id + "/descriptor?x", 400, nil, "", api.QueryNotAllowed},
		{"/v1/rooms/" + id + "/keylog/01", 400, nil, "", api.BadLogRequest},
		{"/v1/rooms/" + id + "/keylog/2", 404, nil, "", api.NotFound},
		{"/v1/policies/" + e.sc.Policy.Digest().String(), 200, e.sc.PolicyBytes, Immutable, ""},
		{"/v1/records/" + strings.Repeat("ab", 32), 404, nil, "", api.NotFound},
	} {
		w := e.get(c.target)
		if w.Code != c.status || w.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: %d %s", c.target, w.Code, w.Body)
			continue
		}
		if c.code != "" {
			if refusal(w) != c.code {
				t.Errorf("%s: %s, want %s", c.target, w.Body, c.code)
			}
			continue
		}
		if !bytes.Equal(w.Body.Bytes(), c.body) || w.Header().Get("Cache-Control") != c.cache {
			t.Errorf("%s: Cache-Control %q, the bytes stored: %v", c.target, w.Header().Get("Cache-Control"), bytes.Equal(w.Body.Bytes(), c.body))
		}
	}
}

// TestCheckpointCache: a checkpoint is signed by the steering key and
// names the epoch in force; while the log grows it is signed again at most
// every checkpointEvery, so that one asked again at once is the one before,
// a prefix of the log.
func TestCheckpointCache(t *testing.T) {
	e := newEnv(t)
	id := e.sc.Room.ID()
	e.decide(2)
	target := "/v1/rooms/" + id.String() + "/log/checkpoint"
	w := e.get(target)
	if w.Code != 200 || w.Header().Get("Cache-Control") != "no-cache" || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("checkpoint: %d %v %s", w.Code, w.Header(), w.Body)
	}
	first := w.Body.Bytes()
	c, _, err := declog.Open(first, id, []sig.PublicKey{e.sc.SteerKey.Public()})
	if err != nil || c.Size != 2 || c.Keys == nil || *c.Keys != (declog.Epoch{Seq: 1, From: 0}) {
		t.Fatalf("checkpoint %+v, %v: want 2 leaves under head 1 from 0", c, err)
	}
	e.decide(1)
	if again := e.get(target).Body.Bytes(); !bytes.Equal(again, first) {
		t.Fatalf("the log grew and the checkpoint was signed again within %v", checkpointEvery)
	}
	// Past checkpointEvery it is signed again, of 3 leaves.
	last := e.a.lastCheckpoint(logKey{id, 0})
	old := *last.Load()
	old.at = old.at.Add(-checkpointEvery)
	last.Store(&old)
	c, _, err = declog.Open(e.get(target).Body.Bytes(), id, []sig.PublicKey{e.sc.SteerKey.Public()})
	if err != nil || c.Size != 3 {
		t.Fatalf("checkpoint %+v, %v: want 3 leaves", c, err)
	}
}

// TestKeepEpoch: the first head is an epoch from the log's start with no
// handover; a head of a seq not greater is not kept again; a newer one is
// kept from the log's size, with the handover checkpoint of the log so far
// signed under the head before.
func TestKeepEpoch(t *testing.T) {
	e := newEnv(t)
	id := e.sc.Room.ID()
	rm := e.rooms.steered[id]
	e.decide(2)
	if err := e.a.KeepEpoch(bg, id, rm); err != nil {
		t.Fatal(err)
	}
	head2, err := room.NewKeyLogHead(e.sc.Room.OriginKey, 2, []room.Entry{room.SteerEntry(e.sc.SteerKey.Public(),
		evidence.ModelBased, evidence.Estimator, evidence.OnChipCounter, evidence.CalibratedInstrument)})
	if err != nil {
		t.Fatal(err)
	}
	rm.Head, rm.Seq = head2, 2
	if err := e.a.KeepEpoch(bg, id, rm); err != nil {
		t.Fatal(err)
	}
	es, err := e.st.KeyEpochs(bg, id)
	if err != nil || len(es) != 2 {
		t.Fatalf("epochs %+v, %v: want 2", es, err)
	}
	if es[0].Seq != 1 || es[0].From != 0 || es[0].Handover != nil || es[1].Seq != 2 || es[1].From != 2 || !bytes.Equal(es[1].Head, head2) {
		t.Fatalf("epochs %+v", es)
	}
	c, _, err := declog.Open(es[1].Handover, id, []sig.PublicKey{e.sc.SteerKey.Public()})
	if err != nil || c.Size != 2 || c.Keys == nil || *c.Keys != (declog.Epoch{Seq: 1, From: 0}) {
		t.Fatalf("handover %+v, %v: want the log's 2 leaves under head 1", c, err)
	}
	w := e.get("/v1/rooms/" + id.String() + "/log/epochs")
	var got []view.Epoch
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got) != 2 || got[1].Handover != string(es[1].Handover) {
		t.Fatalf("epochs route: %d %s", w.Code, w.Body)
	}
	// A room of no origin has no key log, and so no epoch.
	if err := e.a.KeepEpoch(bg, e.archived.ID(), Room{Key: e.sc.SteerKey, Descriptor: e.archived.DescriptorBytes}); err != nil {
		t.Fatal(err)
	}
	if es, err := e.st.KeyEpochs(bg, e.archived.ID()); err != nil || len(es) != 0 {
		t.Fatalf("a room of no origin: epochs %+v, %v", es, err)
	}
}

// TestQueryParams: a tree size in the query is decimal, canonical, given
// once and within the log; a proof's route takes only its parameters; a
// proof of a named size is immutable.
func TestQueryParams(t *testing.T) {
	for _, c := range []struct {
		query string
		n     int64
		code  api.Code
	}{
		{"", 7, ""}, {"size=0", 0, ""}, {"size=10", 10, ""}, {"size=11", 0, api.NotFound},
		{"size=01", 0, api.BadLogRequest}, {"size=-1", 0, api.BadLogRequest}, {"size=x", 0, api.BadLogRequest},
		{"size=1&size=1", 0, api.BadLogRequest}, {"size=", 0, api.BadLogRequest},
	} {
		r := httptest.NewRequest(http.MethodGet, "/p?"+c.query, nil)
		n, aerr := sizeParam(r, "size", 7, 10)
		if c.code == "" && (aerr != nil || n != c.n) || c.code != "" && (aerr == nil || aerr.Code != c.code) {
			t.Errorf("sizeParam(%q) = %d, %v", c.query, n, aerr)
		}
	}
	if aerr := onlyParams(httptest.NewRequest(http.MethodGet, "/p?from=1&size=2", nil), "from", "size"); aerr != nil {
		t.Errorf("from and size: %v", aerr)
	}
	if aerr := onlyParams(httptest.NewRequest(http.MethodGet, "/p?from=1&x=2", nil), "from", "size"); aerr == nil || aerr.Code != api.BadLogRequest {
		t.Errorf("x: %v", aerr)
	}
	if c := proofCache(httptest.NewRequest(http.MethodGet, "/p?size=2", nil), "size"); c != Immutable {
		t.Errorf("a proof of a named size: %q", c)
	}
	if c := proofCache(httptest.NewRequest(http.MethodGet, "/p?from=2", nil), "size"); c != "no-cache" {
		t.Errorf("a proof of the log as it stands: %q", c)
	}
}

// TestProofs: an inclusion proof and a consistency proof over the memory
// store's log verify against the checkpoint's root.
func TestProofs(t *testing.T) {
	e := newEnv(t)
	id := e.sc.Room.ID()
	e.decide(5)
	c, _, err := declog.Open(e.get("/v1/rooms/"+id.String()+"/log/checkpoint").Body.Bytes(), id, []sig.PublicKey{e.sc.SteerKey.Public()})
	if err != nil {
		t.Fatal(err)
	}
	w := e.get("/v1/rooms/" + id.String() + "/log/inclusion/" + e.decided[3].Digest.String())
	var inc declog.Inclusion
	if err := json.Unmarshal(w.Body.Bytes(), &inc); err != nil || inc.Index != 3 || inc.Size != 5 || w.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("inclusion: %d %s", w.Code, w.Body)
	}
	leaf, err := e.st.LogHashes(bg, id, 0, []int64{tlog.StoredHashIndex(0, 3)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckRecord(inc.Proof, c.Size, c.Root, 3, leaf[0]); err != nil {
		t.Fatalf("the inclusion proof does not prove leaf 3 in the checkpoint's tree: %v", err)
	}
	w = e.get("/v1/rooms/" + id.String() + "/log/consistency?from=2&size=5")
	var con declog.Consistency
	if err := json.Unmarshal(w.Body.Bytes(), &con); err != nil || con.From != 2 || con.Size != 5 || w.Header().Get("Cache-Control") != Immutable {
		t.Fatalf("consistency: %d %s", w.Code, w.Body)
	}
	root2, err := tlog.TreeHash(2, declog.HashReader(bg, e.st, id, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(con.Proof, c.Size, c.Root, 2, root2); err != nil {
		t.Fatalf("the consistency proof does not prove the tree of 5 extends that of 2: %v", err)
	}
	if w := e.get("/v1/rooms/" + id.String() + "/log/consistency"); w.Code != 400 || refusal(w) != api.BadLogRequest {
		t.Fatalf("consistency with no from: %d %s", w.Code, w.Body)
	}
	if w := e.get("/v1/rooms/" + id.String() + "/log/tile/0/000.p/5"); w.Code != 200 || w.Body.Len() != 5*32 || w.Header().Get("Cache-Control") != Immutable {
		t.Fatalf("tile: %d %s", w.Code, w.Body)
	}
}
