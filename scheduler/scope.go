package scheduler

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/cron"
)

// Instances are the definitions a daemon on host publishes for a job
// file's jobs: a fleet job as it is, a host-scoped job (scope: host, or
// @reboot) as host's instance of it (baton.Job.ForHost), which only the
// daemons of that host claim. It refuses a host identity that cannot name
// an instance, and an instance name past baton.MaxJobNameLen (with its
// slot leases JOB@HOST#N under overlap {allow: N}).
func Instances(jobs []baton.Job, host string) ([]baton.Job, error) {
	out := make([]baton.Job, len(jobs))
	checked := false
	for i, j := range jobs {
		if j.Scope != baton.ScopeHost || j.Host != "" {
			out[i] = j
			continue
		}
		if !checked {
			if err := baton.ValidateHost(host); err != nil {
				return nil, baton.Wrap(baton.EINVALID, err, "job %s has scope: host, and this daemon's host identity cannot name its instance (give --host)", j.Name)
			}
			checked = true
		}
		in := j.ForHost(host)
		name := in.Name
		if j.Overlap.Policy == baton.OverlapAllow && j.Overlap.Allow > 1 {
			name += "#" + strconv.Itoa(j.Overlap.Allow)
		}
		if err := baton.ValidateJobName(name); err != nil {
			return nil, baton.Wrap(baton.EINVALID, err, "job %s has scope: host, and its instance on this host, %s, cannot be named", j.Name, name)
		}
		out[i] = in
	}
	return out, nil
}

// isReboot says whether j's schedule is @reboot: it runs when a daemon
// starts (Daemon.Run), never on a tick of the clock.
func isReboot(j baton.Job) bool {
	s, err := cron.Parse(j.Schedule)
	return err == nil && s.Reboot()
}

// reboot records, for each of jobs (@reboot jobs, this host's instances),
// a scheduled tick at the store's current instant, the daemon's start,
// claimed by daemon, and returns the claims. A job that is gone, paused,
// not this host's, or that needs a feature level above own gets none.
// An earlier start's tick that nobody holds and that is not running (its
// daemon stopped before it ran, or between retries) is ended first: one
// start runs the job once, not again for the starts before it.
func (s *Store) reboot(ctx context.Context, daemon, host string, own int, claimTTL time.Duration, jobs []string) ([]Claim, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	var out []Claim
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		at := now.Truncate(time.Microsecond)
		for _, name := range jobs {
			dj, err := s.getJob(ctx, tx, name)
			switch {
			case baton.ErrorCode(err) == baton.ENOTFOUND:
				continue
			case err != nil:
				return err
			case dj.Paused || dj.FeatureLevel > own || dj.Job.Host != host || !isReboot(dj.Job):
				continue
			}
			if err := s.endEarlierStarts(ctx, tx, name, at); err != nil {
				return err
			}
			t := baton.Tick{Job: name, At: at, Version: dj.Version, Kind: baton.TickScheduled}
			res, err := tx.ExecContext(ctx, s.query("insert_tick"), name, s.ts(at), dj.Version, t.Kind,
				baton.TickPending, nil, "", daemon, ms(claimTTL))
			if err != nil {
				return s.translate(err, "recording the start tick of "+name)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				out = append(out, Claim{Tick: t, State: baton.TickPending, Job: dj.Job})
			}
		}
		return nil
	})
	return out, err
}

// endEarlierStarts ends job's earlier start ticks (before at) that nobody
// holds and that are not running, with their last attempt's outcome
// (skipped-missed when they had none).
func (s *Store) endEarlierStarts(ctx context.Context, tx *sql.Tx, job string, at time.Time) error {
	rows, err := tx.QueryContext(ctx, s.query("unheld_ticks"), job, s.ts(at))
	if err != nil {
		return s.translate(err, "reading the earlier start ticks of "+job)
	}
	type open struct {
		at       time.Time
		runID    string
		attempts int
	}
	var ticks []open
	for rows.Next() {
		var o open
		var when dbTime
		if err := rows.Scan(&when, &o.runID, &o.attempts); err != nil {
			rows.Close()
			return s.translate(err, "reading the earlier start ticks of "+job)
		}
		o.at = when.Time
		ticks = append(ticks, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.translate(err, "reading the earlier start ticks of "+job)
	}
	for _, o := range ticks {
		why := "not run: the daemon start it belongs to ended before it ran; the start at " + baton.FormatTick(at) + " runs the job instead"
		if o.attempts > 0 {
			why = "not retried: the daemon start it belongs to ended before its retry; the start at " + baton.FormatTick(at) + " runs the job instead"
		}
		err := tx.QueryRowContext(ctx, s.query("end_overtaken"), job, s.ts(o.at), o.runID, why).Scan(new(string))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return s.translate(err, "ending an earlier start tick of "+job)
		}
	}
	return nil
}
