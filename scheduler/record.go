package scheduler

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/backoff"
)

// record writes the ending of the tick's attempt under term and then, with
// release, gives the term back (a replaced term is still held until
// released: a flock lease never expires while its holder lives; never
// while a process of the run lives: its guard died and they outlived it).
// The ending is written before the release, so a takeover never repeats a
// run that finished.
//
// A store that blinks changes neither: the daemon keeps the ending and
// writes it again, with backoff, while it holds the tick's claim (the
// heartbeat renews the claim of every tick in hand meanwhile), and then the
// release likewise, so that the job's next tick is not skipped for the rest
// of a TTL. It gives up only when it drains and its claim has lapsed: then
// another daemon's takeover decides. It returns false when the tick was
// taken over meanwhile: the takeover decided the tick, and the attempt's
// own record, and the tick's reason, say how the run really ended.
//
// An attempt whose start the store lost (a failover that lost the last
// commits: the tick is open, and from, the attempt before this one, is
// still its current one) is recorded then, start and ending together, so
// that the run that happened is in the record and is not run again.
func (d *Daemon) record(ctx context.Context, t baton.Tick, from string, term *baton.Term, ending Ending, release bool, log *slog.Logger) (ok bool, err error) {
	call := finishCall{tick: t, runID: term.Owner, ending: ending}
	if release {
		call.release = term
	}
	retry := backoff.Loop{Min: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	var f finishAnswer
	tries := 0
	for {
		tries++
		if f = d.finishes.call(call); f.err == nil {
			break
		}
		if ctx.Err() != nil && !d.claimsHeld() {
			log.Error("cannot record the outcome, and this daemon's claim has lapsed while it drains; another daemon's takeover decides the tick", "err", f.err, "outcome", ending.Outcome)
			return false, f.err
		}
		if tries == 1 {
			log.Warn("cannot record the outcome yet; retrying while this daemon holds the tick's claim", "err", f.err, "outcome", ending.Outcome)
		}
		time.Sleep(retry.Next())
	}
	if tries > 1 {
		log.Info("recorded the outcome after the store came back", "outcome", ending.Outcome, "tries", tries)
	}
	if !f.ok {
		f.ok = d.recordLostStart(t, from, term, ending, log)
	}
	if !f.ok {
		log.Warn("the tick was taken over while it ran; its outcome is the other daemon's", "outcome", ending.Outcome)
		if ending.ExitCode != nil {
			d.amendTakenOver(t, term.Owner, *ending.ExitCode, log)
		}
	}
	if release && f.releaseErr != nil && baton.ErrorCode(f.releaseErr) != baton.ELEASELOST {
		d.releaseRetrying(term, f.releaseErr, log)
	}
	return f.ok, nil
}

// recordLostStart records the attempt under term, started from the attempt
// from, with its ending, if the store lost its start; it says whether it
// did.
func (d *Daemon) recordLostStart(t baton.Tick, from string, term *baton.Term, ending Ending, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const lost = "its start was lost with the store's last commits (a failover?) and recorded as it ended"
	if ending.Reason == "" {
		ending.Reason = lost
	} else {
		ending.Reason += "; " + lost
	}
	ok, err := d.Store.RecordLostStart(ctx, t, from, d.ID, d.Host, term, ending)
	if err != nil {
		log.Warn("cannot record the attempt whose start the store lost", "err", err)
	}
	if ok {
		log.Warn("the store had lost the attempt's start (a failover?); recorded it with its ending", "outcome", ending.Outcome, "token", term.Token)
	}
	return ok
}

// amendTakenOver adds to the reason of a tick that another daemon's
// takeover ended lost-lease, while this daemon's attempt runID had in fact
// finished with exit code, that it did.
func (d *Daemon) amendTakenOver(t baton.Tick, runID string, code int, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	note := fmt.Sprintf("finished with exit %d; its daemon could not record it before the claim lapsed", code)
	if err := d.Store.AmendTakenOver(ctx, t, runID, note); err != nil {
		log.Warn("cannot add the run's real ending to the taken-over tick", "err", err)
	}
}

// releaseRetrying gives term back, trying again with backoff after a
// failure (first) until the store answers, or until a TTL has passed: the
// term has expired by itself by then.
func (d *Daemon) releaseRetrying(term *baton.Term, first error, log *slog.Logger) {
	log.Warn("cannot release the lease yet; retrying", "lease", term.Job, "token", term.Token, "err", first)
	retry := backoff.Loop{Min: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	until := time.Now().Add(term.TTL)
	for time.Now().Before(until) {
		time.Sleep(retry.Next())
		if d.releaseOnce(term) == nil {
			log.Info("released the lease after the store came back", "lease", term.Job, "token", term.Token)
			return
		}
	}
	log.Warn("cannot release the lease; it has expired by itself", "lease", term.Job, "token", term.Token)
}

// RecordLostStart records attempt term of tick t, started from the attempt
// from, with its ending e, when the store lost its start (a failover lost
// the last commits): only if the tick is open and from is still its
// current attempt (compare-and-set, as StartAttempt). It returns whether it
// did.
func (s *Store) RecordLostStart(ctx context.Context, t baton.Tick, from, daemon, host string, term *baton.Term, e Ending) (bool, error) {
	var ok bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		attempt, err := s.start(ctx, tx, t, from, daemon, host, term, false)
		if err != nil || attempt == 0 {
			return err
		}
		ok, err = s.finish(ctx, tx, t, term.Owner, e)
		return err
	})
	return ok, err
}

// AmendTakenOver adds note to the reason of tick t when another daemon's
// takeover ended it lost-lease while its attempt runID was still the
// tick's: the attempt's daemon, back too late, says how the run really
// ended. Nothing else of the tick changes: the takeover decided it.
func (s *Store) AmendTakenOver(ctx context.Context, t baton.Tick, runID, note string) error {
	_, err := s.db.ExecContext(ctx, s.query("amend_taken_over"), t.Job, s.ts(t.At), runID, note, string(baton.OutcomeLostLease))
	return s.translate(err, "amending the outcome of "+t.IdempotencyKey())
}
