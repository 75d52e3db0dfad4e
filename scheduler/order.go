package scheduler

import (
	"context"
	"errors"
	"strconv"

	"github.com/batonhq/baton"
)

// startAttempt starts an attempt of c's tick under term (prev is the
// tick's current attempt, attempts how many it has had). Its first start in
// this daemon keeps the job's scheduled ticks in tick order: a tick that a
// later tick overtook (a daemon claimed it and died, froze or fell behind
// before running it, and the later tick started meanwhile) is recorded,
// never run, and ok is false. A retry of an attempt this daemon ran is not
// a first start.
func (d *Daemon) startAttempt(ctx context.Context, c Claim, prev string, attempts int, term *baton.Term, log interface {
	Info(string, ...any)
	Error(string, ...any)
}) (attempt int, ok bool, err error) {
	if prev != c.RunID {
		return d.Store.StartAttempt(ctx, c.Tick, prev, d.ID, d.Host, term)
	}
	attempt, ok, err = d.Store.StartAttemptInOrder(ctx, c.Tick, prev, d.ID, d.Host, term)
	var ov *Overtaken
	if !errors.As(err, &ov) {
		return attempt, ok, err
	}
	if attempts == 0 {
		if d.end(ctx, c.Tick, prev, baton.OutcomeSkippedMissed, OvertakenReason(ov.Later, false), log) {
			d.observer().TicksSkipped(c.Tick.Job, SkipOvertaken, 1)
		}
		return 0, false, nil
	}
	// Its attempt's daemon stopped renewing its claim; it is not retried.
	d.end(ctx, c.Tick, prev, baton.OutcomeLostLease, "its daemon stopped renewing its claim (crashed, paused or cut off) after attempt "+
		strconv.Itoa(attempts)+"; not run again: "+ov.Error()+", and a job's scheduled ticks start in tick order", log)
	return 0, false, nil
}
