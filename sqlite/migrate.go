package sqlite

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/batonhq/baton"
)

// Migration is one numbered, embedded schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// createMigrations records which migrations a database has. applied_at is
// the database's clock, as UTC text that sorts in time order.
const createMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT`

// Migrations lists the embedded migrations in order.
func (db *DB) Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(sqlFiles, "sql/migrations")
	if err != nil {
		return nil, baton.Wrap(baton.EINTERNAL, err, "reading embedded migrations")
	}
	var out []Migration
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".sql")
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, baton.Errorf(baton.EINTERNAL, "migration %s is not named NNNN_name.sql", e.Name())
		}
		out = append(out, Migration{Version: v, Name: name, SQL: query("migrations/" + name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Migrate applies every migration not yet recorded in schema_migrations, each
// in its own transaction with its record, since DDL in SQLite is
// transactional. Concurrent callers (two baton processes starting at once)
// serialise on the write lock that BEGIN IMMEDIATE takes before the check
// for the record, so a migration is never applied twice. It returns the
// names of the migrations it applied.
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	migrations, err := db.Migrations()
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range migrations {
		did, err := db.migrate(ctx, m)
		if err != nil {
			return applied, translate(err, db.path, "migrating "+m.Name)
		}
		if did {
			applied = append(applied, m.Name)
		}
	}
	return applied, nil
}

func (db *DB) migrate(ctx context.Context, m Migration) (did bool, err error) {
	tx, err := db.db.BeginTx(ctx, nil) // IMMEDIATE: see connParams
	if err != nil {
		return false, err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, createMigrations); err != nil {
		return false, err
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)", m.Version).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// SchemaVersion returns the highest migration applied, 0 when none is.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var n int
	err := db.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").Scan(&n)
	if err != nil || n == 0 {
		return 0, translate(err, db.path, "reading schema version")
	}
	var v int
	err = db.db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v)
	return v, translate(err, db.path, "reading schema version")
}

// migrateIfBehind costs two reads when the schema is current, and takes no
// write lock then, so that opening a busy store does not queue behind its
// writer: the price of "migrations apply automatically on first use".
func (db *DB) migrateIfBehind(ctx context.Context) ([]string, error) {
	have, err := db.SchemaVersion(ctx)
	if err != nil {
		return nil, err
	}
	migrations, err := db.Migrations()
	if err != nil {
		return nil, err
	}
	if len(migrations) == 0 || have >= migrations[len(migrations)-1].Version {
		return nil, nil
	}
	return db.Migrate(ctx)
}
