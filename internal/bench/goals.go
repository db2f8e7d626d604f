package bench

// Issue 30's goals, each a ratio (or a figure) beside its threshold, and
// whether it holds.

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
)

// Goals of issue 30 ("Goals, each measured in one run beside the floor").
const (
	benchGoalRateFast   = 1.0  // fasthttp: durable signed decisions/s >= 1.0 x the signing floor's
	benchGoalRateStd    = 0.8  // net/http: >= 0.8 x the floor's
	benchGoalCPUFast    = 1.0  // fasthttp: CPU per decision <= 1.0 x the floor's CPU per answer
	benchGoalCPUStd     = 1.25 // net/http: <= 1.25 x
	benchGoalTwoCores   = 1.1  // GOMAXPROCS=2: CPU per decision <= 1.1 x the one-core figure
	benchGoalHalfP99    = 1.5  // at half the saturated rate: p99 <= 1.5 x the floor's at the same offered rate
	benchGoalDemoP99    = 2.0  // the demo's p99 <= 2 x serve's at the same offered rate
	benchGoalRecordCore = 0.10 // 1 000 records a second within 10 % of one core
	benchGoalStartup    = time.Second
	// benchRecountStable (startup30.go): p99 while the recount runs <= 1.2 x after
)

// benchGoal is one goal's line: value op target.
type benchGoal struct {
	name   string
	value  float64
	unit   string // "" for a ratio
	op     string // "<=" or ">="
	target float64
}

// holds says whether the goal is met: a figure that is not a number, or
// not positive, meets none.
func (g benchGoal) holds() bool {
	if math.IsNaN(g.value) || math.IsInf(g.value, 0) || g.value <= 0 {
		return false
	}
	if g.op == ">=" {
		return g.value >= g.target
	}
	return g.value <= g.target
}

func (g benchGoal) write(w io.Writer) {
	u := ""
	if g.unit != "" {
		u = " " + g.unit
	}
	fmt.Fprintf(w, "  %-78s = %.2f%s (goal %s %s%s: %s)\n", g.name, g.value, u, g.op, strconv.FormatFloat(g.target, 'f', -1, 64), u, benchMet(g.holds()))
}

// rateGoal: the server's decisions a second over the floor's answers a
// second, both saturated at the same connections in turns.
func rateGoal(n int, engine string, conns int, serveRate, floorRate float64) benchGoal {
	target := benchGoalRateStd
	if engine == serve.EngineFast {
		target = benchGoalRateFast
	}
	return benchGoal{name: fmt.Sprintf("rate, %d pathways, %s, %d conns: decisions/s / floor (c)'s answers/s", n, engine, conns),
		value: benchRatio(serveRate, floorRate), op: ">=", target: target}
}

// cpuGoal: the server's CPU per decision over the floor's CPU per answer.
func cpuGoal(n int, engine string, conns int, serveCPU, floorCPU time.Duration) benchGoal {
	target := benchGoalCPUStd
	if engine == serve.EngineFast {
		target = benchGoalCPUFast
	}
	return benchGoal{name: fmt.Sprintf("CPU, %d pathways, %s, %d conns: per decision / floor (c)'s per answer", n, engine, conns),
		value: benchRatio(serveCPU.Seconds(), floorCPU.Seconds()), op: "<=", target: target}
}

// twoCoresGoal: CPU per decision on two cores over the one-core figure.
func twoCoresGoal(n int, engine string, two, one time.Duration) benchGoal {
	return benchGoal{name: fmt.Sprintf("two cores, %d pathways, %s: CPU per decision, GOMAXPROCS=2 / one core's", n, engine),
		value: benchRatio(two.Seconds(), one.Seconds()), op: "<=", target: benchGoalTwoCores}
}

// halfGoal: the server's p99 at half its saturated rate over the floor's
// p99 at the same offered rate.
func halfGoal(n int, engine string, serveP99, floorP99 time.Duration) benchGoal {
	return benchGoal{name: fmt.Sprintf("latency, %d pathways, %s: p99 at half rate / floor (c)'s at that rate", n, engine),
		value: benchRatio(serveP99.Seconds(), floorP99.Seconds()), op: "<=", target: benchGoalHalfP99}
}

// demoGoal: the demo's p99 over serve's, at the same offered rate.
func demoGoal(ref string, demoP99, serveP99 time.Duration) benchGoal {
	return benchGoal{name: fmt.Sprintf("latency: the demo's p99 / serve's (%s) at the same offered rate", ref),
		value: benchRatio(demoP99.Seconds(), serveP99.Seconds()), op: "<=", target: benchGoalDemoP99}
}

// recordsGoal: the server's CPU over the paced records phase, a share of
// one core.
func recordsGoal(n int, fraction float64) benchGoal {
	return benchGoal{name: fmt.Sprintf("records, %d pathways: the server's CPU at 1 000 records/s, of one core", n),
		value: fraction, op: "<=", target: benchGoalRecordCore}
}

// recordsFloor is the least a server of records could cost, as a share
// of one core: what the plain server (b) cost for the same POSTs, plus a
// record's check (a') for each record a second.
func recordsFloor(plainFraction, rate float64, check time.Duration) float64 {
	return plainFraction + rate*check.Seconds()
}

// startupGoal: from the spawn to the first 200, in seconds.
func startupGoal(decisions int, took time.Duration) benchGoal {
	return benchGoal{name: fmt.Sprintf("start-up: spawn to the first 200 on %d decisions", decisions),
		value: took.Seconds(), unit: "s", op: "<=", target: benchGoalStartup.Seconds()}
}

// recountGoal: p99 while the restart's recount runs over p99 after it.
func recountGoal(during, after time.Duration) benchGoal {
	return benchGoal{name: "start-up: p99 while the recount of live sessions runs / p99 after",
		value: benchRatio(during.Seconds(), after.Seconds()), op: "<=", target: benchRecountStable}
}

// nothingLost says whether a store's figures agree: answered 200 =
// decisions stored = leaves logged, and some.
func nothingLost(answered, stored, leaves uint64) bool {
	return answered > 0 && answered == stored && stored == leaves
}
