package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// A tick that a live daemon claimed but no longer works on (its handling
// gave up: an outcome it could not record, a start refused) is not kept
// by the daemon's heartbeat: the claim lapses after ClaimTTL, and the
// tick is taken over and ends. Before, the heartbeat renewed every open
// tick claimed in the daemon's name, and such a tick stayed pending for as
// long as the daemon lived, beside daemons that would have run it.
func TestAbandonedClaimLapses(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		const id = "abandoner"
		j := job("abandoned", "0 0 1 1 *", "true")
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "h", nil); err != nil {
			t.Fatal(err)
		}
		makeDue(t, e)
		claims, err := e.store.ClaimDueAt(ctx, id, scheduler.FeatureLevel, 2*time.Second, 100)
		if err != nil || len(claims) != 1 {
			t.Fatalf("claimed %d ticks, %v; want 1", len(claims), err)
		}
		// The daemon of that name runs, and never handles the claim above.
		d := startDaemon(t, e, id, []baton.Job{j}, func(d *scheduler.Daemon) { d.ID = id })
		defer d.drain()
		ticks := waitTicks(t, e, "abandoned", 1, 30*time.Second)
		if ticks[0].Outcome != baton.OutcomeSucceeded {
			t.Errorf("the abandoned tick: %s", describe(ticks))
		}
	})
}
