package view

import "github.com/waisteer/waisteer/internal/front"

// FrontStatus is the front's view for the operator (GET /v1/front/status):
// who opened playlists, by what they can do, and each pool's headroom.
type FrontStatus struct {
	front.Opens
	Pools []PoolHeadroom `json:"pools"`
}

// PoolHeadroom is, per edge, the load the edge must be able to carry for
// one failure: its live sessions × (1 + 1/(N − 1)), N the edges that can
// take a failed one's viewers (the OTT seed's capacity rule).
type PoolHeadroom struct {
	Pool  string             `json:"pool"`
	N     int                `json:"eligible"`
	Edges map[string]float64 `json:"headroom"`
}
