// Package par runs the parts of a loop over a slice on every core: for the
// reads that turn 10,000 rows into values (decoding the jobs' definitions,
// judging their status, encoding them), which are pure per element and
// would otherwise use one core of the machine while the others idle.
package par

import (
	"runtime"
	"sync"
)

// For calls fn(lo, hi) for consecutive ranges that cover [0, n) exactly
// once, at most GOMAXPROCS of them at once, and returns when all have
// returned. Each range holds at least minPart elements (but the last), so
// that a short loop runs on the caller's goroutine alone. fn must touch
// only its own range's elements.
func For(n, minPart int, fn func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), n/max(minPart, 1))
	if parts <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		if p == parts-1 {
			fn(lo, hi) // the caller's goroutine takes the last part
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
