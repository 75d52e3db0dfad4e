package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// pgReport is the part of baton doctor pg --json that the tests read.
type pgReport struct {
	Level   string `json:"level"`
	Verdict string `json:"verdict"`
	Server  *struct {
		DSN string `json:"dsn"`
		Via string `json:"via"`
	} `json:"server"`
	ConnectFailures []struct {
		SQLState string `json:"sqlstate"`
		Limit    string `json:"limit"`
		Name     string `json:"name"`
	} `json:"connect_failures"`
	Budget *struct {
		Usable int `json:"usable"`
		InUse  int `json:"in_use"`
	} `json:"budget"`
	Pins *struct {
		IdleInTransaction []struct {
			PID int `json:"pid"`
		} `json:"idle_in_transaction"`
	} `json:"pins"`
	Sessions *struct {
		PreviousAt *time.Time `json:"previous_at"`
	} `json:"sessions"`
	Plan *struct {
		Total    int  `json:"total"`
		Headroom *int `json:"headroom"`
	} `json:"plan"`
	Replication *pgReplication `json:"replication"`
	Findings    []struct {
		Level string `json:"level"`
		Check string `json:"check"`
	} `json:"findings"`
}

const secret = "s3cret"

// doctorPG runs baton doctor pg --json and decodes its report. No output
// may show the password.
func (s store) doctorPG(t *testing.T, args ...string) (pgReport, result) {
	t.Helper()
	r := s.runPG(t, append([]string{"--json"}, args...)...)
	var rep pgReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("baton doctor pg --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return rep, r
}

func (s store) runPG(t *testing.T, args ...string) result {
	t.Helper()
	r := s.run(t, append([]string{"doctor", "pg"}, args...)...)
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("baton doctor pg %q shows the password:\n%s%s", args, r.stdout, r.stderr)
	}
	return r
}

// withPassword is dsn's URL form, as user with the password; the test
// cluster trusts every connection, so any password will do.
func withPassword(t *testing.T, dsn, user string) string {
	t.Helper()
	u, err := url.Parse(asURL(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, secret)
	return u.String()
}

func pgConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func pgExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func firstLine(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }

// TestDoctorPG does not run in parallel: its verdicts are about the whole
// server, which the package's parallel tests would move.
func TestDoctorPG(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := pgConnect(t, dsn)
	db := withPassword(t, dsn, "postgres")
	s := store{name: "postgres"}
	var version int
	if err := admin.QueryRow(context.Background(), "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	// idle_session_timeout and the session counters are new in 14.
	idleSession := "idle_session_timeout"
	if version < 140000 {
		idleSession = "idle_in_transaction_session_timeout"
	}

	t.Run("healthy", func(t *testing.T) {
		r := s.runPG(t, "--db", db)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "OK: ") {
			t.Fatalf("exit %d, want 0 and OK first\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"\nbudget\n", "superuser_reserved_connections", "= usable", "\nwho holds slots\n", "\npins\n", "\ntimeouts\n", idleSession,
			"\nreplication\n", "no standby: a lost server loses the store; a restore needs `baton migrate --new-epoch`", "\nfindings\n", ":xxxxx@"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
		rep, r := s.doctorPG(t, "--db", db)
		if r.code != 0 || rep.Level != "ok" || rep.Server == nil || rep.Server.Via != "db" || !strings.Contains(rep.Server.DSN, ":xxxxx@") || rep.Budget == nil || rep.Budget.Usable < 1 ||
			rep.Replication == nil || rep.Replication.Role != "primary" || rep.Replication.Mode != "none" {
			t.Errorf("--json: exit %d, %+v", r.code, rep)
		}
		// $BATON_DB as for every command.
		env := store{name: "postgres", env: []string{"BATON_DB=" + db}}
		if rep, r := env.doctorPG(t); r.code != 0 || rep.Level != "ok" {
			t.Errorf("with $BATON_DB: exit %d, %+v\n%s", r.code, rep, r.stderr)
		}
	})

	t.Run("plan", func(t *testing.T) {
		rep, r := s.doctorPG(t, "--db", db, "--plan", "web=1x2", "--instances", "2", "--pool-max", "3")
		if r.code != 0 || rep.Plan == nil || rep.Plan.Total != 8 || rep.Plan.Headroom == nil || *rep.Plan.Headroom != rep.Budget.Usable-8 {
			t.Fatalf("a small plan: exit %d, %+v", r.code, rep.Plan)
		}
		over := strconv.Itoa(rep.Budget.Usable + 1)
		r = s.runPG(t, "--db", db, "--plan", "fleet="+over+"x1")
		if r.code != 2 || !strings.HasPrefix(r.stdout, "CRITICAL: ") || !strings.Contains(firstLine(r.stdout), "1 more than") || !strings.Contains(r.stdout, "\nplan\n") {
			t.Errorf("a plan of usable+1: exit %d\n%s", r.code, r.stdout)
		}
	})

	t.Run("state", func(t *testing.T) {
		if version < 140000 {
			// No session counters before 14: nothing to keep between runs.
			rep, r := s.doctorPG(t, "--db", db, "--state", filepath.Join(t.TempDir(), "doctor.json"))
			if r.code != 0 || rep.Sessions != nil {
				t.Errorf("on %d: exit %d, sessions %+v; want none", version, r.code, rep.Sessions)
			}
			return
		}
		state := filepath.Join(t.TempDir(), "doctor.json")
		for i := range 2 {
			rep, r := s.doctorPG(t, "--db", db, "--state", state)
			if r.code != 0 || rep.Sessions == nil || (rep.Sessions.PreviousAt != nil) != (i == 1) {
				t.Errorf("run %d with --state: exit %d, sessions %+v", i+1, r.code, rep.Sessions)
			}
		}
		if _, err := os.Stat(state); err != nil {
			t.Error(err)
		}
	})

	t.Run("pins", func(t *testing.T) {
		idle := pgConnect(t, dsn)
		pgExec(t, idle, "begin")
		pgExec(t, idle, "select 1")
		time.Sleep(1100 * time.Millisecond)
		r := s.runPG(t, "--db", db, "--idle-tx", "1s")
		pid := strconv.Itoa(int(idle.PgConn().PID()))
		if r.code != 1 || !strings.HasPrefix(r.stdout, "WARNING: ") || !strings.Contains(firstLine(r.stdout), "idle in a transaction") || !strings.Contains(r.stdout, "pid "+pid) {
			t.Errorf("idle in transaction: exit %d, want 1 and a warning naming pid %s\n%s", r.code, pid, r.stdout)
		}
		// Below the threshold: listed, not warned of.
		rep, r := s.doctorPG(t, "--db", db)
		listed := false
		for _, p := range rep.Pins.IdleInTransaction {
			listed = listed || strconv.Itoa(p.PID) == pid
		}
		if r.code != 0 || !listed {
			t.Errorf("idle in transaction below --idle-tx: exit %d, %+v", r.code, rep.Pins)
		}
		pgExec(t, idle, "rollback")

		pgExec(t, idle, "select pg_advisory_lock(42)")
		r = s.runPG(t, "--db", db)
		if r.code != 1 || !strings.Contains(firstLine(r.stdout), "session-level advisory locks") {
			t.Errorf("session advisory lock: exit %d, want 1\n%s", r.code, r.stdout)
		}
		pgExec(t, idle, "select pg_advisory_unlock_all()")
	})

	t.Run("role limit", func(t *testing.T) {
		role := pgRole(t, admin, "connection limit 1")
		asRole := withPassword(t, dsn, role)
		pgConnect(t, asRole)
		r := s.runPG(t, "--db", asRole)
		if r.code != 2 || !strings.HasPrefix(r.stdout, "CRITICAL: ") || !strings.Contains(firstLine(r.stdout), `too many connections for role "`+role+`"`) {
			t.Errorf("a role at its limit: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
		}
		rep, r := s.doctorPG(t, "--db", asRole, "--reserved-db", db)
		if r.code != 2 || rep.Server == nil || rep.Server.Via != "reserved-db" || len(rep.ConnectFailures) != 1 ||
			rep.ConnectFailures[0].Limit != "role_connection_limit" || rep.ConnectFailures[0].Name != role {
			t.Errorf("with --reserved-db: exit %d, %+v", r.code, rep)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		rep, r := s.doctorPG(t, "--db", "postgres://u:"+secret+"@127.0.0.1:1/db?sslmode=disable", "--connect-timeout", "2s")
		if r.code != 3 || rep.Level != "unknown" || rep.Server != nil || !strings.HasPrefix(rep.Verdict, "UNKNOWN: ") {
			t.Errorf("no server: exit %d, %+v", r.code, rep)
		}
	})
}

// pgRole creates a login role, dropped when the test ends.
func pgRole(t *testing.T, admin *pgx.Conn, options string) string {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "doctor_" + hex.EncodeToString(rnd[:])
	pgExec(t, admin, "create role "+name+" login "+options)
	t.Cleanup(func() {
		// Its connections, closed by later cleanups that ran first, may
		// still be exiting on the server.
		for range 100 {
			if _, err := admin.Exec(context.Background(), "drop role "+name); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("could not drop role %s", name)
	})
	return name
}

func TestDoctorPGUsage(t *testing.T) {
	t.Parallel()
	s := store{name: "postgres"}
	db := "postgres://u:" + secret + "@127.0.0.1:1/db"
	for _, c := range []struct {
		args []string
		want string // in the first line of stderr
	}{
		{[]string{}, "--db"},
		{[]string{"--db", "mysql://u:" + secret + "@h/db"}, "--db"},
		{[]string{"--db", db, "--reserved-db", "h=x"}, "--reserved-db"},
		{[]string{"--db", db, "--warn", "0"}, "--warn"},
		{[]string{"--db", db, "--warn", "many"}, "-warn"},
		{[]string{"--db", db, "--crit", "101"}, "--crit"},
		{[]string{"--db", db, "--warn", "90", "--crit", "80"}, "--crit"},
		{[]string{"--db", db, "--long-tx", "0s"}, "--long-tx"},
		{[]string{"--db", db, "--idle-tx", "soon"}, "-idle-tx"},
		{[]string{"--db", db, "--pool-idle", "-1m"}, "--pool-idle"},
		{[]string{"--db", db, "--connect-timeout", "0s"}, "--connect-timeout"},
		{[]string{"--db", db, "--plan", "web=20"}, "-plan"},
		{[]string{"--db", db, "--plan", "web=0x10"}, "-plan"},
		{[]string{"--db", db, "--instances", "3"}, "--instances"},
		{[]string{"--db", db, "--pool-max", "-2"}, "-pool-max"},
		{[]string{"--db", db, "--bogus"}, "-bogus"},
		{[]string{"--db", db, "extra"}, "SUBJECT"},
	} {
		r := s.runPG(t, c.args...)
		line := firstLine(r.stderr)
		if r.code != 64 || !strings.Contains(line, c.want) || r.stdout != "" {
			t.Errorf("baton doctor pg %q: exit %d, stderr %q, stdout %q; want exit 64 and an error naming %s", c.args, r.code, r.stderr, r.stdout, c.want)
		}
	}
	r := s.run(t, "doctor", "--help")
	for _, want := range []string{"pg", "max_connections", "superuser_reserved_connections", "reserved_connections", "pg_use_reserved_connections",
		"usable", "client backend", "pg_read_all_stats", "idle in a transaction", "backend_xmin", "pg_blocking_pids", "advisory",
		"idle_session_timeout", "transaction_timeout", "sessions_abandoned", "53300", "Exit status of doctor pg", "1 WARNING", "2 CRITICAL", "3 UNKNOWN",
		"64 usage error", "-reserved-db", "-warn", "-crit", "-long-tx", "-idle-tx", "-pool-idle", "-state", "-plan", "-instances", "-pool-max", "-connect-timeout",
		"baton/doctor/HOST", "docs/DOCTOR.md", "replication", "pg_stat_replication", "synchronous_standby_names", "target_session_attrs=read-write",
		"baton migrate --new-epoch"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("baton doctor --help lacks %q", want)
		}
	}
}
