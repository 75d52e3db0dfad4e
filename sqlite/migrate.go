package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/migration"
)

// Migration is one numbered, embedded schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// Checksum is the sha256 of the file as shipped (sha256sum's hex),
	// recorded in schema_migrations when the migration is applied.
	Checksum string
	// CompatibleDownTo is the lowest schema version a binary must know to
	// use a database that has this migration (see package migration).
	CompatibleDownTo int
}

// Report is what a migration run did, and the schema's state after it.
type Report = migration.Report

// edited lists the checksums that shipped migrations had before they were
// edited: none of SQLite's was (git log --follow on each file).
var edited = migration.Edited{}

// createMigrations records which migrations a database has. applied_at is
// the database's clock, as UTC text that sorts in time order. checksum is
// the sha256 of the migration's file (NULL when a baton from before
// checksums applied it); compatible_down_to the lowest schema version a
// binary must know to use a database with this migration (NULL: the
// migration's own version). A table made by an older baton gains the two
// columns in addColumns.
const createMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version            INTEGER PRIMARY KEY,
  name               TEXT NOT NULL,
  applied_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  checksum           TEXT,
  compatible_down_to INTEGER
) STRICT`

var addColumns = map[string]string{
	"checksum":           "ALTER TABLE schema_migrations ADD COLUMN checksum TEXT",
	"compatible_down_to": "ALTER TABLE schema_migrations ADD COLUMN compatible_down_to INTEGER",
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
		out = append(out, Migration{Version: f.Version, Name: f.Name, SQL: f.Text, Checksum: f.Checksum, CompatibleDownTo: f.CompatibleDownTo})
	}
	return out, nil
}

// KnownVersion is the highest schema version this binary knows.
func KnownVersion() int {
	fs, err := files()
	if err != nil {
		return 0
	}
	return migration.Known(fs)
}

// Migrate applies every migration not yet recorded in schema_migrations
// (see MigrateReport) and returns the names of those it applied.
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	r, err := db.MigrateReport(ctx)
	return r.Applied, err
}

// MigrateReport brings the schema up to date and says what it did. Each
// migration is applied in its own transaction with its record and
// checksum, since DDL in SQLite is transactional. Concurrent callers (two
// baton processes starting at once) serialise on the write lock that BEGIN
// IMMEDIATE takes before the check for the record, so a migration is
// never applied twice.
//
// First the record is checked against this binary's files: a database
// newer than this binary and not compatible with it, or one whose recorded
// checksum is not this binary's, is refused with EUNAVAILABLE. Last,
// unless the database is newer than this binary, the checksums that a
// baton from before checksums left out are recorded.
func (db *DB) MigrateReport(ctx context.Context) (Report, error) {
	fs, err := files()
	if err != nil {
		return Report{}, err
	}
	var plan migration.Plan
	err = db.tx(ctx, func(tx *sql.Tx) error {
		if err := bookkeeping(ctx, tx); err != nil {
			return err
		}
		if plan, err = readPlan(ctx, tx, fs); err != nil {
			return err
		}
		if r := plan.Check(db.fix); r != nil {
			return db.refuse(r)
		}
		return nil
	})
	if err != nil {
		return Report{}, translate(err, db.path, "checking the schema's migrations")
	}
	report := migration.NewReport(plan)
	if plan.NewerThanKnown() {
		db.logInfo("the schema is newer than this baton, and says this baton may use it", "version", plan.Version, "known", plan.Known, "newer", report.Newer)
	}
	for _, f := range plan.Pending {
		did := false
		err := db.tx(ctx, func(tx *sql.Tx) error {
			var exists bool
			if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)", f.Version).Scan(&exists); err != nil || exists {
				return err
			}
			if _, err := tx.ExecContext(ctx, f.Text); err != nil {
				return fmt.Errorf("migration %s: %w", f.Name, err)
			}
			did = true
			_, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, checksum, compatible_down_to) VALUES (?, ?, ?, ?)",
				f.Version, f.Name, f.Checksum, f.CompatibleDownTo)
			return err
		})
		if err != nil {
			return report, translate(err, db.path, "migrating "+f.Name)
		}
		if did {
			report.Applied = append(report.Applied, f.Name)
			db.logInfo("applied migration", "migration", f.Name, "checksum", f.Checksum)
		}
	}
	if !plan.NewerThanKnown() {
		err := db.tx(ctx, func(tx *sql.Tx) error {
			p, err := readPlan(ctx, tx, fs)
			if err != nil {
				return err
			}
			for _, f := range p.Unverified {
				if _, err := tx.ExecContext(ctx, "UPDATE schema_migrations SET checksum = ? WHERE version = ?", f.Checksum, f.Version); err != nil {
					return err
				}
				report.Verified = append(report.Verified, f.Name)
				db.logInfo("recorded the checksum of a migration applied before checksums were", "migration", f.Name, "checksum", f.Checksum)
			}
			return nil
		})
		if err != nil {
			return report, translate(err, db.path, "recording the migrations' checksums")
		}
	}
	after, err := readPlan(ctx, db.db, fs)
	if err != nil {
		return report, translate(err, db.path, "reading the schema's migrations")
	}
	report.Version, report.CompatibleDownTo = after.Version, after.CompatibleDownTo
	return report, nil
}

// tx runs f in a write transaction (IMMEDIATE: see connParams).
func (db *DB) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// bookkeeping creates the migrations table, or adds the columns that a
// table of an older baton lacks.
func bookkeeping(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, createMigrations); err != nil {
		return err
	}
	cols, err := columns(ctx, tx)
	if err != nil {
		return err
	}
	for _, name := range []string{"checksum", "compatible_down_to"} {
		if !slices.Contains(cols, name) {
			if _, err := tx.ExecContext(ctx, addColumns[name]); err != nil {
				return err
			}
		}
	}
	return nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func columns(ctx context.Context, q querier) ([]string, error) {
	rows, err := q.QueryContext(ctx, "SELECT name FROM pragma_table_info('schema_migrations')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// readPlan reads the record, whatever columns its table has (none when
// there is no table), and compares it with fs. Reading takes no write
// lock, so that opening a busy store does not queue behind its writer.
func readPlan(ctx context.Context, q querier, fs []migration.File) (migration.Plan, error) {
	cols, err := columns(ctx, q)
	if err != nil || len(cols) == 0 {
		return migration.NewPlan(fs, nil, edited), err
	}
	sum, compat := "''", "0"
	if slices.Contains(cols, "checksum") {
		sum = "coalesce(checksum, '')"
	}
	if slices.Contains(cols, "compatible_down_to") {
		compat = "coalesce(compatible_down_to, 0)"
	}
	rows, err := q.QueryContext(ctx, "SELECT version, name, "+sum+", "+compat+" FROM schema_migrations")
	if err != nil {
		return migration.Plan{}, err
	}
	defer rows.Close()
	var records []migration.Record
	for rows.Next() {
		var r migration.Record
		if err := rows.Scan(&r.Version, &r.Name, &r.Checksum, &r.CompatibleDownTo); err != nil {
			return migration.Plan{}, err
		}
		records = append(records, r)
	}
	if err := rows.Err(); err != nil {
		return migration.Plan{}, err
	}
	return migration.NewPlan(fs, records, edited), nil
}

// SchemaVersion returns the highest migration applied, 0 when none is.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	fs, err := files()
	if err != nil {
		return 0, err
	}
	p, err := readPlan(ctx, db.db, fs)
	return p.Version, translate(err, db.path, "reading schema version")
}

// migrateIfBehind costs two reads when the schema is current, and takes no
// write lock then: the price of "migrations apply automatically on first
// use" (and of the version gate). A database that this binary must not use
// is refused, unless readOnly: a reader may read it as it is (nothing is
// migrated then).
func (db *DB) migrateIfBehind(ctx context.Context, readOnly bool) (Report, error) {
	fs, err := files()
	if err != nil {
		return Report{}, err
	}
	plan, err := readPlan(ctx, db.db, fs)
	if err != nil {
		return Report{}, translate(err, db.path, "reading the schema's migrations")
	}
	if r := plan.Check(db.fix); r != nil {
		if readOnly {
			return migration.NewReport(plan), nil
		}
		return Report{}, db.refuse(r)
	}
	if plan.Current() {
		return migration.NewReport(plan), nil
	}
	return db.MigrateReport(ctx)
}

// refuse is the error for a database this binary must not use:
// unavailable (exit 69); Open does not wait for it to mend.
func (db *DB) refuse(r *migration.Refusal) error {
	return baton.Wrap(baton.EUNAVAILABLE, r, "the SQLite store %s %s", db.path, r.Headline)
}

func isRefusal(err error) bool { return errors.As(err, new(*migration.Refusal)) }

// fix is the command that records this binary's checksum of a migration.
func (db *DB) fix(version int, checksum string) string {
	return fmt.Sprintf("sqlite3 %s \"UPDATE schema_migrations SET checksum = '%s' WHERE version = %d\"", db.path, checksum, version)
}

func (db *DB) logInfo(msg string, args ...any) {
	if db.log != nil {
		db.log.Info(msg, append(args, "store", db.path)...)
	}
}
