package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton"
)

const logsHelp = `
Usage: baton logs [flags] JOB

Prints a job's output as the store keeps it: the last 4 KiB of stdout and
stderr together, of the attempt that ended the tick (a retried attempt's
output is not kept), and none for a job with output: discard. Without
--tick, the newest ended tick's; --tick names one by its instant, as
baton runs prints it. The output is printed as it was written, with a
newline added if it ends without one; --json prints it with the tick's
outcome, exit code and attempt.

--follow prints the newest ended tick's output, then each tick's as it
ends, under a line "# JOB TICK OUTCOME", until interrupted (Ctrl-C); with
--json, one JSON object a line. The whole output of a run, line by line,
is in the daemon's log (output: log, the default; the journal under
systemd).

Exit status: 0 printed (--follow: 130 when interrupted); 64 usage error;
66 no such job, or no ended tick of it (at --tick); 69 store unavailable;
70 internal error.

Examples:
  # the output of backup's last run
  baton logs backup

  # the output of one tick, as baton runs lists it
  baton logs --tick 2026-12-02T03:00:00Z backup

  # each run's output as it ends, until Ctrl-C
  baton logs --follow backup
`

// LogsCommand is `baton logs`.
type LogsCommand struct {
	env    *Env
	store  storeFlags
	json   bool
	tick   string
	follow bool
	poll   time.Duration
}

// logEntry is one tick's output as --json prints it.
type logEntry struct {
	Job      string        `json:"job"`
	Tick     string        `json:"tick"`
	Kind     string        `json:"kind"`
	Outcome  baton.Outcome `json:"outcome"`
	ExitCode *int          `json:"exit_code"`
	Attempt  int           `json:"attempt"`
	Host     string        `json:"host,omitempty"`
	Ended    time.Time     `json:"ended,omitzero"`
	Reason   string        `json:"reason,omitempty"`
	Output   string        `json:"output"`
}

// Run prints the output.
func (c *LogsCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("logs", c.env.Stdout, logsHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON: the tick, its outcome and its output")
	fs.StringVar(&c.tick, "tick", "", "the tick whose output to print, as RFC 3339 (`INSTANT`, as baton runs prints it)")
	fs.BoolVar(&c.follow, "follow", false, "then print each tick's output as it ends, until interrupted")
	fs.DurationVar(&c.poll, "poll", time.Second, "with --follow: how often to read the store")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return baton.Invalid("JOB", "want one job name, got %d arguments", len(pos))
	}
	var at time.Time
	if c.tick != "" {
		if at, err = time.Parse(time.RFC3339Nano, c.tick); err != nil {
			return baton.Invalid("--tick", "want an instant as RFC 3339, as baton runs prints it (2026-12-02T03:00:00Z), not %q", c.tick)
		}
		if c.follow {
			return baton.Invalid("--tick", "--follow starts at the newest ended tick: leave --tick out")
		}
	}
	if c.poll <= 0 {
		return baton.Invalid("--poll", "must be positive, got %s", c.poll)
	}
	job := pos[0]
	st, err := c.store.openSchedule(ctx, c.env, "logs")
	if err != nil {
		return err
	}
	defer st.close()
	if _, err := st.schedule.Job(ctx, job); err != nil {
		return err
	}
	if !c.follow {
		r, err := st.schedule.EndedTick(ctx, job, at)
		if err != nil {
			return err
		}
		return c.print(r, false)
	}
	// Each poll lists the job's newest ticks and prints those that ended
	// since the last, oldest first; the first prints the newest ended one
	// only. A tick older than the newest 50 (a backfill far behind) is not
	// followed.
	const window = 50
	var seen map[time.Time]bool
	for {
		ticks, err := st.schedule.Ticks(ctx, job, window)
		if err != nil && ctx.Err() == nil {
			return err
		}
		slices.Reverse(ticks)
		ended := map[time.Time]bool{}
		var news []baton.TickRecord
		for _, t := range ticks {
			if t.State == baton.TickDone {
				ended[t.At] = true
				if !seen[t.At] {
					news = append(news, t)
				}
			}
		}
		if seen == nil && len(news) > 1 {
			news = news[len(news)-1:]
		}
		for _, t := range news {
			if err := c.print(t, true); err != nil {
				return err
			}
		}
		if err == nil {
			seen = ended
		}
		select {
		case <-ctx.Done():
			if e, ok := interrupted(ctx); ok {
				return e
			}
			return ctx.Err()
		case <-time.After(c.poll):
		}
	}
}

// print writes one tick's output: as it is (with a header line when
// following), or as JSON (one line when following).
func (c *LogsCommand) print(r baton.TickRecord, following bool) error {
	if c.json {
		e := logEntry{Job: r.Tick.Job, Tick: baton.FormatTick(r.At), Kind: r.Kind, Outcome: r.Outcome, ExitCode: r.ExitCode,
			Attempt: r.Attempts, Host: r.Host, Ended: r.Ended, Reason: r.Reason, Output: r.Output}
		if !following {
			return printJSON(c.env.Stdout, e)
		}
		return json.NewEncoder(c.env.Stdout).Encode(e)
	}
	var b strings.Builder
	if following {
		fmt.Fprintf(&b, "# %s %s %s\n", r.Tick.Job, baton.FormatTick(r.At), cmp.Or(string(r.Outcome), "-"))
	}
	b.WriteString(r.Output)
	if r.Output != "" && !strings.HasSuffix(r.Output, "\n") {
		b.WriteString("\n")
	}
	_, err := fmt.Fprint(c.env.Stdout, b.String())
	return err
}
