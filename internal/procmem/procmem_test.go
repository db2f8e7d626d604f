package procmem

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Held is what was mapped less what was given back, never below zero.
func TestHeld(t *testing.T) {
	if got := (Mem{Total: 9000, Released: 2500}).Held(); got != 6500 {
		t.Fatalf("held %d, want 6500", got)
	}
	if got := (Mem{Total: 10, Released: 20}).Held(); got != 0 {
		t.Fatalf("held %d, want 0", got)
	}
}

// With 64 MiB kept live across a collection, the account and the gauges
// say so: the live heap at least 64 MiB, the goal and what is held at
// least that.
func TestWriteMetrics(t *testing.T) {
	hold := make([][]byte, 64)
	for i := range hold {
		hold[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	var b bytes.Buffer
	WriteMetrics(&b)
	runtime.KeepAlive(hold)
	got := map[string]uint64{}
	for line := range strings.SplitSeq(b.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		n, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			t.Fatalf("line %q does not read", line)
		}
		got[name] = n
	}
	live, goal, held := got["waisteer_go_heap_live_bytes"], got["waisteer_go_heap_goal_bytes"], got["waisteer_go_memory_held_bytes"]
	if len(got) != 3 || live < 64<<20 || goal < live || held < live {
		t.Fatalf("gauges %v with 64 MiB live", got)
	}
}
