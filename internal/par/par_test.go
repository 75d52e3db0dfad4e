package par

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// Every element is visited once, whatever n, the part size and the number
// of cores; short loops stay on the caller's goroutine.
func TestForCoversEachElementOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, n := range []int{0, 1, 2, 3, 7, 63, 64, 65, 1000, 10001} {
		for _, minPart := range []int{0, 1, 16, 64, 5000} {
			seen := make([]int32, n)
			var calls atomic.Int32
			For(n, minPart, func(lo, hi int) {
				calls.Add(1)
				if lo >= hi {
					t.Errorf("n=%d minPart=%d: empty range [%d,%d)", n, minPart, lo, hi)
				}
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&seen[i], 1)
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d minPart=%d: element %d visited %d times", n, minPart, i, c)
				}
			}
			if want := min(4, n/max(minPart, 1)); want > 1 && int(calls.Load()) != want {
				t.Errorf("n=%d minPart=%d: %d parts, want %d", n, minPart, calls.Load(), want)
			}
			if n/max(minPart, 1) <= 1 && n > 0 && calls.Load() != 1 {
				t.Errorf("n=%d minPart=%d: %d parts, want 1", n, minPart, calls.Load())
			}
		}
	}
}
