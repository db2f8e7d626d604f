package roomsteer

import (
	"context"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// What another server of a shared store changed, installed here as it is
// (internal/follow decides what to install).

// Hold holds the room for an operator's change (a policy, a key log head),
// until release.
func (h *Room) Hold() (release func()) {
	h.opMu.Lock()
	return h.opMu.Unlock
}

// InstallHead installs a key log head another server stored, checked as
// PutKeyLog checks one, and not stored again; Hold is held. It returns the
// head's seq.
func (h *Room) InstallHead(ctx context.Context, head []byte) (uint64, *api.Error) {
	st, aerr := h.installHead(ctx, head, false)
	if aerr != nil {
		return 0, aerr
	}
	seq, _ := st.keyLogSeq()
	return seq, nil
}

// InstallPolicy makes p, which another server stored active, the room's
// operator policy, not stored again; Hold is held. It returns the digest
// of the policy the room steers by.
func (h *Room) InstallPolicy(ctx context.Context, p *policy.Policy) (sig.Hash, *api.Error) {
	_, st, aerr := h.install(ctx, p, false)
	if aerr != nil {
		return sig.Hash{}, aerr
	}
	return st.digest, nil
}

// AddFromPeers adds to the evidence the records another server of a
// shared store accepted, read and authorised again under the room's key
// log (ReadRecord).
func (h *Room) AddFromPeers(es []evidence.Entry) {
	h.addRecords(es)
	h.fromPeers.Add(uint64(len(es)))
}
