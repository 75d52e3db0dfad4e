package main

import (
	"cmp"
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/jobfile"
	"github.com/batonhq/baton/scheduler"
)

const validateHelp = `
Usage: baton validate [--json] FILE

Checks a job file as 'baton daemon' would load it, without touching any
store: every problem is listed with its line, column and field. A valid file
prints each job with its version and its next tick. A file without jobs
(empty, or its jobs commented out) is invalid unless it says 'jobs: []'; the
limits on a file's size, a job's name and its command are in docs/JOBS.md.
Warnings (legal but likely wrong, e.g. retries that outlast key_retention)
go to stderr and do not change the exit status.

Exit status: 0 valid; 64 invalid file or usage error.
`

// ValidateCommand is `baton validate`.
type ValidateCommand struct {
	env  *Env
	json bool
}

type validatedJob struct {
	Name     string    `json:"name"`
	Version  string    `json:"version"`
	Schedule string    `json:"schedule"`
	Timezone string    `json:"timezone"`
	NextTick time.Time `json:"next_tick,omitzero"`
	Job      baton.Job `json:"job"`
	Warnings []string  `json:"warnings,omitempty"`
}

// Run validates the file.
func (c *ValidateCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("validate", c.env.Stdout, validateHelp)
	fs.BoolVar(&c.json, "json", false, "print the jobs, defaults applied, as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return baton.Invalid("arguments", "want one job file, got %d arguments", len(pos))
	}
	file, err := jobfile.Load(pos[0])
	if err != nil {
		return err
	}
	now := time.Now()
	out := []validatedJob{}
	for _, j := range file.Jobs {
		cj, err := scheduler.Compile(j)
		if err != nil {
			return err
		}
		out = append(out, validatedJob{Name: j.Name, Version: j.Version(), Schedule: j.Schedule,
			Timezone: cmp.Or(j.Timezone, "UTC"), NextTick: cj.Next(now), Job: j, Warnings: scheduler.Warnings(j)})
		for _, w := range scheduler.Warnings(j) {
			fmt.Fprintf(c.env.Stderr, "baton validate: warning: job %s: %s\n", j.Name, w)
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			File string         `json:"file"`
			Jobs []validatedJob `json:"jobs"`
		}{file.Path, out})
	}
	fmt.Fprintf(c.env.Stdout, "%s: %d jobs, valid\n", file.Path, len(out))
	if len(out) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tVERSION\tSCHEDULE\tTIMEZONE\tNEXT TICK")
	for _, v := range out {
		next := "never"
		if !v.NextTick.IsZero() {
			loc, _ := time.LoadLocation(v.Timezone)
			next = v.NextTick.In(loc).Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, v.Version, v.Schedule, v.Timezone, next)
	}
	return tw.Flush()
}
