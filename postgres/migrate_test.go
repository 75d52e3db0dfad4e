package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// oldSchema builds, in schema, what a baton of an older commit left: the
// migrations up to and including version upTo, each from this binary's text
// except those named in older (name → file text), recorded in a
// schema_migrations table of the old shape (no checksums).
func oldSchema(t *testing.T, dsn, schema string, upTo int, older map[string]string) {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	migrations, err := db.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, fmt.Sprintf(`create schema %[1]s; create table %[1]s.schema_migrations (
  version integer primary key, name text not null, applied_at timestamptz not null default clock_timestamp())`, schema)); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		if m.Version > upTo {
			break
		}
		sql := m.SQL
		if text, ok := older[m.Name]; ok {
			sql = strings.ReplaceAll(text, "@schema@", pgx.Identifier{schema}.Sanitize())
		}
		if _, err := db.Pool().Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := db.Pool().Exec(ctx, "insert into "+schema+".schema_migrations (version, name) values ($1, $2)", m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// functionBody is the source of schema.name as the server holds it.
func functionBody(t *testing.T, db *postgres.DB, schema, name string) string {
	t.Helper()
	var src string
	err := db.Pool().QueryRow(context.Background(), `select p.prosrc from pg_proc p join pg_namespace n on n.oid = p.pronamespace
 where n.nspname = $1 and p.proname = $2`, schema, name).Scan(&src)
	if err != nil {
		t.Fatalf("%s.%s: %v", schema, name, err)
	}
	return src
}

// A schema that reached version 6 at one of the commits before 0006_outbox
// took its final text kept the old outbox functions, while migrate said
// nothing was left to apply. Today's migration brings them up to today's
// bodies: outbox_settle no longer waits for a writer that holds the key's
// lock, and the checksum of every migration is recorded.
func TestMigrateRepairsFunctionsOfAnEditedMigration(t *testing.T) {
	for _, commit := range []string{"cf4db93", "e710a26", "6d437e9"} {
		t.Run(commit, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := pgtest.DSN(t)
			text, err := os.ReadFile("testdata/0006_outbox." + commit + ".sql")
			if err != nil {
				t.Fatal(err)
			}
			schema := "at_" + commit
			oldSchema(t, dsn, schema, 6, map[string]string{"0006_outbox": string(text)})

			// Today's schema, for comparison.
			today, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: "today", MaxConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer today.Close()

			db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, MaxConns: 4})
			if err != nil {
				t.Fatalf("opening the schema of %s with today's baton: %v", commit, err)
			}
			defer db.Close()
			for _, fn := range []string{"enqueue", "outbox_settle"} {
				got, want := functionBody(t, db, schema, fn), functionBody(t, today, "today", fn)
				if strings.ReplaceAll(got, schema, "today") != want {
					t.Errorf("%s: the body of the schema migrated at %s is not today's:\n%s", fn, commit, got)
				}
			}

			// Behaviour: an event whose key a writer holds (it enqueued on
			// the key and has not committed) is left by outbox_settle for
			// later, never waited for.
			q := func(s string) string { return strings.ReplaceAll(s, "baton.", schema+".") }
			var first int64
			if err := db.Pool().QueryRow(ctx, q(`select baton.enqueue('orders.created', 'e-1', '{}', 'K')`)).Scan(&first); err != nil {
				t.Fatal(err)
			}
			writer, err := db.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Rollback(ctx)
			if _, err := writer.Exec(ctx, q(`select baton.enqueue('orders.created', 'e-2', '{}', 'K')`)); err != nil {
				t.Fatal(err)
			}
			err = pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
				// A bound, not a speed: today's body never waits for the lock.
				if _, err := tx.Exec(ctx, "set local lock_timeout = '10s'"); err != nil {
					return err
				}
				rows, err := tx.Query(ctx, q(`select baton.outbox_settle(array[$1::bigint], null, 'delivered')`), first)
				if err != nil {
					return err
				}
				n := 0
				for rows.Next() {
					n++
				}
				if err := rows.Err(); err != nil {
					return err
				}
				if n != 0 {
					return fmt.Errorf("settled %d events while a writer held their key; want 0 (left for later)", n)
				}
				return nil
			})
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
				t.Fatalf("outbox_settle waited for the writer's key lock (the body of %s): %v", commit, err)
			}
			if err != nil {
				t.Fatal(err)
			}

			// Every migration's checksum is recorded: the file's sha256.
			migrations, err := db.Migrations()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range migrations {
				var sum *string
				if err := db.Pool().QueryRow(ctx, "select checksum from "+schema+".schema_migrations where version = $1", m.Version).Scan(&sum); err != nil {
					t.Fatalf("%s: %v", m.Name, err)
				}
				file, err := os.ReadFile("sql/migrations/" + m.Name + ".sql")
				if err != nil {
					t.Fatal(err)
				}
				h := sha256.Sum256(file)
				if sum == nil || *sum != hex.EncodeToString(h[:]) {
					t.Errorf("%s: recorded checksum %v, want the file's sha256 %x", m.Name, sum, h)
				}
			}
		})
	}
}
