package bench

import (
	"syscall"
	"time"
	"unsafe"
)

// threadClock is the calling thread's CPU time to the nanosecond
// (CLOCK_THREAD_CPUTIME_ID): unlike RUSAGE_THREAD, which a running thread
// sees advance only at the scheduler's ticks and switches, it counts the
// time run since, so that a sample of 100 µs reads as such.
func threadClock() (time.Duration, bool) {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
