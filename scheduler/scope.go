package scheduler

import (
	"context"
	"database/sql"
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
