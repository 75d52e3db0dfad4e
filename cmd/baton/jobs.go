package main

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

const jobsHelp = `
Usage: baton jobs [flags]

Lists the jobs in the store's schedule: schedule and zone, next tick, last
outcome, the age of the last success, paused state, and drift (running
daemons whose job file has another version of the job, or lacks it). A
paused job has no next tick ("-"; no next_tick in --json): none is run.

Exit status: 0 listed; 64 usage error; 69 store unavailable; 70 internal error.

Examples:
  # the jobs of the local store
  baton jobs

  # only the names, one per line (as the shell completions read them)
  baton jobs --names

  # the jobs of a PostgreSQL store, and the daemons' drift, as JSON
  baton jobs --db postgres://baton@db1/app --json
`

// JobsCommand is `baton jobs`.
type JobsCommand struct {
	env   *Env
	store storeFlags
	json  bool
	names bool
}

type jobRow struct {
	baton.DefinedJob
	SuccessAge string   `json:"last_success_age,omitempty"`
	Drift      []string `json:"drift,omitempty"`
}

// Run lists the jobs.
func (c *JobsCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("jobs", c.env.Stdout, jobsHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON: {\"jobs\": […], \"daemons\": […]}")
	fs.BoolVar(&c.names, "names", false, "print only the jobs' names, one per line (the shell completions read them)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton jobs takes none, got %q", pos)
	}
	st, err := c.store.openSchedule(ctx, c.env, "jobs")
	if err != nil {
		return err
	}
	defer st.close()
	if c.names {
		jobs, err := st.schedule.Jobs(ctx)
		if err != nil {
			return err
		}
		for _, dj := range jobs {
			fmt.Fprintln(c.env.Stdout, dj.Job.Name)
		}
		return nil
	}
	// The listing and the daemons (with their files' versions, as large as
	// the listing's names) are read side by side, on two connections.
	type listing struct {
		jobs []baton.DefinedJob
		err  error
	}
	listed := make(chan listing, 1)
	go func() {
		jobs, err := st.schedule.Jobs(ctx)
		listed <- listing{jobs, err}
	}()
	daemons, err := st.schedule.Daemons(ctx, 2*time.Minute)
	var now time.Time
	if err == nil {
		now, err = st.schedule.Now(ctx)
	}
	l := <-listed
	if l.err != nil {
		return l.err
	}
	if err != nil {
		return err
	}
	jobs := l.jobs
	rows := []jobRow{}
	for _, dj := range jobs {
		r := jobRow{DefinedJob: dj}
		if dj.Paused {
			r.NextTick = time.Time{} // a paused job has none: no tick of it is run
		}
		if !dj.LastSuccess.IsZero() {
			r.SuccessAge = now.Sub(dj.LastSuccess).Round(time.Second).String()
		}
		for _, d := range daemons {
			v, ok := d.Versions[dj.Job.Name]
			switch {
			case !ok && !scheduler.Owns(d, dj.Job):
				// Not d's to define: a service's function, or a job file's
				// command for a service's daemon.
			case !ok:
				r.Drift = append(r.Drift, fmt.Sprintf("%s (%s) has no such job in %s", d.Host, d.ID, d.Config))
			case v != dj.Version:
				r.Drift = append(r.Drift, fmt.Sprintf("%s (%s) has version %s in %s", d.Host, d.ID, v, d.Config))
			}
		}
		rows = append(rows, r)
	}
	if c.json {
		shell := struct {
			Jobs    []jobRow               `json:"jobs"`
			Daemons []scheduler.DaemonInfo `json:"daemons"`
		}{Jobs: []jobRow{}}
		lists := []jsonList{listJSON("jobs", rows)}
		if daemons != nil { // none is null, as printJSON wrote it
			shell.Daemons = []scheduler.DaemonInfo{}
			lists = append(lists, listJSON("daemons", daemons))
		}
		return printJSONLists(c.env.Stdout, shell, lists...)
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.env.Stdout, "no jobs in the store (start 'baton daemon --config FILE')")
		return nil
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tNEXT TICK\tLAST\tLAST SUCCESS\tSTATE\tDRIFT")
	for _, r := range rows {
		sched := r.Job.Schedule
		if r.Job.Timezone != "" {
			sched += " (" + r.Job.Timezone + ")"
		}
		next := "-"
		if !r.Paused && isReboot(r.Job.Schedule) {
			next = atDaemonStart
		}
		if !r.NextTick.IsZero() {
			next = r.NextTick.Format(time.RFC3339)
		}
		last := cmp.Or(string(r.LastOutcome), "-")
		success := "never"
		if r.SuccessAge != "" {
			success = r.SuccessAge + " ago"
		}
		state := "active"
		if r.Paused {
			state = "paused"
			if r.PausedNote != "" {
				state += ": " + r.PausedNote
			}
		}
		sort.Strings(r.Drift)
		name := r.Job.Name
		if r.Job.Func != "" {
			name += " (Go function of " + r.Job.Func + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, sched, next, last, success, state,
			cmp.Or(strings.Join(r.Drift, "; "), "-"))
	}
	return tw.Flush()
}
