package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// The trail of the model's FINISH_NO_CAS and START_NO_CAS mutations
// (model/trails, docs/MODEL.md), driven through the real store: a run ends,
// the daemon writes its ending and the reply is lost, so Daemon.record
// writes it again and then, the write refused, tries recordLostStart. The
// real statements do what the unmutated model does: the second ending and
// the late start are refused (finish_tick.sql and start_attempt.sql
// compare-and-set on the run id and an open tick), and the tick keeps its
// one outcome and its one attempt.
func TestTrailFinishReplyLost(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		if _, err := e.store.Publish(ctx, []baton.Job{job("trail-finish", "0 0 1 1 *", "true")}, "h", nil); err != nil {
			t.Fatal(err)
		}
		makeDue(t, e)
		claims, err := e.store.ClaimDue(ctx, "d1", time.Minute, 10)
		if err != nil || len(claims) != 1 {
			t.Fatalf("claimed %d, %v", len(claims), err)
		}
		c := claims[0]
		// daemon 1 acquires the lease: token 1; starts attempt 1 (run 1)
		term := &baton.Term{Job: c.Tick.Job, Owner: "run-1", Token: 1}
		if _, ok, err := e.store.StartAttempt(ctx, c.Tick, c.RunID, "d1", "h", term); err != nil || !ok {
			t.Fatalf("start: %v %v", ok, err)
		}
		// command 1 exits: SUCCEEDED; daemon 1 ends the tick (the reply is lost)
		code := 0
		ended := scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}
		if ok, err := e.store.Finish(ctx, c.Tick, term.Owner, ended); err != nil || !ok {
			t.Fatalf("finish: %v %v", ok, err)
		}
		// daemon 1 records again: FINISH_NO_CAS ended the tick a second time
		again := scheduler.Ending{Outcome: baton.OutcomeFailed, Reason: "a second ending"}
		if ok, err := e.store.Finish(ctx, c.Tick, term.Owner, again); err != nil || ok {
			t.Errorf("the second ending of a done tick: ok %v, %v; want refused", ok, err)
		}
		// refused, so recordLostStart: START_NO_CAS started attempt 2
		if ok, err := e.store.RecordLostStart(ctx, c.Tick, c.RunID, "d1", "h", term, again); err != nil || ok {
			t.Errorf("recording a lost start of a done tick: ok %v, %v; want refused", ok, err)
		}
		got := ticksOf(t, e, c.Tick.Job)
		if len(got) != 1 || got[0].State != "done" || got[0].Outcome != baton.OutcomeSucceeded || got[0].Attempts != 1 {
			t.Fatalf("the tick after the trail: %+v; want done, succeeded, 1 attempt", got)
		}
	})
}
