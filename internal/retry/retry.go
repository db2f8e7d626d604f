// Package retry spaces the attempts of a loop that reaches a store again
// after a failure (issue 26 item 6): each wait doubles from a first to a
// cap, and is drawn at random in its upper half, so that servers that lost
// one database together do not come back to it in step.
package retry

import (
	"math/rand/v2"
	"time"
)

// Backoff is the waits of one loop. Its zero value is not usable: give
// First and Max. It is not safe for concurrent use.
type Backoff struct {
	First, Max time.Duration
	cur        time.Duration // the wait Next draws from; 0 before the first
}

// Next is the wait before the next attempt: a duration in [d/2, d], where d
// is First at the first call after Reset and doubles at each call, up to
// Max.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.First
	} else {
		b.cur = min(2*b.cur, b.Max)
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

// Reset starts the waits again from First, after an attempt succeeded.
func (b *Backoff) Reset() { b.cur = 0 }
