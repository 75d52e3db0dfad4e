package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

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
