package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/migration"
	"github.com/batonhq/baton/sqlite"
)

// The version gate: a file with a migration this binary does not know is
// refused (unavailable, naming both versions), not taken for current
// because its highest version is at least this binary's; unless it says
// it stays compatible with this binary.
func TestOpenVersionGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	known := migrationCount(t, db)
	future := known + 90
	if _, err := db.SQL().ExecContext(ctx, "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", future, fmt.Sprintf("%04d_future", future)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(ctx, path)
	if baton.ErrorCode(err) != baton.EUNAVAILABLE {
		t.Fatalf("a newer schema: %v (code %q); want unavailable", err, baton.ErrorCode(err))
	}
	for _, want := range []string{fmt.Sprintf("schema version %d", future), fmt.Sprintf("knows (%d)", known), fmt.Sprintf("%04d_future", future), path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
}

// The rest of the gate: a reader may read a refused file; a file that says
// it stays compatible with this binary is used, and nothing is migrated
// back.
func TestOpenVersionGateReadersAndCompatible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openTest(t)
	path := db.Path()
	known := sqlite.KnownVersion()
	future := known + 90
	if _, err := db.SQL().ExecContext(ctx, "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", future, fmt.Sprintf("%04d_future", future)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.MigrateReport(ctx); baton.ErrorCode(err) != baton.EUNAVAILABLE {
		t.Fatalf("migrate on a newer schema: %v; want unavailable", err)
	}
	reader, err := sqlite.OpenConfig(ctx, sqlite.Config{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatalf("a reader of a newer schema: %v", err)
	}
	if v, err := reader.SchemaVersion(ctx); err != nil || v != future {
		t.Fatalf("version read: %d, %v; want %d", v, err, future)
	}
	reader.Close()
	if _, err := db.SQL().ExecContext(ctx, "UPDATE schema_migrations SET compatible_down_to = ? WHERE version = ?", known, future); err != nil {
		t.Fatal(err)
	}
	compat, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("a newer schema compatible with this binary: %v", err)
	}
	compat.Close()
	r, err := db.MigrateReport(ctx)
	if err != nil || r.Version != future || r.Known != known || len(r.Applied) != 0 || r.CompatibleDownTo != known {
		t.Fatalf("migrate on a compatible newer schema: %+v, %v", r, err)
	}
}

// A file migrated by a baton from before checksums (its table has no such
// column) gains the columns and its checksums; a checksum that is not this
// binary's file's is refused, naming the migration and the fix.
func TestOpenRecordsChecksums(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	db, err := sqlite.OpenConfig(ctx, sqlite.Config{Path: path, NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := db.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE schema_migrations (
  version INTEGER PRIMARY KEY, name TEXT NOT NULL,
  applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) STRICT`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:len(ms)-1] { // one left to apply
		if _, err := db.SQL().ExecContext(ctx, m.SQL); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().ExecContext(ctx, "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	r, err := db.MigrateReport(ctx)
	if err != nil || len(r.Applied) != 1 || len(r.Verified) != len(ms)-1 || r.Version != ms[len(ms)-1].Version {
		t.Fatalf("migrating a file of an older baton: %+v, %v", r, err)
	}
	for _, m := range ms {
		b, err := os.ReadFile("sql/migrations/" + m.Name + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		var sum string
		if err := db.SQL().QueryRowContext(ctx, "SELECT checksum FROM schema_migrations WHERE version = ?", m.Version).Scan(&sum); err != nil || sum != migration.Checksum(b) {
			t.Errorf("%s: checksum %q, %v; want the file's", m.Name, sum, err)
		}
	}
	if _, err := db.SQL().ExecContext(ctx, "UPDATE schema_migrations SET checksum = ? WHERE version = 2", strings.Repeat("ab", 32)); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(ctx, path)
	if baton.ErrorCode(err) != baton.EUNAVAILABLE {
		t.Fatalf("an unknown checksum: %v; want unavailable", err)
	}
	for _, want := range []string{"0002_schedule", strings.Repeat("ab", 32), ms[1].Checksum, "UPDATE schema_migrations SET checksum = '" + ms[1].Checksum + "' WHERE version = 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
}

// Shipped migrations never change: each is pinned in SHIPPED.sum, and a new
// one is added there.
func TestShippedMigrationsAreUnchanged(t *testing.T) {
	for _, err := range migration.VerifyShipped(os.DirFS("."), "sql/migrations", "") {
		t.Error(err)
	}
}

// 0007_last_ticks fills each job's row of last ticks from the ticks the
// store holds when it migrates, as PostgreSQL's 0013 does.
func TestMigrateFillsLastTicks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// The store as 0006 left it, with some history.
	if _, err := db.SQL().ExecContext(ctx, `
DROP TRIGGER ticks_note_last_insert; DROP TRIGGER ticks_note_last_update; DROP TABLE last_ticks;
DELETE FROM schema_migrations WHERE name = '0007_last_ticks';
INSERT INTO ticks (job, tick_at, version, kind, state, outcome, claim_until, ended_at) VALUES
  ('a', 60, 'v', 'scheduled', 'done', 'succeeded', 0, 540),
  ('a', 120, 'v', 'scheduled', 'done', 'failed', 0, 180),
  ('a', 180, 'v', 'scheduled', 'running', NULL, 0, NULL),
  ('b', 60, 'v', 'scheduled', 'pending', NULL, 0, NULL),
  ('c', 60, 'v', 'scheduled', 'done', 'skipped-overlap', 0, 60)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.SQL().QueryContext(ctx, `SELECT job || ' ' || tick_at || ' ' || coalesce(outcome, '-') || ' ' || coalesce(succeeded_at, '-')
FROM last_ticks ORDER BY job`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if want := []string{"a 120 failed 540", "c 60 skipped-overlap -"}; !slices.Equal(got, want) {
		t.Fatalf("last_ticks after the migration: %q, want %q", got, want)
	}
}
