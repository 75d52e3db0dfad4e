// Package backoff is baton's one exponential backoff: a wait that starts at
// a minimum and doubles per attempt up to a maximum, and the two ways baton
// spreads such a wait so that many waiters do not retry in step.
//
// The relay, the HTTP retry transport, the scheduler's job retries, the
// command line's wait for a store and the relay's round loop all use it;
// what differs between them is the bounds and the jitter, not the arithmetic.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Exp is the wait before attempt n's retry (n = 1 for the first): lo·2^(n−1),
// at most hi. It never overflows, however large n is; lo ≤ 0 is no wait, and
// lo > hi is hi.
func Exp(lo, hi time.Duration, n int) time.Duration {
	if lo <= 0 || hi <= 0 {
		return 0
	}
	d := lo
	for i := 1; i < n && d < hi; i++ {
		if d > hi/2 {
			return hi
		}
		d *= 2
	}
	return min(d, hi)
}

// Equal is d with "equal jitter": drawn uniformly from [d/2, d], so a wait
// is never shorter than half its nominal length and waiters spread over
// the other half.
func Equal(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// Around is d spread by up to half of it either way, drawn uniformly from
// [d/2, 3d/2] with seed: the same seed gives the same wait, so a wait that
// is recorded (an outbox event's next attempt) can be reproduced.
func Around(d time.Duration, seed uint64) time.Duration {
	if d <= 0 {
		return 0
	}
	jitter := time.Duration(rand.New(rand.NewPCG(seed, 0)).Int64N(int64(d)+1)) - d/2
	return d + jitter
}

// Loop is the backoff of a loop that retries until something works: each
// Next is the following Exp wait (without jitter when Jitter is false, with
// Equal jitter when true), and Reset starts over after a success.
type Loop struct {
	Min, Max time.Duration
	Jitter   bool
	n        int
}

// Next returns the wait before the next try and counts it.
func (l *Loop) Next() time.Duration {
	l.n++
	d := Exp(l.Min, l.Max, l.n)
	if l.Jitter {
		d = Equal(d)
	}
	return d
}

// Reset starts the waits over at Min.
func (l *Loop) Reset() { l.n = 0 }
