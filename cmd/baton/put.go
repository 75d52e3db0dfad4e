package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
)

const putHelp = `
Usage: baton put --resource NAME --dest PATH [flags] < DATA

Writes stdin to PATH atomically (a temporary file in the same directory,
fsync, rename, fsync of the directory), but only if this run's fencing token
is not below the highest token that already wrote RESOURCE. A job whose
lease was taken over while it was paused, and which wakes up to write its
result late, is refused instead of overwriting the newer run's result:

  baton run daily-report -- sh -c 'make-report | baton put --resource daily-report --dest /srv/report.csv'

The token comes from BATON_FENCING_TOKEN (set by baton run) or --token. The
high-water marks live in the local store's lock directory (<resource>.fence),
so every writer of a resource must use the same --lock-dir and --scope.

Exit status: 0 written; 77 fenced: nothing written; 64 usage error (no token,
bad resource); 69 the file or the store could not be written; 70 internal error.
`

// PutCommand is `baton put`.
type PutCommand struct {
	env      *Env
	store    storeFlags
	resource string
	dest     string
	token    string
	mode     string
	timeout  time.Duration
}

// Run writes stdin to the destination through the fence.
func (c *PutCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("put", c.env.Stdout, putHelp)
	c.store.register(fs)
	fs.StringVar(&c.resource, "resource", "", "the fenced resource's `NAME` (default: the file name of --dest)")
	fs.StringVar(&c.dest, "dest", "", "the file to write (required)")
	fs.StringVar(&c.token, "token", "", "fencing token (default $BATON_FENCING_TOKEN)")
	fs.StringVar(&c.mode, "mode", "0644", "permissions of the written file, octal")
	durationFlag(fs, &c.timeout, "timeout", 30*time.Second, "wait at most `DURATION` for other writers of the resource")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton put reads its data from stdin and takes no arguments, got %q", pos)
	}
	if c.dest == "" {
		return baton.Invalid("--dest", "is required")
	}
	if c.resource == "" {
		c.resource = filepath.Base(c.dest)
	}
	if err := baton.ValidateResource(c.resource); err != nil {
		return err
	}
	raw, field := c.token, "--token"
	if raw == "" {
		raw, field = c.env.Getenv("BATON_FENCING_TOKEN"), "BATON_FENCING_TOKEN"
	}
	token, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || token < 1 {
		return baton.Invalid(field, "%q is not a fencing token (want an integer >= 1; baton run sets BATON_FENCING_TOKEN)", raw)
	}
	mode, err := strconv.ParseUint(c.mode, 8, 32)
	if err != nil || mode > 0o7777 {
		return baton.Invalid("--mode", "%q is not an octal file mode", c.mode)
	}
	dir, scope, explicit, err := c.store.local(c.env)
	if err != nil {
		return err
	}
	l, err := flock.Open(dir, scope, explicit)
	if err != nil {
		return err
	}

	// The data goes to disk before the fence is taken, so that the fence is
	// held only for the rename.
	dest, err := filepath.Abs(c.dest)
	if err != nil {
		return baton.Invalid("--dest", "%v", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".baton-*")
	if err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "creating a temporary file beside %s", dest)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing left to remove
	if _, err := io.Copy(tmp, c.env.Stdin); err != nil {
		tmp.Close()
		return baton.Wrap(baton.EUNAVAILABLE, err, "writing %s", tmp.Name())
	}
	if err := tmp.Chmod(os.FileMode(mode)); err != nil {
		tmp.Close()
		return baton.Wrap(baton.EUNAVAILABLE, err, "setting the mode of %s", tmp.Name())
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return baton.Wrap(baton.EUNAVAILABLE, err, "syncing %s", tmp.Name())
	}
	if err := tmp.Close(); err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "closing %s", tmp.Name())
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err = l.HighWater().Write(ctx, c.resource, token, func() error {
		if err := os.Rename(tmp.Name(), dest); err != nil {
			return baton.Wrap(baton.EUNAVAILABLE, err, "renaming into %s", dest)
		}
		return syncDir(filepath.Dir(dest))
	})
	if baton.ErrorCode(err) == baton.EFENCED {
		fmt.Fprintf(c.env.Stderr, "baton put: %v; %s was not written\n", err, dest)
		return ExitError{baton.ExitFenced}
	}
	return err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "opening %s", dir)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "syncing %s", dir)
	}
	return nil
}
