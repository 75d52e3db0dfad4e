package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// A batch of outcomes is recorded as each would be alone: an attempt that
// is the tick's current one ends it (or leaves it for a retry), one that
// is not touches nothing of the tick.
func TestFinishBatchAsIfAlone(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var jobs []baton.Job
		for i := range 3 {
			jobs = append(jobs, job(fmt.Sprintf("batch-%d", i), "0 0 1 1 *", "true"))
		}
		if _, err := e.store.Publish(ctx, jobs, "h", nil); err != nil {
			t.Fatal(err)
		}
		makeDue(t, e)
		claims, err := e.store.ClaimDue(ctx, "d", time.Minute, 10)
		if err != nil || len(claims) != 3 {
			t.Fatalf("claimed %d, %v", len(claims), err)
		}
		var ticks []baton.Tick
		var runs []string
		for i, c := range claims {
			term := &baton.Term{Job: c.Tick.Job, Owner: fmt.Sprintf("run-%d", i), Token: int64(10 + i)}
			if _, ok, err := e.store.StartAttempt(ctx, c.Tick, "", "d", "h", term); err != nil || !ok {
				t.Fatalf("start %s: %v %v", c.IdempotencyKey(), ok, err)
			}
			ticks, runs = append(ticks, c.Tick), append(runs, term.Owner)
		}
		code, failed := 0, 3
		runs[2] = "not-its-run"
		oks, errs := e.store.FinishBatch(ctx, ticks, runs, []scheduler.Ending{
			{Outcome: baton.OutcomeSucceeded, ExitCode: &code, Output: "out"},
			{Outcome: baton.OutcomeFailed, ExitCode: &failed, Reason: "why", RetryAfter: time.Hour},
			{Outcome: baton.OutcomeSucceeded, ExitCode: &code},
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		if !oks[0] || !oks[1] || oks[2] {
			t.Errorf("answers %v, want [true true false]", oks)
		}
		byJob := map[string]baton.TickRecord{}
		for _, j := range jobs {
			tr := ticksOf(t, e, j.Name)
			if len(tr) != 1 {
				t.Fatalf("%s: %d ticks", j.Name, len(tr))
			}
			byJob[j.Name] = tr[0]
		}
		if r := byJob[ticks[0].Job]; r.State != baton.TickDone || r.Outcome != baton.OutcomeSucceeded || r.Output != "out" || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Errorf("ended tick: %+v", r)
		}
		if r := byJob[ticks[1].Job]; r.State != baton.TickPending || r.Outcome != "" || r.Reason != "why" || r.ExitCode == nil || *r.ExitCode != 3 {
			t.Errorf("tick left for a retry: %+v", r)
		}
		if r := byJob[ticks[2].Job]; r.State != baton.TickRunning || r.Outcome != "" {
			t.Errorf("tick of another attempt: %+v", r)
		}
		atts, err := e.store.Attempts(ctx, ticks[1].Job, ticks[1].At)
		if err != nil || len(atts) != 1 || atts[0].Outcome != baton.OutcomeFailed || atts[0].Ended.IsZero() {
			t.Errorf("attempt of the retried tick: %+v, %v", atts, err)
		}
	})
}
