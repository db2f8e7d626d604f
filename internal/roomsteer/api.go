package roomsteer

import (
	"context"
	"fmt"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/qoewatch"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/steerroute"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// ID is the room's id (COMPANION §4).
func (h *Room) ID() sig.Hash { return h.id }

// State is the state the room steers by now.
func (h *Room) State() *State { return h.state.Load() }

// Key is the room's steering key, which signs its decisions (§3.5) and
// its log's checkpoints.
func (h *Room) Key() sig.PrivateKey { return h.key }

// Retired are the steering routes of the policies the room steered by
// before its current one, which still reach it; Routes' lock guards them.
func (h *Room) Retired() []steerroute.Route { return h.retired }

// SupersededDecisions is the decision prefix of the configured policy when
// the store's active one superseded it at the start, which stays routed;
// "" for none.
func (h *Room) SupersededDecisions() string { return h.decisions }

// QoE is the room's steering by what its players report; nil for none.
func (h *Room) QoE() *qoewatch.Watch { return h.qoe }

// Unread counts the steering requests' report values that do not count.
func (h *Room) Unread() *qoewatch.Unread { return &h.unread }

// Limited counts the requests over budget.
func (h *Room) Limited() *budget.Counts { return &h.limited }

// HasOverlay says whether the room steers by an overlay policy at times
// (health checks, QoE), which RunOverlay keeps.
func (h *Room) HasOverlay() bool { return h.wake != nil }

// RunOverlay checks the room's pathways until ctx ends, and steers by the
// policy their health and QoE call for after each change.
func (h *Room) RunOverlay(ctx context.Context) { h.runOverlay(ctx) }

// MarkRestored says the room's live sessions are counted again from its
// log (internal/restore), or need not be.
func (h *Room) MarkRestored() { h.restored.Store(true) }

// Publish stores what the room starts with (the room, its key log head as
// an epoch of its log, its policy as the active one) and builds its
// evidence from the records the store holds for its window (§5).
func (h *Room) Publish(ctx context.Context) error {
	st := h.state.Load()
	if err := h.d.Store.PutRoom(ctx, store.Room{ID: h.id, Descriptor: st.descriptor, KeyLogHead: st.head}); err != nil {
		return fmt.Errorf("storing the room: %w", err)
	}
	if err := h.d.KeepEpoch(ctx, h, st); err != nil {
		return fmt.Errorf("storing its key log head as an epoch of its log: %w", err)
	}
	if err := h.d.Store.PutPolicy(ctx, h.id, st.digest, st.policy.Bytes(), true); err != nil {
		return fmt.Errorf("storing its policy: %w", err)
	}
	h.d.KnowPolicy(st.policy)
	h.warnHopGaps(st)
	if err := h.replace(ctx, st, nil); err != nil {
		return fmt.Errorf("its evidence: %w", err)
	}
	return nil
}

// Policy is the state's policy.
func (st *State) Policy() *policy.Policy { return st.policy }

// Digest is the state's policy's digest (§3.4).
func (st *State) Digest() sig.Hash { return st.digest }

// IDs are the pathways' ids in the policy's order.
func (st *State) IDs() []string { return st.ids }

// Room is the room as its descriptor and key log head give it.
func (st *State) Room() *room.Room { return st.room }

// Head is the key log head's bytes; nil for a room with no origin.
func (st *State) Head() []byte { return st.head }

// KeyLogSeq is the seq of the key log head, and false with none.
func (st *State) KeyLogSeq() (uint64, bool) { return st.keyLogSeq() }

// Steer are the steering routes of the state's policy.
func (st *State) Steer() []steerroute.Route { return st.steer }

// Decisions is the path (and query) prefix of the policy's decision_uri
// (§8.4).
func (st *State) Decisions() string { return st.decisions }

// Descriptor is the room descriptor's bytes (COMPANION §4).
func (st *State) Descriptor() []byte { return st.descriptor }

// FromPeers counts the records other servers of a shared store accepted,
// joined to this one's evidence.
func (h *Room) FromPeers() uint64 { return h.fromPeers.Load() }

// Replayable is how many sessions' latest manifests the room keeps to
// answer again over budget.
func (h *Room) Replayable() int { return h.latest.Len() }

// Decided is how many decisions were made under the state's policy.
func (st *State) Decided() uint64 {
	var n uint64
	for r := range st.firsts {
		for i := range st.firsts[r] {
			n += st.firsts[r][i].Load()
		}
	}
	return n
}

// EachHop calls fn for each hop of the policy the room steers by, by
// pathway in the policy's order and hop in the pathway's, with the
// evidence's records of the hop over [a, b): all under one hold of the
// evidence, so that they are of one moment.
func (h *Room) EachHop(a, b uint64, fn func(pathway string, hop sig.PublicKey, es []evidence.Entry)) {
	st := h.state.Load()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pw := range st.policy.Pathways {
		for _, hop := range pw.Hops {
			fn(pw.ID, hop.Key, h.index.InWindow(hop.Key, a, b))
		}
	}
}
