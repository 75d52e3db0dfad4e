package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/migration"
	"github.com/jackc/pgx/v5"
)

// Migration is one numbered, embedded schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string // with the schema spliced in
	// Checksum is the sha256 of the file as shipped (sha256sum's hex),
	// recorded in schema_migrations when the migration is applied.
	Checksum string
	// CompatibleDownTo is the lowest schema version a binary must know to
	// use a schema that has this migration (see package migration).
	CompatibleDownTo int
}

// Report is what a migration run did, and the schema's state after it.
type Report = migration.Report

// edited lists the checksums that shipped migrations had before they were
// edited, from git history (git log --follow -p on each file). A schema
// recorded with one of them (or with none: a baton from before checksums)
// is repaired, not refused: see package migration.
var edited = migration.Edited{
	// At cf4db93, e710a26 and 6d437e9: enqueue's key rules, then
	// outbox_settle's try-lock, then its head promotion changed (final
	// text at e474083). repeatable/outbox.sql redefines both functions.
	"0006_outbox": {
		"c20bc48bd3290bc5133d9a5eb253ebdc2feb8743b35ef51b33320024d5a45a2c",
		"b98a8de7f24ea8460b7d1e430963c93e20f65d1e31b1342c6ed55f60b401b1d4",
		"97c8fe8208b6c06f1bf238dfb929bb78307b38056fa663ab62d2673cba6d098d",
	},
	// At 585554f: only a comment changed (b405066).
	"0009_fence_lease_key_share": {
		"be292aa7d078396f20293db4ca3d280e9267e72cb2d0038941f5d0461bf17e23",
	},
}

// files reads and hashes the embedded migrations, once: readiness probes
// ask for the schema version often.
var files = sync.OnceValues(func() ([]migration.File, error) {
	out, err := migration.Load(sqlFiles, "sql/migrations")
	if err != nil {
		return nil, baton.Wrap(baton.EINTERNAL, err, "reading embedded migrations")
	}
	return out, nil
})

// Migrations lists the embedded migrations in order.
func (db *DB) Migrations() ([]Migration, error) {
	fs, err := files()
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(fs))
	for _, f := range fs {
		out = append(out, Migration{Version: f.Version, Name: f.Name, SQL: db.query("migrations/" + f.Name),
			Checksum: f.Checksum, CompatibleDownTo: f.CompatibleDownTo})
	}
	return out, nil
}

// fenceOnly lists the migrations that `baton migrate --fence-only` installs
// in a database that holds results but no leases.
var fenceOnly = map[string]bool{"0002_fence": true}

// Migrate applies every migration not yet recorded in schema_migrations, each
// in its own transaction, then the repeatable steps that are due (see
// MigrateReport). It returns the names of the migrations it applied.
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	r, err := db.MigrateReport(ctx)
	return r.Applied, err
}

// MigrateReport brings the schema up to date and says what it did.
// Concurrent callers (two daemons starting at once) serialise on a
// transaction-scoped advisory lock, which pins no session.
//
// In order: the runner's own tables are created or extended (so a schema
// of an older baton gains the checksum columns); the record is checked
// against this binary's files, and a schema newer than this binary and
// not compatible with it, or one whose recorded checksum is neither this
// binary's nor an edited file's older one, is refused with EUNAVAILABLE;
// the missing migrations are applied, each in its own transaction with
// its record and checksum; and, unless the schema is newer than this
// binary (whose newer binary then keeps it), the repeatable steps that
// are due are applied and the checksums that were missing or old are
// recorded, in one transaction.
func (db *DB) MigrateReport(ctx context.Context) (Report, error) {
	fs, err := files()
	if err != nil {
		return Report{}, err
	}
	return db.apply(ctx, fs, true)
}

// MigrateFence applies only the high-water-mark fence (table and SQL
// function), for a result store's own database.
func (db *DB) MigrateFence(ctx context.Context) ([]string, error) {
	fs, err := files()
	if err != nil {
		return nil, err
	}
	var fence []migration.File
	for _, f := range fs {
		if fenceOnly[f.Name] {
			fence = append(fence, f)
		}
	}
	r, err := db.apply(ctx, fence, false)
	return r.Applied, err
}

func (db *DB) apply(ctx context.Context, fs []migration.File, full bool) (Report, error) {
	var plan migration.Plan
	err := db.locked(ctx, func(tx pgx.Tx) error {
		if err := db.bookkeeping(ctx, tx); err != nil {
			return err
		}
		var err error
		if plan, err = db.plan(ctx, tx, fs); err != nil {
			return err
		}
		if r := plan.Check(db.fix); r != nil {
			return db.refuse(r)
		}
		return nil
	})
	if pgCode(err) == "42501" {
		return Report{}, baton.Wrap(baton.EUNAVAILABLE, refusal{redactSecrets(err.Error(), db.secrets)},
			"schema %s at %s needs migrating (or its migrations' checksums recorded, once, by this version of baton), and this role may not change it: run baton migrate as a role that owns the schema", db.schema, db.dsn)
	}
	if err != nil {
		return Report{}, db.translate(err, "checking the schema's migrations")
	}
	report := migration.NewReport(plan)
	if plan.NewerThanKnown() {
		db.logInfo("the schema is newer than this baton, and says this baton may use it", "version", plan.Version, "known", plan.Known, "newer", report.Newer)
	}
	for _, f := range plan.Pending {
		did := false
		err := db.locked(ctx, func(tx pgx.Tx) error {
			var exists bool
			if err := tx.QueryRow(ctx, db.sub("select exists (select 1 from @schema@.schema_migrations where version = $1)"), f.Version).Scan(&exists); err != nil || exists {
				return err
			}
			if _, err := tx.Exec(ctx, db.query("migrations/"+f.Name), pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("migration %s: %w", f.Name, err)
			}
			did = true
			_, err := tx.Exec(ctx, db.sub("insert into @schema@.schema_migrations (version, name, checksum, compatible_down_to) values ($1, $2, $3, $4)"),
				f.Version, f.Name, f.Checksum, f.CompatibleDownTo)
			return err
		})
		if err != nil {
			return report, db.translate(err, "migrating "+f.Name)
		}
		if did {
			report.Applied = append(report.Applied, f.Name)
			db.logInfo("applied migration", "migration", f.Name, "checksum", f.Checksum)
		}
	}
	if full && !plan.NewerThanKnown() {
		if err := db.locked(ctx, func(tx pgx.Tx) error { return db.repeat(ctx, tx, fs, &report) }); err != nil {
			return report, db.translate(err, "applying the repeatable steps")
		}
	}
	after, err := db.readPlan(ctx, fs)
	if err != nil {
		return report, err
	}
	report.Version, report.CompatibleDownTo = after.Version, after.CompatibleDownTo
	return report, db.checkFunctions(ctx)
}

// repeat applies the repeatable steps that are due and then records the
// checksums that were missing or an edited file's older one: those
// migrations' functions are today's now.
func (db *DB) repeat(ctx context.Context, tx pgx.Tx, fs []migration.File, report *Report) error {
	steps, err := migration.LoadRepeatables(sqlFiles, "sql/repeatable")
	if err != nil {
		return baton.Wrap(baton.EINTERNAL, err, "reading embedded repeatable steps")
	}
	recorded, err := db.repeatables(ctx, tx)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if !s.Due(recorded[s.Name]) {
			continue
		}
		if _, err := tx.Exec(ctx, db.query("repeatable/"+s.Name), pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("repeatable step %s: %w", s.Name, err)
		}
		_, err := tx.Exec(ctx, db.sub(`insert into @schema@.schema_repeatables as r (name, checksum) values ($1, $2)
on conflict (name) do update set checksum = excluded.checksum, applied_at = clock_timestamp()`), s.Name, s.Checksum)
		if err != nil {
			return err
		}
		report.Repeated = append(report.Repeated, s.Name)
		db.logInfo("applied repeatable step", "step", s.Name, "checksum", s.Checksum, "was", recorded[s.Name])
	}
	plan, err := db.plan(ctx, tx, fs)
	if err != nil {
		return err
	}
	for _, f := range plan.Unverified {
		var was *string
		err := tx.QueryRow(ctx, db.sub("update @schema@.schema_migrations m set checksum = $2 from @schema@.schema_migrations o where m.version = $1 and o.version = m.version returning o.checksum"),
			f.Version, f.Checksum).Scan(&was)
		if err != nil {
			return err
		}
		report.Verified = append(report.Verified, f.Name)
		if was == nil {
			db.logInfo("recorded the checksum of a migration applied before checksums were", "migration", f.Name, "checksum", f.Checksum)
		} else {
			db.logInfo("repaired a migration applied from an older text of its file: its functions are today's, its checksum is now the file's",
				"migration", f.Name, "was", *was, "checksum", f.Checksum)
		}
	}
	return nil
}

// locked runs f in a transaction that holds the schema's migration lock.
func (db *DB) locked(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", db.lockKey()); err != nil {
			return err
		}
		return f(tx)
	})
}

// bookkeeping creates the runner's own tables, and adds the columns that a
// table made by an older baton lacks, so that every schema gains them on
// its next migration without a numbered migration of its own (which an
// older baton would record without a checksum).
func (db *DB) bookkeeping(ctx context.Context, tx pgx.Tx) error {
	setup := db.sub(`create schema if not exists @schema@;
create table if not exists @schema@.schema_migrations (
  version    integer primary key,
  name       text not null,
  applied_at timestamptz not null default clock_timestamp()
);
create table if not exists @schema@.schema_repeatables (
  name       text primary key,
  checksum   text not null,            -- sha256 of the step's file
  applied_at timestamptz not null default clock_timestamp()
)`)
	if _, err := tx.Exec(ctx, setup, pgx.QueryExecModeSimpleProtocol); err != nil {
		return err
	}
	// ADD COLUMN IF NOT EXISTS locks the table even when the columns are
	// there: ask first.
	var have int
	if err := tx.QueryRow(ctx, `select count(*) from information_schema.columns
 where table_schema = $1 and table_name = 'schema_migrations' and column_name in ('checksum', 'compatible_down_to')`, db.schema).Scan(&have); err != nil {
		return err
	}
	if have == 2 {
		return nil
	}
	// checksum: the sha256 of the migration's file; null when a baton from
	// before checksums applied it. compatible_down_to: the lowest schema
	// version a binary must know to use a schema with this migration;
	// null means the migration's own version.
	_, err := tx.Exec(ctx, db.sub(`alter table @schema@.schema_migrations
  add column if not exists checksum text,
  add column if not exists compatible_down_to integer`))
	return err
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// plan reads the schema's record and compares it with fs. It reads
// whatever columns the table has, so a table of an older baton reads as
// having no checksums.
func (db *DB) plan(ctx context.Context, q querier, fs []migration.File) (migration.Plan, error) {
	rows, err := q.Query(ctx, db.sub(`select version, name, coalesce(to_jsonb(m)->>'checksum', ''),
       coalesce((to_jsonb(m)->>'compatible_down_to')::integer, 0)
  from @schema@.schema_migrations m`))
	if err != nil {
		return migration.Plan{}, err
	}
	records, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (migration.Record, error) {
		var r migration.Record
		err := row.Scan(&r.Version, &r.Name, &r.Checksum, &r.CompatibleDownTo)
		return r, err
	})
	if err != nil {
		return migration.Plan{}, err
	}
	return migration.NewPlan(fs, records, edited), nil
}

// readPlan is plan outside a transaction: a schema without a record (no
// table, no schema) has nothing applied.
func (db *DB) readPlan(ctx context.Context, fs []migration.File) (migration.Plan, error) {
	p, err := db.plan(ctx, db.pool, fs)
	if c := pgCode(err); c == "42P01" || c == "3F000" {
		return migration.NewPlan(fs, nil, edited), nil
	}
	return p, db.translate(err, "reading the schema's migrations")
}

// repeatables maps each repeatable step recorded to its checksum; none
// when the table is missing.
func (db *DB) repeatables(ctx context.Context, q querier) (map[string]string, error) {
	rows, err := q.Query(ctx, repeatablesSQL(db))
	if err != nil {
		return nil, err
	}
	return scanRepeatables(rows)
}

// repeatablesSQL reads the schema's record of repeatable steps.
func repeatablesSQL(db *DB) string {
	return db.sub("select name, checksum from @schema@.schema_repeatables")
}

// scanRepeatables maps the rows of repeatablesSQL, each step to its
// checksum.
func scanRepeatables(rows pgx.Rows) (map[string]string, error) {
	out := map[string]string{}
	var name, sum string
	_, err := pgx.ForEachRow(rows, []any{&name, &sum}, func() error { out[name] = sum; return nil })
	return out, err
}

// SchemaVersion returns the highest migration applied, 0 when none is.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	fs, err := files()
	if err != nil {
		return 0, err
	}
	p, err := db.readPlan(ctx, fs)
	return p.Version, err
}

// KnownVersion is the highest schema version this binary knows.
func KnownVersion() int {
	fs, err := files()
	if err != nil {
		return 0
	}
	return migration.Known(fs)
}

// migrateIfBehind costs two round trips when the schema is current, which
// is the price of "migrations apply automatically on first use" (and of the
// version gate, and of the check of baton's functions, whose query goes in
// the second, beside the repeatable steps'). A schema that this binary
// must not use is refused, unless readOnly: a reader may read a newer
// schema, one built from other text, or one whose functions of baton's
// were changed, as it is (nothing is migrated then).
func (db *DB) migrateIfBehind(ctx context.Context, readOnly bool) (Report, error) {
	fs, err := files()
	if err != nil {
		return Report{}, err
	}
	plan, err := db.readPlan(ctx, fs)
	if err != nil {
		return Report{}, err
	}
	if r := plan.Check(db.fix); r != nil {
		if readOnly {
			return migration.NewReport(plan), nil
		}
		return Report{}, db.refuse(r)
	}
	if plan.Current() {
		if plan.NewerThanKnown() {
			return migration.NewReport(plan), nil
		}
		st := schemaState{files: fs, plan: plan}
		if st.steps, err = migration.LoadRepeatables(sqlFiles, "sql/repeatable"); err != nil {
			return Report{}, baton.Wrap(baton.EINTERNAL, err, "reading embedded repeatable steps")
		}
		// A reader reads the schema's functions as they are: only a
		// process that writes reads their fingerprints.
		var live map[string]fingerprint
		if readOnly {
			st.repeatable, err = db.repeatables(ctx, db.pool)
		} else {
			st.repeatable, live, err = db.repeatablesAndFunctions(ctx)
		}
		switch pgCode(err) {
		case "42P01":
			st.repeatable, err = map[string]string{}, nil
		case "42501":
			// A role that may not read the table (granted its tables
			// before the table was made) could not apply a step either;
			// the checksums are current, so an owner's migration ran.
			// Which steps it applied is unknown: their functions are
			// left alone (functionsOf).
			st.repeatable, err = nil, nil
		}
		if err != nil {
			return Report{}, db.translate(err, "reading the schema's repeatable steps and functions")
		}
		if st.repeatable == nil || !slices.ContainsFunc(st.steps, func(s migration.Repeatable) bool { return s.Due(st.repeatable[s.Name]) }) {
			if !readOnly {
				fns, err := shippedFunctions()
				if err != nil {
					return Report{}, err
				}
				if want, _, ok := st.functionsOf(fns); ok {
					if problems := compareFunctions(want, live); len(problems) > 0 {
						return Report{}, db.refuse(functionsRefusal(db.schema, problems))
					}
				}
			}
			return migration.NewReport(plan), nil
		}
	}
	r, err := db.apply(ctx, fs, true)
	if readOnly && isRefusal(err) {
		return r, nil
	}
	return r, err
}

// repeatablesAndFunctions is repeatables and the fingerprints of baton's
// functions in the schema, read in one round trip: the functions first,
// from the catalog, which any role may read, so that they are read even
// when the table of repeatable steps is missing or not the role's to read
// (its error is returned, with the functions).
func (db *DB) repeatablesAndFunctions(ctx context.Context) (map[string]string, map[string]fingerprint, error) {
	fns, err := shippedFunctions()
	if err != nil {
		return nil, nil, err
	}
	b := &pgx.Batch{}
	b.Queue(functionsSQL(), db.schema, functionNames(fns))
	b.Queue(repeatablesSQL(db))
	br := db.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	live, _, err := collectFingerprints(rows)
	if err != nil {
		return nil, nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, live, err
	}
	recorded, err := scanRepeatables(rows)
	if err != nil {
		return nil, live, err
	}
	return recorded, live, br.Close()
}

// refuse is the error for a schema this binary must not use: unavailable
// (exit 69), and Refused, so that a command does not wait for it to mend.
func (db *DB) refuse(r *migration.Refusal) error {
	return baton.Wrap(baton.EUNAVAILABLE, r, "schema %s at %s %s", db.schema, db.dsn, r.Headline)
}

// fix is the statement that records this binary's checksum of a migration.
func (db *DB) fix(version int, checksum string) string {
	return fmt.Sprintf("psql -c \"update %s.schema_migrations set checksum = '%s' where version = %d\"", db.schema, checksum, version)
}

func (db *DB) logInfo(msg string, args ...any) {
	if db.log != nil {
		db.log.Info(msg, append(args, "schema", db.schema)...)
	}
}

// sub names the schema in a statement of the runner's own.
func (db *DB) sub(q string) string { return spliceSchema(q, db.schema) }

func (db *DB) lockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("baton.migrate." + db.schema))
	return int64(h.Sum64())
}

// isRefusal reports whether err refuses a schema (see refuse).
func isRefusal(err error) bool { return errors.As(err, new(*migration.Refusal)) }
