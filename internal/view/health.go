package view

import "github.com/waisteer/waisteer/internal/health"

// HealthOf is a check's status as the operator sees it.
func HealthOf(st health.Status) *HealthView {
	v := &HealthView{Up: st.Up, Failures: st.Failures, LastError: st.LastError, LastMs: st.LastMs}
	if !st.LastCheck.IsZero() {
		t := st.LastCheck.UTC()
		v.LastCheck = &t
	}
	if !st.Since.IsZero() {
		t := st.Since.UTC()
		v.Since = &t
	}
	return v
}
