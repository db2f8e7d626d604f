package bench

// CPU time from /proc for issue 31, where a decision's cost is spread over
// several processes: the servers' and every process of the PostgreSQL
// server they share (its postmaster and the backends, checkpointer,
// writers and autovacuum it forks), and the machine's idle share.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// benchTick is a clock tick of /proc's times (USER_HZ, 1/100 s on Linux).
const benchTick = 10 * time.Millisecond

// procStat is what bench reads of one /proc/PID/stat: the parent's id, and
// the process's CPU time in ticks, user and system, with its waited-for
// children's (cutime and cstime). A child's own time moves into its
// parent's cutime and cstime once the parent waits for it, so that the sum
// over a process and its live children never loses a child that ended.
type procStat struct {
	ppid  int
	ticks uint64
}

// parseProcStat reads the text of /proc/PID/stat (proc(5)): "pid (comm)
// state ppid ..." with utime, stime, cutime and cstime the 14th to 17th
// fields. comm may hold spaces and parentheses, so the fields are counted
// after its last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("no ')' after the command")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is the state, f[1] the parent; utime is the 14th field of the
	// line, the 12th after the command.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("%d fields after the command, want 15 at least", len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("parent %q: %v", f[1], err)
	}
	var ticks uint64
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return procStat{}, fmt.Errorf("a CPU time %q is not a count of ticks", v)
		}
		ticks += uint64(n)
	}
	return procStat{ppid: ppid, ticks: ticks}, nil
}

// readProcStats reads every process's stat under the proc directory (a
// process that ends meanwhile, or whose stat does not read, is left out).
func readProcStats(proc string) map[int]procStat {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	stats := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue
		}
		if st, err := parseProcStat(b); err == nil {
			stats[pid] = st
		}
	}
	return stats
}

// treeCPU is the CPU time of root and of every live process descended
// from it, with the children each has waited for; false when root is not
// among stats.
func treeCPU(stats map[int]procStat, root int) (time.Duration, bool) {
	tree, ok := processTree(stats, root)
	var ticks uint64
	for _, pid := range tree {
		ticks += stats[pid].ticks
	}
	return time.Duration(ticks) * benchTick, ok
}

// processTree is root and every live process descended from it, each
// once; false when root is not among stats.
func processTree(stats map[int]procStat, root int) ([]int, bool) {
	if _, ok := stats[root]; !ok {
		return nil, false
	}
	children := map[int][]int{}
	for pid, st := range stats {
		if pid != root {
			children[st.ppid] = append(children[st.ppid], pid)
		}
	}
	var tree []int
	seen := map[int]bool{}
	for todo := []int{root}; len(todo) > 0; {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		tree = append(tree, pid)
		todo = append(todo, children[pid]...)
	}
	return tree, true
}

// benchCPUTimes are the machine's CPU times from /proc/stat's "cpu" line,
// in ticks: busy (user, nice, system, irq, softirq), idle (idle and
// iowait), and stolen by the hypervisor.
type benchCPUTimes struct{ busy, idle, steal uint64 }

// parseCPUTimes reads the first line of /proc/stat: "cpu  user nice
// system idle iowait irq softirq steal ..." (guest time is in user's).
func parseCPUTimes(b []byte) (benchCPUTimes, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return benchCPUTimes{}, fmt.Errorf("the first line %q is not the cpu line with 8 times", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[1+i], 10, 64)
		if err != nil {
			return benchCPUTimes{}, fmt.Errorf("cpu time %q: %v", f[1+i], err)
		}
		v[i] = n
	}
	return benchCPUTimes{busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3] + v[4], steal: v[7]}, nil
}

func readCPUTimes() (benchCPUTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return benchCPUTimes{}, false
	}
	t, err := parseCPUTimes(b)
	return t, err == nil
}

// idleShare is the share of the machine's CPU time left idle between two
// readings; NaN when no time passed.
func idleShare(before, after benchCPUTimes) float64 {
	idle := float64(after.idle - before.idle)
	total := idle + float64(after.busy-before.busy) + float64(after.steal-before.steal)
	if total <= 0 {
		return math.NaN()
	}
	return idle / total
}
