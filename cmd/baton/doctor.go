package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
)

const doctorHelp = `
Usage: baton doctor SUBJECT [flags]

Checks what baton depends on and says what to fix, without creating or
changing anything. Each finding is one line: its level (ok, warn or error),
the check's name, and a message that says what to do.

Subjects:
  local   the lock directory that baton run would use with the same flags
          and environment (--lock-dir, --scope, $BATON_LOCK_DIR, $BATON_SCOPE)

Checks of doctor local:
  exists             the directory exists; if not, whether baton run would
                     create it (user scope, a directory named explicitly, or
                     as root) and how to create it now
  fs-type            the file system, by statfs(2): warns on NFS, SMB/CIFS and
                     FUSE (flock(2) there is emulated or lost on reconnect) and
                     on tmpfs/ramfs (lock files, and so fencing tokens, do not
                     survive a reboot); ext4, xfs, btrfs and the like are ok
  group              host scope: the group baton exists, so the directory can
                     be shared by every user that runs baton
  owner              the owner and group: group baton in host scope, the
                     current user in user scope
  mode               host scope wants 2770: setgid (lock files inherit the
                     group), group rwx, no access for others; warns when
                     world-writable without the sticky bit. User scope wants
                     no write access for others
  access             the current user can create files there (access(2) W_OK|X_OK)
  protected-regular  fs.protected_regular: when set and the directory is
                     sticky and world-writable (like /tmp), O_CREAT opens of
                     other users' lock files fail (flock(1), 9>FILE)
  tmp-cleaner        the directory is not under /tmp or /var/tmp, where
                     systemd-tmpfiles or tmpreaper delete old files, and with
                     a lock file its fencing token (/var/lib is safe)
  lock-files         the <job>.lock files: their count; errors for entries
                     that are not regular files or hold unreadable state; in
                     host scope, warnings for files that are not
                     group-read-writable or not of the directory's group

For host scope it then prints a tmpfiles.d(5) line that creates the directory
at boot (put it in /etc/tmpfiles.d/baton.conf) and the equivalent install(1)
command; user scope needs neither, as baton run creates its own directory.

doctor local checks the local store even when --db or $BATON_DB is set, and
then says that baton run would use PostgreSQL instead.

Exit status: 0 healthy, or only warnings; 1 problems found (an error-level
finding); 64 usage error.
`

// DoctorCommand is `baton doctor SUBJECT`.
type DoctorCommand struct {
	env   *Env
	store storeFlags
	json  bool
}

// doctorSubjects are what baton doctor can check. All share the command's
// flags, so a subject adds an entry here and a method, nothing else.
var doctorSubjects = []struct {
	name  string
	check func(*DoctorCommand, context.Context) error
}{
	{"local", (*DoctorCommand).local},
}

// Run checks the subject named by the first argument.
func (c *DoctorCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("doctor", c.env.Stdout, doctorHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, `print JSON: {"dir", "scope", "findings": [{"level", "check", "message"}], "tmpfiles", "install"}`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range doctorSubjects {
		names = append(names, s.name)
	}
	want := strings.Join(names, " or ")
	switch {
	case len(pos) == 0:
		return baton.Invalid("SUBJECT", "missing: want %s, as in baton doctor %s", want, names[0])
	case len(pos) > 1:
		return baton.Invalid("SUBJECT", "want one, got %q", pos)
	}
	for _, s := range doctorSubjects {
		if s.name == pos[0] {
			return s.check(c, ctx)
		}
	}
	return baton.Invalid("SUBJECT", "unknown subject %q: want %s", pos[0], want)
}

// local checks the local store's lock directory.
func (c *DoctorCommand) local(ctx context.Context) error {
	dir, scope, explicit, err := c.store.local(c.env)
	if err != nil {
		return err
	}
	r := flock.CheckDir(dir, scope, explicit)
	if c.store.db != "" || c.env.Getenv("BATON_DB") != "" {
		source := "$BATON_DB"
		if c.store.db != "" {
			source = "--db"
		}
		r.Findings = append([]flock.Finding{{Level: flock.LevelWarn, Check: "store",
			Message: source + " is set, so baton run uses PostgreSQL, not this directory"}}, r.Findings...)
	}
	if err := c.print(r); err != nil {
		return err
	}
	if r.HasErrors() {
		return ExitError{Code: 1}
	}
	return nil
}

func (c *DoctorCommand) print(r flock.Report) error {
	w := c.env.Stdout
	if c.json {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "lock directory: %s (scope: %s)\n", r.Dir, r.Scope)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Level, f.Check, f.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Tmpfiles == "" {
		fmt.Fprintln(w, "\ntmpfiles.d: none needed for user scope; baton run creates the directory, mode 0700")
		return nil
	}
	fmt.Fprintf(w, "\ntmpfiles.d line, to create it at boot (in /etc/tmpfiles.d/baton.conf, then systemd-tmpfiles --create):\n  %s\nor now, as root:\n  %s\n", r.Tmpfiles, r.Install)
	return nil
}
