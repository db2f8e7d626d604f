package view

// Epoch is one key log head a room has had, as /log/epochs lists it.
type Epoch struct {
	Seq  uint64 `json:"seq"`
	From int64  `json:"from"` // the log's size when the head was installed
	// Handover is the checkpoint of the log's first From leaves, signed
	// under the head before; "" for the room's first head.
	Handover string `json:"handover"`
}

// Log is one of a room's logs of decisions, as /v1/rooms/{room}/logs
// lists them (issue 31: one log per server and room).
type Log struct {
	Log    int64  `json:"log"`    // its number in the room, 0 for issue 16's one log
	Server string `json:"server"` // the server that appends to it, "<host> <pid>"; "" for log 0
	Size   int64  `json:"size"`   // its leaves, committed
	Sealed bool   `json:"sealed"` // nothing is appended to it again: its size is final
}
