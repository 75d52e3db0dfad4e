package scheduler

import (
	"context"
	"errors"
	"log/slog"

	"github.com/batonhq/baton"
)

// startAttempt starts an attempt of c's tick under term (prev is the
// tick's current attempt, attempts how many it has had), keeping the job's
// scheduled ticks in tick order: an attempt (first, retry or after a
// takeover) of a tick that a later tick overtook is not started. The tick
// is ended instead, with its last attempt's outcome or skipped-missed, and
// ok is false.
func (d *Daemon) startAttempt(ctx context.Context, c Claim, prev string, attempts int, term *baton.Term, log *slog.Logger) (attempt int, ok bool, err error) {
	a := d.starts.call(startCall{tick: c.Tick, prev: prev, daemon: d.ID, host: d.Host, term: term})
	attempt, ok, err = a.attempt, a.attempt > 0, a.err
	var ov *Overtaken
	if !errors.As(err, &ov) {
		return attempt, ok, err
	}
	d.endOvertaken(ctx, c, prev, attempts, ov, log)
	return 0, false, nil
}

// endOvertaken ends c's tick, whose current attempt is prev, because the
// later tick ov.Later started first: with its last attempt's outcome, or
// skipped-missed when it had none.
func (d *Daemon) endOvertaken(ctx context.Context, c Claim, prev string, attempts int, ov *Overtaken, log *slog.Logger) {
	o, ended, err := d.Store.EndOvertaken(ctx, c.Tick, prev, attempts, ov.Later)
	switch {
	case err != nil:
		// Given back, so that the claim does not stay this daemon's: the
		// next daemon to claim it ends it.
		log.Error("cannot record the outcome of a tick a later tick overtook", "err", err)
		d.giveBack(ctx, c, log)
	case ended:
		log.Log(ctx, outcomeLevel(o), "tick ended", "outcome", o, "reason", ov.Error()+": a job's scheduled ticks start in tick order")
		if o == baton.OutcomeSkippedMissed {
			d.observer().TicksSkipped(c.Tick.Job, SkipOvertaken, 1)
		}
	}
}
