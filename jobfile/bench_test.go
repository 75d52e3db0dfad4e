package jobfile

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// manyJobs is a job file of n jobs as bench/schedule.sh and
// bench/reads.sh write it.
func manyJobs(n int) []byte {
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: j%05d\n    schedule: \"%d * * * * *\"\n    command: [\"true\"]\n", i, i%60)
	}
	return []byte(b.String())
}

// BenchmarkParse10k parses a file of 10,000 jobs; -benchmem shows what
// the parse allocates, heap-sys-MB what the heap took from the system
// over the run (see docs/BENCHMARKS.md for the daemon's peak).
func BenchmarkParse10k(b *testing.B) {
	data := manyJobs(10000)
	b.ReportAllocs()
	var jobs int
	for b.Loop() {
		f, err := Parse("jobs.yaml", data)
		if err != nil {
			b.Fatal(err)
		}
		jobs = len(f.Jobs)
	}
	if jobs != 10000 {
		b.Fatalf("%d jobs", jobs)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heap-sys-MB")
}
