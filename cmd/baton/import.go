package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/crontab"
	"github.com/batonhq/baton/jobfile"
)

const importHelp = `
Usage: baton import crontab [flags] FILE…

Prints a job file on standard output that runs the entries of the crontabs
FILE… (- for standard input) as cron runs them, in their order, one job per
entry. Warnings go to standard error, and into the file as comments.

Which crontab a FILE is, as cron reads it:

  /etc/crontab, /etc/cron.d/NAME   a system crontab: a user field after the
                                   schedule says whom each line runs as
  /var/spool/cron/crontabs/NAME,   NAME's crontab
  /var/spool/cron/NAME
  any other FILE, or -             the crontab of --user (default: the user
                                   running baton)

--system reads every FILE as a system crontab; --user NAME every FILE as
NAME's. A file that cron skips there (NAME~, NAME.rpmsave, .NAME) is
skipped, with a warning.

What each line becomes:

  MIN HOUR DOM MON DOW, @daily …   schedule: (read as cron reads it; see
  @reboot                          docs/CRON.md for @reboot and DST)
  the command before a %           command: (run as SHELL -c, as cron does)
  the text after it                stdin: (% made newlines; \% is %)
  the line's user, or the owner    user: (HOME, LOGNAME and USER set by it),
                                   dir: HOME (cron runs a command in HOME)
  SHELL=                           shell: and env SHELL (default /bin/sh)
  CRON_TZ=                         timezone: (default: --timezone, the
                                   zone cron read the crontab in)
  PATH= and any other NAME=VALUE   env: (PATH default
                                   /usr/bin:/bin:/usr/sbin:/sbin)
  MAILTO=addr[,addr…]              notify: {on: [output]} through the file's
                                   sink exec:baton notify mail --to addr;
                                   MAILTO="" notifies nothing
  no MAILTO                        cron mailed the output to the user on this
                                   host; baton keeps it with each run
                                   (baton logs JOB): a warning says so
  RANDOM_DELAY=N (cronie)          jitter: Nm
  # comments                       kept, above the next job

Settings that every job shares go to the file's defaults:. Each job is named
from its command and a hash of its user, schedule and command, such as
backup-full-9f756cdf, so the same crontab imported on every host of a fleet
gives the same names, and the fleet runs each once.

By default a job runs once per tick across all daemons that share the store:
where cron ran a line on every host, baton runs it on one. --scope host
runs every job on every host (cron's way), once per host per tick.

Exit status: 0 printed; 64 usage error (a flag, a --user unknown here); 65
a line cannot be imported (each such line is named FILE:LINE on standard
error: a sixth schedule field, which would be seconds, a bad schedule, a
malformed environment line, a line's user unknown on this host, a CRON_TZ
zone unknown here); 66 a FILE cannot be read.

Examples:
  # your own crontab, checked, then run by a daemon
  crontab -l | baton import crontab - > jobs.yaml && baton validate jobs.yaml

  # the system crontabs, each job run on every host
  baton import crontab --scope host /etc/crontab /etc/cron.d/* > system.yaml

  # alice's crontab, read by root from cron's spool
  baton import crontab /var/spool/cron/crontabs/alice > alice.yaml
`

// ImportCommand is `baton import crontab`.
type ImportCommand struct {
	env *Env
}

// maxCrontab bounds what is read of one crontab: a job file may hold no
// more.
const maxCrontab = jobfile.MaxFileSize

// Run prints the job file of the crontabs named in args.
func (c *ImportCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("import", c.env.Stdout, importHelp)
	system := fs.Bool("system", false, "read every FILE as a system crontab (/etc/crontab, /etc/cron.d/*): a user field after the schedule")
	owner := fs.String("user", "", "read every FILE as the crontab of user `NAME` (default: by its path, else the user running baton)")
	scope := fs.String("scope", "", "`SCOPE` of every job: fleet (once per tick across the daemons sharing the store) or host (on every host, as cron) (default fleet)")
	tz := fs.String("timezone", "", "the `ZONE` of the lines without CRON_TZ (default: this host's, which cron read them in)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || pos[0] != "crontab":
		return baton.Invalid("WHAT", "want baton import crontab FILE…")
	case len(pos) == 1:
		return baton.Invalid("FILE", "missing; name the crontab files, or - for standard input")
	case *system && *owner != "":
		return baton.Invalid("--user", "a system crontab names a user on each line; give --system or --user, not both")
	case *scope != "" && *scope != "fleet" && *scope != "host":
		return baton.Invalid("--scope", "%q: want fleet or host", *scope)
	}
	o := crontab.Options{Zone: *tz, Lookup: lookupAccount}
	if *scope == "host" {
		o.Scope = "host"
	}
	if o.Zone == "" {
		o.Zone = cmp.Or(hostZone(time.Now()), "UTC")
	} else if _, err := time.LoadLocation(o.Zone); err != nil || o.Zone == "Local" {
		return baton.Invalid("--timezone", "unknown time zone %q; want an IANA zone such as Europe/Berlin", o.Zone)
	}
	if *owner != "" {
		if _, err := lookupAccount(*owner); err != nil {
			return baton.Invalid("--user", "user %q %v", *owner, err)
		}
	}
	var srcs []crontab.Source
	var problems []string
	stdinRead := false
	for _, file := range pos[1:] {
		if skip, why := cronSkips(file); why != "" {
			fmt.Fprintf(c.env.Stderr, "baton import: warning: %s: %s\n", file, why)
			if skip {
				continue
			}
		}
		data, name, err := c.read(file, &stdinRead)
		if err != nil {
			return err
		}
		sys, who := *system, *owner
		if !sys && who == "" {
			sys, who = cronKind(file)
		}
		if !sys && who == "" {
			u, err := user.Current()
			if err != nil {
				return baton.Invalid("--user", "cannot tell who runs baton (%v); say whose crontab it is with --user NAME", err)
			}
			who = u.Username
		}
		tab, err := crontab.Parse(name, data, sys)
		if err != nil {
			problems = append(problems, crontabProblems(err)...)
			continue
		}
		if sys {
			who = ""
		}
		srcs = append(srcs, crontab.Source{Name: name, Tab: tab, User: who})
	}
	if len(problems) == 0 {
		out, warns, err := crontab.JobFile(srcs, o)
		if err != nil {
			problems = crontabProblems(err)
		} else {
			for _, w := range warns {
				fmt.Fprintf(c.env.Stderr, "baton import: warning: %s\n", w)
			}
			if *scope == "" && len(srcs) > 0 {
				fmt.Fprintf(c.env.Stderr, "baton import: warning: each job runs once per tick across the daemons that share the store, "+
					"where cron ran a line on every host whose crontab had it; --scope host runs every job on every host\n")
			}
			_, err := c.env.Stdout.Write(out)
			return err
		}
	}
	for _, p := range problems {
		fmt.Fprintf(c.env.Stderr, "baton import: %s\n", p)
	}
	return ExitError{Code: 65}
}

// read returns the crontab at file (- for standard input, once) and the
// name to call it by.
func (c *ImportCommand) read(file string, stdinRead *bool) ([]byte, string, error) {
	var r io.Reader
	name := file
	if file == "-" {
		if *stdinRead {
			return nil, "", baton.Invalid("FILE", "- (standard input) is named twice")
		}
		*stdinRead, r, name = true, c.env.Stdin, "stdin"
	} else {
		f, err := os.Open(file)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, "", baton.Wrap(baton.ENOTFOUND, err, "cannot read crontab %s", file)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxCrontab+1))
	if err != nil {
		return nil, "", baton.Wrap(baton.ENOTFOUND, err, "cannot read crontab %s", name)
	}
	if len(data) > maxCrontab {
		return nil, "", baton.Errorf(baton.ENOTFOUND, "crontab %s is more than %d bytes, more than a job file may hold", name, maxCrontab)
	}
	return data, name, nil
}

// cronKind tells, from a crontab's path, what cron reads it as: a system
// crontab (/etc/crontab, /etc/cron.d/*), or a user's crontab in cron's
// spool, named after its owner. It returns neither for other paths.
func cronKind(file string) (system bool, owner string) {
	if file == "-" {
		return false, ""
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return false, ""
	}
	switch dir := filepath.Dir(abs); {
	case abs == "/etc/crontab", dir == "/etc/cron.d":
		return true, ""
	case dir == "/var/spool/cron/crontabs", dir == "/var/spool/cron", dir == "/var/spool/cron/tabs":
		return false, filepath.Base(abs)
	}
	return false, ""
}

// cronSkips tells whether cron skips the file in /etc/cron.d (or its
// spool) at file, as cronie's not_a_crontab does, with why; and, for a
// name that cronie reads and Debian's cron does not (one with a character
// other than letters, digits, _ and -), why it is imported anyway.
func cronSkips(file string) (bool, string) {
	if file == "-" {
		return false, ""
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return false, ""
	}
	if dir := filepath.Dir(abs); dir != "/etc/cron.d" && !strings.HasPrefix(dir, "/var/spool/cron") {
		return false, ""
	}
	base := filepath.Base(abs)
	for _, suffix := range []string{"~", ".rpmsave", ".rpmorig", ".rpmnew"} {
		if strings.HasSuffix(base, suffix) {
			return true, "cron ignores a file whose name ends with " + suffix + "; skipped"
		}
	}
	if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "#") {
		return true, "cron ignores a file whose name starts with " + base[:1] + "; skipped"
	}
	if strings.HasPrefix(abs, "/etc/cron.d/") && strings.ContainsFunc(base, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) {
		return false, "Debian's cron ignores a name with characters other than letters, digits, _ and - (cronie reads it); imported"
	}
	return false, ""
}

// lookupAccount finds a user of this host as cron does (getpwnam).
func lookupAccount(name string) (crontab.Account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return crontab.Account{}, errors.New("does not exist on this host")
		}
		return crontab.Account{}, err
	}
	return crontab.Account{Name: u.Username, Home: u.HomeDir}, nil
}

// crontabProblems are the lines of a *crontab.Error, each FILE:LINE:
// MESSAGE.
func crontabProblems(err error) []string {
	var e *crontab.Error
	if errors.As(err, &e) {
		return strings.Split(e.Error(), "\n")
	}
	return []string{err.Error()}
}
