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

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/migration"
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
			// enqueue refuses the keys that cf4db93's accepted (up to 400
			// bytes of anything).
			var pgErr *pgconn.PgError
			_, err = db.Pool().Exec(ctx, q(`select baton.enqueue('orders.created', repeat('k', 300), '{}')`))
			if !errors.As(err, &pgErr) || pgErr.Code != "22023" {
				t.Errorf("enqueue of a 300-byte key: %v; want SQLSTATE 22023", err)
			}
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

// A recorded checksum that is an edited file's older one is repaired (the
// functions are today's, the checksum the file's); any other is refused,
// naming the migration and the fix, except to a reader.
func TestMigrateChecksumMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	const schema = "sums"
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Pool().Exec(ctx, strings.ReplaceAll(q, "@schema@", schema), args...); err != nil {
			t.Fatal(err)
		}
	}

	// 0006 as it shipped at cf4db93: repaired.
	exec("update @schema@.schema_migrations set checksum = 'c20bc48bd3290bc5133d9a5eb253ebdc2feb8743b35ef51b33320024d5a45a2c' where version = 6")
	exec("delete from @schema@.schema_repeatables")
	again, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatalf("a known older checksum of 0006 was refused: %v", err)
	}
	again.Close()
	var sum string
	if err := db.Pool().QueryRow(ctx, "select checksum from "+schema+".schema_migrations where version = 6").Scan(&sum); err != nil || sum != "be45580c85eb6ead928bddfe9ea336c4c1524f82d3fe1bd4b94c9d68670f87d7" {
		t.Fatalf("0006's checksum after the repair: %q, %v; want the file's", sum, err)
	}

	// A text this binary never shipped: refused, loudly.
	exec("update @schema@.schema_migrations set checksum = repeat('ab', 32) where version = 5")
	_, err = postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	t.Log(err)
	if baton.ErrorCode(err) != baton.EUNAVAILABLE || !postgres.Refused(err) {
		t.Fatalf("an unknown checksum: %v (code %s); want a refusal, unavailable", err, baton.ErrorCode(err))
	}
	for _, want := range []string{"0005_idempotency", strings.Repeat("ab", 32), "a55253934e425231aa7ba0329e66b2c0e568d9e4e122d1010f75ae0671b8af29",
		"update sums.schema_migrations set checksum = 'a55253934e425231aa7ba0329e66b2c0e568d9e4e122d1010f75ae0671b8af29' where version = 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	if _, err := db.MigrateReport(ctx); !postgres.Refused(err) {
		t.Fatalf("migrate over an unknown checksum: %v; want the refusal", err)
	}
	reader, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, ReadOnly: true})
	if err != nil {
		t.Fatalf("a reader was refused: %v", err)
	}
	reader.Close()
}

// The version gate: a schema with a migration this binary does not know is
// refused (unavailable, naming both versions), unless the schema says it
// stays compatible with this binary; a reader may read it either way.
func TestMigrateVersionGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db := open(t, dsn)
	known := postgres.KnownVersion()
	future := known + 90
	if _, err := db.Pool().Exec(ctx, "insert into baton.schema_migrations (version, name, checksum) values ($1, $2, repeat('0', 64))",
		future, fmt.Sprintf("%04d_future", future)); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	t.Log(err)
	if baton.ErrorCode(err) != baton.EUNAVAILABLE || !postgres.Refused(err) {
		t.Fatalf("a newer schema: %v; want a refusal, unavailable", err)
	}
	for _, want := range []string{fmt.Sprintf("schema version %d", future), fmt.Sprintf("knows (%d)", known), fmt.Sprintf("%04d_future", future), "upgrade baton"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	if _, err := db.MigrateReport(ctx); !postgres.Refused(err) {
		t.Fatalf("migrate on a newer schema: %v; want the refusal", err)
	}
	reader, err := postgres.Open(ctx, postgres.Config{DSN: dsn, ReadOnly: true})
	if err != nil {
		t.Fatalf("a reader of a newer schema: %v", err)
	}
	if v, err := reader.SchemaVersion(ctx); err != nil || v != future {
		t.Fatalf("version read: %d, %v; want %d", v, err, future)
	}
	reader.Close()

	// Compatible down to what this binary knows: used, not migrated back.
	if _, err := db.Pool().Exec(ctx, "update baton.schema_migrations set compatible_down_to = $1 where version = $2", known, future); err != nil {
		t.Fatal(err)
	}
	compat, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("a newer schema compatible with this binary: %v", err)
	}
	compat.Close()
	r, err := db.MigrateReport(ctx)
	if err != nil || r.Version != future || r.Known != known || len(r.Applied) != 0 || fmt.Sprint(r.Newer) != fmt.Sprintf("[%04d_future]", future) {
		t.Fatalf("migrate on a compatible newer schema: %+v, %v", r, err)
	}
	// One migration too new for this binary among compatible ones.
	if _, err := db.Pool().Exec(ctx, "insert into baton.schema_migrations (version, name, compatible_down_to) values ($1, $2, $1)",
		future+1, fmt.Sprintf("%04d_breaking", future+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, postgres.Config{DSN: dsn}); !postgres.Refused(err) || !strings.Contains(err.Error(), fmt.Sprintf("%04d_breaking", future+1)) {
		t.Fatalf("a newer schema with one incompatible migration: %v; want the refusal naming it", err)
	}
}

// Shipped migrations never change: each is pinned in SHIPPED.sum (a new
// one is added there), and each repeatable step's hash is the last of its
// history.
func TestShippedMigrationsAreUnchanged(t *testing.T) {
	for _, err := range migration.VerifyShipped(os.DirFS("."), "sql/migrations", "sql/repeatable") {
		t.Error(err)
	}
}

// A role that may not change the schema, on a schema that needs this
// version's bookkeeping (recorded by an older baton): refused with the fix,
// not an internal error.
func TestMigrateNeedsOwnerOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	oldSchema(t, dsn, "baton", 9, nil)
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	role := "worker_" + strings.ReplaceAll(t.Name(), "/", "_")
	role = strings.ToLower(role)
	if _, err := db.Pool().Exec(ctx, fmt.Sprintf(`create role %[1]s login; grant usage on schema baton to %[1]s;
grant select, insert, update, delete on all tables in schema baton to %[1]s`, role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Pool().Exec(context.Background(), fmt.Sprintf("drop owned by %[1]s; drop role %[1]s", role))
	})
	_, err = postgres.Open(ctx, postgres.Config{DSN: dsn + " user=" + role})
	if baton.ErrorCode(err) != baton.EUNAVAILABLE || !strings.Contains(err.Error(), "run baton migrate as a role that owns the schema") {
		t.Fatalf("a role that may not migrate: %v; want unavailable, with the fix", err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	worker, err := postgres.Open(ctx, postgres.Config{DSN: dsn + " user=" + role})
	if err != nil {
		t.Fatalf("the worker role, once the owner migrated: %v", err)
	}
	worker.Close()
}

// 0013_last_ticks fills each job's row of last ticks from the ticks a schema
// holds when it migrates: the newest ended tick by instant (not the last to
// end), and the latest end of a succeeded tick.
func TestMigrateFillsLastTicks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	oldSchema(t, dsn, "s12", 12, nil)
	admin := open(t, dsn)
	if _, err := admin.Pool().Exec(ctx, `
insert into s12.ticks (job, tick_at, version, kind, state, outcome, claim_until, ended_at) values
  ('a', '2026-01-01 00:01Z', 'v', 'scheduled', 'done', 'succeeded', '2026-01-01Z', '2026-01-01 00:09Z'),
  ('a', '2026-01-01 00:02Z', 'v', 'scheduled', 'done', 'failed',    '2026-01-01Z', '2026-01-01 00:03Z'),
  ('a', '2026-01-01 00:03Z', 'v', 'scheduled', 'running', null,     '2026-01-01Z', null),
  ('b', '2026-01-01 00:01Z', 'v', 'scheduled', 'pending', null,     '2026-01-01Z', null),
  ('c', '2026-01-01 00:01Z', 'v', 'scheduled', 'done', 'skipped-overlap', '2026-01-01Z', '2026-01-01 00:01Z')`); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: "s12"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Pool().Query(ctx, `select job || ' ' || to_char(tick_at at time zone 'UTC', 'HH24:MI') || ' ' || coalesce(outcome, '-') || ' ' ||
  coalesce(to_char(succeeded_at at time zone 'UTC', 'HH24:MI'), '-') from s12.last_ticks order by job`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a 00:02 failed 00:09", "c 00:01 skipped-overlap -"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("last_ticks after the migration: %q, want %q", got, want)
	}
}
