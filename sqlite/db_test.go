package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/sqlite"
)

// openTest opens a fresh store in the test's own directory.
func openTest(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "baton.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// migrationCount is the number of embedded migrations, numbered 1…n.
func migrationCount(t *testing.T, db *sqlite.DB) int {
	t.Helper()
	ms, err := db.Migrations()
	if err != nil || len(ms) < 4 { // 0004_outbox at least
		t.Fatalf("embedded migrations: %d, %v", len(ms), err)
	}
	return len(ms)
}

func TestOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	for i := range 2 { // the second Open finds the schema current
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		want := migrationCount(t, db)
		if v, err := db.SchemaVersion(ctx); err != nil || v != want {
			t.Fatalf("open #%d: schema version %d, %v; want %d, the newest embedded migration", i+1, v, err, want)
		}
		rows, err := db.SQL().QueryContext(ctx, "SELECT version, name, applied_at FROM schema_migrations ORDER BY version")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var v int
			var name, at string
			if err := rows.Scan(&v, &name, &at); err != nil {
				t.Fatal(err)
			}
			if at == "" {
				t.Errorf("migration %s has no applied_at", name)
			}
			got = append(got, name)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if want := []string{"0001_fence", "0002_schedule", "0003_idempotency", "0004_outbox"}; !slices.Equal(got, want) {
			t.Fatalf("open #%d: schema_migrations holds %q, want %q", i+1, got, want)
		}
		// Migrate again by hand: nothing left to apply.
		if applied, err := db.Migrate(ctx); err != nil || len(applied) != 0 {
			t.Fatalf("open #%d: Migrate applied %q, %v; want nothing", i+1, applied, err)
		}
		db.Close()
	}
}

// Two baton processes starting at once on a new file: the migration is
// applied once and both opens succeed (the second waits on the write lock).
func TestOpenConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	var wg sync.WaitGroup
	dbs := make([]*sqlite.DB, 4)
	errs := make([]error, len(dbs))
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = sqlite.Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open #%d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	var n int
	want := migrationCount(t, dbs[0])
	if err := dbs[0].SQL().QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != want {
		t.Fatalf("schema_migrations has %d rows, %v; want %d (each migration once)", n, err, want)
	}
}

// The settings come with every connection of the pool, not only the first:
// hold one connection busy and look at a second one.
func TestConnectionSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openTest(t)
	held, err := db.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"busy_timeout": "5000",
		"synchronous":  "2", // FULL
		"foreign_keys": "1",
	} {
		var got string
		if err := conn.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte("this is not a SQLite database, it is text that is long enough to fill a header"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       baton.Code
	}{
		{"empty", "", baton.EINVALID},
		{"uri", "file:x.db", baton.EINVALID},
		{"memory", ":memory:", baton.EINVALID},
		{"not a database", notDB, baton.EINVALID},
		{"no such directory", filepath.Join(dir, "missing", "baton.db"), baton.EUNAVAILABLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqlite.Open(ctx, tc.path)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) succeeded", tc.path)
			}
			if got := baton.ErrorCode(err); got != tc.want {
				t.Fatalf("Open(%q): code %s, want %s (%v)", tc.path, got, tc.want, err)
			}
			t.Log(err)
		})
	}
}

// A path that a bare-name DSN would cut at '?', or that a URI needs
// escaped, still names the file it says.
func TestOpenAwkwardPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a dir?with#odd%chars")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "baton.db")
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not created at the path given: %v", err)
	}
}
