package main

import (
	"context"
	"io"
	"slices"

	"github.com/batonhq/baton/internal/runcmd"
	"github.com/batonhq/baton/outbox"
)

// RunCommand is `baton run`. Package runcmd has the run itself, and runs
// the common case (the local store) from an early init before this
// package's dependencies initialise; what it leaves, and every in-process
// call of Main, comes here, with the store that storeFlags open.
type RunCommand struct {
	env   *Env
	store storeFlags
	opts  runcmd.Options
}

// Run parses args, takes the lease and supervises the command.
func (c *RunCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("run", c.env.Stdout, runcmd.Help)
	c.store.register(fs)
	c.opts.Register(fs.FlagSet)

	// Everything after the first "--" is the command, never flags.
	sep := slices.Index(args, "--")
	var command []string
	if sep >= 0 {
		command = args[sep+1:]
		args = args[:sep]
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := c.opts.Validate(pos, sep, command); err != nil {
		return err
	}
	var notifier outbox.Sink
	if c.opts.Notify != "" {
		// A bad sink is a usage error before the run, not news after it.
		if notifier, err = openNotifySink(c.opts.Notify); err != nil {
			return err
		}
		if c, ok := notifier.(io.Closer); ok {
			defer c.Close()
		}
	}
	streams := runcmd.Streams{Stdin: c.env.Stdin, Stdout: c.env.Stdout, Stderr: c.env.Stderr, Started: c.env.Started}
	err = c.opts.Run(ctx, pos[0], command, streams, func(ctx context.Context) (*runcmd.Store, error) {
		st, err := c.store.open(ctx, c.env, "run", true)
		if err != nil {
			return nil, err
		}
		return &runcmd.Store{
			Leaser: st.leaser, Close: st.close, Verbose: c.store.verbose,
			Environ: c.store.jobEnviron(c.env, c.opts.Password),
			Retry: func(ctx context.Context, what string, try func() error) error {
				return c.store.retryLease(ctx, c.env, st, what, try)
			},
		}, nil
	})
	if notifier != nil {
		c.notify(context.WithoutCancel(ctx), notifier, c.opts.Last())
	}
	return err
}
