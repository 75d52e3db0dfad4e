package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A job's environment does not carry the store's password: BATON_DB is
// passed without it (so that baton commands in the job still name the
// fleet's database, never the local store), and PGPASSWORD is removed.
// --pass-db-password gives the job both, for a job that enqueues outbox
// events with the store's own role.
func TestJobEnvironmentWithholdsStorePassword(t *testing.T) {
	t.Parallel()
	pg := pgStore(t)
	dsn := withPassword(t, pg.dsn, "postgres")
	s := store{name: "postgres", env: []string{"BATON_DB=" + dsn, "PGPASSWORD=" + secret}, dsn: pg.dsn}
	r := s.run(t, "run", "job", "--", "env")
	if r.code != 0 {
		t.Fatalf("baton run: exit %d: %s", r.code, r.stderr)
	}
	env := r.stdout
	if strings.Contains(env, secret) {
		t.Errorf("baton run: the command's environment holds the store's password:\n%s", env)
	}
	if !strings.Contains(env, "BATON_DB=postgres://postgres@") {
		t.Errorf("baton run: the command's environment lacks BATON_DB without its password:\n%s", env)
	}
	// The job can still reach the store, with its own credentials (here the
	// test cluster trusts everyone).
	if r := s.run(t, "run", "job", "--", batonBin, "leases"); r.code != 0 || !strings.Contains(r.stdout, "job") {
		t.Errorf("baton leases inside a job: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = s.run(t, "run", "--pass-db-password", "job", "--", "env")
	if r.code != 0 || !strings.Contains(r.stdout, "BATON_DB="+dsn+"\n") || !strings.Contains(r.stdout, "PGPASSWORD="+secret+"\n") {
		t.Errorf("baton run --pass-db-password: exit %d, the command's environment lacks the password:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// The daemon's jobs, likewise: BATON_DB without its password, no
// PGPASSWORD, unless the daemon runs with --pass-db-password.
func TestDaemonJobEnvironmentWithholdsStorePassword(t *testing.T) {
	t.Parallel()
	pg := pgStore(t)
	dsn := withPassword(t, pg.dsn, "postgres")
	s := store{name: "postgres", env: []string{"BATON_DB=" + dsn, "PGPASSWORD=" + secret}, dsn: pg.dsn}
	out := filepath.Join(t.TempDir(), "env")
	jobs := writeJobFile(t, `
jobs:
  - name: dump-env
    schedule: "@every 1s"
    command: env > `+out+`.tmp && mv `+out+`.tmp `+out+`
`)
	d := s.startDaemon(t, "env", jobs)
	deadline := time.Now().Add(time.Minute)
	var got []byte
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(out); err == nil && len(b) > 0 {
			got = b
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.stop(t)
	if got == nil {
		t.Fatal("the daemon's job did not run")
	}
	if strings.Contains(string(got), secret) {
		t.Errorf("daemon: the job's environment holds the store's password:\n%s", got)
	}
	if !strings.Contains(string(got), "BATON_DB=postgres://postgres@") {
		t.Errorf("daemon: the job's environment lacks BATON_DB without its password:\n%s", got)
	}
}
