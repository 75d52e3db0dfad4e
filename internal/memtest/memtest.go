// Package memtest measures the Go heap, for tests of what code holds.
package memtest

import "runtime"

// LiveHeap is the heap in use after two full collections (the second
// frees what the first's finalizers let go of).
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
