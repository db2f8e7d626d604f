// Package guard keeps a panic in one of the process's own loops from
// ending the process or the loop (issue 26): the loop's unit of work runs
// under Do or Try, which recover a panic, log it at ERROR with its stack,
// and count it by the loop's name for the metrics
// (waisteer_background_panics_total). The loop then goes on to its next
// unit. A test fails on any panic counted that it did not cause on purpose
// (Total).
package guard

import (
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// PanicError is a recovered panic, as Do and Try return it.
type PanicError struct {
	Loop  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("%s: panic: %v", e.Loop, e.Value) }

// Seen, when set, is told of every panic recovered, after it is logged
// and counted: a test's, set before any loop starts, which prints it
// whatever the logger under test discards.
var Seen func(*PanicError)

var (
	mu     sync.Mutex
	counts = map[string]uint64{}
	total  atomic.Uint64
)

// Do runs fn. A panic in fn is recovered, logged on log (slog.Default
// when nil) at ERROR with its stack, counted under loop, and returned.
func Do(log *slog.Logger, loop string, fn func()) (err error) {
	return Try(log, loop, func() error { fn(); return nil })
}

// Try runs fn and returns its error, or the panic it recovered, as Do.
func Try(log *slog.Logger, loop string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Recovered(log, loop, v)
		}
	}()
	return fn()
}

// Recovered logs and counts v, a value recover returned in loop, and
// returns it as a *PanicError: for a caller that must recover itself
// (a deferred function that also answers what the panic left waiting).
func Recovered(log *slog.Logger, loop string, v any) *PanicError {
	e := &PanicError{Loop: loop, Value: v, Stack: debug.Stack()}
	mu.Lock()
	counts[loop]++
	mu.Unlock()
	total.Add(1)
	if log == nil {
		log = slog.Default()
	}
	log.Error("a panic recovered; the loop goes on", "loop", loop, "panic", fmt.Sprint(v), "stack", string(e.Stack))
	if Seen != nil {
		Seen(e)
	}
	return e
}

// Counts are the panics recovered since the process started, by loop.
func Counts() map[string]uint64 {
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(counts)
}

// Total is the number of panics recovered since the process started.
func Total() uint64 { return total.Load() }
