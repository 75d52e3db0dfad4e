package scheduler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// A daemon whose slots are all taken claims again as soon as one frees,
// not at its next poll: with more jobs due than --max-concurrent, it used to
// wait up to a poll (or to the next whole second) each time its slots
// filled, and idled while its runs, short ones, had long ended. Each run
// here is a no-op, so the ticks' pace is the daemon's bookkeeping alone.
func TestFullDaemonClaimsWhenASlotFrees(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		const jobs, slots = 100, 2
		var js []baton.Job
		for i := range jobs {
			js = append(js, job(fmt.Sprintf("slots-%02d", i), "0 0 1 1 *", "true"))
		}
		var ran atomic.Int64
		all := make(chan struct{})
		tune := func(d *scheduler.Daemon) {
			// A poll far longer than the test: a daemon that waits for it
			// once its slots are full fails the test.
			d.Poll, d.ClaimTTL, d.MaxConcurrent = time.Hour, 30*time.Second, slots
			d.Action = func(baton.Job, baton.Tick, *baton.Term) scheduler.Ending {
				if ran.Add(1) == jobs {
					close(all)
				}
				code := 0
				return scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}
			}
		}
		// Loaded before the daemon runs, so its first claim finds them due.
		if _, err := e.store.Publish(context.Background(), js, "test", nil); err != nil {
			t.Fatal(err)
		}
		makeDue(t, e)
		began := time.Now()
		startDaemon(t, e, "full", js, tune)
		// 100 ticks through 2 slots take about a second here (a few round
		// trips each). Waiting for the next whole second whenever the slots
		// filled took 23-24 s.
		select {
		case <-all:
			t.Logf("%d ticks ran in %s", jobs, time.Since(began))
		case <-time.After(12 * time.Second):
			t.Fatalf("%d of %d ticks ran in 12 s with %d slots: the daemon waited to claim while its slots were free", ran.Load(), jobs, slots)
		}
	})
}
