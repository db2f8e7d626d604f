package view

import "time"

// QoEView is the operator's view of a steerer's QoE: its settings, per
// pathway and cohort the sessions, quantiles and state, the latest moves,
// and the reports not aggregated by reason.
type QoEView struct {
	Settings QoESettings       `json:"settings"`
	Cells    []QoECell         `json:"cells"`
	Moves    []QoEMove         `json:"moves"` // the latest, oldest first
	Ignored  map[string]uint64 `json:"ignored"`
	// KeptAway is a pool's clients the per-client rule keeps off a
	// pathway now.
	KeptAway *int `json:"kept_away,omitempty"`
}

// QoESettings are the rule's settings, in the configuration's units.
type QoESettings struct {
	WindowS     float64 `json:"window_s"`
	MinSessions int     `json:"min_sessions"`
	FloorBps    uint64  `json:"floor_bps"`
	Fraction    float64 `json:"fraction"`
	Margin      float64 `json:"margin"`
	HoldS       float64 `json:"hold_s"`
	ProbeShare  float64 `json:"probe_share"`
}

// QoECell is one pathway in one cohort.
type QoECell struct {
	Pathway  string `json:"pathway"`
	Cohort   string `json:"cohort"`
	Sessions int    `json:"sessions"`
	// Throughput (bits/s) and buffer (ms) quantiles: p10, p50, p90, over
	// the sessions that reported each.
	WithThroughput int        `json:"with_throughput"`
	Throughput     [3]uint64  `json:"throughput_bps"`
	WithBuffer     int        `json:"with_buffer"`
	Buffer         [3]uint64  `json:"buffer_ms"`
	State          string     `json:"state"` // "ok", "degraded", or "probing" (degraded but for the probe share)
	LastMove       *time.Time `json:"last_move"`
	// Clients are the addresses (IPv6: /64s) Sessions came from; each
	// counts at most qoe.PerClient sessions (issue 26 item 2).
	Clients int `json:"clients"`
}

// QoEMove is one move.
type QoEMove struct {
	At       time.Time `json:"at"`
	Pathway  string    `json:"pathway"`
	Cohort   string    `json:"cohort"`
	To       string    `json:"to"` // "behind", "probe" or "back"
	Median   uint64    `json:"median_bps"`
	Best     uint64    `json:"best_bps"`
	Sessions int       `json:"sessions"`
	Reason   string    `json:"reason"`
}
