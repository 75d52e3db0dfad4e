package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// A tick that a takeover ended lost-lease while its attempt had finished
// gets that attempt's real ending in its reason, once, and nothing else of
// it changes; a tick the attempt is no longer the current one of, or that
// ended otherwise, is left alone.
func TestAmendTakenOver(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		jobs := []baton.Job{job("amend-lost", "0 0 1 1 *", "true"), job("amend-ok", "0 0 1 1 *", "true")}
		if _, err := e.store.Publish(ctx, jobs, "h", nil); err != nil {
			t.Fatal(err)
		}
		makeDue(t, e)
		claims, err := e.store.ClaimDue(ctx, "d", time.Minute, 10)
		if err != nil || len(claims) != 2 {
			t.Fatalf("claimed %d, %v", len(claims), err)
		}
		const taken = "its daemon stopped renewing its claim (crashed or cut off) while it ran"
		const note = "finished with exit 0; its daemon could not record it before the claim lapsed"
		ticks := map[string]baton.Tick{}
		for _, c := range claims {
			term := &baton.Term{Job: c.Tick.Job, Owner: "run-" + c.Tick.Job, Token: 7}
			if _, ok, err := e.store.StartAttempt(ctx, c.Tick, "", "d", "h", term); err != nil || !ok {
				t.Fatalf("start %s: %v %v", c.IdempotencyKey(), ok, err)
			}
			ending := scheduler.Ending{Outcome: baton.OutcomeLostLease, Reason: taken}
			if c.Tick.Job == "amend-ok" {
				code := 0
				ending = scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}
			}
			if ok, err := e.store.Finish(ctx, c.Tick, term.Owner, ending); err != nil || !ok {
				t.Fatalf("finish %s: %v %v", c.IdempotencyKey(), ok, err)
			}
			ticks[c.Tick.Job] = c.Tick
		}
		for range 2 { // once, however often it is said
			for name, tick := range ticks {
				if err := e.store.AmendTakenOver(ctx, tick, "run-"+name, note); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := e.store.AmendTakenOver(ctx, ticks["amend-lost"], "another-run", "not this"); err != nil {
			t.Fatal(err)
		}
		lost := ticksOf(t, e, "amend-lost")[0]
		if lost.Outcome != baton.OutcomeLostLease || strings.Count(lost.Reason, note) != 1 || !strings.Contains(lost.Reason, taken) || strings.Contains(lost.Reason, "not this") {
			t.Errorf("taken-over tick: %s %q", lost.Outcome, lost.Reason)
		}
		if ok := ticksOf(t, e, "amend-ok")[0]; ok.Outcome != baton.OutcomeSucceeded || ok.Reason != "" {
			t.Errorf("a tick its own attempt ended: %s %q", ok.Outcome, ok.Reason)
		}
	})
}

// An attempt whose start the store lost (the tick is open, and the attempt
// before it still its current one) is recorded with its ending, once; not
// over an attempt that another daemon started meanwhile.
func TestRecordLostStart(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		jobs := []baton.Job{job("lost-start", "0 0 1 1 *", "true"), job("lost-other", "0 0 1 1 *", "true")}
		if _, err := e.store.Publish(ctx, jobs, "h", nil); err != nil {
			t.Fatal(err)
		}
		makeDue(t, e)
		claims, err := e.store.ClaimDue(ctx, "d", time.Minute, 10)
		if err != nil || len(claims) != 2 {
			t.Fatalf("claimed %d, %v", len(claims), err)
		}
		code := 0
		for _, c := range claims {
			term := &baton.Term{Job: c.Tick.Job, Owner: "lost-" + c.Tick.Job, Token: 9}
			if c.Tick.Job == "lost-other" {
				// Another daemon started an attempt of its own meanwhile.
				other := &baton.Term{Job: c.Tick.Job, Owner: "other", Token: 10}
				if _, ok, err := e.store.StartAttempt(ctx, c.Tick, c.RunID, "d2", "h2", other); err != nil || !ok {
					t.Fatalf("start: %v %v", ok, err)
				}
			}
			for i := range 2 {
				ok, err := e.store.RecordLostStart(ctx, c.Tick, c.RunID, "d", "h", term, scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code})
				if err != nil {
					t.Fatal(err)
				}
				if want := c.Tick.Job == "lost-start" && i == 0; ok != want {
					t.Errorf("%s, call %d: recorded %v, want %v", c.Tick.Job, i+1, ok, want)
				}
			}
		}
		tr := ticksOf(t, e, "lost-start")[0]
		atts, err := e.store.Attempts(ctx, tr.Job, tr.At)
		if tr.State != baton.TickDone || tr.Outcome != baton.OutcomeSucceeded || tr.Token != 9 || err != nil || len(atts) != 1 || atts[0].Outcome != baton.OutcomeSucceeded {
			t.Errorf("the lost start's tick: %s %s token %d; attempts %+v, %v", tr.State, tr.Outcome, tr.Token, atts, err)
		}
		if other := ticksOf(t, e, "lost-other")[0]; other.State != baton.TickRunning || other.Token != 10 {
			t.Errorf("the other daemon's tick: %s token %d", other.State, other.Token)
		}
	})
}
