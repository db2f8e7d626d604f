package view

// ReportsAnswer is the answer to an event report: what was taken and why
// the rest was not.
type ReportsAnswer struct {
	Accepted int            `json:"accepted"`
	Ignored  map[string]int `json:"ignored,omitempty"` // lines not aggregated, by reason
	Lines    []string       `json:"lines,omitempty"`   // the first lines that did not read, with why
}
