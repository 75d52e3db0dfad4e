package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/batonhq/baton"
)

const migrateHelp = `
Usage: baton migrate [flags]

Applies baton's numbered schema migrations to the PostgreSQL database named
by --db or BATON_DB, each in its own transaction, and records them in
<schema>.schema_migrations. Safe to run from several hosts at once. Other
commands apply missing migrations by themselves on first use; run this when
you want schema changes to happen at a time of your choosing, or with a more
privileged role. The local store has no schema: there, this does nothing.

Exit status: 0 up to date; 64 usage error; 69 store unavailable; 70 internal error.
`

// MigrateCommand is `baton migrate`.
type MigrateCommand struct {
	env   *Env
	store storeFlags
	json  bool
}

// Run applies the migrations.
func (c *MigrateCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("migrate", c.env.Stdout, migrateHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON: {\"applied\": [...], \"version\": N}")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton migrate takes none, got %q", pos)
	}
	st, err := c.store.open(ctx, c.env, "migrate", false)
	if err != nil {
		return err
	}
	defer st.close()
	out := struct {
		Store   baton.StoreInfo `json:"store"`
		Applied []string        `json:"applied"`
		Version int             `json:"version"`
	}{Store: st.leaser.Info(), Applied: []string{}}
	if st.db != nil {
		applied, err := st.db.Migrate(ctx)
		if err != nil {
			return err
		}
		out.Applied = append(out.Applied, applied...)
		if out.Version, err = st.db.SchemaVersion(ctx); err != nil {
			return err
		}
	}
	if c.json {
		enc := json.NewEncoder(c.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if st.db == nil {
		fmt.Fprintf(c.env.Stdout, "local store at %s: no schema to migrate\n", out.Store.Location)
		return nil
	}
	for _, name := range out.Applied {
		fmt.Fprintf(c.env.Stdout, "applied %s\n", name)
	}
	fmt.Fprintf(c.env.Stdout, "%s: schema at version %d\n", out.Store.Location, out.Version)
	return nil
}
