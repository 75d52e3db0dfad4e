package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
)

const migrateHelp = `
Usage: baton migrate [flags]

Brings the store's schema up to date, and says where it stands. Both stores
have one:

  PostgreSQL (--db or BATON_DB)  baton's tables in --schema (default baton),
                                 recorded in SCHEMA.schema_migrations
  the local store                the schedule and the outbox in baton.db, a
                                 SQLite file in the lock directory, recorded
                                 in its table schema_migrations (the lock
                                 files themselves have no schema)

Each migration runs in its own transaction and is recorded with the sha256
of its file. Safe to run from several hosts, or processes, at once. Other
commands apply missing migrations by themselves on first use (baton.db is
created and migrated by the first command that opens it: daemon, jobs,
status, outbox, ...); run this to have schema changes happen at a time of
your choosing, or with a more privileged role. stdout says what was done,
one line a step, and the version reached; with --log-format or --log-level
each step is logged on stderr too, as the daemon and the relay log them.

Every command that opens the store to write checks, as this one does:

  - a schema newer than this baton (it has migrations this baton does not
    know) is refused, exit 69, naming both versions, unless the schema
    records that it stays compatible with this baton ("compatible down to"
    a version this baton knows). baton status, jobs, runs, leases, outbox status
    and outbox dead still read it.
  - a migration recorded with another sha256 than this baton's file is
    refused, exit 69, naming the migration and how to record this baton's
    checksum once you have checked the schema. Migrations recorded without a
    checksum (by an older baton), or with the checksum of a file's text from
    before it was edited (0006_outbox changed after it shipped), are
    repaired instead: repeatable steps redefine the functions they define
    with today's bodies, then the file's checksum is recorded.
  - PostgreSQL: every function of baton's in the schema (trigger functions
    too) is as this baton's migrations define it: its body, arguments,
    result, language, volatility, security and settings. One changed by
    hand (create or replace function, alter function) or missing is
    refused, exit 69, naming it, unless --repair. Functions that no
    migration of baton's defines (your own in the schema) are not looked
    at; nor is any function when the schema is newer than this baton.

--repair (PostgreSQL) first restores the functions of baton's that differ
from this baton's, or are missing, by running again the statement of the
migration (or repeatable step) that defines each, in one transaction, then
migrates as usual; it says which it restored. Nothing else is changed:
tables, rows and your own functions stay as they are.

  baton migrate --repair --db postgres://owner@db/app

docs/UPGRADE.md describes migrations, the version gate and upgrades.

--fence-only installs just the high-water-mark fence (table SCHEMA.fence and
the SQL function SCHEMA.fence(resource, token)) in any database that holds
results, e.g. the one a job writes to:

  baton migrate --fence-only --db postgres://app@db/reports
  psql -v token="$BATON_FENCING_TOKEN" <<'SQL'
  begin;
  select baton.fence('daily-report', :'token');  -- SQLSTATE BF001 when stale
  insert into report ...;
  commit;
  SQL

--new-epoch starts a new token epoch, after a dump and restore or a move to
another cluster (a new cluster starts again at timeline 1, and a restore
lacks the acquisitions made after its dump): every fencing token issued
afterwards is above every token the schema holds, and above the epoch in
force. --epoch N sets the new epoch to at least N, for a source cluster that
went on issuing tokens (failed over) after the dump was taken: a token's
epoch is the token >> 32. docs/FAILOVER.md has the runbook. Every command
that issues tokens warns on stderr while the schema sits on another cluster
than the one its epoch was set on, until this is run.

Exit status: 0 up to date; 64 usage error; 69 store unavailable, or a schema
this baton must not use (newer, built from other migration files, or with
functions of baton's changed by hand); 70 internal error.

Examples:
  # bring the local store's baton.db up to date
  baton migrate

  # migrate baton's schema in PostgreSQL, as a role that may create tables
  baton migrate --db postgres://owner@db1/app --schema baton

  # after a restore from a dump: tokens from now on are above every old one
  baton migrate --new-epoch --db postgres://owner@db2/app
`

// MigrateCommand is `baton migrate`.
type MigrateCommand struct {
	env      *Env
	store    storeFlags
	json     bool
	fence    bool
	newEpoch bool
	epoch    int64
	repair   bool
	logFmt   string
	logLevel string
}

// Run applies the migrations.
func (c *MigrateCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("migrate", c.env.Stdout, migrateHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON: {\"store\": {…}, \"database\": \"…\" (local), \"restored\": […] (--repair), \"applied\": […], \"repeated\": […], \"verified\": […], \"version\": N, \"known\": N, \"newer\": […], \"compatible_down_to\": N}")
	fs.BoolVar(&c.fence, "fence-only", false, "install only the high-water-mark fence (PostgreSQL), in a database that holds results")
	fs.BoolVar(&c.newEpoch, "new-epoch", false, "after a restore or a move to another cluster: start a new token epoch, above every token the schema holds (PostgreSQL)")
	fs.Int64Var(&c.epoch, "epoch", 0, "with --new-epoch: the new epoch is at least this")
	fs.BoolVar(&c.repair, "repair", false, "first restore the functions of baton's in the schema that were changed by hand or dropped, from this baton's migrations (PostgreSQL)")
	fs.StringVar(&c.logFmt, "log-format", "", "log each step on stderr too: text, json, journal or auto (default: no log lines, or text with --log-level)")
	fs.StringVar(&c.logLevel, "log-level", "", "log each step on stderr too, from this level: debug, info, warn or error (default: no log lines, or info with --log-format)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton migrate takes none, got %q", pos)
	}
	// stdout says each step to whoever ran this; log lines on stderr too
	// would say each twice, so they come only when asked for.
	var log *slog.Logger
	if c.logFmt != "" || c.logLevel != "" {
		if log, err = newLogger(c.env.Stderr, cmp.Or(c.logFmt, "text"), cmp.Or(c.logLevel, "info"), c.env.Getenv); err != nil {
			return err
		}
	}
	c.store.log = log
	st, err := c.store.open(ctx, c.env, "migrate", false)
	if err != nil {
		return err
	}
	defer st.close()
	if c.fence && st.db == nil {
		return baton.Invalid("--fence-only", "needs a PostgreSQL database (--db or BATON_DB)")
	}
	if c.newEpoch && (st.db == nil || c.fence) {
		return baton.Invalid("--new-epoch", "needs a PostgreSQL database (--db or BATON_DB) and a full migration (not --fence-only): the local store has no failover")
	}
	if c.repair && st.db == nil {
		return baton.Invalid("--repair", "needs a PostgreSQL database (--db or BATON_DB): the local store has no functions")
	}
	if c.epoch != 0 && !c.newEpoch {
		return baton.Invalid("--epoch", "only goes with --new-epoch")
	}
	if c.epoch < 0 || c.epoch >= 1<<21 {
		return baton.Invalid("--epoch", "%d: want 0..%d (tokens stay below 2^53)", c.epoch, 1<<21-1)
	}
	out := struct {
		Store    baton.StoreInfo `json:"store"`
		Database string          `json:"database,omitempty"` // the local store's baton.db
		Restored []string        `json:"restored,omitempty"` // with --repair: the functions restored
		postgres.Report
		Epoch       *postgres.Epoch `json:"epoch,omitempty"`        // PostgreSQL, after a full migration
		EpochBefore *postgres.Epoch `json:"epoch_before,omitempty"` // with --new-epoch
		Warning     string          `json:"warning,omitempty"`
	}{Store: st.leaser.Info()}
	if c.repair {
		if out.Restored, err = st.db.RepairFunctions(ctx); err != nil {
			return err
		}
		out.Restored = append([]string{}, out.Restored...)
	}
	switch {
	case c.fence:
		applied, err := st.db.MigrateFence(ctx)
		if err != nil {
			return err
		}
		out.Report = postgres.Report{Applied: append([]string{}, applied...), Repeated: []string{}, Verified: []string{}, Newer: []string{}, Known: postgres.KnownVersion()}
		if out.Version, err = st.db.SchemaVersion(ctx); err != nil {
			return err
		}
	case st.db != nil:
		if out.Report, err = st.db.MigrateReport(ctx); err != nil {
			return err
		}
		if out.EpochBefore, out.Epoch, err = c.epochs(ctx, st.db); err != nil {
			return err
		}
		if out.Epoch != nil {
			out.Warning = out.Epoch.Warning(st.db.Schema())
		}
	default:
		out.Database = filepath.Join(st.lockDir, LocalScheduleDB)
		db, err := sqlite.OpenConfig(ctx, sqlite.Config{Path: out.Database, NoMigrate: true, Log: log})
		if err != nil {
			return err
		}
		defer db.Close()
		if out.Report, err = db.MigrateReport(ctx); err != nil {
			return err
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, out)
	}
	w := c.env.Stdout
	for _, name := range out.Restored {
		fmt.Fprintf(w, "restored %s as this baton defines it\n", name)
	}
	if c.repair && len(out.Restored) == 0 {
		fmt.Fprintf(w, "every function of baton's is as this baton defines it: nothing to restore\n")
	}
	for _, name := range out.Applied {
		fmt.Fprintf(w, "applied %s\n", name)
	}
	for _, name := range out.Repeated {
		fmt.Fprintf(w, "redefined the functions of %s (repeatable step)\n", name)
	}
	if len(out.Verified) > 0 {
		fmt.Fprintf(w, "recorded the checksums of %s\n", strings.Join(out.Verified, ", "))
	}
	where := out.Store.Location
	if out.Database != "" {
		where = out.Database
	}
	switch {
	case len(out.Newer) > 0:
		fmt.Fprintf(w, "%s: schema at version %d, newer than this baton knows (%d): %s; it stays usable by a baton that knows version %d or later\n",
			where, out.Version, out.Known, strings.Join(out.Newer, ", "), out.CompatibleDownTo)
	default:
		fmt.Fprintf(w, "%s: schema at version %d (this baton knows up to %d)\n", where, out.Version, out.Known)
	}
	if e := out.Epoch; out.EpochBefore != nil {
		fmt.Fprintf(w, "new token epoch %d (was %d; timeline %d, offset %d): every token issued from now on is above %d\n",
			e.Epoch, out.EpochBefore.Epoch, e.Timeline, e.Offset, e.Epoch<<postgres.EpochBits)
	}
	if out.Warning != "" {
		fmt.Fprintf(c.env.Stderr, "baton: WARNING: %s\n", out.Warning)
	}
	return nil
}

// epochs starts a new token epoch when asked, and reads the one in force.
// A schema that this binary must not use was refused before; one that is
// newer but compatible may lack nothing this reads. A standby has no epoch:
// nil, without error.
func (c *MigrateCommand) epochs(ctx context.Context, db *postgres.DB) (before, after *postgres.Epoch, err error) {
	if c.newEpoch {
		b, a, err := db.NewEpoch(ctx, c.epoch, "baton migrate --new-epoch")
		if err != nil {
			return nil, nil, err
		}
		return &b, &a, nil
	}
	e, err := db.Epoch(ctx)
	if err != nil {
		return nil, nil, nil
	}
	return nil, &e, nil
}
