package view

// Status is a room's status (GET /v1/rooms/{room}/status, operator).
type Status struct {
	Server    string       `json:"server"` // which server answered (Config.Name)
	Room      string       `json:"room"`
	Name      string       `json:"name"`
	KeyLogSeq *uint64      `json:"key_log_seq"` // null for a room with no origin
	Policy    PolicyStatus `json:"policy"`
	// OperatorPolicy is the operator's policy: Policy's digest, or while
	// a pathway is down, the policy the health policy was made from.
	OperatorPolicy string `json:"operator_policy"`
	// RestoringLoads is true while the live sessions a restart forgot are
	// being counted again from the room's log: the loads count fewer.
	RestoringLoads bool            `json:"restoring_loads"`
	T              uint64          `json:"t"`      // the room clock when the status was taken, µs
	Window         [2]uint64       `json:"window"` // [a, b) at t (§5.1)
	Order          []string        `json:"order"`  // the pathways in the order of §6.2
	Pathways       []PathwayStatus `json:"pathways"`
	Decisions      DecisionsStatus `json:"decisions"`
	Records        RecordsStatus   `json:"records"`
	QoE            *QoEView        `json:"qoe,omitempty"` // a room that steers by QoE
	// ReportsIgnored counts the steering requests whose report carried a
	// value that does not count, by reason (issue 26 item 3).
	ReportsIgnored map[string]uint64 `json:"reports_ignored"`

	// Limited counts the requests over budget, while the server has
	// budgets (internal/budget).
	Limited *LimitedView `json:"limited,omitempty"`
}

// PolicyStatus names the active policy.
type PolicyStatus struct {
	Digest      string `json:"digest"`
	Signer      string `json:"signer"`
	ServerURI   string `json:"server_uri"`
	ReloadURI   string `json:"reload_uri"`
	DecisionURI string `json:"decision_uri"`
}

// PathwayStatus is one pathway's evidence (§5), rank (§6.2), limits
// (§6.1, as for a client not on it) and load (§6), and how often decisions
// under the active policy put it first.
type PathwayStatus struct {
	ID       string          `json:"id"`
	Status   string          `json:"status"`
	Class    int             `json:"class"`
	Joules   string          `json:"joules"`
	Delivery string          `json:"delivery"`
	Rank     int             `json:"rank"`
	Records  int             `json:"records"` // how many records its evidence names
	Limits   map[string]bool `json:"limits"`
	Load     *uint32         `json:"load"` // null when the table of loads cannot say
	First    uint64          `json:"first"`
	Health   *HealthView     `json:"health,omitempty"` // for a pathway with a check URL
}

// DecisionsStatus counts the decisions made under the active policy.
type DecisionsStatus struct {
	Total    uint64            `json:"total"`
	ByReason map[string]uint64 `json:"by_reason"`
}

// RecordsStatus counts the records posted since the server started.
type RecordsStatus struct {
	Accepted  uint64 `json:"accepted"`
	Duplicate uint64 `json:"duplicate"`
	// OffPolicy counts the accepted records whose hop is in no pathway of
	// the active policy (api.HopNotInPolicy).
	OffPolicy uint64 `json:"off_policy"`
	// FromPeers counts the records other servers on the same shared store
	// accepted since this one started, which its evidence holds too.
	FromPeers uint64            `json:"from_peers"`
	Refused   map[string]uint64 `json:"refused"`
	InIndex   int               `json:"in_index"`
}
