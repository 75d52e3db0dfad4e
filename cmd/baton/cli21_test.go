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

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
)

// An invalid job file: every problem on a line of its own, as compilers
// print them (FILE:LINE:COL: PATH: MESSAGE), and as JSON with --json; both
// exit 64.
func TestValidateProblemsOnePerLine(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	path := writeJobFile(t, `
jobs:
  - name: a
    schedule: "bogus"
    command: [x]
  - name: b
    schedule: "* * * * *"
    command: [x]
    foo: 1
`)
	r := s.run(t, "validate", path)
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:3:15: jobs\[0\]\(a\)\.schedule: "bogus" has 1 fields`),
		regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:8:5: jobs\[1\]\(b\)\.foo: unknown key`),
	}
	if r.code != 64 || len(lines) != len(want) {
		t.Fatalf("exit %d, %d lines; want 64 and one line per problem (%d)\n%s", r.code, len(lines), len(want), r.stderr)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d: %q; want %s", i+1, lines[i], re)
		}
	}

	r = s.run(t, "validate", "--json", path)
	var out struct {
		File     string `json:"file"`
		Valid    *bool  `json:"valid"`
		Problems []struct {
			Line, Column   int
			Field, Message string
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 64 {
		t.Fatalf("--json of an invalid file: exit %d, %v; want 64 and JSON\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if out.File != path || out.Valid == nil || *out.Valid || len(out.Problems) != 2 ||
		out.Problems[0].Line != 3 || out.Problems[0].Column != 15 || out.Problems[0].Field != "jobs[0](a).schedule" ||
		out.Problems[1].Field != "jobs[1](b).foo" || !strings.Contains(out.Problems[1].Message, "unknown key") {
		t.Errorf("--json: %+v", out)
	}
}

// baton help CMD is baton CMD --help.
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	for _, name := range []string{"trigger", "validate", "bench"} {
		want := s.run(t, name, "--help")
		got := s.run(t, "help", name)
		if got.code != 0 || got.stdout != want.stdout || !strings.HasPrefix(got.stdout, "Usage: baton "+name) {
			t.Errorf("baton help %s: exit %d\n%s\nwant baton %s --help:\n%s", name, got.code, got.stdout, name, want.stdout)
		}
	}
	if r := s.run(t, "help", "nope"); r.code != 64 || !strings.Contains(r.stderr, `unknown command "nope"`) {
		t.Errorf("baton help nope: exit %d %s; want 64, unknown command", r.code, r.stderr)
	}
}

// A job without timezone on a host whose zone is not UTC: validate and the
// daemon warn once for it, and not for a job that names its zone; on a UTC
// host neither warns.
func TestZoneWarning(t *testing.T) {
	t.Parallel()
	path := writeJobFile(t, `
jobs:
  - name: cronlike
    schedule: "0 3 * * *"
    command: ["true"]
  - name: zoned
    schedule: "0 3 * * *"
    timezone: UTC
    command: ["true"]
`)
	berlin := localStore(t)
	berlin.env = append(berlin.env, "TZ=Europe/Berlin")
	r := berlin.run(t, "validate", path)
	if r.code != 0 || strings.Count(r.stderr, "warning: job cronlike: no timezone") != 1 || !strings.Contains(r.stderr, "Europe/Berlin") || strings.Contains(r.stderr, "zoned") {
		t.Errorf("validate with TZ=Europe/Berlin: exit %d; want 0 and one warning for cronlike naming Europe/Berlin, none for zoned\n%s", r.code, r.stderr)
	}
	utc := localStore(t)
	utc.env = append(utc.env, "TZ=UTC")
	if r := utc.run(t, "validate", path); r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("validate with TZ=UTC: exit %d; want 0 and no warning\n%s", r.code, r.stderr)
	}

	d := berlin.startDaemon(t, "berlin", path)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(d.logText(t), `"msg":"starting"`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	d.stop(t)
	log := d.logText(t)
	if n := strings.Count(log, "job has no timezone"); n != 1 || !strings.Contains(log, `"job":"cronlike"`) || !strings.Contains(log, `"host_zone":"Europe/Berlin"`) {
		t.Errorf("daemon with TZ=Europe/Berlin: %d zone warnings; want one, for cronlike\n%s", n, log)
	}
}

// The job commands against a store that a daemon published: trigger of an
// unknown job is "not found" (66); pause without --note keeps the note; a
// paused job shows no next tick; status --check is 0 while all is well
// and 1 once a job fails, and 2 for a store it cannot reach.
func TestJobCommandsStatuses(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		path := writeJobFile(t, `
jobs:
  - name: calm
    schedule: "0 3 1 1 *"
    command: ["true"]
  - name: flaky
    schedule: "0 3 1 1 *"
    command: ["false"]
`)
		d := s.startDaemon(t, "d1", path)
		defer d.stop(t)
		deadline := time.Now().Add(time.Minute)
		for len(s.ticks(t, "flaky")) == 0 && s.run(t, "jobs").code != 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		for time.Now().Before(deadline) {
			if r := s.run(t, "runs", "calm"); r.code == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}

		if r := s.run(t, "trigger", "nope"); r.code != baton.ExitNotFound || !strings.Contains(r.stderr, "no job named") {
			t.Errorf("trigger of an unknown job: exit %d %s; want 66 (not found)", r.code, r.stderr)
		}
		if r := s.run(t, "status", "--check"); r.code != 0 {
			t.Errorf("status --check with nothing failing: exit %d; want 0\n%s%s", r.code, r.stdout, r.stderr)
		}

		if r := s.run(t, "pause", "--note", "disk swap", "calm"); r.code != 0 {
			t.Fatalf("pause: exit %d %s", r.code, r.stderr)
		}
		if r := s.run(t, "pause", "calm"); r.code != 0 {
			t.Fatalf("pause again: exit %d %s", r.code, r.stderr)
		}
		for _, j := range s.jobsJSON(t) {
			if j.Job.Name == "calm" && (!j.Paused || j.PausedNote != "disk swap" || !j.NextTick.IsZero()) {
				t.Errorf("calm after pause --note and pause: paused %v, note %q, next tick %v; want paused, the note kept, no next tick", j.Paused, j.PausedNote, j.NextTick)
			}
		}
		for _, cmd := range []string{"jobs", "status"} {
			r := s.run(t, cmd)
			for _, line := range strings.Split(r.stdout, "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] == "calm" && (!strings.Contains(line, "paused: disk swap") || strings.Contains(line, "T03:00:00Z")) {
					t.Errorf("baton %s: %q; want paused with its note and no next tick", cmd, line)
				}
			}
		}

		if r := s.run(t, "trigger", "flaky"); r.code != 0 {
			t.Fatalf("trigger flaky: exit %d %s", r.code, r.stderr)
		}
		s.waitDone(t, "flaky", 1, time.Minute, nil)
		if r := s.run(t, "status", "--check"); r.code != 1 || !strings.Contains(r.stdout, "1 failing") {
			t.Errorf("status --check with flaky failed: exit %d; want 1\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := s.run(t, "status", "--check", "--json"); r.code != 1 {
			t.Errorf("status --check --json with flaky failed: exit %d; want 1", r.code)
		}
		if r := s.run(t, "status"); r.code != 0 {
			t.Errorf("status without --check: exit %d; want 0", r.code)
		}
	})
}

func TestStatusCheckUnreachable(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	r := s.run(t, "status", "--check", "--db-wait", "0", "--db", "postgres://baton@127.0.0.1:1/baton?sslmode=disable")
	if r.code != 2 || !strings.Contains(r.stderr, "baton status:") {
		t.Errorf("status --check of an unreachable store: exit %d %s; want 2 and the reason", r.code, r.stderr)
	}
	if r := s.run(t, "status", "--db-wait", "0", "--db", "postgres://baton@127.0.0.1:1/baton?sslmode=disable"); r.code != 69 {
		t.Errorf("status of an unreachable store: exit %d; want 69", r.code)
	}
}

// doctor pg on a refused connection prints each error line once (pgx
// tries twice with sslmode=prefer).
func TestDoctorPGRefusedOnce(t *testing.T) {
	t.Parallel()
	s := store{name: "postgres"}
	r := s.runPG(t, "--db", "postgres://u@127.0.0.1:1/x")
	if r.code != 3 {
		t.Fatalf("exit %d; want 3\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Each section shows the error once: no line repeats the one before.
	prev := ""
	for _, line := range strings.Split(r.stdout, "\n") {
		l := strings.TrimSpace(line)
		if l == prev && strings.Contains(l, "connection refused") {
			t.Errorf("line printed twice: %q\n%s", l, r.stdout)
		}
		prev = l
	}
}

// An advisory lock held by a session the doctor's role may not see: its
// age is "hidden", not "0s". A session idle in a transaction: the warning
// names the fix. Not parallel, as TestDoctorPG.
func TestDoctorPGHiddenAgeAndFixes(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := pgConnect(t, dsn)
	s := store{name: "postgres"}
	role := pgRole(t, admin, "")
	asRole := withPassword(t, dsn, role)

	locker := pgConnect(t, dsn)
	pgExec(t, locker, "select pg_advisory_lock(4242)")
	pid := strconv.Itoa(int(locker.PgConn().PID()))
	r := s.runPG(t, "--db", asRole)
	var line string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "advisory") && strings.Contains(l, "pid "+pid) {
			line = l
		}
	}
	if line == "" || !strings.HasSuffix(line, "for hidden") || strings.Contains(line, "for 0s") {
		t.Errorf("advisory lock of a hidden session: line %q; want its age hidden, never 0s\n%s", line, r.stdout)
	}
	pgExec(t, locker, "select pg_advisory_unlock_all()")

	idle := pgConnect(t, dsn)
	pgExec(t, idle, "begin")
	pgExec(t, idle, "select 1")
	time.Sleep(1100 * time.Millisecond)
	r = s.runPG(t, "--db", asURL(t, dsn), "--idle-tx", "1s")
	if !strings.Contains(r.stdout, "SET idle_in_transaction_session_timeout = ") || !strings.Contains(r.stdout, "pg_terminate_backend("+strconv.Itoa(int(idle.PgConn().PID()))+")") {
		t.Errorf("idle in transaction: the warning names no fix\n%s", r.stdout)
	}
	pgExec(t, idle, "rollback")
}

// baton run in a crontab: a busy run says one line on stderr (which cron
// mails) even when stderr is no terminal, and nothing with --quiet, as
// flock -n; docs/RUN.md's "Coming from flock(1)" says so.
func TestBusyLineInCrontab(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	started := filepath.Join(t.TempDir(), "started")
	holder, _ := s.start(t, "run", "busy", "--", "sh", "-c", "echo up > "+started+"; sleep 30")
	waitFile(t, started, time.Minute)
	r := s.run(t, "run", "busy", "--", "true")
	if n := strings.Count(r.stderr, "\n"); r.code != baton.ExitBusy || n != 1 || !strings.Contains(r.stderr, "baton: job busy not run: its lease is held") {
		t.Errorf("busy run, stderr a pipe: exit %d, %q; want 75 and one line saying so", r.code, r.stderr)
	}
	if r := s.run(t, "run", "--quiet", "busy", "--", "true"); r.code != baton.ExitBusy || r.stderr != "" {
		t.Errorf("busy run with --quiet: exit %d, stderr %q; want 75 and nothing", r.code, r.stderr)
	}
	holder.Process.Kill()
	holder.Wait()

	b, err := os.ReadFile("../../docs/RUN.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "## Coming from `flock(1)`")
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, "| `flock -n` is silent when the lock is held") || !strings.Contains(section, "`--quiet` is silent") {
		t.Errorf("docs/RUN.md's \"Coming from flock(1)\" has no row for flock -n's silence and --quiet:\n%s", section)
	}
}

// Help reads as one: flags spelt --name as the docs spell them, each value
// a placeholder in capitals; a command lists only the flags it uses, each
// described for it (doctor's --db is the server to check); bench lists
// bench outbox first.
func TestHelpReadsAsOne(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	flagLine := regexp.MustCompile(`^  (-{1,2})([a-zA-Z][\w-]*)( (.*))?$`)
	for _, name := range []string{"run", "doctor", "daemon", "bench", "status", "trigger", "relay", "outbox", "next"} {
		r := s.run(t, name, "--help")
		_, flags, ok := strings.Cut(r.stdout, "\nFlags:\n")
		if !ok {
			t.Fatalf("baton %s --help has no flags", name)
		}
		for _, line := range strings.Split(flags, "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if m[1] != "--" {
				t.Errorf("baton %s --help: %q; want the flag spelt --%s", name, line, m[2])
			}
			if v := m[4]; v != "" && (strings.ToUpper(v) != v && !regexp.MustCompile(`^[A-Z=]+[a-z][A-Z]+$`).MatchString(v) || v == "INT" || v == "STRING") {
				t.Errorf("baton %s --help: %q; want a placeholder in capitals", name, line)
			}
		}
	}
	doctor := s.run(t, "doctor", "--help").stdout
	for _, unused := range []string{"--db-max-conns", "--db-wait", "--verbose"} {
		if strings.Contains(doctor, "\n  "+unused+" ") || strings.Contains(doctor, "\n  "+unused+"\n") {
			t.Errorf("baton doctor --help lists %s, which doctor does not use", unused)
		}
	}
	if strings.Contains(doctor, "shared by a fleet") || !strings.Contains(doctor, "the PostgreSQL server to check") {
		t.Errorf("baton doctor --help: --db is not described for doctor\n%s", doctor)
	}
	if bench := s.run(t, "bench", "--help").stdout; !strings.HasPrefix(bench, "Usage: baton bench outbox") {
		t.Errorf("baton bench --help does not list bench outbox first:\n%s", firstLine(bench))
	}
}
