package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
)

const leasesHelp = `
Usage: baton leases [flags]

Lists every job's lease in the store in use: its state (held, expired: its
holder stopped without releasing it, or free: released), its last fencing
token, its holder (host, pid, run ID) and, for PostgreSQL, its expiry by the
database's clock. The first line names the store and its scope.

For the local store, ALIVE says whether the recorded holder still runs (yes,
no, or - when it cannot be told or the lease is free): the same boot of this host, and a process
with that pid and that start time. NOTE names the other processes that hold
the lock or have its file open (a job run under flock(1), a child that
inherited the descriptor), and problems such as a lock file removed or
replaced while held. Finding them reads every process's descriptors in /proc:
as another user than root, other users' processes are not seen, and a last
line says how many. --json carries all of it.

Exit status: 0 listed; 64 usage error; 69 store unavailable; 70 internal error.

Examples:
  # every lease of the local store, with its holder and whether it is alive
  baton leases

  # the leases of a PostgreSQL store, as JSON
  baton leases --db postgres://baton@db1/app --json
`

// LeasesCommand is `baton leases`.
type LeasesCommand struct {
	env   *Env
	store storeFlags
	json  bool
}

// Run lists the leases.
func (c *LeasesCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("leases", c.env.Stdout, leasesHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON: {\"store\": {…}, \"leases\": […]}")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton leases takes none, got %q", pos)
	}
	st, err := c.store.open(ctx, c.env, "leases", true)
	if err != nil {
		return err
	}
	defer st.close()
	leases, err := st.leaser.Leases(ctx)
	if err != nil {
		return err
	}
	info := st.leaser.Info()
	if c.json {
		if leases == nil {
			leases = []baton.Lease{}
		}
		return printJSON(c.env.Stdout, struct {
			Store  baton.StoreInfo `json:"store"`
			Leases []baton.Lease   `json:"leases"`
		}{info, leases})
	}
	fmt.Fprintf(c.env.Stdout, "store: %s %s (scope: %s)\n", info.Kind, info.Location, info.Scope)
	if len(leases) == 0 {
		fmt.Fprintln(c.env.Stdout, "no leases")
		return nil
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tTOKEN\tHOLDER\tALIVE\tACQUIRED\tUNTIL\tRUN\tNOTE")
	unreadable := 0
	for _, l := range leases {
		h := l.Holder
		holder := "-"
		if h.Host != "" || h.PID != 0 {
			holder = fmt.Sprintf("%s:%d", h.Host, h.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Job, l.State, l.Token, holder,
			alive(l), stamp(h.AcquiredAt), stamp(h.Until), dash(h.Owner), dash(note(l)))
		unreadable = max(unreadable, l.UnreadableProcs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if unreadable > 0 {
		fmt.Fprintf(c.env.Stdout, "note: the descriptors of %d processes could not be read (other users'); as root, NOTE would name every process with a lock file open\n", unreadable)
	}
	return nil
}

// alive is the ALIVE column: whether the holder runs; "-" for a free
// lease, released by its last holder, whose life says nothing of it.
func alive(l baton.Lease) string {
	if l.State == baton.LeaseFree {
		return "-"
	}
	return yesNo(l.HolderAlive)
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "yes"
	}
	return "no"
}

// note renders a lease's problem and the processes with its file open,
// leaving out the live holder itself and its children (its guard), which
// hold the lock as they should.
func note(l baton.Lease) string {
	var parts []string
	if l.Problem != "" {
		parts = append(parts, l.Problem)
	}
	var locking, open []string
	for _, p := range l.OpenBy {
		own := l.HolderAlive != nil && *l.HolderAlive && (p.PID == l.Holder.PID || p.PPID == l.Holder.PID)
		if own {
			continue
		}
		s := fmt.Sprintf("pid %d (%s)", p.PID, shorten(baton.ShellQuote(p.Argv...), 40))
		if p.HoldsLock {
			locking = append(locking, s)
		} else {
			open = append(open, s)
		}
	}
	if len(locking) > 0 {
		parts = append(parts, "locked by "+strings.Join(locking, ", "))
	}
	if len(open) > 0 {
		parts = append(parts, "open by "+strings.Join(open, ", "))
	}
	return strings.Join(parts, "; ")
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
