package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// Fair spread: with a few jobs due each second, the ticks spread over the
// live daemons instead of all going to the first daemon to poll after the
// second's boundary. Outcomes, not timing: each of three daemons runs at
// least a tenth of the runs.
func TestFewJobsSpreadOverDaemons(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		var jobs []baton.Job
		for i := range 6 {
			jobs = append(jobs, job(fmt.Sprintf("spread-%d", i), "* * * * * *", "true"))
		}
		names := []string{"a", "b", "c"}
		for _, name := range names {
			// No process per run: what is measured is who claims the
			// ticks, not how fast this (busy) machine starts commands.
			startDaemon(t, e, name, jobs, func(d *scheduler.Daemon) {
				// Polls as long as the ticks are apart: daemons that poll in step
				// would each second meet the ticks in the same order.
				d.Poll = time.Second
				d.Action = func(baton.Job, baton.Tick, *baton.Term) scheduler.Ending {
					code := 0
					return scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}
				}
			})
		}
		// About 20 s of ticks: 120 runs (however slow the machine, wait for
		// them, within a generous bound).
		var ran map[string]int
		total := 0
		for deadline := time.Now().Add(3 * time.Minute); total < 120; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d runs succeeded in 3 minutes of 6 every-second jobs: %v", total, ran)
			}
			ran, total = map[string]int{}, 0
			for _, j := range jobs {
				ticks, err := e.store.Ticks(context.Background(), j.Name, 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, tr := range ticks {
					if tr.State == baton.TickDone && tr.Outcome == baton.OutcomeSucceeded {
						ran[tr.Host]++
						total++
					}
				}
			}
		}
		t.Logf("%s: %d runs by daemon: %v", e.name, total, ran)
		for _, name := range names {
			if ran[name]*10 < total {
				t.Errorf("daemon %s ran %d of %d runs, less than a tenth: %v", name, ran[name], total, ran)
			}
		}
	})
}

// The share in the store: of jobs due at once, a daemon of a fleet of
// three claims a third (rounded up, at least one, of those still due), and
// says so; a claim for one daemon alone takes the rest. Every tick is
// claimed once.
func TestClaimTakesItsShare(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var jobs []baton.Job
		for i := range 6 {
			jobs = append(jobs, job(fmt.Sprintf("share-%d", i), "0 0 1 1 *", "true"))
		}
		if _, err := e.store.Publish(ctx, jobs, "h", nil); err != nil {
			t.Fatal(err)
		}
		ids := []string{"a", "b", "c"}
		for _, id := range ids {
			if err := e.store.Register(ctx, scheduler.DaemonInfo{ID: id, Host: id, Config: "test.yaml", FeatureLevel: scheduler.FeatureLevel}); err != nil {
				t.Fatal(err)
			}
		}
		live, err := e.store.Live(ctx, time.Minute)
		if err != nil || live != 3 {
			t.Fatalf("live daemons: %d, %v; want 3", live, err)
		}
		makeDue(t, e)
		seen := map[string]bool{}
		claim := func(id string, live, want int, wantCapped bool) {
			t.Helper()
			claims, capped, err := e.store.ClaimShareAt(ctx, id, scheduler.FeatureLevel, time.Minute, 100, live)
			if err != nil {
				t.Fatal(err)
			}
			if len(claims) != want || capped != wantCapped {
				t.Errorf("%s (of %d live) claimed %d ticks, capped %v; want %d, %v", id, live, len(claims), capped, want, wantCapped)
			}
			for _, c := range claims {
				if seen[c.IdempotencyKey()] {
					t.Errorf("%s claimed %s a second time", id, c.IdempotencyKey())
				}
				seen[c.IdempotencyKey()] = true
			}
		}
		claim("a", 3, 2, true) // 6 due: a third
		claim("b", 3, 2, true) // 4 due: 2 (rounded up)
		claim("c", 3, 1, true) // 2 due: 1
		claim("a", 1, 1, false)
		claim("b", 3, 0, false)
		if len(seen) != 6 {
			t.Errorf("%d of 6 ticks claimed", len(seen))
		}
	})
}
