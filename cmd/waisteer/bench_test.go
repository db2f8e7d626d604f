package main

import (
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/bench"
)

// benchChildEnv makes this test binary run the command line it is given
// instead of the tests: `waisteer bench` starts its servers as children of
// its own binary, which under `go test` is this one.
const benchChildEnv = "WAISTEER_BENCH_CHILD"

// TestBenchQuick runs `waisteer bench -quick` (a few seconds a phase of
// tenths of a second) and checks its report: every section, each figure
// measured, the goals' ratios computed, and every manifest answered naming
// a decision the store holds (§8.4: an auditor fetches the decision by the
// digest its manifest names, so each must be durable before the answer).
func TestBenchQuick(t *testing.T) {
	spawn := bench.Spawn
	bench.Spawn = func(args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), benchChildEnv+"=1")
		return cmd, nil
	}
	t.Cleanup(func() { bench.Spawn = spawn })

	out, errs, code := waisteer(t, "", "bench", "-quick")
	if code != 0 {
		t.Fatalf("bench -quick exited %d:\n%s\n%s", code, errs, out)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{
		"machine ", "Steering: waisteer serve behind fasthttp on its bbolt store", "decisions/s at saturation", "server CPU per decision",
		"latency p50 at half rate", "latency p99 / p999 at half rate", "bytes stored per decision", "decisions per group commit",
		"(a) bare Ed25519 of the decision", "the same on every core at once", "(c) plain + signature: answers/s", "(b) plain net/http, fixed manifest:",
		"Records in: POST /v1/rooms/{room}/records", "1 records per POST:", "64 records per POST:",
		"Evidence update after a record", "Memory per live session",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	for _, goal := range []string{"CPU per decision / bare signature = ", "decisions/s / signing floor (c)   = "} {
		m := regexp.MustCompile(regexp.QuoteMeta(goal) + `([0-9.]+|NaN)`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("no goal line %q", goal)
			continue
		}
		if r, err := strconv.ParseFloat(m[1], 64); err != nil || math.IsNaN(r) || r <= 0 {
			t.Errorf("%s%s: not a ratio", goal, m[1])
		}
	}
	m := regexp.MustCompile(`decisions stored / answered +(\d+) / (\d+)`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[1] == "0" {
		t.Errorf("decisions stored and answered: %v", m)
	}
	if !regexp.MustCompile(`failed requests +0 `).MatchString(out) {
		t.Errorf("requests failed")
	}
	for _, batch := range []string{" 1 records per POST: ", "64 records per POST: "} {
		i := strings.Index(out, batch)
		if i < 0 {
			continue
		}
		line := out[i : i+strings.IndexByte(out[i:], '\n')]
		if strings.Contains(line, "failed") || strings.HasPrefix(line[len(batch):], "0 records/s") {
			t.Errorf("ingest: %s", line)
		}
	}
}
