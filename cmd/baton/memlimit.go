package main

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The daemon's soft memory limit (runtime/debug.SetMemoryLimit), unless
// GOMEMLIMIT sets one: memoryFloor, or memoryPerLive times the heap live
// once the job file is loaded if that is more, and memoryPerRun for each
// of --max-concurrent runs.
//
// Why. With the garbage collector's default target alone, the heap grows to
// twice what was live at the last collection, and a dashboard read or a
// /metrics scrape holds for a moment several times what the daemon holds
// at rest (10,000 jobs: 4.3 MB at rest, 14 MB during a read of the
// overview): a daemon of 10,000 jobs serving the dashboard peaked at 58-66
// MB resident, 48-49.5 with this limit, for more CPU while the reads last
// (docs/BENCHMARKS.md, "Reads and memory at 10,000 jobs"). At rest the
// limit is far above the heap and changes nothing.
//
// The limit is soft: a daemon that needs more than it goes on, and the
// runtime spends at most half the CPU on collections to stay near it; the
// share of runs and of what was loaded keeps a daemon with many jobs or
// many runs at once well clear of that. A run costs the daemon about 83 KB
// of heap (its output's copy buffers, its goroutines) and more beside it (a
// thread waiting for the guard): 1,000 `sleep 20` at once held an 83 MB
// heap, and at 64 KiB a run the limit had the runtime collect all the time
// (271 collections in 52 s against 24 without a limit); at 256 KiB, 26
// (bench/connections.sh).
const (
	memoryFloor   = 16 << 20
	memoryPerLive = 4
	memoryPerRun  = 256 << 10
)

// setMemoryLimit sets the daemon's limit after a load of its job file, and
// logs it; GOMEMLIMIT in env is kept.
func setMemoryLimit(log *slog.Logger, getenv func(string) string, maxConcurrent int) {
	if v := getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory limit", "memory_limit_bytes", debug.SetMemoryLimit(-1), "set_by", "GOMEMLIMIT")
		return
	}
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	var live int64
	if sample[0].Value.Kind() == metrics.KindUint64 {
		live = int64(sample[0].Value.Uint64())
	}
	limit := max(memoryFloor, memoryPerLive*live) + int64(maxConcurrent)*memoryPerRun
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", "memory_limit_bytes", limit, "live_heap_bytes", live,
		"set_by", "baton: the jobs loaded and --max-concurrent (GOMEMLIMIT overrides)")
}
