package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// A store that refuses connections (53300, too many clients for the role)
// is retried for --db-wait: baton waits, says so, and runs once a slot is
// free; or gives up with exit 69 and a clear message, never a crash.
func TestTooManyClientsIsRetried(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var dbname string
	admin.QueryRow(ctx, "select current_database()").Scan(&dbname)
	role := "limited_" + strings.TrimPrefix(dbname, "t_")[:20]
	for _, q := range []string{
		"create role " + role + " login connection limit 1",
		"alter database " + dbname + " owner to " + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "drop owned by "+role+" cascade") })
	cfg, _ := pgx.ParseConfig(dsn)
	limitedDSN := strings.Replace(asURL(t, dsn), "postgres://"+cfg.User+"@", "postgres://"+role+"@", 1)
	s := store{name: "postgres", env: []string{"BATON_DB=" + limitedDSN}}

	// The role's one slot is taken: baton gives up after --db-wait.
	holder, err := pgx.Connect(ctx, dsn+" user="+role)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := s.run(t, "run", "--db-wait", "1s", "job", "--", "true")
	if r.code != baton.ExitUnavailable || !strings.Contains(r.stderr, "retrying for up to 1s") || !strings.Contains(r.stderr, "too many connections") {
		t.Errorf("exit %d after %s, want %d naming the limit:\n%s", r.code, time.Since(start), baton.ExitUnavailable, r.stderr)
	}
	if strings.Contains(r.stderr, "goroutine") {
		t.Errorf("a stack trace:\n%s", r.stderr)
	}

	// The slot frees up while baton waits: it runs, once.
	// The slot is freed only once baton has been refused and says it
	// retries: on a busy machine its first attempt may come late.
	outPath := filepath.Join(t.TempDir(), "out")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := s.command(ctx, "run", "--db-wait", "2m", "job", "--", "echo", "ran")
	cmd.Stdout, cmd.Stderr = outFile, outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outFile.Close()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	output := func() string { b, _ := os.ReadFile(outPath); return string(b) }
	waitUntil(t, "baton to retry the refused connection", time.Minute, func() bool {
		return strings.Contains(output(), "retrying for up to")
	})
	holder.Close(ctx)
	if code := exitCode(t, cmd); code != 0 || strings.Count(output(), "ran\n") != 1 || !strings.Contains(output(), "answers again") {
		t.Errorf("exit %d, output:\n%s", code, output())
	}
}
