package view

// LimitedView is the counts of requests over budget, by answer and reason
// (a room's or pool's status).
type LimitedView struct {
	Replayed map[string]uint64 `json:"replayed"` // answered their latest manifest again
	Refused  map[string]uint64 `json:"refused"`  // answered 503 over_budget
}
