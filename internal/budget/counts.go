package budget

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
)

// The answers to a request over budget, as counted.
const (
	Replayed = "replayed" // the session's answer again
	Refused  = "refused"  // 503 over_budget
)

// Counts are a room's or a pool's requests over budget, by reason and
// answer.
type Counts struct{ c web.Counters[string] }

// Note counts one request over budget for why, answered so.
func (c *Counts) Note(why, answer string) { c.c.Add(why + "\x00" + answer) }

// View is the counts as the status shows them.
func (c *Counts) View() *view.LimitedView {
	v := &view.LimitedView{Replayed: map[string]uint64{}, Refused: map[string]uint64{}}
	ks, ns := c.c.Sorted()
	for i, k := range ks {
		why, answer := split(k)
		if answer == Replayed {
			v.Replayed[why] = ns[i]
		} else {
			v.Refused[why] = ns[i]
		}
	}
	return v
}

// MetricsHelp is the header of the over-budget counts' family.
const MetricsHelp = "# HELP waisteer_steer_over_budget_total Steering requests over a client address's or network's budget, by room or pool, reason and answer (replayed: the session's manifest again; refused: 503).\n# TYPE waisteer_steer_over_budget_total counter\n"

// Write writes the counts' series with labels (the room's or the pool's)
// before the reason and the answer.
func (c *Counts) Write(b *bytes.Buffer, labels string) {
	ks, vs := c.c.Sorted()
	for i, k := range ks {
		why, answer := split(k)
		fmt.Fprintf(b, "waisteer_steer_over_budget_total{%s,reason=%q,answer=%q} %d\n", labels, why, answer, vs[i])
	}
}

// split cuts a count's key into its reason and answer.
func split(k string) (why, answer string) {
	why, answer, _ = strings.Cut(k, "\x00")
	return why, answer
}
