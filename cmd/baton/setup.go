package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
)

const setupHelp = `
Usage: baton setup local [--user NAME]… [--lock-dir DIR] [--dry-run] [--json]

The one-time set-up, as root, that lets every member of group baton share the
host's lock directory (host scope, baton's default), as the .deb's sysusers.d
and tmpfiles.d entries do (docs/INSTALL.md):

  groupadd --system baton                        the group, if missing
  install -d -m 2770 -g baton DIR                 the directory: owner root,
                                                 group baton, setgid, no
                                                 access for others
  chgrp baton DIR && chmod 2770 DIR               instead, for a directory
                                                 that exists without them
  usermod -aG baton NAME                         each --user not yet in it

DIR is --lock-dir, else $BATON_LOCK_DIR, else /var/lib/baton/locks. Only the
steps still missing are taken: running it again changes nothing. A user
added to the group gets it from their next login. baton run and baton doctor
local name this command when a user cannot lock in the directory.

All input is checked before anything changes: an unknown user, or a DIR
that is a symbolic link (its target is not what was named: name the target)
or not a directory, is refused with nothing done.

Exit status: 0 set up (or nothing to do); 64 usage error (an unknown user,
a DIR that is a link or not a directory); 69 not root, or a step failed (the
message names it).

Examples:
  # the steps still missing, changing nothing (no root needed)
  baton setup local --dry-run

  # as root: the group and the directory, and two users added to the group
  sudo baton setup local --user alice --user bob
`

// SetupCommand is `baton setup local`.
type SetupCommand struct {
	env *Env
}

// stringsFlag is a flag that may be given more than once.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// Run sets up the host's lock directory.
func (c *SetupCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("setup", c.env.Stdout, setupHelp)
	var users stringsFlag
	fs.Var(&users, "user", "add this user to group baton (repeat for several users)")
	lockDir := fs.String("lock-dir", "", "the directory to set up (default $BATON_LOCK_DIR, else "+flock.HostDir+")")
	dryRun := fs.Bool("dry-run", false, "print the steps that are missing, and change nothing (needs no root)")
	asJSON := fs.Bool("json", false, `print JSON: {"dir": …, "group": …, "steps": [{"step": …, "done": …}, …]}`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return baton.Invalid("subject", "missing: baton setup local")
	case pos[0] != "local":
		return baton.Invalid("subject", "%q: want local (the host's lock directory)", pos[0])
	case len(pos) > 1:
		return baton.Invalid("arguments", "unexpected %q after local", pos[1:])
	}
	dir, field := *lockDir, "--lock-dir"
	if dir == "" {
		dir, field = c.env.Getenv("BATON_LOCK_DIR"), "BATON_LOCK_DIR"
	}
	if dir == "" {
		dir, field = flock.HostDir, "--lock-dir"
	}
	steps, err := flock.SetupHost(dir, flock.HostGroup, users, *dryRun)
	if e, ok := err.(*baton.Error); ok && e.Field == "lock-dir" {
		e.Field = field // where the directory was named
	}
	if err != nil {
		return err
	}
	if *asJSON {
		if steps == nil {
			steps = []flock.SetupStep{}
		}
		enc := json.NewEncoder(c.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Dir    string            `json:"dir"`
			Group  string            `json:"group"`
			DryRun bool              `json:"dry_run"`
			Steps  []flock.SetupStep `json:"steps"`
		}{dir, flock.HostGroup, *dryRun, steps})
	}
	if len(steps) == 0 {
		fmt.Fprintf(c.env.Stdout, "%s is set up for group %s: nothing to do\n", dir, flock.HostGroup)
		return nil
	}
	for _, s := range steps {
		if s.Done {
			fmt.Fprintf(c.env.Stdout, "done: %s\n", s.Step)
		} else {
			fmt.Fprintf(c.env.Stdout, "would run: %s\n", s.Step)
		}
	}
	if len(users) > 0 && !*dryRun {
		fmt.Fprintf(c.env.Stdout, "users added to group %s have it from their next login\n", flock.HostGroup)
	}
	return nil
}
