package main

import (
	"context"
	"fmt"
	"strings"
	"time"
	// Zones are read from the system first; the embedded copy (about
	// 450 KB) is the fallback for hosts without one (scratch and distroless
	// images), where a schedule in a zone must still fire at the right time
	// rather than fail to load its zone.
	_ "time/tzdata"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/cron"
)

const nextHelp = `
Usage: baton next SCHEDULE [flags]

Prints the next fire times of a cron schedule, one a line: in the zone, then
in UTC. Quote the schedule: baton next '30 2 * * *' --tz Europe/Berlin

SCHEDULE is 5 fields (minute hour day-of-month month day-of-week), 6 with a
leading second, a macro (@yearly @annually @monthly @weekly @daily @midnight
@hourly), @every DURATION (at least 1s; fires at whole multiples of it
since the Unix epoch, so DST never affects it), or @reboot (no instants: it
fires each time a daemon starts, on each host; --json prints []). Fields
take lists (1,15), ranges (1-5), steps (*/15, 0-30/10), names (JAN-DEC,
SUN-SAT) and 7 for Sunday. When both day fields are restricted a day
matches on either, as in Vixie cron: '0 0 13 * FRI' fires on every 13th and
every Friday.

DST: clocks that spring forward skip wall times, and clocks that fall back
repeat them. The policies say what a fixed-time schedule does then:

  --dst-gap shift    (default) a skipped wall time fires at the first instant
                     after the gap; all skipped times of one gap make one
                     fire there
  --dst-gap skip     a skipped wall time does not fire that day
  --dst-repeat once  (default) a repeated wall time fires at its first
                     occurrence only
  --dst-repeat both  a repeated wall time fires at both occurrences

For example, in Europe/Berlin 02:00 becomes 03:00 on 2026-03-29 and 03:00
becomes 02:00 on 2026-10-25. '30 2 * * *' then fires:

  spring, shift: 2026-03-29T03:00:00+02:00  2026-03-29T01:00:00Z
  spring, skip:  not on 2026-03-29; next 2026-03-30T02:30:00+02:00
  fall, once:    2026-10-25T02:30:00+02:00  2026-10-25T00:30:00Z
  fall, both:    that, and 2026-10-25T02:30:00+01:00  2026-10-25T01:30:00Z

A wildcard schedule, whose minute or hour field starts with '*' ('*/20 * * * *',
'0 * * * *', '*/15 2 * * *', @hourly), runs by real time whatever the flags,
as in Vixie cron and cronie: at both occurrences of a repeated wall time, and
not for wall times in a gap. A range ('0 1-3 * * *') is a fixed time.

  baton next '*/20 * * * *' --tz Europe/Berlin --from 2026-10-25T00:30:00Z -n 4

Exit status: 0 printed; 64 usage error (the message names the field at fault).

Examples:
  # the next 5 fire times of 02:30 every day in Berlin
  baton next '30 2 * * *' --tz Europe/Berlin

  # every 15 minutes on weekdays, as JSON
  baton next '*/15 * * * MON-FRI' --json

  # the 4 fires of a wildcard schedule across the fall-back of 2026
  baton next '*/20 * * * *' --tz Europe/Berlin --from 2026-10-25T00:30:00Z -n 4
`

// atDaemonStart is a @reboot job's next tick, as the listings show it: no
// clock says when a daemon starts.
const atDaemonStart = "at daemon start"

// isReboot says whether schedule is @reboot.
func isReboot(schedule string) bool {
	s, err := cron.Parse(schedule)
	return err == nil && s.Reboot()
}

// NextCommand is `baton next`.
type NextCommand struct {
	env *Env
}

// nextFire is one fire time in --json output.
type nextFire struct {
	Local string `json:"local"`
	UTC   string `json:"utc"`
}

// Run prints the next fire times.
func (c *NextCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("next", c.env.Stdout, nextHelp)
	tz := fs.String("tz", "UTC", "time zone of the schedule: an IANA name such as Europe/Berlin, UTC, or Local (this host's); UTC by default, as for jobs")
	n := fs.Int("n", 5, "how many fire times to print (1-1000)")
	from := fs.String("from", "", "print fire times after this RFC 3339 time (default now)")
	gap := fs.String("dst-gap", "shift", "wall times skipped by DST: shift or skip")
	repeat := fs.String("dst-repeat", "once", "wall times repeated by DST: once or both")
	asJSON := fs.Bool("json", false, `print JSON: [{"local": …, "utc": …}, …]`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return baton.Invalid("schedule", "missing; quote it, as in baton next '30 2 * * *'")
	case len(pos) > 1:
		return baton.Invalid("schedule", "want one argument, got %d (%q); quote the schedule, as in baton next '30 2 * * *'", len(pos), pos)
	}
	sched, err := cron.Parse(pos[0])
	if err != nil {
		return err
	}
	if sched.Reboot() {
		// No clock says when a daemon starts: there are no instants to list.
		if *asJSON {
			return printJSON(c.env.Stdout, []nextFire{})
		}
		fmt.Fprintln(c.env.Stdout, atDaemonStart+": once each time a daemon starts, on each host (never on a reload)")
		return nil
	}
	if *tz == "" {
		return baton.Invalid("--tz", "empty; want an IANA zone such as Europe/Berlin, UTC, or Local")
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil {
		return baton.Invalid("--tz", "unknown time zone %q; want an IANA zone such as Europe/Berlin, UTC, or Local", *tz)
	}
	if *n < 1 || *n > 1000 {
		return baton.Invalid("-n", "%d is out of range 1-1000", *n)
	}
	after := time.Now()
	if *from != "" {
		if after, err = time.Parse(time.RFC3339Nano, *from); err != nil {
			return baton.Invalid("--from", "%q is not an RFC 3339 time such as 2026-03-29T00:00:00+01:00", *from)
		}
	}
	var dst cron.DST
	switch strings.ToLower(*gap) {
	case "shift":
		dst.Gap = cron.GapShift
	case "skip":
		dst.Gap = cron.GapSkip
	default:
		return baton.Invalid("--dst-gap", "%q: want shift or skip", *gap)
	}
	switch strings.ToLower(*repeat) {
	case "once":
		dst.Repeat = cron.RepeatOnce
	case "both":
		dst.Repeat = cron.RepeatBoth
	default:
		return baton.Invalid("--dst-repeat", "%q: want once or both", *repeat)
	}

	fires := []nextFire{}
	for range *n {
		next := sched.Next(after, loc, dst)
		if next.IsZero() {
			break
		}
		fires = append(fires, nextFire{Local: next.In(loc).Format(time.RFC3339Nano), UTC: next.UTC().Format(time.RFC3339Nano)})
		after = next
	}
	if *asJSON {
		return printJSON(c.env.Stdout, fires)
	}
	for _, f := range fires {
		fmt.Fprintf(c.env.Stdout, "%s  %s\n", f.Local, f.UTC)
	}
	if len(fires) < *n {
		fmt.Fprintf(c.env.Stderr, "baton next: no more fire times within 10 years\n")
	}
	return nil
}
