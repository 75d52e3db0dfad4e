package scheduler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// Through Finish, in the transaction that records the outcome: a run that
// wrote output notifies under on: [output] whatever its outcome, a quiet
// one does not, and a failure that its own kind notifies is sent once, as
// failed, with its output. EndedTick reads the tick back with its output.
func TestNotifyOutputThroughFinish(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		rules := map[string]baton.Notify{
			"chatty": {On: []string{"output"}, After: 1},
			"quiet":  {On: []string{"output"}, After: 1},
			"mixed":  {On: []string{"failed", "output"}, After: 1},
		}
		endings := map[string]scheduler.Ending{
			"chatty": {Outcome: baton.OutcomeSucceeded, Output: "removed 3 files\n"},
			"quiet":  {Outcome: baton.OutcomeSucceeded},
			"mixed":  {Outcome: baton.OutcomeFailed, Output: "no space left\n"},
		}
		var jobs []baton.Job
		for name := range rules {
			j := job(name, "0 0 1 1 *", "true")
			r := rules[name]
			j.Notify = &r
			jobs = append(jobs, j)
		}
		if _, err := e.store.Publish(ctx, jobs, "h", nil); err != nil {
			t.Fatal(err)
		}
		makeDue(t, e)
		claims, err := e.store.ClaimDue(ctx, "d", time.Minute, 10)
		if err != nil || len(claims) != 3 {
			t.Fatalf("claimed %d, %v", len(claims), err)
		}
		for _, c := range claims {
			term := &baton.Term{Job: c.Tick.Job, Owner: "run-" + c.Tick.Job, Token: 7}
			attempt, ok, err := e.store.StartAttempt(ctx, c.Tick, "", "d", "h", term)
			if err != nil || !ok {
				t.Fatalf("start %s: %v %v", c.IdempotencyKey(), ok, err)
			}
			ending := endings[c.Tick.Job]
			ending.Notice = &scheduler.Notice{Rule: rules[c.Tick.Job], Attempt: attempt, Host: "h", Daemon: "d", Token: 7}
			if ok, err := e.store.Finish(ctx, c.Tick, term.Owner, ending); err != nil || !ok {
				t.Fatalf("finish %s: %v %v", c.IdempotencyKey(), ok, err)
			}
		}
		got := &collect{got: map[string][]scheduler.Notification{}}
		got.drain(t, e)
		var kinds []string
		for _, ns := range got.got {
			for _, n := range ns {
				kinds = append(kinds, n.Job+" "+n.Kind+" "+string(n.Outcome)+" "+n.OutputTail)
			}
		}
		slices.Sort(kinds)
		want := []string{"chatty output succeeded removed 3 files\n", "mixed failed failed no space left\n"}
		if !slices.Equal(kinds, want) {
			t.Errorf("notifications %q, want %q", kinds, want)
		}

		r, err := e.store.EndedTick(ctx, "chatty", time.Time{})
		if err != nil || r.Output != "removed 3 files\n" || r.Outcome != baton.OutcomeSucceeded {
			t.Errorf("EndedTick(chatty): %+v, %v", r, err)
		}
		if again, err := e.store.EndedTick(ctx, "chatty", r.At); err != nil || again.Output != r.Output {
			t.Errorf("EndedTick(chatty, %s): %+v, %v", baton.FormatTick(r.At), again, err)
		}
		if _, err := e.store.EndedTick(ctx, "chatty", r.At.Add(time.Second)); baton.ErrorCode(err) != baton.ENOTFOUND {
			t.Errorf("EndedTick of no tick: %v, want not found", err)
		}
	})
}
