package main

import (
	"context"
	"fmt"
	"time"

	"github.com/batonhq/baton"
)

const triggerHelp = `
Usage: baton trigger [flags] JOB

Records a manual tick of JOB at the store's current time; the next daemon
to look claims it and runs it under the job's lease and overlap policy,
like a scheduled tick. Prints the tick and its idempotency key.

Exit status: 0 recorded; 64 usage error; 66 no such job; 69 store unavailable;
70 internal error.

Examples:
  # run backup now, through the daemons
  baton trigger backup

  # the same, printing the tick as JSON
  baton trigger --json backup
`

// TriggerCommand is `baton trigger`.
type TriggerCommand struct {
	env   *Env
	store storeFlags
	json  bool
}

// Run records the manual tick.
func (c *TriggerCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("trigger", c.env.Stdout, triggerHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print the tick as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return baton.Invalid("arguments", "want one job name, got %d arguments", len(pos))
	}
	st, err := c.store.openSchedule(ctx, c.env, "trigger")
	if err != nil {
		return err
	}
	defer st.close()
	tick, err := st.schedule.Trigger(ctx, pos[0])
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			baton.Tick
			Key string `json:"idempotency_key"`
		}{tick, tick.IdempotencyKey()})
	}
	fmt.Fprintf(c.env.Stdout, "triggered %s at %s (idempotency key %s)\n", tick.Job, tick.At.Format(time.RFC3339Nano), tick.IdempotencyKey())
	return nil
}
