package main_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
)

// A service's replicas (scheduler.New, in this process) and a job file's
// daemon (the binary) share one store: the daemon never claims a tick of
// the service's function, which it cannot run, the replicas never claim
// the file's command, and status and jobs show the function as one, with
// no drift on either side.
func TestFuncJobsShareTheStoreWithADaemon(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: s.dsn, Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	st := scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema())
	var calls atomic.Int64
	var ids []string
	for range 2 {
		d := scheduler.New(st, postgres.NewLeaser(db), "billing")
		d.Poll, d.ClaimTTL = 50*time.Millisecond, 3*time.Second
		d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
		err := d.Func(baton.Job{Name: "report", Schedule: "* * * * * *", Timezone: "Europe/Berlin"}, func(ctx context.Context) error {
			calls.Add(1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); d.Run(rctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	cli := s.startDaemon(t, "cli", writeJobFile(t, `
jobs:
  - name: sweep
    schedule: "* * * * * *"
    command: "true"
`))
	ticks := s.waitDone(t, "report", 8, 60*time.Second, nil)
	s.waitDone(t, "sweep", 3, 30*time.Second, nil)
	for _, tr := range ticks {
		if tr.State != baton.TickDone {
			continue
		}
		if (tr.Outcome == baton.OutcomeSkippedOverlap || tr.Outcome == baton.OutcomeSkippedMissed) && len(tr.AttemptList) == 0 {
			continue // a loaded machine: the last run's lease not yet given back, or claimed late
		}
		if tr.Outcome != baton.OutcomeSucceeded {
			t.Errorf("report tick %s: %s (%s), want succeeded", baton.FormatTick(tr.At), tr.Outcome, tr.Reason)
		}
		for _, a := range tr.AttemptList {
			if !slices.Contains(ids, a.Daemon) {
				t.Errorf("report tick %s: attempt %d by daemon %s, not a replica of the service (%v)", baton.FormatTick(tr.At), a.Attempt, a.Daemon, ids)
			}
		}
	}
	for _, tr := range s.ticks(t, "sweep") {
		for _, a := range tr.AttemptList {
			if slices.Contains(ids, a.Daemon) {
				t.Errorf("sweep tick %s: run by the service's replica %s", baton.FormatTick(tr.At), a.Daemon)
			}
		}
	}
	if calls.Load() == 0 {
		t.Error("the function was never called")
	}
	if log := cli.logText(t); strings.Contains(log, `"job":"report"`) {
		t.Errorf("the job file's daemon logged of the service's function:\n%s", tail(log))
	}

	status := s.run(t, "status")
	if status.code != 0 || !strings.Contains(status.stdout, "\nreport ") || !strings.Contains(status.stdout, " 0 drifted") {
		t.Errorf("baton status: exit %d, want the function's job and no drift:\n%s%s", status.code, status.stdout, status.stderr)
	}
	jobs := s.run(t, "jobs")
	if jobs.code != 0 || !strings.Contains(jobs.stdout, "report") || !strings.Contains(jobs.stdout, "Go function of billing") {
		t.Errorf("baton jobs: exit %d, want the function's job shown as one:\n%s%s", jobs.code, jobs.stdout, jobs.stderr)
	}
	for _, j := range s.jobsJSON(t) {
		switch {
		case j.Job.Name == "report" && (j.Job.Func != "billing" || len(j.Job.Command) != 0 || len(j.Drift) != 0 || j.FeatureLevel != scheduler.FeatureLevel):
			t.Errorf("jobs --json: report is %+v, want a Go function of billing, no command, no drift, level %d", j, scheduler.FeatureLevel)
		case j.Job.Name == "sweep" && len(j.Drift) != 0:
			t.Errorf("jobs --json: sweep has drift %v", j.Drift)
		}
	}
	t.Logf("status:\n%s\njobs:\n%s", status.stdout, jobs.stdout)
}
