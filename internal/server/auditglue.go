package server

import (
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/audit"
	"github.com/waisteer/waisteer/internal/roomsteer"
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
	return auditRoom(h, h.State()), true
}

func (a auditRooms) Find(segment string) (sig.Hash, *api.Error) { return a.s.roomOf(segment) }

func (a auditRooms) Archived(id sig.Hash) (store.Room, bool) {
	r, ok := a.s.archived[id]
	return r, ok
}

// auditRoom is room h in state st, as the audit reads it.
func auditRoom(h *roomsteer.Room, st *roomsteer.State) audit.Room {
	seq, _ := st.KeyLogSeq()
	return audit.Room{Key: h.Key(), Descriptor: st.Descriptor(), Head: st.Head(), Seq: seq}
}
