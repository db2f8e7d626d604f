package roomsteer

import (
	"bytes"
	"context"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// FollowHead installs the room's key log head as the store holds it, when
// it is newer than this server's.
func (h *Room) FollowHead(ctx context.Context) error {
	rooms, err := h.d.Store.Rooms(ctx)
	if err != nil {
		return err
	}
	var head []byte
	for _, r := range rooms {
		if r.ID == h.id {
			head = r.KeyLogHead
		}
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	cur := h.state.Load()
	if head == nil || bytes.Equal(head, cur.head) {
		return nil
	}
	st, aerr := h.installHead(ctx, head, false)
	switch {
	case aerr != nil && aerr.Code == api.StoreUnavailable:
		return aerr
	case aerr != nil:
		// An older head (this server installed a newer one meanwhile),
		// or one this server refuses: it keeps its own.
		h.d.Log.Warn("a key log head another server stored is not installed", "room", h.id.String(), "err", aerr)
		return nil
	}
	seq, _ := st.keyLogSeq()
	h.d.Log.Info("key log head replaced by another server", "room", h.id.String(), "seq", seq)
	return nil
}

// FollowPolicy installs the room's active policy as the store holds it,
// when it is not this server's operator policy already.
func (h *Room) FollowPolicy(ctx context.Context) error {
	digest, raw, err := h.d.Store.ActivePolicy(ctx, h.id)
	if err != nil {
		return err
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	if digest == h.base.Digest() {
		return nil
	}
	p, err := policy.Parse(raw)
	if err != nil {
		h.d.Log.Warn("a policy another server stored does not read", "room", h.id.String(), "policy", digest.String(), "err", err)
		return nil
	}
	prev := h.base.Digest()
	_, st, aerr := h.install(ctx, p, false)
	switch {
	case aerr != nil && aerr.Code == api.StoreUnavailable:
		return aerr
	case aerr != nil:
		h.d.Log.Warn("a policy another server stored is not installed", "room", h.id.String(), "policy", digest.String(), "err", aerr)
		return nil
	}
	h.d.Log.Info("policy replaced by another server", "room", h.id.String(), "policy", digest.String(), "previous", prev.String(), "steering_by", st.digest.String())
	return nil
}

// AddPeerRecords adds to the evidence the records another server of a
// shared store accepted: each read and authorised again under the room's
// key log (COMPANION §5, §4.2); one that does not pass is logged and left
// out.
func (h *Room) AddPeerRecords(rs []store.Record) {
	var es []evidence.Entry
	for _, r := range rs {
		rec, err := h.state.Load().room.ReadRecord(r.Raw)
		if err != nil {
			h.d.Log.Warn("a record another server stored is left out of the evidence", "room", h.id.String(), "record", r.Digest.String(), "err", err)
			continue
		}
		es = append(es, evidence.Entry{Digest: rec.Digest(), Record: rec})
	}
	if len(es) > 0 {
		h.addRecords(es)
		h.fromPeers.Add(uint64(len(es)))
	}
}
