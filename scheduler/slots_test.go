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
//
// The same ticks through 2 slots and through as many slots as ticks, in one
// run: 100 ticks took 23-24 s through 2 slots, against well under a second
// through 100.
func TestFullDaemonClaimsWhenASlotFrees(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		const jobs = 100
		through := func(e env, name string, slots int) time.Duration {
			var js []baton.Job
			for i := range jobs {
				js = append(js, job(fmt.Sprintf("%s-%03d", name, i), "0 0 1 1 *", "true"))
			}
			var ran atomic.Int64
			all := make(chan struct{})
			tune := func(d *scheduler.Daemon) {
				// A poll far longer than the test: a daemon that waits for it
				// once its slots are full waits for the next whole second.
				d.Poll, d.ClaimTTL, d.MaxConcurrent = time.Hour, 30*time.Second, slots
				d.Action = func(baton.Job, baton.Tick, *baton.Term) scheduler.Ending {
					if ran.Add(1) == jobs {
						close(all)
					}
					code := 0
					return scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}
				}
			}
			// Loaded before the daemon runs, so that its first claim finds
			// them all due.
			if _, err := e.store.Publish(context.Background(), js, "test", nil); err != nil {
				t.Fatal(err)
			}
			makeDue(t, e)
			began := time.Now()
			d := startDaemon(t, e, name, js, tune)
			defer d.drain()
			select {
			case <-all:
			case <-time.After(2 * time.Minute):
				t.Fatalf("%d of %d ticks ran in 2 minutes through %d slots", ran.Load(), jobs, slots)
			}
			return time.Since(began)
		}
		// Each in a store of its own, alone in it.
		wide := through(e, "wide", jobs)
		narrow := through(another(t, e), "narrow", 2)
		t.Logf("%d ticks through %d slots: %s; through 2: %s (%.1fx)", jobs, jobs, wide, narrow, float64(narrow)/float64(wide))
		// Either alone can be a loaded machine's doing: a daemon that waits
		// for the next second whenever its slots fill takes at least 20 s
		// here, and 50-100x as long as through 100 slots.
		if narrow > 20*time.Second && narrow > 15*wide {
			t.Errorf("%d ticks through 2 slots took %.0fx as long as through %d (%s against %s): the daemon waited to claim while its slots were free",
				jobs, float64(narrow)/float64(wide), jobs, narrow, wide)
		}
	})
}

// A claim round that took a full batch of due jobs is followed by another
// at once, even when none of them had a tick to run: after an outage, a
// backlog of jobs whose ticks are all missed (outside their catch-up window)
// went one batch a second, the daemon waiting for its next poll after each
// batch that started nothing, and the due ticks behind them waited too.
func TestMissedBacklogClaimedWithoutWaiting(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		// 20 batches of 5: the waits between batches, not their work, are
		// what the test tells apart (batches of 100 took 0.9 s each under
		// the race detector on a loaded box).
		const jobs, batch = 100, 5
		var js []baton.Job
		for i := range jobs {
			j := job(fmt.Sprintf("missed-%04d", i), "0 0 1 1 *", "true")
			j.Catchup = baton.Catchup{Policy: baton.CatchupSkip, Window: baton.Duration(time.Minute)}
			js = append(js, j)
		}
		ctx := context.Background()
		if _, err := e.store.Publish(ctx, js, "test", nil); err != nil {
			t.Fatal(err)
		}
		now, err := e.store.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Due an hour ago: each job's one due tick is missed.
		if err := e.store.SetNextTick(ctx, now.Add(-time.Hour).Truncate(time.Second)); err != nil {
			t.Fatal(err)
		}
		var skipped atomic.Int64
		all := make(chan struct{})
		began := time.Now()
		startDaemon(t, e, "backlog", js, func(d *scheduler.Daemon) {
			d.Poll, d.ClaimTTL, d.MaxConcurrent = time.Hour, 30*time.Second, batch
			d.Observer = skipCounter{func(n int) {
				if skipped.Add(int64(n)) == jobs {
					close(all)
				}
			}}
		})
		select {
		case <-all:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%d of %d missed ticks recorded in 2 minutes", skipped.Load(), jobs)
		}
		took := time.Since(began)
		t.Logf("%d missed ticks recorded in %s", jobs, took)
		// Waiting for the next whole second after each batch, 20 batches
		// take 19 s at least.
		if took > 15*time.Second {
			t.Errorf("%d missed ticks took %s to record: the daemon waited between batches", jobs, took)
		}
	})
}

// skipCounter is an Observer that counts skipped ticks.
type skipCounter struct{ skipped func(n int) }

func (skipCounter) JobsLoaded([]string)                           {}
func (skipCounter) RunStarted(string, time.Duration)              {}
func (skipCounter) RunEnded(string, baton.Outcome, time.Duration) {}
func (c skipCounter) TicksSkipped(_ string, _ scheduler.SkipReason, n int) {
	c.skipped(n)
}
func (skipCounter) LeaseAcquired(string, string, int64)       {}
func (skipCounter) LeaseBusy(string)                          {}
func (skipCounter) LeaseLost(string)                          {}
func (skipCounter) LeaseRenewed(string, time.Duration, error) {}
