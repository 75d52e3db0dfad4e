package postgres

import "testing"

// ExecFenced's statement, as built for each call and as a program that
// fences one statement many times gets it.
func BenchmarkFenceStatement(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fenceStatement("baton", "insert into bench_fence_results (token) select $1 from baton_fence", 2, 3); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFencedStatementCached(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fencedStatement("baton", "insert into bench_fence_results (token) select $1 from baton_fence", 1); err != nil {
			b.Fatal(err)
		}
	}
}
