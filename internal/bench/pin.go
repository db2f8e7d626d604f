package bench

// Pinned cores (issue 14): each server child on core 0 under taskset, the
// load generator on the others, so that a server's CPU per request and its
// core's busy fraction are not blurred by the generator taking turns on
// the same core.

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// benchPin says where the servers and the load generator run.
type benchPin struct {
	on       bool
	taskset  string // the taskset binary
	ncpu     int
	saved    []uint64 // this process's affinity before it was pinned
	restored bool
}

// newBenchPin pins when the machine has two cores or more and taskset is
// on PATH; otherwise nothing is pinned, as before issue 14.
func newBenchPin() *benchPin {
	p := &benchPin{ncpu: runtime.NumCPU()}
	if p.ncpu < 2 {
		return p
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return p
	}
	p.on, p.taskset = true, ts
	return p
}

// canPin says whether the bench can pin, whether or not it does.
func (p *benchPin) canPin() bool { return p.taskset != "" && p.ncpu >= 2 }

// pinTree moves root and every process descended from it, each of its
// threads, onto cpus (taskset's list); a process started after inherits
// its parent's cores. A descendant gone meanwhile is no failure.
func (p *benchPin) pinTree(root int, cpus string) error {
	tree, ok := processTree(readProcStats("/proc"), root)
	if !ok {
		return fmt.Errorf("process %d is gone", root)
	}
	for _, pid := range tree {
		if out, err := exec.Command(p.taskset, "-a", "-c", "-p", cpus, strconv.Itoa(pid)).CombinedOutput(); err != nil && pid == root {
			return fmt.Errorf("taskset: %v: %s", err, out)
		}
	}
	return nil
}

// serverCore is the cpu list of the servers; loadCores, the generator's.
func (p *benchPin) serverCore() string { return "0" }
func (p *benchPin) loadCores() string {
	if p.ncpu == 2 {
		return "1"
	}
	return "1-" + strconv.Itoa(p.ncpu-1)
}

// wrap runs cmd under taskset on cpus, keeping its environment; taskset
// execs the command, so the child's pid is the server's.
func (p *benchPin) wrap(cmd *exec.Cmd, cpus string) *exec.Cmd {
	if !p.on {
		return cmd
	}
	w := exec.Command(p.taskset, append([]string{"-c", cpus, cmd.Path}, cmd.Args[1:]...)...)
	w.Env, w.Dir = cmd.Env, cmd.Dir
	return w
}

// pinSelf moves every thread of this process onto the generator's cores:
// sched_setaffinity is per thread, and a thread the runtime starts later
// inherits its creator's mask.
func (p *benchPin) pinSelf() error {
	if !p.on {
		return nil
	}
	saved, err := getAffinity()
	if err != nil {
		return err
	}
	p.saved = saved
	mask := make([]uint64, len(saved))
	for c := 1; c < p.ncpu; c++ {
		mask[c/64] |= 1 << (c % 64)
	}
	return setAllThreads(mask)
}

// widen gives this process every core it had until the returned func
// pins it again on the generator's cores: work of its own (building a
// store) that no server's figure is read beside.
func (p *benchPin) widen() (again func()) {
	if !p.on || p.saved == nil || p.restored {
		return func() {}
	}
	setAllThreads(p.saved)
	return func() {
		mask := make([]uint64, len(p.saved))
		for c := 1; c < p.ncpu; c++ {
			mask[c/64] |= 1 << (c % 64)
		}
		setAllThreads(mask)
	}
}

// unpinSelf gives this process back the affinity it had.
func (p *benchPin) unpinSelf() {
	if p.saved != nil && !p.restored {
		setAllThreads(p.saved)
		p.restored = true
	}
}

func getAffinity() ([]uint64, error) {
	mask := make([]uint64, 16) // 1024 cpus
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	if e != 0 {
		return nil, fmt.Errorf("sched_getaffinity: %v", e)
	}
	return mask, nil
}

func setAllThreads(mask []uint64) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var first error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
		if e != 0 && first == nil && e != syscall.ESRCH { // a thread that has just ended
			first = fmt.Errorf("sched_setaffinity %d: %v", tid, e)
		}
	}
	return first
}
