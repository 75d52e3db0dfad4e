package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// migrateJSON is `baton migrate --json`.
type migrateJSON struct {
	Store struct {
		Kind string `json:"kind"`
	} `json:"store"`
	Database         string   `json:"database"`
	Applied          []string `json:"applied"`
	Version          int      `json:"version"`
	Known            int      `json:"known"`
	Newer            []string `json:"newer"`
	CompatibleDownTo int      `json:"compatible_down_to"`
}

func (s store) migrate(t *testing.T) (migrateJSON, result) {
	t.Helper()
	r := s.run(t, "migrate", "--json")
	var out migrateJSON
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("baton migrate --json: %v\n%s", err, r.stdout)
		}
	}
	return out, r
}

// execSchema runs a statement on the store's schema record: PostgreSQL's
// baton.schema_migrations, or the local store's baton.db.
func (s store) execSchema(t *testing.T, q string, args ...any) {
	t.Helper()
	ctx := context.Background()
	if s.dsn != "" {
		conn, err := pgx.Connect(ctx, s.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, strings.ReplaceAll(q, "schema_migrations", "baton.schema_migrations"), args...); err != nil {
			t.Fatal(err)
		}
		return
	}
	db, err := sqlite.OpenConfig(ctx, sqlite.Config{Path: filepath.Join(strings.TrimPrefix(s.env[0], "BATON_LOCK_DIR="), "baton.db"), NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.SQL().ExecContext(ctx, strings.ReplaceAll(q, "$", "?"), args...); err != nil {
		t.Fatal(err)
	}
}

func knownVersion(s store) int {
	if s.dsn != "" {
		return postgres.KnownVersion()
	}
	return sqlite.KnownVersion()
}

// `baton migrate` migrates both stores, the local store's baton.db too, and
// says so in its help and its output.
func TestMigrateBothStores(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		out, r := s.migrate(t)
		if r.code != 0 {
			t.Fatalf("baton migrate: exit %d: %s", r.code, r.stderr)
		}
		known := knownVersion(s)
		if out.Store.Kind != s.name || len(out.Applied) != known || out.Version != known || out.Known != known {
			t.Fatalf("first migrate: %+v; want %d migrations applied, version %d", out, known, known)
		}
		if s.name == "local" && filepath.Base(out.Database) != "baton.db" {
			t.Errorf("database %q, want the lock directory's baton.db", out.Database)
		}
		if r.stderr != "" {
			t.Errorf("baton migrate --json logged without being asked:\n%s", r.stderr)
		}
		again, r := s.migrate(t)
		if r.code != 0 || len(again.Applied) != 0 || again.Version != known {
			t.Fatalf("second migrate: %+v, exit %d: %s", again, r.code, r.stderr)
		}
		r = s.run(t, "migrate")
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("schema at version %d (this baton knows up to %d)", known, known)) || strings.Contains(r.stdout, "no schema") {
			t.Fatalf("baton migrate: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	r := localStore(t).run(t, "migrate", "--help")
	if r.code != 0 || strings.Contains(r.stdout, "has no schema") || !strings.Contains(r.stdout, "baton.db") {
		t.Fatalf("baton migrate --help, exit %d:\n%s", r.code, r.stdout)
	}
}

// baton migrate says each step once: on stdout, for whoever ran it. Before,
// every step was also logged on stderr, so a terminal showed each twice.
// Log lines come only when asked for, with --log-format or --log-level, as
// the daemon and the relay write them.
func TestMigrateSaysEachStepOnce(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		known := knownVersion(s)
		r := s.run(t, "migrate")
		if r.code != 0 || strings.Count(r.stdout, "applied ") != known || r.stderr != "" {
			t.Fatalf("baton migrate: exit %d; want %d steps on stdout and nothing on stderr\nstdout:\n%s\nstderr:\n%s", r.code, known, r.stdout, r.stderr)
		}
		fresh := s
		if s.dsn != "" {
			fresh = pgStore(t)
		} else {
			fresh = localStore(t)
		}
		r = fresh.run(t, "migrate", "--log-format", "json")
		if r.code != 0 || strings.Count(r.stderr, `"msg":"applied migration"`) != known || strings.Count(r.stdout, "applied ") != known {
			t.Fatalf("baton migrate --log-format json: exit %d; want %d JSON log lines on stderr\nstdout:\n%s\nstderr:\n%s", r.code, known, r.stdout, r.stderr)
		}
		if r := s.run(t, "migrate", "--log-level", "debug"); r.code != 0 || r.stderr != "" && !strings.Contains(r.stderr, "level=") {
			t.Fatalf("baton migrate --log-level debug: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := s.run(t, "migrate", "--log-format", "yaml"); r.code != 64 || !strings.Contains(r.stderr, "--log-format") {
			t.Errorf("baton migrate --log-format yaml: exit %d, stderr %q; want 64 naming --log-format", r.code, r.stderr)
		}
	})
}

// The version gate, with the real binary: on a schema that has a migration
// it does not know, baton refuses to migrate, run the daemon or the relay,
// or enqueue (exit 69, naming both versions), while status, jobs, runs and
// leases still read; once the schema says it stays compatible with this
// baton, everything runs.
func TestMigrateVersionGate(t *testing.T) {
	jobs := writeJobFile(t, `
jobs:
  - name: job
    schedule: "@daily"
    command: [true]
`)
	bothStores(t, func(t *testing.T, s store) {
		if _, r := s.migrate(t); r.code != 0 {
			t.Fatalf("baton migrate: exit %d: %s", r.code, r.stderr)
		}
		known := knownVersion(s)
		future := known + 90
		s.execSchema(t, "insert into schema_migrations (version, name) values ($1, $2)", future, fmt.Sprintf("%04d_future", future))

		writers := [][]string{
			{"migrate"},
			{"daemon", "--config", jobs},
			{"relay", "--sink", "noop:", "--until-idle"},
			{"outbox", "enqueue", "--topic", "t", `{"a":1}`},
		}
		for _, args := range writers {
			r := s.runWithin(t, time.Minute, args...)
			if r.code != 69 {
				t.Errorf("baton %s on a newer schema: exit %d, want 69\n%s%s", args[0], r.code, r.stdout, r.stderr)
				continue
			}
			for _, want := range []string{fmt.Sprintf("schema version %d", future), fmt.Sprintf("knows (%d)", known), fmt.Sprintf("%04d_future", future), "upgrade baton"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("baton %s on a newer schema does not say %q:\n%s", args[0], want, r.stderr)
				}
			}
		}
		for _, args := range [][]string{{"status"}, {"jobs"}, {"runs"}, {"leases"}, {"outbox", "status"}, {"outbox", "dead"}} {
			if r := s.run(t, args...); r.code != 0 {
				t.Errorf("baton %s (read-only) on a newer schema: exit %d, want 0\n%s", strings.Join(args, " "), r.code, r.stderr)
			}
		}

		s.execSchema(t, "update schema_migrations set compatible_down_to = $1 where version = $2", known, future)
		out, r := s.migrate(t)
		if r.code != 0 || out.Version != future || out.Known != known || len(out.Newer) != 1 || out.CompatibleDownTo != known {
			t.Fatalf("baton migrate on a compatible newer schema: %+v, exit %d: %s", out, r.code, r.stderr)
		}
		if r := s.run(t, "outbox", "enqueue", "--topic", "t", `{"a":1}`); r.code != 0 {
			t.Fatalf("baton outbox enqueue on a compatible newer schema: exit %d: %s", r.code, r.stderr)
		}
		if r := s.run(t, "relay", "--sink", "noop:", "--until-idle"); r.code != 0 {
			t.Fatalf("baton relay on a compatible newer schema: exit %d: %s", r.code, r.stderr)
		}
	})
}

// A daemon that migrates the store on its way up logs each migration at
// INFO.
func TestDaemonLogsMigrations(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		jobs := writeJobFile(t, `
jobs:
  - name: job
    schedule: "@daily"
    command: [true]
`)
		d := s.startDaemon(t, "d", jobs)
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(d.logText(t), `"msg":"starting"`) {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon did not start:\n%s", d.logText(t))
			}
			time.Sleep(50 * time.Millisecond)
		}
		d.stop(t)
		n := 0
		for _, line := range strings.Split(d.logText(t), "\n") {
			if strings.Contains(line, `"msg":"applied migration"`) {
				if !strings.Contains(line, `"level":"INFO"`) {
					t.Errorf("not at INFO: %s", line)
				}
				n++
			}
		}
		if n != knownVersion(s) {
			t.Fatalf("the daemon logged %d migrations applied, want %d:\n%s", n, knownVersion(s), d.logText(t))
		}
	})
}

// A migration recorded from another text than this baton's file: the
// daemon and the relay refuse to start (exit 69), naming the migration and
// the fix; readers still read; once the fix is applied, they start.
func TestChecksumMismatchRefusesDaemonAndRelay(t *testing.T) {
	t.Parallel()
	jobs := writeJobFile(t, `
jobs:
  - name: job
    schedule: "@daily"
    command: [true]
`)
	for _, s := range []store{pgStore(t), localStore(t)} {
		t.Run(s.name, func(t *testing.T) {
			if _, r := s.migrate(t); r.code != 0 {
				t.Fatalf("baton migrate: exit %d: %s", r.code, r.stderr)
			}
			s.execSchema(t, "update schema_migrations set checksum = $1 where version = 2", strings.Repeat("ab", 32))
			var fix string
			for _, args := range [][]string{{"daemon", "--config", jobs}, {"relay", "--sink", "noop:", "--until-idle"}, {"migrate"}} {
				r := s.runWithin(t, time.Minute, args...)
				if r.code != 69 {
					t.Fatalf("baton %s over a mismatched checksum: exit %d, want 69\n%s", args[0], r.code, r.stderr)
				}
				if !strings.Contains(r.stderr, "migration 0002_") || !strings.Contains(r.stderr, strings.Repeat("ab", 32)) {
					t.Errorf("baton %s does not name the migration and the recorded checksum:\n%s", args[0], r.stderr)
				}
				_, after, ok := strings.Cut(r.stderr, "record this baton's checksum: ")
				if !ok {
					t.Fatalf("baton %s gives no fix:\n%s", args[0], r.stderr)
				}
				fix, _, _ = strings.Cut(after, ";")
			}
			if r := s.run(t, "status"); r.code != 0 {
				t.Errorf("baton status over a mismatched checksum: exit %d\n%s", r.code, r.stderr)
			}
			// The fix, as given: the statement between the quotes.
			_, stmt, _ := strings.Cut(fix, "\"")
			stmt, _, _ = strings.Cut(stmt, "\"")
			s.execSchema(t, strings.ReplaceAll(stmt, "baton.schema_migrations", "schema_migrations"))
			if r := s.runWithin(t, time.Minute, "relay", "--sink", "noop:", "--until-idle"); r.code != 0 {
				t.Fatalf("baton relay after the fix (%s): exit %d\n%s", fix, r.code, r.stderr)
			}
		})
	}
}

// A function of baton's replaced by hand in the live schema, a fence_lease
// that accepts any token: baton migrate, run, the daemon and the relay
// refuse to run on it (exit 69), naming the function and the fix; doctor pg
// reports it, critical; baton migrate --repair restores it, and the fence
// refuses a token that was never issued again.
func TestHandEditedFunctionIsRefused(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	jobs := writeJobFile(t, `
jobs:
  - name: job
    schedule: "@daily"
    command: [true]
`)
	if _, r := s.migrate(t); r.code != 0 {
		t.Fatalf("baton migrate: exit %d: %s", r.code, r.stderr)
	}
	if r := s.run(t, "run", "job", "--", "true"); r.code != 0 {
		t.Fatalf("baton run: exit %d: %s", r.code, r.stderr)
	}
	conn := pgConnect(t, s.dsn)
	// fence is the SQLSTATE of fence_lease on a token far above the job's
	// term, "" when it accepts it.
	fence := func() string {
		t.Helper()
		_, err := conn.Exec(context.Background(), "select baton.fence_lease('job', 1000000)")
		var pgErr *pgconn.PgError
		if err != nil && !errors.As(err, &pgErr) {
			t.Fatal(err)
		}
		if err == nil {
			return ""
		}
		return pgErr.Code
	}
	if code := fence(); code != "BF003" {
		t.Fatalf("the shipped fence on a token never issued: SQLSTATE %q, want BF003", code)
	}
	pgExec(t, conn, "create or replace function baton.fence_lease(p_job text, p_token bigint) returns bigint language sql as $$ select p_token $$")
	if code := fence(); code != "" {
		t.Fatalf("the hand-edited fence refused the token (%s): the test's edit did not take", code)
	}

	for _, args := range [][]string{
		{"migrate"},
		{"run", "job", "--", "true"},
		{"daemon", "--config", jobs},
		{"relay", "--sink", "noop:", "--until-idle"},
	} {
		r := s.runWithin(t, time.Minute, args...)
		if r.code != 69 {
			t.Errorf("baton %s over a hand-edited fence_lease: exit %d, want 69\n%s%s", args[0], r.code, r.stdout, r.stderr)
			continue
		}
		for _, want := range []string{"fence_lease(text, bigint)", "0009_fence_lease_key_share", "baton migrate --repair"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("baton %s does not say %q:\n%s", args[0], want, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "goroutine") {
			t.Errorf("baton %s: a stack trace:\n%s", args[0], r.stderr)
		}
	}

	type doctorFunctions struct {
		Level     string `json:"level"`
		Functions *struct {
			Checked int `json:"checked"`
			Differ  []struct {
				Function string `json:"function"`
			} `json:"differ"`
		} `json:"functions"`
		Findings []struct {
			Level, Check, Message string
		} `json:"findings"`
	}
	doctor := func() (doctorFunctions, result) {
		t.Helper()
		r := s.runPG(t, "--json")
		var rep doctorFunctions
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("baton doctor pg --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		return rep, r
	}
	rep, r := doctor()
	var found bool
	for _, f := range rep.Findings {
		found = found || f.Check == "functions" && f.Level == "critical" && strings.Contains(f.Message, "fence_lease(text, bigint)") && strings.Contains(f.Message, "baton migrate --repair")
	}
	if r.code != 2 || rep.Level != "critical" || !found || rep.Functions == nil || len(rep.Functions.Differ) != 1 || rep.Functions.Differ[0].Function != "fence_lease(text, bigint)" {
		t.Errorf("baton doctor pg over a hand-edited fence_lease: exit %d, %+v; want critical, naming it and the fix", r.code, rep)
	}
	if text := s.runPG(t); !strings.Contains(text.stdout, "fence_lease(text, bigint)") {
		t.Errorf("baton doctor pg does not name the function:\n%s", text.stdout)
	}

	r = s.run(t, "migrate", "--repair")
	if r.code != 0 || !strings.Contains(r.stdout, "restored fence_lease(text, bigint)") {
		t.Fatalf("baton migrate --repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code := fence(); code != "BF003" {
		t.Fatalf("the repaired fence on a token never issued: SQLSTATE %q, want BF003", code)
	}
	rep, _ = doctor()
	if rep.Functions == nil || rep.Functions.Checked == 0 || len(rep.Functions.Differ) != 0 {
		t.Errorf("baton doctor pg after the repair: %+v; want every function compared, none differing", rep.Functions)
	}
	for _, f := range rep.Findings {
		if f.Check == "functions" {
			t.Errorf("baton doctor pg after the repair: %+v", f)
		}
	}
	if r := s.run(t, "run", "job", "--", "true"); r.code != 0 {
		t.Fatalf("baton run after the repair: exit %d: %s", r.code, r.stderr)
	}
}
