package scheduler_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/batonhq/baton/internal/memtest"
	"github.com/batonhq/baton/scheduler"
)

// A daemon keeps of its job file what drift needs, each job's version: it
// schedules the store's definitions, not its file's. It kept every
// definition, with defaults, beside the versions too: 5.5 MB of a 10,000-job
// daemon's 9 MB of live heap (issue 18's memory target).
func TestLoadedDaemonKeepsVersionsOnly(t *testing.T) {
	e := sqliteEnv(t)
	const n = 3000
	jobs := numbered("held", n)
	for i := range jobs {
		jobs[i].Env = map[string]string{"REPORT": "daily", "REGION": "eu-west-1"}
		jobs[i].Dir = "/srv/reports"
	}
	ctx := context.Background()
	// A first daemon publishes the file; the second, measured, finds it
	// published, as the fleet's other daemons do.
	first := &scheduler.Daemon{Store: e.store, Leaser: e.leaser(t), ID: "first", Host: "first", Config: "test.yaml"}
	if err := first.Load(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	d := &scheduler.Daemon{Store: e.store, Leaser: e.leaser(t), ID: "held", Host: "held", Config: "test.yaml"}
	before := memtest.LiveHeap()
	if err := d.Load(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	held := int64(memtest.LiveHeap()) - int64(before)
	runtime.KeepAlive(jobs) // counted in both: what Load added is measured
	runtime.KeepAlive(d)
	runtime.KeepAlive(first)
	// A name and a version (a 64-character hex string) in a map: about
	// 200 bytes; a definition with its defaults is three times that.
	t.Logf("held %d bytes a job", held/n)
	if per := held / n; per > 300 {
		t.Fatalf("a loaded daemon holds %d bytes a job (%d jobs: %d bytes), want at most 300: its job file's definitions are kept beside their versions", per, n, held)
	}
}
