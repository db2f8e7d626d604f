package view

import "time"

// PoolView is the operator's view of a pool (GET P/edges).
type PoolView struct {
	Server  string       `json:"server"` // which server answered (Config.Name)
	Pool    string       `json:"pool"`   // "" for [steering]
	Path    string       `json:"path"`
	Enabled bool         `json:"enabled"`
	TTLs    int          `json:"ttl_s"`
	Assign  string       `json:"assign"`
	Edges   []EdgeView   `json:"edges"`
	Changes []EdgeChange `json:"changes"`       // the latest, oldest first
	QoE     *QoEView     `json:"qoe,omitempty"` // with [steering.qoe]
	// ReportsIgnored counts the steering requests whose report carried a
	// value that does not count, by reason (issue 26 item 3).
	ReportsIgnored map[string]uint64 `json:"reports_ignored"`

	// Limited counts the requests over budget, while the server has
	// budgets (internal/budget).
	Limited *LimitedView `json:"limited,omitempty"`
}

// EdgeView is one edge, as the station seed lists it, with what the
// operator changed.
type EdgeView struct {
	Pathway  string     `json:"pathway"`
	Host     string     `json:"host"`
	Weight   uint32     `json:"weight"`
	Checked  bool       `json:"checked"`
	Drained  bool       `json:"drained"`
	Health   HealthView `json:"health"`
	First    uint64     `json:"first"`    // manifests since start that put it first
	Sessions uint32     `json:"sessions"` // live sessions it is first for
	// Headroom is the load it must carry should another edge fail:
	// sessions × (1 + 1/(N − 1)), N the edges up, not drained, of weight
	// above 0 (the OTT seed's capacity rule).
	Headroom float64 `json:"headroom"`
}

// HealthView is an edge's health (the station seed's fields).
type HealthView struct {
	Up        bool       `json:"up"`
	Failures  int        `json:"failures"`
	LastCheck *time.Time `json:"last_check"`
	LastError string     `json:"last_error"`
	LastMs    float64    `json:"last_ms"`
	Since     *time.Time `json:"since"`
}

// EdgeChange is an edge going down or coming back, drained or reweighted,
// as the operator's view lists it.
type EdgeChange struct {
	At      time.Time `json:"at"`
	Pathway string    `json:"pathway"`
	What    string    `json:"what"` // "down", "up", "drained", "undrained", "weight", "added", "removed"
	Detail  string    `json:"detail,omitempty"`
}
