package main

import (
	"context"
	"fmt"
	"time"

	"github.com/batonhq/baton"
)

const backfillHelp = `
Usage: baton backfill --from TIME --to TIME JOB

Records a tick of JOB for each instant of its schedule in [--from, --to]
(RFC 3339 times, e.g. 2026-11-01T00:00:00Z); daemons run them one at a
time, oldest first as far as they can, each waiting for the job's lease.
Instants that already have a tick (run, skipped or pending) are left alone,
so a backfill can be repeated safely. At most --max ticks per call.

Exit status: 0 recorded; 64 usage error; 66 no such job; 69 store unavailable;
70 internal error.

Examples:
  # record the ticks of backup in the first week of November for the daemons
  baton backfill --from 2026-11-01T00:00:00Z --to 2026-11-07T23:59:59Z backup
`

// BackfillCommand is `baton backfill`.
type BackfillCommand struct {
	env      *Env
	store    storeFlags
	from, to string
	max      int
	json     bool
}

// Run records the backfill ticks.
func (c *BackfillCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("backfill", c.env.Stdout, backfillHelp)
	c.store.register(fs)
	fs.StringVar(&c.from, "from", "", "first instant, RFC 3339 (inclusive)")
	fs.StringVar(&c.to, "to", "", "last instant, RFC 3339 (inclusive)")
	fs.IntVar(&c.max, "max", 10000, "most ticks to record")
	fs.BoolVar(&c.json, "json", false, "print {\"added\": N, \"existing\": M} as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return baton.Invalid("arguments", "want one job name, got %d arguments", len(pos))
	}
	from, err := time.Parse(time.RFC3339, c.from)
	if err != nil {
		return baton.Invalid("--from", "%q is not an RFC 3339 time such as 2026-11-01T00:00:00Z", c.from)
	}
	to, err := time.Parse(time.RFC3339, c.to)
	if err != nil {
		return baton.Invalid("--to", "%q is not an RFC 3339 time such as 2026-11-02T00:00:00Z", c.to)
	}
	if to.Before(from) {
		return baton.Invalid("--to", "%s is before --from %s", c.to, c.from)
	}
	if c.max < 1 {
		return baton.Invalid("--max", "must be at least 1, got %d", c.max)
	}
	st, err := c.store.openSchedule(ctx, c.env, "backfill")
	if err != nil {
		return err
	}
	defer st.close()
	added, existing, err := st.schedule.Backfill(ctx, pos[0], from, to, c.max)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.env.Stdout, map[string]int{"added": added, "existing": existing})
	}
	fmt.Fprintf(c.env.Stdout, "backfill of %s: %d ticks added, %d existed already\n", pos[0], added, existing)
	return nil
}
