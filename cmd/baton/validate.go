package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/zone"
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
An invalid file prints one problem per line on stderr, as compilers do,
so that editors can jump to each:

  FILE:LINE:COL: PATH: MESSAGE     (jobs.yaml:3:15: jobs[0](backup).schedule: …)

With --json, stdout has {"file", "valid", "jobs"} for a valid file and
{"file", "valid": false, "problems": [{"line", "column", "field",
"message"}], "omitted"} for an invalid one (line and column 0 when
unknown; omitted counts the problems past the first 50).

A job's user and group must exist on this host. A job of another user
than the one validating gets a warning: only a daemon running as root (or
as that user) runs it, and a daemon that cannot refuses the file.

Warnings (legal but likely wrong, e.g. retries that outlast key_retention,
or a job without timezone on a host whose zone is not UTC: cron would read
its schedule in the host's zone, baton reads it in UTC) go to stderr, one
per job and warning, and do not change the exit status.

Exit status: 0 valid; 64 invalid file (its problems printed) or usage error.

Examples:
  # check a job file before a daemon loads it
  baton validate /etc/baton/jobs.yaml

  # its jobs with defaults applied, as JSON
  baton validate --json /etc/baton/jobs.yaml
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
	fs.BoolVar(&c.json, "json", false, "print the jobs, defaults applied, or the problems of an invalid file, as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return baton.Invalid("arguments", "want one job file, got %d arguments", len(pos))
	}
	file, err := jobfile.Load(pos[0])
	if err == nil {
		// The daemon's user is not known here: only the accounts'
		// existence is checked, and jobs of other users get a warning.
		err = file.CheckAccounts(-1, -1)
	}
	var invalid *jobfile.Error
	if errors.As(err, &invalid) {
		return c.problems(invalid)
	}
	if err != nil {
		return err
	}
	now := time.Now()
	host := hostZone(now)
	out := []validatedJob{}
	for _, j := range file.Jobs {
		cj, err := scheduler.Compile(j)
		if err != nil {
			return err
		}
		warnings := scheduler.Warnings(j)
		if w := zoneWarning(j, host); w != "" {
			warnings = append(warnings, w)
		}
		if w := userWarning(j); w != "" {
			warnings = append(warnings, w)
		}
		out = append(out, validatedJob{Name: j.Name, Version: j.Version(), Schedule: j.Schedule,
			Timezone: cmp.Or(j.Timezone, "UTC"), NextTick: cj.Next(now), Job: j, Warnings: warnings})
		for _, w := range warnings {
			fmt.Fprintf(c.env.Stderr, "baton validate: warning: job %s: %s\n", j.Name, w)
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			File  string         `json:"file"`
			Valid bool           `json:"valid"`
			Jobs  []validatedJob `json:"jobs"`
		}{file.Path, true, out})
	}
	fmt.Fprintf(c.env.Stdout, "%s: %d jobs, valid\n", file.Path, len(out))
	if len(out) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tVERSION\tSCHEDULE\tTIMEZONE\tNEXT TICK")
	for _, v := range out {
		next := "never"
		if isReboot(v.Schedule) {
			next = atDaemonStart
		}
		if !v.NextTick.IsZero() {
			loc, _ := zone.Load(v.Timezone)
			next = v.NextTick.In(loc).Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, v.Version, v.Schedule, v.Timezone, next)
	}
	return tw.Flush()
}

// userWarning notes that j runs as another user than the one validating
// it, which only a daemon running as root (or as that user) can do; ""
// otherwise. CheckAccounts found the user.
func userWarning(j baton.Job) string {
	if j.User == "" {
		return ""
	}
	if u, err := user.Lookup(j.User); err == nil && u.Uid == strconv.Itoa(os.Getuid()) {
		return ""
	}
	return fmt.Sprintf("runs as %s: only a daemon running as root (or as %s) runs it; the packaged baton.service runs as baton, see docs/SYSTEMD.md", j.User, j.User)
}

// problem is one problem of an invalid file in validate's --json.
type problem struct {
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// problems prints an invalid file's problems, one per line on stderr
// (FILE:LINE:COL: PATH: MESSAGE), or as JSON on stdout with --json, and
// exits 64 without a message of its own.
func (c *ValidateCommand) problems(e *jobfile.Error) error {
	if !c.json {
		fmt.Fprintln(c.env.Stderr, e.Error())
		return ExitError{baton.ExitUsage}
	}
	out := make([]problem, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = problem{p.Line, p.Column, p.Field, p.Message}
	}
	if err := printJSON(c.env.Stdout, struct {
		File     string    `json:"file"`
		Valid    bool      `json:"valid"`
		Problems []problem `json:"problems"`
		Omitted  int       `json:"omitted"`
	}{e.Path, false, out, e.Omitted()}); err != nil {
		return err
	}
	return ExitError{baton.ExitUsage}
}
