package main_test

import (
	"net/url"
	"os"
	"strings"
	"testing"
)

// Bad input: a one-line error naming the problem, its documented exit
// status, and no lease taken or changed, in either store.
func TestRunBadInput(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		// One real lease, whose token must not move.
		if r := s.run(t, "run", "job", "--", "true"); r.code != 0 {
			t.Fatalf("setup run: %d %s", r.code, r.stderr)
		}
		cases := []struct {
			name string
			args []string
			code int
			want string // in the error line
		}{
			{"unknown flag", []string{"run", "--bogus", "job", "--", "true"}, 64, "-bogus"},
			{"missing --", []string{"run", "job", "true"}, 64, "--"},
			{"missing job", []string{"run", "--", "true"}, 64, "JOB"},
			{"missing command", []string{"run", "job", "--"}, 64, "COMMAND"},
			{"two jobs", []string{"run", "job", "other", "--", "true"}, 64, "one job name"},
			{"bad duration", []string{"run", "--ttl", "soon", "job", "--", "true"}, 64, "-ttl"},
			{"bad wait", []string{"run", "--wait", "-1s", "job", "--", "true"}, 64, "--wait"},
			{"zero ttl", []string{"run", "--ttl", "0s", "job", "--", "true"}, 64, "--ttl"},
			{"negative ttl", []string{"run", "--ttl", "-5s", "job", "--", "true"}, 64, "--ttl"},
			{"busy code too big", []string{"run", "--busy-exit-code", "256", "job", "--", "true"}, 64, "--busy-exit-code"},
			{"empty job", []string{"run", "", "--", "true"}, 64, "job"},
			{"job with slash", []string{"run", "a/b", "--", "true"}, 64, "'/'"},
			{"job with newline", []string{"run", "a\nb", "--", "true"}, 64, "control character"},
			{"not a postgres dsn", []string{"run", "--db", "mysql://u:pw@h/db", "job", "--", "true"}, 64, "--db"},
			{"unparsable dsn", []string{"run", "--db", "postgres://u:pw@[::1/db", "job", "--", "true"}, 64, "db"},
			{"unreachable server", []string{"run", "--db-wait", "1s", "--db", "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2", "job", "--", "true"}, 69, "unavailable"},
			{"unknown command", []string{"frobnicate"}, 64, "unknown command"},
		}
		for _, c := range cases {
			r := s.run(t, c.args...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != c.code || !strings.Contains(lines[0], c.want) {
				t.Errorf("%s: exit %d, stderr %q; want exit %d and an error naming %q", c.name, r.code, r.stderr, c.code, c.want)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("%s: stack trace in output:\n%s", c.name, r.stderr)
			}
			if strings.Contains(r.stderr, "hunter2") || strings.Contains(r.stderr, ":pw@") {
				t.Errorf("%s: password printed: %s", c.name, r.stderr)
			}
			if len(lines) > 2 {
				t.Errorf("%s: want a one-line error (and a hint), got:\n%s", c.name, r.stderr)
			}
		}
		ls := s.leases(t)
		if len(ls) != 1 || ls[0].Job != "job" || ls[0].Token != 1 || ls[0].State != "free" {
			t.Fatalf("bad input changed the leases: %+v", ls)
		}
	})
}

func TestHelp(t *testing.T) {
	s := localStore(t)
	r := s.run(t, "run", "--help")
	for _, want := range []string{"Exit status", "75", "64", "69", "76", "BATON_FENCING_TOKEN", "--kill-after", "crontab"} {
		if !strings.Contains(r.stdout, want) && !strings.Contains(r.stdout, strings.TrimPrefix(want, "-")) {
			t.Errorf("baton run --help lacks %q", want)
		}
	}
	if r.code != 0 {
		t.Errorf("baton run --help: exit %d", r.code)
	}
	if r := s.run(t); r.code != 64 || !strings.Contains(r.stdout, "Commands:") {
		t.Errorf("bare baton: exit %d, stdout %q", r.code, r.stdout)
	}
}

// storeCommands are the subcommands that open the store named by --db or
// BATON_DB, each with arguments that are otherwise valid.
func storeCommands(t *testing.T) [][]string {
	jobs := writeJobFile(t, `
jobs:
  - name: job
    schedule: "@daily"
    command: [true]
`)
	return [][]string{
		{"run", "job", "--", "true"},
		{"leases"},
		{"migrate"},
		{"bench", "leases", "--duration", "1s"},
		{"daemon", "--config", jobs},
		{"jobs"},
		{"status"},
		{"runs"},
		{"logs", "job"},
		{"trigger", "job"},
		{"pause", "job"},
		{"resume", "job"},
		{"backfill", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z", "job"},
		{"relay", "--sink", "noop:", "--until-idle"},
		{"outbox", "status"},
		{"outbox", "enqueue", "--topic", "t", `{"a":1}`},
		{"doctor", "pg"},
	}
}

// An empty store address (--db ”, or BATON_DB= set but empty, as an
// unset variable in --db "$URL" gives) is a usage error naming the flag or
// the variable: never a silent fall back to the local store, which would
// let this host run jobs under its own lock beside the fleet.
func TestEmptyStoreAddress(t *testing.T) {
	t.Parallel()
	for _, args := range storeCommands(t) {
		for _, how := range []string{"flag", "variable"} {
			dir := t.TempDir()
			s := store{name: "local", env: []string{"BATON_LOCK_DIR=" + dir}}
			run, want := args, "-db"
			if how == "flag" {
				run = append([]string{args[0], "--db", ""}, args[1:]...)
			} else {
				s.env = append(s.env, "BATON_DB=")
				want = "BATON_DB"
			}
			r := s.run(t, run...)
			if r.code != 64 || !strings.Contains(firstLine(r.stderr), want) {
				t.Errorf("baton %q with an empty %s: exit %d, stderr %q; want 64 naming %s", run, how, r.code, r.stderr, want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("baton %q with an empty %s used the local store: %d entries in its lock directory", run, how, len(ents))
			}
		}
	}
}

// Bad values of the store's flags are usage errors naming the flag, not
// internal errors (70) and not values silently wrapped around.
func TestStoreFlagBadInput(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	opts := "options=-c%20statement_timeout%3Dbogus"
	for _, c := range []struct {
		name string
		args []string
		want string // in the first line of stderr
	}{
		{"max conns past int32", []string{"leases", "--db-max-conns", "4294967296"}, "--db-max-conns"},
		{"max conns huge", []string{"leases", "--db-max-conns", "1000000"}, "--db-max-conns"},
		{"system schema pg_catalog", []string{"leases", "--schema", "pg_catalog"}, "schema"},
		{"system schema pg_toast", []string{"leases", "--schema", "pg_toast"}, "schema"},
		{"system schema information_schema", []string{"leases", "--schema", "information_schema"}, "schema"},
		{"migrate into pg_catalog", []string{"migrate", "--schema", "pg_catalog"}, "schema"},
		{"bad startup option", []string{"leases", "--db", asURL(t, s.dsn) + "&" + opts}, "db"},
		{"unknown startup option", []string{"leases", "--db", asURL(t, s.dsn) + "&" + "options=-c%20no_such_setting%3D1"}, "db"},
	} {
		r := s.run(t, c.args...)
		if r.code != 64 || !strings.Contains(firstLine(r.stderr), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 64 naming %s", c.name, r.code, r.stderr, c.want)
		}
	}
}

// `baton version` takes no flags: an unknown one is a usage error.
func TestVersionBadFlag(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	for _, args := range [][]string{{"version", "--zzz"}, {"version", "extra"}, {"--version", "--zzz"}} {
		r := s.run(t, args...)
		if r.code != 64 || !strings.Contains(r.stderr, "Usage") && !strings.Contains(r.stderr, "--help") {
			t.Errorf("baton %q: exit %d, stdout %q, stderr %q; want 64 with usage", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := s.run(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "baton ") {
		t.Errorf("baton version: exit %d, %q", r.code, r.stdout)
	}
}

// Refusals that waiting cannot change fail at once, with the fix, instead
// of being retried for --db-wait: a role that may not log in (SQLSTATE
// class 28), a database that does not exist (3D000), a lock directory this
// user cannot write.
func TestNotTransientFailsAtOnce(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	u, err := url.Parse(asURL(t, s.dsn))
	if err != nil {
		t.Fatal(err)
	}
	noRole, noDB := *u, *u
	noRole.User = url.UserPassword("no_such_role", secret)
	noDB.Path = "/no_such_database"
	for _, c := range []struct {
		name, dsn string
		want      []string // in stderr
	}{
		{"unknown role", noRole.String(), []string{"no_such_role", "role"}},
		{"missing database", noDB.String(), []string{"no_such_database", "createdb"}},
	} {
		r := s.run(t, "run", "--db", c.dsn, "--db-wait", "20s", "job", "--", "true")
		if r.code != 69 || strings.Contains(r.stderr, "retrying") {
			t.Errorf("%s: exit %d, stderr %q; want 69 at once, without retrying", c.name, r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr %q lacks %q", c.name, r.stderr, w)
			}
		}
		if strings.Contains(r.stderr, secret) {
			t.Errorf("%s: password printed: %s", c.name, r.stderr)
		}
	}
}

// Tried as an ordinary user: a lock directory that does not exist, or
// that this user cannot write, fails at once and says how to fix it.
func TestLockDirFailsAtOnce(t *testing.T) {
	needRoot(t)
	t.Parallel()
	home := userDir(t, 60004, 60004)
	ro, err := os.MkdirTemp("", "baton-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ro) })
	os.Chmod(ro, 0o755) // root's: others may enter, not write
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"missing or unwritable host directory", []string{"HOME=" + home}, "--scope user"},
		{"unwritable directory", []string{"HOME=" + home, "BATON_LOCK_DIR=" + ro}, "as root, once: baton setup local --lock-dir " + ro + " --user 60004 (by hand: "},
	} {
		r := runAs(t, 60004, 60004, c.env, "run", "--db-wait", "20s", "job", "--", "true")
		if r.code != 69 || strings.Contains(r.stderr, "retrying") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 69 at once, saying %q", c.name, r.code, r.stderr, c.want)
		}
	}
}
