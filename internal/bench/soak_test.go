package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/procmem"
)

// The soak's minute line reads the server's histograms of commit and
// steering times from the text of /metrics (the Prometheus exposition
// format: cumulative buckets, +Inf last). The texts below are written by
// hand, not by the server's writer.
func TestSoakHistograms(t *testing.T) {
	before := parseHist([]byte(`# TYPE waisteer_commit_duration_seconds histogram
waisteer_commit_duration_seconds_bucket{le="0.001"} 1
waisteer_commit_duration_seconds_bucket{le="0.025"} 2
waisteer_commit_duration_seconds_bucket{le="0.05"} 2
waisteer_commit_duration_seconds_bucket{le="+Inf"} 2
waisteer_commit_duration_seconds_sum 0.01
waisteer_commit_duration_seconds_count 2
`), benchCommitHist)
	after := parseHist([]byte(`waisteer_http_request_duration_seconds_bucket{route="steer",le="0.001"} 90
waisteer_http_request_duration_seconds_bucket{route="steer",le="+Inf"} 99
waisteer_commit_duration_seconds_bucket{le="0.001"} 3
waisteer_commit_duration_seconds_bucket{le="0.025"} 5
waisteer_commit_duration_seconds_bucket{le="0.05"} 6
waisteer_commit_duration_seconds_bucket{le="+Inf"} 6
`), benchCommitHist)
	if len(after.cum) != 4 {
		t.Fatalf("read %d buckets of the commits' histogram, want 4 (the steering route's are another histogram)", len(after.cum))
	}
	// Over the interval: 2 commits within 1 ms, 1 within 25 ms, 1 within 50 ms.
	d := after.since(before)
	for _, c := range []struct {
		h       benchHist
		over25  uint64
		slowest time.Duration
	}{
		{after, 1, 50 * time.Millisecond},
		{d, 1, 50 * time.Millisecond},
		{before, 0, 25 * time.Millisecond},
		{after.since(after), 0, 0},
	} {
		if got := c.h.over(25 * time.Millisecond); got != c.over25 {
			t.Errorf("%v: over 25 ms = %d, want %d", c.h.cum, got, c.over25)
		}
		if got := c.h.slowest(); got != c.slowest {
			t.Errorf("%v: slowest = %v, want %v", c.h.cum, got, c.slowest)
		}
	}
	// One past every finite bound is reported at the largest of them.
	past := parseHist([]byte(`waisteer_http_request_duration_seconds_bucket{route="steer",le="0.001"} 90
waisteer_http_request_duration_seconds_bucket{route="steer",le="10"} 98
waisteer_http_request_duration_seconds_bucket{route="steer",le="+Inf"} 99
`), benchSteerHist)
	if got := past.slowest(); got != 10*time.Second {
		t.Errorf("slowest past the last bound = %v, want 10s", got)
	}
	// Between 1 ms and 10 s the buckets cannot tell which of the 8 took
	// more than 1 s: only the one past 10 s surely did.
	if got := past.over(time.Second); got != 1 {
		t.Errorf("steering answers surely over 1 s = %d, want 1", got)
	}
}

// proc(5): the first line of /proc/stat is cpu, then user nice system
// idle iowait irq softirq steal guest guest_nice; guest time is already in
// user and nice.
func TestSoakSteal(t *testing.T) {
	a := parseMachineCPU("cpu  100 0 50 800 10 0 0 40 7 0\ncpu0 1 2 3\n")
	b := parseMachineCPU("cpu  200 0 100 1600 20 0 0 80 9 0\n")
	if a.total != 1000 || a.steal != 40 {
		t.Fatalf("read %+v, want total 1000 and steal 40", a)
	}
	if got := b.stealSince(a); got != 0.04 {
		t.Errorf("steal share = %v, want 40/1000", got)
	}
	if got := parseMachineCPU("intr 1 2\n"); got != (benchMachineCPU{}) {
		t.Errorf("a text without the cpu line read as %+v", got)
	}
	if got := a.stealSince(b); got != 0 {
		t.Errorf("a counter that went back gave %v, want 0", got)
	}
}

// The soak's memory columns: parseMem reads the runtime's gauges from the
// text of /metrics, leaving out what it cannot read, written here by hand;
// and reads the gauges the server writes (internal/procmem), which with
// 64 MiB kept live say at least that.
func TestSoakMemory(t *testing.T) {
	m := parseMem([]byte("# HELP waisteer_go_heap_live_bytes x\nwaisteer_go_heap_live_bytes 1000\nwaisteer_go_heap_goal_bytes 4000\nnoise\nwaisteer_go_memory_held_bytes x\nwaisteer_go_memory_held_bytes 6500\nwaisteer_store_up 1\n"))
	if want := (benchMem{live: 1000, goal: 4000, held: 6500}); m != want {
		t.Fatalf("parseMem: %+v, want %+v", m, want)
	}
	hold := make([][]byte, 64)
	for i := range hold {
		hold[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	var b bytes.Buffer
	procmem.WriteMetrics(&b)
	runtime.KeepAlive(hold)
	got := parseMem(b.Bytes())
	if got.live < 64<<20 || got.goal < got.live || got.held < got.live {
		t.Fatalf("the server's gauges with 64 MiB held: %+v", got)
	}
}

// The soak's summary judges minutes 2 to N: RssAnon from 40 to 52 MiB is
// 1.30, over the goal of 1.10; and it prints what the runtime held and its
// live heap over the same minutes, the figures of minutes 2 and 3.
func TestSoakWrite(t *testing.T) {
	const mib = 1 << 20
	so := &benchSoak{minutes: []benchMinute{
		{answered: 10, rss: 100 * mib, anon: 30 * mib, mem: benchMem{live: 4 * mib, goal: 20 * mib, held: 30 * mib}},
		{answered: 10, rss: 200 * mib, anon: 40 * mib, mem: benchMem{live: 6 * mib, goal: 30 * mib, held: 40 * mib}},
		{answered: 10, rss: 220 * mib, anon: 52 * mib, mem: benchMem{live: 8.5 * mib, goal: 42 * mib, held: 52 * mib}},
	}}
	var b strings.Builder
	so.write(&b)
	for _, want := range []string{
		"RSS flat: the largest / the least of minutes 2..N    = 1.10 (goal <= 1.10: met)",
		"RssAnon flat: the same of the heap's and stacks' part = 1.30 (goal <= 1.10: NOT met)",
		"the runtime's, minute 2 to 3: held 40 to 52 MiB, its heap's live bytes 6.0 to 8.5 MiB (goal 30 to 42 MiB)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, b.String())
		}
	}
}

// The soak's flight recorder (-flight): the child's profile listener
// starts it on a POST and writes its trace on a GET, refused before the
// start; the watcher keeps a trace when the count of steering answers over
// 50 ms grows between two polls, in /metrics or in the generator's count,
// and none while neither does. The /metrics text is written by hand.
func TestFlightWatch(t *testing.T) {
	for _, by := range []string{"server", "generator"} {
		t.Run(by, func(t *testing.T) { testFlightWatch(t, by) })
	}
}

func testFlightWatch(t *testing.T, by string) {
	base, err := benchProfiles(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pprof := strings.TrimPrefix(base, "http://")
	if _, err := benchGet(t.Context(), pprof, "/debug/flight"); err == nil {
		t.Fatal("a flight recording was served before the recorder started")
	}
	var slow atomic.Uint64
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "waisteer_http_request_duration_seconds_bucket{route=\"steer\",le=\"0.025\"} 100\n"+
			"waisteer_http_request_duration_seconds_bucket{route=\"steer\",le=\"0.05\"} 100\n"+
			"waisteer_http_request_duration_seconds_bucket{route=\"steer\",le=\"+Inf\"} %d\n", 100+slow.Load())
	}))
	defer metrics.Close()
	dir := t.TempDir()
	var log bytes.Buffer
	b := &bencher{stderr: &log, o: Options{Flight: dir}, began: time.Now()}
	l := &benchLoad{}
	stop := b.flightWatch(&benchChild{addr: strings.TrimPrefix(metrics.URL, "http://"), pprof: pprof}, l, time.Now())
	time.Sleep(benchFlightPoll + benchFlightPoll/2) // a poll with nothing slow
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		stop()
		t.Fatalf("traces kept with no slow answer: %v", files)
	}
	if by == "server" {
		slow.Add(1)
	} else {
		l.slow.Add(1)
	}
	deadline := time.Now().Add(5 * benchFlightPoll)
	var files []string
	for len(files) == 0 && time.Now().Before(deadline) {
		time.Sleep(benchFlightPoll / 4)
		files, _ = filepath.Glob(filepath.Join(dir, "flight-soak-01-*.trace"))
	}
	stop()
	if len(files) != 1 {
		t.Fatalf("traces kept after one slow answer: %v; log:\n%s", files, log.String())
	}
	tr, err := os.ReadFile(files[0])
	if err != nil || !bytes.HasPrefix(tr, []byte("go 1.")) {
		t.Fatalf("the trace kept: %d bytes beginning %q, %v", len(tr), tr[:min(len(tr), 16)], err)
	}
}
