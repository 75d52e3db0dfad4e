package main_test

// baton follows the primary of a highly available PostgreSQL: a DSN that
// lists every host with target_session_attrs=read-write reaches whichever
// is the primary, for every command and the daemon, and a failover is an
// outage that passes by itself.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/pgtest"
)

// pairStore is a store on pair's multi-host DSN, as BATON_DB.
func pairStore(dsn string) store {
	return store{name: "postgres", env: []string{"BATON_DB=" + dsn}, dsn: dsn}
}

// standbyFirstDSN lists pair's standby before its primary, with a
// password (the pair trusts loopback, so any will do) that must never
// reach a job's BATON_DB.
func standbyFirstDSN(pair *pgtest.Pair, url bool) string {
	if url {
		return fmt.Sprintf("postgres://postgres:s3cret@127.0.0.1:%d,127.0.0.1:%d/baton?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
			pair.Standby.Port(), pair.Primary.Port())
	}
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres password=s3cret dbname=baton sslmode=disable target_session_attrs=read-write connect_timeout=5",
		pair.Standby.Port(), pair.Primary.Port())
}

// Every kind of command works on a multi-host DSN, in keyword/value and URL
// form, with the standby listed first: pgx passes over it. A job's
// BATON_DB keeps every host and loses the password.
func TestMultiHostDSN(t *testing.T) {
	pair := pgtest.NewPair(t)
	for _, c := range []struct{ name, dsn string }{
		{"keyword-value", pair.DSN()},
		{"standby-first-keyword-value", standbyFirstDSN(pair, false)},
		{"standby-first-url", standbyFirstDSN(pair, true)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := pairStore(c.dsn)
			ok := func(r result, args ...string) result {
				t.Helper()
				if r.code != 0 {
					t.Fatalf("baton %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
				}
				return r
			}
			for _, args := range [][]string{
				{"migrate"},
				{"outbox", "enqueue", "--topic", "t", "--key", c.name, "{}"},
			} {
				ok(s.run(t, args...), args...)
			}
			args := []string{"run", "multi-host", "--", "sh", "-c", `printf %s "$BATON_DB"`}
			r := ok(s.run(t, args...), args...)
			if strings.Contains(r.stdout, "s3cret") || strings.Count(r.stdout, "127.0.0.1") != 2 {
				t.Errorf("the job's BATON_DB = %q; want both hosts of %q and no password", r.stdout, c.dsn)
			}
			r = ok(s.run(t, "status", "--json"), "status", "--json")
			if !strings.Contains(r.stdout, "multi-host") {
				t.Errorf("baton status --json does not show the run of multi-host:\n%s", r.stdout)
			}
			// doctor pg: 0 OK or 1 WARNING; 3 would say it reached no server.
			r = s.run(t, "doctor", "pg")
			if r.code > 1 {
				t.Errorf("baton doctor pg: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, "s3cret") {
				t.Errorf("baton doctor pg shows the password:\n%s%s", r.stdout, r.stderr)
			}
		})
	}
}
