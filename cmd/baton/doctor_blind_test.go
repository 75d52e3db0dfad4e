package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/bouncertest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// What the doctor cannot see it must not report as healthy: a role without
// pg_monitor (pg_read_all_stats) sees only the pid, user, database and
// application of other roles' sessions, so a session of another role idle
// in a transaction is invisible to it. The verdict says the pins are
// unknown and how to grant the privilege, never "no pins"; once granted,
// the same session is found. Not parallel, as TestDoctorPG: its verdicts
// are about the whole server.
func TestDoctorPGHiddenPins(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := pgConnect(t, dsn)
	s := store{name: "postgres"}
	role := pgRole(t, admin, "")
	asRole := withPassword(t, dsn, role)
	grant := "GRANT pg_monitor TO " + role + ";"

	// A session of another role (here the superuser), idle in a
	// transaction for longer than --idle-tx.
	idle := pgConnect(t, dsn)
	pgExec(t, idle, "begin")
	pgExec(t, idle, "select 1")
	time.Sleep(1100 * time.Millisecond)
	pid := strconv.Itoa(int(idle.PgConn().PID()))

	r := s.runPG(t, "--db", asRole, "--idle-tx", "1s")
	verdict := firstLine(r.stdout)
	if r.code != 3 || !strings.HasPrefix(verdict, "UNKNOWN: ") || !strings.Contains(verdict, "pins unknown") || !strings.Contains(verdict, grant) || strings.Contains(r.stdout, "no pins") {
		t.Errorf("as %s, without pg_monitor, beside a hidden session idle in a transaction: exit %d; want 3 and an UNKNOWN verdict saying the pins are unknown and %q, never \"no pins\"\n%s%s", role, r.code, grant, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "\n  none\n") {
		t.Errorf("the pins section says none although sessions are hidden:\n%s", r.stdout)
	}

	rep, r := s.doctorPG(t, "--db", asRole, "--idle-tx", "1s")
	var hidden struct {
		Pins struct {
			Hidden int `json:"hidden"`
		} `json:"pins"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &hidden); err != nil {
		t.Fatal(err)
	}
	if r.code != 3 || rep.Level != "unknown" || !strings.Contains(rep.Verdict, "pins unknown") || !strings.Contains(rep.Verdict, grant) || hidden.Pins.Hidden < 1 {
		t.Errorf("--json: exit %d, level %s, verdict %q, pins.hidden %d; want 3, unknown, a verdict with %q, and at least 1 hidden", r.code, rep.Level, rep.Verdict, hidden.Pins.Hidden, grant)
	}
	found := false
	for _, f := range rep.Findings {
		found = found || f.Check == "pins" && f.Level == "unknown"
	}
	if !found {
		t.Errorf("no unknown pins finding in %+v", rep.Findings)
	}

	// The control: with pg_monitor the same role sees the pin.
	pgExec(t, admin, "grant pg_monitor to "+role)
	r = s.runPG(t, "--db", asRole, "--idle-tx", "1s")
	if r.code != 1 || !strings.HasPrefix(r.stdout, "WARNING: ") || !strings.Contains(firstLine(r.stdout), "idle in a transaction") || !strings.Contains(r.stdout, "pid "+pid) || strings.Contains(r.stdout, "pins unknown") {
		t.Errorf("with pg_monitor: exit %d; want 1 and a warning naming pid %s\n%s", r.code, pid, r.stdout)
	}
	pgExec(t, idle, "rollback")
}

// PgBouncer's admin console (database "pgbouncer") answers the startup
// like a server, then refuses the doctor's queries. The doctor says that
// this is a bouncer's console, not a PostgreSQL server, and what to check
// instead.
func TestDoctorPGBouncerConsole(t *testing.T) {
	t.Parallel()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	b := bouncertest.Start(t)
	s := store{name: "postgres"}
	console := b.DSN("pgbouncer")

	r := s.runPG(t, "--db", console)
	verdict := firstLine(r.stdout)
	if r.code != 3 || !strings.HasPrefix(verdict, "UNKNOWN: ") || !strings.Contains(verdict, "PgBouncer") || !strings.Contains(verdict, "admin console") || !strings.Contains(verdict, "not a PostgreSQL server") {
		t.Errorf("against the bouncer's console: exit %d; want 3 and a verdict saying it is PgBouncer's admin console, not a server\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(verdict, "PgBouncer 1.") || !strings.Contains(r.stdout, "point --db at the server") {
		t.Errorf("the verdict does not name the bouncer's version (SHOW VERSION), or the findings what to do instead:\n%s", r.stdout)
	}
	rep, r := s.doctorPG(t, "--db", console)
	if r.code != 3 || rep.Level != "unknown" || !strings.Contains(rep.Verdict, "admin console") {
		t.Errorf("--json: exit %d, %+v", r.code, rep)
	}

	// The control: a database behind the same bouncer is the server's.
	r = s.runPG(t, "--db", b.DSN(cfg.Database))
	if strings.Contains(r.stdout, "admin console") {
		t.Errorf("a database behind the bouncer taken for its console: exit %d\n%s", r.code, r.stdout)
	}
}

// A lock directory that anyone may write, without the sticky bit, lets any
// user delete or replace the lock files and with them the fencing tokens:
// doctor local fails (exit 1) with an error naming the directory and the
// fix. With the sticky bit it is only warned of.
func TestDoctorLocalWorldWritable(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := s.lockDir(t)
	if err := unix.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, "doctor", "local")
	line := regexp.MustCompile(`(?m)^error +mode +.*$`).FindString(r.stdout)
	if r.code != 1 || !strings.Contains(line, dir) || !strings.Contains(line, "sticky") || !strings.Contains(line, "chmod +t") {
		t.Errorf("doctor local on a 0777 directory: exit %d, mode line %q; want exit 1 and an error naming %s, the sticky bit and chmod +t\n%s", r.code, line, dir, r.stdout)
	}
	rep, r := s.doctor(t)
	failed := false
	for _, f := range rep.Findings {
		failed = failed || f.Level == "error" && f.Check == "mode" && strings.Contains(f.Message, dir)
	}
	if r.code != 1 || !failed {
		t.Errorf("--json: exit %d, findings %+v; want 1 and an error of mode", r.code, rep.Findings)
	}

	// The control: sticky, other users may add lock files but not replace
	// yours; a warning, not a failure.
	if err := unix.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	if rep, r := s.doctor(t); r.code != 0 {
		t.Errorf("doctor local on a 1777 directory: exit %d, findings %+v; want 0 (warnings only)", r.code, rep.Findings)
	}
}

// readOnlyDir is a directory on a tmpfs mounted read-only, with a
// subdirectory "locks" of mode 2770 made before the remount. Mounting needs
// root (CAP_SYS_ADMIN); without it the test is skipped, and the flock
// package's TestDoctorReadOnly covers the same through a hook.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v): this test needs root", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := os.Mkdir(filepath.Join(dir, "locks"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(filepath.Join(dir, "locks"), 0o2770); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
	return dir
}

// On a read-only file system no owner, group or mode lets anyone create a
// lock file: doctor local says the file system is read-only and suggests a
// writable BATON_LOCK_DIR, not usermod or chmod.
func TestDoctorLocalReadOnly(t *testing.T) {
	t.Parallel()
	ro := readOnlyDir(t)
	for _, c := range []struct{ name, dir, check string }{
		{"existing", filepath.Join(ro, "locks"), "access"},
		{"missing", filepath.Join(ro, "missing"), "exists"},
	} {
		s := store{name: "local", env: []string{"BATON_LOCK_DIR=" + c.dir, "BATON_SCOPE=host"}}
		rep, r := s.doctor(t)
		var msg string
		for _, f := range rep.Findings {
			if f.Level == "error" && f.Check == c.check {
				msg = f.Message
			}
		}
		if r.code != 1 || !strings.Contains(msg, "read-only") || !strings.Contains(msg, "BATON_LOCK_DIR") {
			t.Errorf("%s directory on a read-only file system: exit %d, %s error %q; want exit 1 and an error saying the file system is read-only and suggesting BATON_LOCK_DIR\n%s", c.name, r.code, c.check, msg, r.stdout)
		}
		for _, f := range rep.Findings {
			if f.Level == "error" && (strings.Contains(f.Message, "usermod") || strings.Contains(f.Message, "chmod")) {
				t.Errorf("%s: advice that cannot help on a read-only file system: %s %s", c.name, f.Check, f.Message)
			}
		}
	}
}
