package main_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// A daemon bounds its Go memory with a soft limit sized to what it holds:
// the jobs it loaded and the runs it may have at once. Without one, the
// heap grew to twice the height of each dashboard read, and a daemon of
// 10,000 jobs serving the dashboard peaked at 58-60 MB of resident memory
// (issue 18's target: 50); with the limit, 48.5. GOMEMLIMIT, when set,
// is the operator's, and is kept.
func TestDaemonSetsMemoryLimit(t *testing.T) {
	config := writeJobFile(t, `
jobs:
  - name: memory-job
    schedule: "0 0 1 1 *"
    command: "true"
`)
	const mib = 1 << 20
	for _, tc := range []struct {
		name   string
		env    []string
		extra  []string
		lo, hi int64
	}{
		{"default", nil, nil, 32 * mib, 32 * mib},
		{"runs", nil, []string{"--max-concurrent", "1000"}, 16*mib + 1000*256<<10, 16*mib + 1000*256<<10},
		{"GOMEMLIMIT", []string{"GOMEMLIMIT=100MiB"}, nil, 100 * mib, 100 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := localStore(t)
			s.env = append(s.env, tc.env...)
			addr := freeAddr(t)
			d := s.startDaemon(t, "memory-"+tc.name, config, append([]string{"--http", addr}, tc.extra...)...)
			base := "http://" + addr
			waitHTTP(t, base, d)
			code, body := get(t, base+"/metrics", nil)
			if code != 200 {
				t.Fatalf("GET /metrics: %d %s", code, body)
			}
			limit := int64(-1)
			for _, line := range strings.Split(body, "\n") {
				if v, ok := strings.CutPrefix(line, "go_gc_gomemlimit_bytes "); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatalf("go_gc_gomemlimit_bytes %q: %v", v, err)
					}
					limit = int64(f)
				}
			}
			if limit < tc.lo || limit > tc.hi {
				t.Fatalf("the daemon's memory limit is %d bytes (%.1f MiB), want %d to %d", limit, float64(limit)/mib, tc.lo, tc.hi)
			}
			if !strings.Contains(d.logText(t), fmt.Sprintf(`"memory_limit_bytes":%d`, limit)) {
				t.Errorf("the daemon does not log its memory limit (%d):\n%s", limit, tail(d.logText(t)))
			}
			if c := d.stop(t); c != 0 {
				t.Fatalf("daemon exited %d", c)
			}
		})
	}
}
