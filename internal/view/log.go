package view

// Epoch is one key log head a room has had, as /log/epochs lists it.
type Epoch struct {
	Seq  uint64 `json:"seq"`
	From int64  `json:"from"` // the log's size when the head was installed
	// Handover is the checkpoint of the log's first From leaves, signed
	// under the head before; "" for the room's first head.
	Handover string `json:"handover"`
}
