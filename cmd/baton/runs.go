package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

const runsHelp = `
Usage: baton runs [flags] [JOB]

Lists recorded ticks, newest first, of one job or of all: the tick's
instant, kind (scheduled, manual, backfill), state, its one outcome, the
attempts made, the host and fencing token of the last attempt, its exit
code and why (for outcomes other than succeeded and failed). --attempts
lists each attempt and, indented under them, the tick's output tail (the
last 4 KiB kept, control characters shown escaped; baton logs prints it
as written); --json always has the output tail.

Exit status: 0 listed; 64 usage error; 66 no such job; 69 store unavailable;
70 internal error.

Examples:
  # the last 50 ticks of every job
  baton runs

  # the last 10 ticks of backup, each with its attempts
  baton runs --limit 10 --attempts backup
`

// RunsCommand is `baton runs`.
type RunsCommand struct {
	env      *Env
	store    storeFlags
	json     bool
	limit    int
	attempts bool
}

type runRow struct {
	baton.TickRecord
	AttemptList []scheduler.Attempt `json:"attempt_list,omitempty"`
}

// Run lists the ticks.
func (c *RunsCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("runs", c.env.Stdout, runsHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON: {\"ticks\": […]}")
	fs.IntVar(&c.limit, "limit", 50, "most ticks to list")
	fs.BoolVar(&c.attempts, "attempts", false, "list each tick's attempts too")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return baton.Invalid("arguments", "want at most one job name, got %q", pos)
	}
	if c.limit < 1 {
		return baton.Invalid("--limit", "must be at least 1, got %d", c.limit)
	}
	job := ""
	if len(pos) == 1 {
		job = pos[0]
	}
	st, err := c.store.openSchedule(ctx, c.env, "runs")
	if err != nil {
		return err
	}
	defer st.close()
	if job != "" {
		if _, err := st.schedule.Job(ctx, job); err != nil {
			return err
		}
	}
	ticks, err := st.schedule.Ticks(ctx, job, c.limit)
	if err != nil {
		return err
	}
	rows := []runRow{}
	for _, t := range ticks {
		r := runRow{TickRecord: t}
		if c.attempts {
			if r.AttemptList, err = st.schedule.Attempts(ctx, t.Tick.Job, t.At); err != nil {
				return err
			}
		}
		rows = append(rows, r)
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			Ticks []runRow `json:"ticks"`
		}{rows})
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.env.Stdout, "no ticks recorded")
		return nil
	}
	var table strings.Builder
	var outputs []string
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tTICK\tKIND\tSTATE\tOUTCOME\tATTEMPTS\tHOST\tTOKEN\tEXIT\tDURATION\tREASON")
	for _, r := range rows {
		exit, dur := "-", "-"
		if r.ExitCode != nil {
			exit = fmt.Sprint(*r.ExitCode)
		}
		if !r.Started.IsZero() && !r.Ended.IsZero() {
			dur = r.Ended.Sub(r.Started).Round(time.Millisecond).String()
		}
		token := "-"
		if r.Token > 0 {
			token = fmt.Sprint(r.Token)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Tick.Job, baton.FormatTick(r.At), r.Kind,
			r.State, cmp.Or(string(r.Outcome), "-"), r.Attempts, cmp.Or(r.Host, "-"), token, exit, dur,
			cmp.Or(strings.ReplaceAll(r.Reason, "\n", " "), "-"))
		for _, a := range r.AttemptList {
			code := "-"
			if a.ExitCode != nil {
				code = fmt.Sprint(*a.ExitCode)
			}
			fmt.Fprintf(tw, "\t  attempt %d\t\t\t%s\t\t%s\t%d\t%s\t\t%s\n", a.Attempt, cmp.Or(string(a.Outcome), "running"),
				a.Host, a.Token, code, cmp.Or(a.Reason, "-"))
		}
		if c.attempts && r.Output != "" {
			// A row of empty cells holds the output's place: lines of
			// its own would cut the table's columns into blocks aligned
			// apart.
			fmt.Fprintf(tw, "\t\x00%d\t\t\t\t\t\t\t\t\t\n", len(outputs))
			outputs = append(outputs, r.Output)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeOutputs(c.env.Stdout, table.String(), outputs)
}

// writeOutputs writes table with each output tail in place of the row
// that holds its place, indented under the TICK column, its control
// characters shown escaped (a job's output never drives the terminal).
func writeOutputs(w io.Writer, table string, outputs []string) error {
	var b strings.Builder
	for _, line := range strings.SplitAfter(table, "\n") {
		at := strings.IndexByte(line, 0)
		if at < 0 {
			b.WriteString(line)
			continue
		}
		i, _ := strconv.Atoi(strings.TrimSpace(line[at+1:]))
		out := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(strings.TrimSuffix(outputs[i], "\n"))
		for _, l := range strings.Split(out, "\n") {
			b.WriteString(strings.Repeat(" ", utf8.RuneCountInString(line[:at])+4) + visible(l, "") + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
