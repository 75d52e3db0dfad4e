package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
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
		if want := []string{"0001_fence", "0002_schedule", "0003_idempotency", "0004_outbox", "0005_fleet_versions", "0006_ticks_last_success", "0007_last_ticks", "0008_fence_mark_rises", "0009_job_host"}; !slices.Equal(got, want) {
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

// In a group-shared directory (the host lock directory is 2770), the
// schedule's files are group-writable as the lock files are, whatever the
// umask, so that every member of the group can run daemons on it; an
// older file made 0644 is given the group's write too. Elsewhere the
// umask decides, as before. Not parallel: it sets the process's umask.
func TestFileModesFollowGroupDirectory(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	ctx := context.Background()
	open := func(dir string) {
		t.Helper()
		db, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db"))
		if err != nil {
			t.Fatal(err)
		}
		// A write, so that the WAL and its index exist.
		if _, err := db.SQL().ExecContext(ctx, "create table if not exists t (x integer)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
	}
	modes := func(dir string) map[string]os.FileMode {
		t.Helper()
		out := map[string]os.FileMode{}
		for _, name := range []string{"baton.db", "baton.db-wal", "baton.db-shm"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			out[name] = fi.Mode().Perm()
		}
		return out
	}
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	open(shared)
	for name, mode := range modes(shared) {
		if mode&0o060 != 0o060 {
			t.Errorf("%s in a 2770 directory: mode %v, want group read and write", name, mode)
		}
	}

	older := t.TempDir()
	if err := os.WriteFile(filepath.Join(older, "baton.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(older, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	open(older)
	if mode := modes(older)["baton.db"]; mode&0o060 != 0o060 {
		t.Errorf("an older 0644 baton.db in a 2770 directory: mode %v after Open, want group read and write", mode)
	}

	private := t.TempDir()
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	open(private)
	for name, mode := range modes(private) {
		if mode&0o022 != 0 {
			t.Errorf("%s in a 0700 directory: mode %v, want what umask 022 gives", name, mode)
		}
	}
}
