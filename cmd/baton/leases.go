package main

import (
	"context"
	"encoding/json"
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

Exit status: 0 listed; 64 usage error; 69 store unavailable; 70 internal error.
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
		enc := json.NewEncoder(c.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
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
	fmt.Fprintln(tw, "JOB\tSTATE\tTOKEN\tHOLDER\tACQUIRED\tUNTIL\tRUN")
	for _, l := range leases {
		h := l.Holder
		holder := "-"
		if h.Host != "" || h.PID != 0 {
			holder = fmt.Sprintf("%s:%d", h.Host, h.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", l.Job, l.State, l.Token, holder,
			stamp(h.AcquiredAt), stamp(h.Until), dash(h.Owner))
	}
	return tw.Flush()
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
