// Package procmem reads the Go runtime's account of the process's memory,
// for the operator's /metrics and bench's soak: what the last collection
// kept live, the heap's goal, and what the runtime holds of the kernel's
// memory. The runtime's memory is the process's anonymous resident memory
// (RssAnon) but for what the kernel has not faulted in; the store's file,
// mapped, is the kernel's page cache and is not in it.
package procmem

import (
	"bytes"
	"fmt"
	"runtime/metrics"
)

// Mem is the runtime's account, in bytes.
type Mem struct {
	Live     uint64 // the heap's objects the last collection kept; 0 before the first
	Goal     uint64 // the heap's size at which the next collection starts
	Total    uint64 // all the runtime has mapped
	Released uint64 // of which given back to the kernel
}

// Held is what the runtime holds: all it mapped but what it gave back.
func (m Mem) Held() uint64 { return m.Total - min(m.Released, m.Total) }

// names are runtime/metrics's, in Mem's order.
var names = [...]string{
	"/gc/heap/live:bytes",
	"/gc/heap/goal:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
}

// Read reads the account now.
func Read() Mem {
	var s [len(names)]metrics.Sample
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s[:])
	var v [len(names)]uint64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	return Mem{Live: v[0], Goal: v[1], Total: v[2], Released: v[3]}
}

// WriteMetrics writes the account read now as Prometheus gauges.
func WriteMetrics(b *bytes.Buffer) {
	m := Read()
	b.WriteString("# HELP waisteer_go_heap_live_bytes The heap's objects that the Go runtime's last collection kept.\n# TYPE waisteer_go_heap_live_bytes gauge\n")
	fmt.Fprintf(b, "waisteer_go_heap_live_bytes %d\n", m.Live)
	b.WriteString("# HELP waisteer_go_heap_goal_bytes The heap's size at which the next collection starts (GOGC's multiple of the live heap).\n# TYPE waisteer_go_heap_goal_bytes gauge\n")
	fmt.Fprintf(b, "waisteer_go_heap_goal_bytes %d\n", m.Goal)
	b.WriteString("# HELP waisteer_go_memory_held_bytes Memory the Go runtime holds from the kernel: what it mapped but gave back; about RssAnon.\n# TYPE waisteer_go_memory_held_bytes gauge\n")
	fmt.Fprintf(b, "waisteer_go_memory_held_bytes %d\n", m.Held())
}
