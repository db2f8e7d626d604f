package server

import (
	"github.com/waisteer/waisteer/internal/audit"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
)

// auditRooms are the server's rooms as the audit reads them
// (internal/audit).
type auditRooms struct{ s *Server }

func (a auditRooms) Steered(id sig.Hash) (audit.Room, bool) {
	h, ok := a.s.hubs[id]
	if !ok {
		return audit.Room{}, false
	}
	return auditRoom(h, h.state.Load()), true
}

func (a auditRooms) Archived(id sig.Hash) (store.Room, bool) {
	r, ok := a.s.archived[id]
	return r, ok
}

// auditRoom is the room of hub h in state st.
func auditRoom(h *hub, st *roomState) audit.Room {
	seq, _ := st.keyLogSeq()
	return audit.Room{Key: h.key, Descriptor: st.descriptor, Head: st.head, Seq: seq}
}
