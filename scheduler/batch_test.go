package scheduler_test

import (
	"context"
	"errors"
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

// A batch of starts answers each call as StartAttemptInOrder alone would:
// a fresh tick starts its first attempt (recorded with its term), a tick
// that a later scheduled tick of its job overtook is refused with that
// tick and nothing written, and a tick whose attempt is not the one the
// call expects is not started.
func TestStartBatchAsIfAlone(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		overJob := job("sb-over", "* * * * * *", "true")
		overJob.Catchup = baton.Catchup{Policy: baton.CatchupAll, Window: baton.Duration(time.Minute)}
		jobs := []baton.Job{job("sb-fresh", "0 0 1 1 *", "true"), job("sb-other", "0 0 1 1 *", "true"), overJob}
		if _, err := e.store.Publish(ctx, jobs, "h", nil); err != nil {
			t.Fatal(err)
		}
		makeDue(t, e) // 2 s ago: sb-over has catch-up ticks
		claims, err := e.store.ClaimDue(ctx, "d", time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		var fresh, other, over []baton.Tick
		for _, c := range claims {
			switch c.Tick.Job {
			case "sb-fresh":
				fresh = append(fresh, c.Tick)
			case "sb-other":
				other = append(other, c.Tick)
			case "sb-over":
				over = append(over, c.Tick)
			}
		}
		if len(fresh) != 1 || len(other) != 1 || len(over) < 2 {
			t.Fatalf("claimed %d, %d, %d ticks; want 1, 1 and at least 2", len(fresh), len(other), len(over))
		}
		latest := over[len(over)-1]
		for _, tk := range []baton.Tick{other[0], latest} {
			if _, ok, err := e.store.StartAttempt(ctx, tk, "", "d", "h", &baton.Term{Job: tk.Job, Owner: "elsewhere", Token: 1}); err != nil || !ok {
				t.Fatalf("start %s: %v %v", tk.IdempotencyKey(), ok, err)
			}
		}
		ticks := []baton.Tick{over[0], fresh[0], other[0]}
		terms := []*baton.Term{{Job: "sb-over", Owner: "run-0", Token: 7}, {Job: "sb-fresh", Owner: "run-1", Token: 8}, {Job: "sb-other", Owner: "run-2", Token: 9}}
		attempts, errs := e.store.StartBatch(ctx, ticks, []string{"", "", ""}, "d2", "h2", terms)
		var ov *scheduler.Overtaken
		if !errors.As(errs[0], &ov) || !ov.Later.Equal(latest.At) || attempts[0] != 0 {
			t.Errorf("overtaken tick: attempt %d, %v; want refused, overtaken by %s", attempts[0], errs[0], baton.FormatTick(latest.At))
		}
		if attempts[1] != 1 || errs[1] != nil {
			t.Errorf("fresh tick: attempt %d, %v; want attempt 1", attempts[1], errs[1])
		}
		if attempts[2] != 0 || errs[2] != nil {
			t.Errorf("tick of another attempt: attempt %d, %v; want not started", attempts[2], errs[2])
		}
		atts, err := e.store.Attempts(ctx, fresh[0].Job, fresh[0].At)
		if err != nil || len(atts) != 1 || atts[0].RunID != "run-1" || atts[0].Token != 8 || atts[0].Daemon != "d2" || atts[0].Host != "h2" {
			t.Errorf("attempts of the fresh tick: %+v, %v", atts, err)
		}
		if atts, err := e.store.Attempts(ctx, over[0].Job, over[0].At); err != nil || len(atts) != 0 {
			t.Errorf("attempts of the overtaken tick: %+v, %v; want none", atts, err)
		}
		if atts, err := e.store.Attempts(ctx, other[0].Job, other[0].At); err != nil || len(atts) != 1 || atts[0].RunID != "elsewhere" {
			t.Errorf("attempts of the tick started elsewhere: %+v, %v", atts, err)
		}
	})
}
