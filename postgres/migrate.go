package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/batonhq/baton"
	"github.com/jackc/pgx/v5"
)

// Migration is one numbered, embedded schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

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
		out = append(out, Migration{Version: v, Name: name, SQL: db.query("migrations/" + name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// fenceOnly lists the migrations that `baton migrate --fence-only` installs
// in a database that holds results but no leases.
var fenceOnly = map[string]bool{"0002_fence": true}

// Migrate applies every migration not yet recorded in schema_migrations, each
// in its own transaction. Concurrent callers (two daemons starting at once)
// serialise on a transaction-scoped advisory lock, which pins no session.
// It returns the names of the migrations it applied.
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	migrations, err := db.Migrations()
	if err != nil {
		return nil, err
	}
	return db.apply(ctx, migrations)
}

// MigrateFence applies only the high-water-mark fence (table and SQL
// function), for a result store's own database.
func (db *DB) MigrateFence(ctx context.Context) ([]string, error) {
	migrations, err := db.Migrations()
	if err != nil {
		return nil, err
	}
	var fence []Migration
	for _, m := range migrations {
		if fenceOnly[m.Name] {
			fence = append(fence, m)
		}
	}
	return db.apply(ctx, fence)
}

func (db *DB) apply(ctx context.Context, migrations []Migration) ([]string, error) {
	var applied []string
	for _, m := range migrations {
		did := false
		err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			s := pgx.Identifier{db.schema}.Sanitize()
			if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", db.lockKey()); err != nil {
				return err
			}
			setup := fmt.Sprintf(`create schema if not exists %s;
create table if not exists %s.schema_migrations (
  version    integer primary key,
  name       text not null,
  applied_at timestamptz not null default clock_timestamp()
)`, s, s)
			if _, err := tx.Exec(ctx, setup, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			var exists bool
			if err := tx.QueryRow(ctx, fmt.Sprintf("select exists (select 1 from %s.schema_migrations where version = $1)", s), m.Version).Scan(&exists); err != nil {
				return err
			}
			if exists {
				return nil
			}
			if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf("insert into %s.schema_migrations (version, name) values ($1, $2)", s), m.Version, m.Name); err != nil {
				return err
			}
			did = true
			return nil
		})
		if err != nil {
			return applied, db.translate(err, "migrating "+m.Name)
		}
		if did {
			applied = append(applied, m.Name)
		}
	}
	return applied, nil
}

// SchemaVersion returns the highest migration applied, 0 when none is.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	applied, err := db.appliedCount(ctx)
	return applied.max, err
}

type appliedSummary struct{ count, max int }

func (db *DB) appliedCount(ctx context.Context) (appliedSummary, error) {
	var s appliedSummary
	q := fmt.Sprintf("select count(*), coalesce(max(version), 0) from %s.schema_migrations", pgx.Identifier{db.schema}.Sanitize())
	err := db.pool.QueryRow(ctx, q).Scan(&s.count, &s.max)
	if pgCode(err) == "42P01" || pgCode(err) == "3F000" { // no table, no schema
		return appliedSummary{}, nil
	}
	return s, db.translate(err, "reading schema version")
}

// migrateIfBehind costs one query when the schema is current, which is the
// price of "migrations apply automatically on first use". It counts the
// applied migrations rather than taking the highest: a fence-only database
// has 0002 without 0001.
func (db *DB) migrateIfBehind(ctx context.Context) ([]string, error) {
	have, err := db.appliedCount(ctx)
	if err != nil {
		return nil, err
	}
	migrations, err := db.Migrations()
	if err != nil {
		return nil, err
	}
	if have.count >= len(migrations) {
		return nil, nil
	}
	return db.Migrate(ctx)
}

func (db *DB) lockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("baton.migrate." + db.schema))
	return int64(h.Sum64())
}
