package main

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/runcmd"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/web"
)

const statusHelp = `
Usage: baton status [flags]

Shows in the terminal what the dashboard's first screen shows (see
'baton daemon --http'): a summary, then every job with its schedule and
zone, next tick, last outcome, the age of its last success, paused state
and drift; the running daemons; the outbox's backlog (pending events and
the age of the oldest, dead events, active relays); and the leases held.

A job is OVERDUE when its last success (or, if it never succeeded, its
definition) is older than its expected interval: the tick after the
success came, and the tick after that too, without a success. A paused
job is never overdue.

Versions: the store's schema version (the highest migration applied), and
each daemon's and relay's baton version ('baton version') and each
daemon's feature level: the job semantics it implements. A job whose
definition needs a higher level than some daemon's is left alone by that
daemon; status says which, under the job table (see docs/UPGRADE.md).
"unknown" is a daemon or relay older than the version records.

--json prints {"now", "store", "schema_version", "summary", "jobs",
"daemons", "leases", "outbox"}; each job has next_tick, last_outcome,
last_success, last_success_age, expected_interval, overdue, paused, drift,
feature_level and level_note, and an instance of a scope: host job its host
and host_note (none of that host's daemons is running); each daemon version
and feature_level (not its file's versions, compared in the store: each
job's drift says where they differ, and 'baton jobs --json' lists them);
the leases held or expired (free ones are history: 'baton leases --json'
lists every one); each relay of the outbox version.

A paused job shows no next tick ("-"; none in --json): none is run. A
@reboot job's next tick is "at daemon start" (none in --json).

--check makes the exit status say whether all is well, for monitors (as
doctor pg): 0 ok; 1 a job failing (its last ended tick neither succeeded
nor was skipped) or overdue; 2 the store is unreachable (after --db-wait:
set --db-wait 0 for an answer at once). The report is printed as without
--check.

Exit status: 0 shown; 64 usage error; 69 store unavailable; 70 internal
error. With --check: 0 ok; 1 failing or overdue; 2 store unreachable; 64
usage error; 70 internal error.

Examples:
  # the dashboard's overview in the terminal
  baton status

  # for a monitor: exit 1 when a job fails or is overdue, 2 without a store
  baton status --check --db-wait 0
`

// StatusCommand is `baton status`.
type StatusCommand struct {
	env   *Env
	store storeFlags
	json  bool
	check bool
}

// Run prints the overview.
func (c *StatusCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("status", c.env.Stdout, statusHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON: {\"summary\": {…}, \"jobs\": […], \"daemons\": […], \"leases\": […], \"outbox\": {…}}")
	fs.BoolVar(&c.check, "check", false, "exit 0 when all is well, 1 when a job is failing or overdue, 2 when the store is unreachable (for monitors)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton status takes none, got %q", pos)
	}
	err = c.show(ctx)
	if !c.check {
		return err
	}
	switch baton.ErrorCode(err) {
	case "":
		return nil
	case baton.EUNAVAILABLE:
		runcmd.Status(c.env.Stderr, "status", err)
		return ExitError{statusUnreachable}
	}
	return err
}

// Exit statuses of baton status --check.
const (
	statusFailing     = 1
	statusUnreachable = 2
)

// show prints the overview; with --check, an ExitError when a job is
// failing or overdue.
func (c *StatusCommand) show(ctx context.Context) error {
	st, err := c.store.openSchedule(ctx, c.env, "status")
	if err != nil {
		return err
	}
	defer st.close()
	var ob web.Outbox
	if st.outbox != nil {
		ob = st.outbox
	}
	o, err := web.LoadOverview(ctx, st.schedule, st.leaser, ob, false)
	if err != nil {
		return err
	}
	for i := range o.Jobs {
		if o.Jobs[i].Paused {
			o.Jobs[i].NextTick = time.Time{} // none is run
		}
	}
	if c.json {
		shell := *o
		shell.Jobs, shell.Daemons, shell.Leases = []web.JobStatus{}, []scheduler.DaemonInfo{}, []baton.Lease{}
		err = printJSONLists(c.env.Stdout, &shell, listJSON("jobs", o.Jobs), listJSON("daemons", o.Daemons), listJSON("leases", o.Leases))
	} else {
		err = printStatus(c.env, o)
	}
	if err == nil && c.check && (o.Summary.Failing > 0 || o.Summary.Overdue > 0) {
		return ExitError{statusFailing}
	}
	return err
}

func printStatus(env *Env, o *web.Overview) error {
	w := env.Stdout
	s := o.Summary
	fmt.Fprintf(w, "store: %s %s (scope: %s); schema version %d\n", o.Store.Kind, o.Store.Location, o.Store.Scope, o.SchemaVersion)
	fmt.Fprintf(w, "jobs: %d (%d failing, %d overdue, %d paused, %d drifted); daemons: %d; leases held: %d\n",
		s.Jobs, s.Failing, s.Overdue, s.Paused, s.Drifted, s.Daemons, s.Held)
	if len(o.Jobs) == 0 {
		fmt.Fprintln(w, "\nno jobs in the store (start 'baton daemon --config FILE')")
	} else {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tSCHEDULE\tNEXT TICK\tLAST\tLAST SUCCESS\tSTATE\tDRIFT")
		for _, j := range o.Jobs {
			sched := j.Schedule
			if j.Timezone != "" {
				sched += " (" + j.Timezone + ")"
			}
			next := "-"
			if !j.Paused && isReboot(j.Schedule) {
				next = atDaemonStart
			}
			if !j.NextTick.IsZero() {
				next = j.NextTick.UTC().Format(time.RFC3339)
			}
			success := "never"
			if j.SuccessAge != "" {
				success = j.SuccessAge + " ago"
			}
			if j.Overdue {
				success += " OVERDUE"
			}
			state := "active"
			if j.Paused {
				state = "paused"
				if j.PausedNote != "" {
					state += ": " + j.PausedNote
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.Name, sched, next,
				cmp.Or(string(j.LastOutcome), "-"), success, state, cmp.Or(strings.Join(j.Drift, "; "), "-"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, j := range o.Jobs {
			if j.LevelNote != "" {
				fmt.Fprintf(w, "%s: %s\n", j.Name, j.LevelNote)
			}
			if j.HostNote != "" {
				fmt.Fprintf(w, "%s: %s\n", j.Name, j.HostNote)
			}
		}
	}
	if len(o.Daemons) == 0 {
		fmt.Fprintln(w, "\nno daemon seen in the last 2 minutes: nothing runs the schedule")
	} else {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DAEMON\tHOST\tPID\tCONFIG\tVERSION\tLEVEL\tSTARTED\tLAST SEEN")
		for _, d := range o.Daemons {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s ago\n", d.ID, d.Host, d.PID, d.Config, cmp.Or(d.Version, "unknown"),
				d.FeatureLevel, stamp(d.Started), o.Now.Sub(d.Seen).Round(time.Second))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	switch {
	case o.Outbox != nil:
		ob := o.Outbox
		oldest := ""
		if ob.Pending > 0 {
			oldest = fmt.Sprintf(" (oldest %s)", time.Duration(ob.OldestAge).Round(time.Second))
		}
		fmt.Fprintf(w, "\noutbox: %d pending%s, %d dead, %d relays active\n", ob.Pending, oldest, ob.Dead, ob.RelaysActive)
		for _, r := range ob.Relays {
			if r.Active {
				fmt.Fprintf(w, "  relay %s (%s, pid %d): version %s\n", r.ID, r.Host, r.PID, cmp.Or(r.Version, "unknown"))
			}
		}
		if ob.Pending > 0 && ob.RelaysActive == 0 {
			fmt.Fprintln(w, "  no relay is active: start 'baton relay' or 'baton daemon --relay-sink'")
		}
		if ob.Dead > 0 {
			fmt.Fprintln(w, "  dead events wait for 'baton outbox retry' or 'baton outbox skip' ('baton outbox dead' lists them)")
		}
	case o.OutboxError != "":
		fmt.Fprintf(w, "\noutbox: could not be read: %s\n", o.OutboxError)
	}
	if v := fleetVersions(o); len(v) > 1 {
		fmt.Fprintf(w, "\nmixed versions: %s\n", strings.Join(v, "; "))
	}
	var held []baton.Lease
	for _, l := range o.Leases {
		if l.State == baton.LeaseHeld {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		fmt.Fprintln(w, "\nno lease held ('baton leases' lists them all)")
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tTOKEN\tHOLDER\tACQUIRED\tUNTIL")
	for _, l := range held {
		holder := "-"
		if l.Holder.Host != "" || l.Holder.PID != 0 {
			holder = fmt.Sprintf("%s:%d", l.Holder.Host, l.Holder.PID)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", l.Job, l.Token, holder, stamp(l.Holder.AcquiredAt), stamp(l.Holder.Until))
	}
	return tw.Flush()
}

// fleetVersions lists the versions the running daemons and active relays
// run, each with who runs it, in order of first appearance.
func fleetVersions(o *web.Overview) []string {
	var order []string
	count := map[string][2]int{} // daemons, relays
	add := func(v string, i int) {
		v = cmp.Or(v, "unknown")
		c, ok := count[v]
		if !ok {
			order = append(order, v)
		}
		c[i]++
		count[v] = c
	}
	for _, d := range o.Daemons {
		add(d.Version, 0)
	}
	if o.Outbox != nil {
		for _, r := range o.Outbox.Relays {
			if r.Active {
				add(r.Version, 1)
			}
		}
	}
	var out []string
	for _, v := range order {
		var who []string
		for i, noun := range []string{"daemon", "relay"} {
			switch n := count[v][i]; n {
			case 0:
			case 1:
				who = append(who, "1 "+noun)
			default:
				who = append(who, fmt.Sprintf("%d %ss", n, noun))
			}
		}
		out = append(out, v+" ("+strings.Join(who, ", ")+")")
	}
	return out
}
