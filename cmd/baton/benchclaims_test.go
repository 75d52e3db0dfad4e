package main_test

import (
	"encoding/json"
	"testing"
)

// TestBenchClaimsEvery: bench claims --every runs a sustained schedule
// (every job every --every) on the daemon's path with a no-op, and reports
// for a window of --duration what was due, what ran and how late, twice
// (no tick of the window run twice), and the process's CPU.
func TestBenchClaimsEvery(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		r := s.run(t, "bench", "claims", "--every", "1s", "--duration", "3s", "--jobs", "5", "--clients", "1,2", "--json")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		var out struct {
			Jobs    int    `json:"jobs"`
			Every   string `json:"every"`
			Results []struct {
				Daemons    int     `json:"daemons"`
				Due        int     `json:"due"`
				Ran        int     `json:"ran"`
				NotRun     int     `json:"not_run"`
				Duplicates int     `json:"duplicates"`
				PerSec     float64 `json:"per_sec"`
				LagP50ms   float64 `json:"lag_p50_ms"`
				LagP99ms   float64 `json:"lag_p99_ms"`
				CPUSeconds float64 `json:"cpu_seconds"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if out.Jobs != 5 || out.Every != "1s" || len(out.Results) != 2 {
			t.Fatalf("want 5 jobs every 1s, rounds of 1 and 2 daemons: %s", r.stdout)
		}
		for i, res := range out.Results {
			if res.Daemons != i+1 || res.Due != 15 || res.Ran+res.NotRun != res.Due || res.Ran < 1 {
				t.Errorf("round %d: want 15 due (5 jobs, 3 s), each run or not: %+v", i, res)
			}
			if res.Duplicates != 0 {
				t.Errorf("round %d: %d ticks ran twice", i, res.Duplicates)
			}
			if res.PerSec <= 0 || res.LagP50ms <= 0 || res.LagP99ms < res.LagP50ms || res.CPUSeconds <= 0 {
				t.Errorf("round %d: want a rate, a lag and CPU: %+v", i, res)
			}
		}
	})
}
