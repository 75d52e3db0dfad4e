package main

import (
	"context"
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

--fence-only installs just the high-water-mark fence (table <schema>.fence and
the SQL function <schema>.fence(resource, token)) in any database that holds
results, e.g. the one a job writes to:

  baton migrate --fence-only --db postgres://app@db/reports
  psql -v token="$BATON_FENCING_TOKEN" <<'SQL'
  begin;
  select baton.fence('daily-report', :'token');  -- SQLSTATE BF001 when stale
  insert into report ...;
  commit;
  SQL

Exit status: 0 up to date; 64 usage error; 69 store unavailable; 70 internal error.
`

// MigrateCommand is `baton migrate`.
type MigrateCommand struct {
	env   *Env
	store storeFlags
	json  bool
	fence bool
}

// Run applies the migrations.
func (c *MigrateCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("migrate", c.env.Stdout, migrateHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON: {\"applied\": [...], \"version\": N}")
	fs.BoolVar(&c.fence, "fence-only", false, "install only the high-water-mark fence (PostgreSQL), in a database that holds results")
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
	if c.fence && st.db == nil {
		return baton.Invalid("--fence-only", "needs a PostgreSQL database (--db or BATON_DB)")
	}
	if st.db != nil {
		migrate := st.db.Migrate
		if c.fence {
			migrate = st.db.MigrateFence
		}
		applied, err := migrate(ctx)
		if err != nil {
			return err
		}
		out.Applied = append(out.Applied, applied...)
		if out.Version, err = st.db.SchemaVersion(ctx); err != nil {
			return err
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, out)
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
