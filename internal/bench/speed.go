package bench

// The machine's speed over a phase (issue 31). The CPU a decision costs is
// read from /proc as time, and the same instructions take more time on
// this machine when both of its cores are busy than when one of them idles
// (its two vCPUs share a host's core, its caches, or its power budget).
// A row whose servers saturate the machine (three servers on two cores)
// then reads more CPU per decision than a row that leaves it idle a
// quarter of the time (one server) for the same work. The probe measures
// that: every probeEvery, it signs one fixed message with Ed25519, as a
// decision is signed, several times, and reads the CPU its own thread
// took (threadClock: the time it ran, not the time it waited for a core). A
// phase's speed is the median of its samples, beside the median over the
// phase of one server on PostgreSQL, the reference of the goal on CPU.
// (The machine left quiet is no reference: a core woken from idle runs the
// probe slower than a busy one.)

import (
	"runtime"
	"slices"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
)

// probeEvery is the probe's period: at about 100 µs of signing a sample,
// a thousandth of a core.
const probeEvery = 100 * time.Millisecond

// probeSigns are the signatures of one sample.
const probeSigns = 4

// speedProbe samples the CPU time of a fixed piece of work until stopped.
type speedProbe struct {
	stop    chan struct{}
	done    chan struct{}
	samples []time.Duration
}

// startSpeedProbe starts sampling, every period, on a thread of its own.
func startSpeedProbe(every time.Duration) *speedProbe {
	p := &speedProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		key := sig.NewPrivateKey([sig.SeedSize]byte{})
		msg := make([]byte, 1260) // a 3-pathway decision's signed bytes
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			t0, ok0 := threadClock()
			for k := range probeSigns {
				msg[0] = byte(k)
				key.SignRaw(msg)
			}
			t1, ok1 := threadClock()
			if ok0 && ok1 && t1 > t0 {
				p.samples = append(p.samples, t1-t0)
			}
		}
	}()
	return p
}

// end stops the probe and returns the median of its samples (0 without
// any).
func (p *speedProbe) end() time.Duration {
	close(p.stop)
	<-p.done
	return medianDuration(p.samples)
}

// medianDuration is the median of xs, 0 for none.
func medianDuration(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// slowdown is how much longer the probe's work took in a phase than in
// the reference's: 1 when either is unknown.
func slowdown(phase, ref time.Duration) float64 {
	if phase <= 0 || ref <= 0 {
		return 1
	}
	return float64(phase) / float64(ref)
}
