package main

import (
	"fmt"
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

// benchChildren has bench start its servers as children of this test
// binary (benchChildEnv) while the test runs.
func benchChildren(t *testing.T) {
	spawn := bench.Spawn
	bench.Spawn = func(args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), benchChildEnv+"=1")
		return cmd, nil
	}
	t.Cleanup(func() { bench.Spawn = spawn })
}

// TestBenchQuick runs `waisteer bench -quick -generator go` (phases of
// about a second at 64 connections, both engines, 3 pathways; the Go
// generator, so that it runs alike with and without wrk) and checks its
// report: every section, each goal of issue 14 on a line of its own with
// a positive figure and a verdict, no request failed, and every manifest
// answered naming a decision the store holds (§8.4: an auditor fetches the
// decision by the digest its manifest names, so each must be durable
// before the answer), in each phase and in each store.
func TestBenchQuick(t *testing.T) {
	benchChildren(t)

	out, errs, code := waisteer(t, "", "bench", "-quick", "-generator", "go")
	if code != 0 {
		t.Fatalf("bench -quick exited %d:\n%s\n%s", code, errs, out)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{
		"machine ", "generator    the Go generator", "pinning      ",
		"Issue 14's table", "(b) plain net/http, fixed manifest", "(c) signing floor: net/http signing",
		"waisteer serve (fasthttp), 3 pathways", "waisteer serve (net/http), 3 pathways", "waisteer demo (its own process, its hops posting)",
		"At half the saturated rate", "Steering: waisteer serve on its bbolt store", "bytes stored per decision", "decisions per group commit",
		"(a) bare Ed25519 of the 3-pathway decision", "Nothing lost:",
		"Records in: POST /v1/rooms/{room}/records from 64 hops", " 1 records per POST:", "64 records per POST:",
		"Start-up: bench serve restarted", "Goals (issue 14)", "Evidence update after a record", "Memory per live session",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report has no %q", want)
		}
	}

	// The goals: each one's line, its figure a positive number.
	goals := map[string]string{}
	goalLine := regexp.MustCompile(`(?m)^  (.+?) += ([0-9.]+|NaN|\+Inf)(?: m?s)? \(goal [^:]*: (met|NOT met)\)$`)
	for _, m := range goalLine.FindAllStringSubmatch(out, -1) {
		goals[m[1]] = m[2]
	}
	for _, goal := range []string{
		"rate, 3 pathways, fasthttp, 64 conns: decisions/s / floor (c)",
		"rate, 3 pathways, net/http, 64 conns: decisions/s / floor (c)",
		"rate: the server's core busy at saturation, least of the phases",
		"CPU, 3 pathways, fasthttp: per decision / bare signature (a)",
		"CPU, 3 pathways, net/http: per decision / bare signature (a)",
		"CPU, 3 pathways: net/http / fasthttp per decision",
		"latency, 3 pathways, fasthttp: p99 at half rate",
		"latency, 3 pathways, fasthttp: p99 at saturation, 64 conns",
		"latency, 3 pathways, net/http: p99 at half rate",
		"latency, 3 pathways, net/http: p99 at saturation, 64 conns",
		"the demo: p99 at saturation, 64 conns, its hops posting",
		"records, 3 pathways: records/s, 1 per POST from 64 hops",
	} {
		v, ok := goals[goal]
		if !ok {
			t.Errorf("no goal line %q", goal)
			continue
		}
		if r, err := strconv.ParseFloat(v, 64); err != nil || math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
			t.Errorf("%s = %s: not a positive figure", goal, v)
		}
	}
	if m := regexp.MustCompile(`(?m)^  start-up: spawn to first 200 on (\d+) decisions, (\d+) bytes +=`).FindStringSubmatch(out); m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("no start-up goal on a store that holds decisions: %v", m)
	}
	if !regexp.MustCompile(`(?m)^  nothing lost: phases whose decisions stored != answered += 0 of [1-9]\d* \(goal .*: met\)$`).MatchString(out) {
		t.Errorf("the goal of nothing lost is not met")
	}

	// Each phase: stored = answered = read by the Go generator, none failed.
	phases := regexp.MustCompile(`(?m)^  (.+?(?:saturated|half rate)) +(\d+) / +(\d+) / +(\d+)  failed (\d+)  (\S+)$`).FindAllStringSubmatch(out, -1)
	if len(phases) < 6 {
		t.Errorf("%d phases checked, want 6: both engines and the demo, saturated and at half rate", len(phases))
	}
	for _, m := range phases {
		if m[2] != m[3] || m[2] == "0" || m[5] != "0" || m[6] != "ok" {
			t.Errorf("phase %s: stored %s, answered %s, read %s, failed %s (%s)", m[1], m[2], m[3], m[4], m[5], m[6])
		}
		if !strings.Contains(m[1], "demo") && m[3] != m[4] {
			t.Errorf("phase %s: the server answered %s, the Go generator read %s", m[1], m[3], m[4])
		}
	}
	stores := regexp.MustCompile(`decisions stored / answered (\d+) / (\d+)`).FindAllStringSubmatch(out, -1)
	if len(stores) != 3 {
		t.Errorf("%d stores checked, want 3: two engines' and the demo's", len(stores))
	}
	for _, m := range stores {
		if m[1] != m[2] || m[1] == "0" {
			t.Errorf("decisions stored and answered: %v", m)
		}
	}
	if m := regexp.MustCompile(`(?m)^  failed requests +(.*)$`).FindStringSubmatch(out); m == nil || strings.Trim(m[1], "0 ") != "" {
		t.Errorf("requests failed: %v", m)
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

// TestBenchAudit (issue 16, must show): the real server, under the
// benchmark's saturated load with its hops posting, makes 100 000
// decisions; the auditor's run over its log checks the tree, verifies a
// sample of 2 000 decisions by §9 in full, reads every one and finds each
// stated load equal to its recount (one server) and the band's share of
// sessions within its bound.
func TestBenchAudit(t *testing.T) {
	benchChildren(t)

	out, errs, code := waisteer(t, "", "bench", "-audit", "100000", "-audit-sample", "2000", "-generator", "go", "-players", "4000", "-conns", "64")
	if code != 0 {
		t.Fatalf("bench -audit exited %d:\n%s\n%s", code, errs, out)
	}
	t.Logf("\n%s", out)
	n := regexp.MustCompile(`a log of (\d+) decisions`).FindStringSubmatch(out)
	if n == nil {
		t.Fatalf("the report names no log")
	}
	size, _ := strconv.Atoi(n[1])
	for _, want := range []string{
		fmt.Sprintf("decisions: %d fetched and read, 2000 verified by §9 in full, 0 refused, 0 not fetched", size),
		fmt.Sprintf("Loads: %d exact, 0 not.", size),
		"Draws: 0 not §6.3's.", "Bands: 1 of 1 within 5 standard deviations.", "outcome: every check holds",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	if size < 100_000 {
		t.Errorf("a log of %d decisions, fewer than 100 000", size)
	}
}
