package main_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// doctorReport is baton doctor local --json.
type doctorReport struct {
	Dir      string `json:"dir"`
	Scope    string `json:"scope"`
	Findings []struct {
		Level   string `json:"level"`
		Check   string `json:"check"`
		Message string `json:"message"`
	} `json:"findings"`
	Tmpfiles string `json:"tmpfiles"`
	Install  string `json:"install"`
}

func (s store) doctor(t *testing.T, args ...string) (doctorReport, result) {
	t.Helper()
	r := s.run(t, append([]string{"doctor", "local", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("baton doctor local --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return rep, r
}

// lockDir is the lock directory of a local store.
func (s store) lockDir(t *testing.T) string {
	t.Helper()
	for _, e := range s.env {
		if dir, ok := strings.CutPrefix(e, "BATON_LOCK_DIR="); ok {
			return dir
		}
	}
	t.Fatal("not a local store")
	return ""
}

func TestDoctorLocal(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := s.lockDir(t)
	if r := s.run(t, "run", "job", "--", "true"); r.code != 0 {
		t.Fatalf("setup run: exit %d: %s", r.code, r.stderr)
	}
	rep, r := s.doctor(t)
	if r.code != 0 {
		t.Fatalf("doctor on the directory baton run just used: exit %d\n%s", r.code, r.stdout)
	}
	if rep.Dir != dir || rep.Scope != "host" {
		t.Errorf("doctor checked %s (%s), want %s (host): the directory baton run uses", rep.Dir, rep.Scope, dir)
	}
	if rep.Tmpfiles != "d "+dir+" 2770 root baton -" || rep.Install != "install -d -m 2770 -g baton "+dir {
		t.Errorf("tmpfiles %q, install %q", rep.Tmpfiles, rep.Install)
	}
	levels := map[string]string{}
	for _, f := range rep.Findings {
		if f.Level != "ok" && f.Level != "warn" && f.Level != "error" {
			t.Errorf("finding %+v: unknown level", f)
		}
		if f.Message == "" {
			t.Errorf("finding %+v: no message", f)
		}
		levels[f.Check] = f.Level
		if f.Check == "lock-files" && (f.Level != "ok" || !strings.HasPrefix(f.Message, "1 lock files")) {
			t.Errorf("lock-files: %s %q, want ok and the one lock file of job", f.Level, f.Message)
		}
	}
	for _, c := range []string{"exists", "fs-type", "owner", "mode", "access", "protected-regular", "tmp-cleaner", "lock-files"} {
		if levels[c] == "" {
			t.Errorf("no %s finding in %+v", c, rep.Findings)
		}
	}
	if levels["exists"] != "ok" || levels["access"] != "ok" {
		t.Errorf("exists %s, access %s; want ok for the directory baton run just used", levels["exists"], levels["access"])
	}

	// The text form: one line per finding, then the tmpfiles.d line.
	r = s.run(t, "doctor", "local")
	if r.code != 0 {
		t.Fatalf("doctor local: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^ok +exists +`+regexp.QuoteMeta(dir)+` is a directory$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^(ok|warn) +fs-type +\S`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "\n  d "+dir+" 2770 root baton -\n") {
		t.Errorf("doctor local text output:\n%s", r.stdout)
	}

	// A lock file that is not a file is an error: exit 1.
	if err := os.Mkdir(filepath.Join(dir, "odd.lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep, r = s.doctor(t)
	if r.code != 1 {
		t.Errorf("doctor with a directory for a lock file: exit %d, want 1\n%s", r.code, r.stdout)
	}
	found := false
	for _, f := range rep.Findings {
		found = found || f.Level == "error" && f.Check == "lock-files" && strings.Contains(f.Message, "odd.lock")
	}
	if !found {
		t.Errorf("no error naming odd.lock in %+v", rep.Findings)
	}
}

// doctor changes nothing: a missing directory stays missing, and the flags
// are resolved as baton run resolves them.
func TestDoctorLocalCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "locks")
	s := store{name: "local", env: []string{"BATON_LOCK_DIR=" + dir, "BATON_SCOPE=user"}}
	rep, r := s.doctor(t)
	if r.code != 0 {
		t.Errorf("doctor on a directory baton run would create: exit %d\n%s", r.code, r.stdout)
	}
	if rep.Dir != dir || rep.Scope != "user" || rep.Tmpfiles != "" {
		t.Errorf("doctor checked %s (%s, tmpfiles %q), want %s (user, none)", rep.Dir, rep.Scope, rep.Tmpfiles, dir)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("doctor created %s (stat: %v)", filepath.Dir(dir), err)
	}
	// With a PostgreSQL store selected, doctor local says the directory is
	// not the one in use, without connecting.
	pg := store{name: "local", env: append(s.env, "BATON_DB=postgres://u@127.0.0.1:1/db?connect_timeout=1")}
	rep, r = pg.doctor(t)
	if r.code != 0 || len(rep.Findings) == 0 || rep.Findings[0].Check != "store" || !strings.Contains(rep.Findings[0].Message, "PostgreSQL") {
		t.Errorf("doctor local with BATON_DB: exit %d, findings %+v; want a first finding saying baton run uses PostgreSQL", r.code, rep.Findings)
	}

	// Flags win over the environment, as for baton run.
	other := t.TempDir()
	rep, _ = s.doctor(t, "--lock-dir", other, "--scope", "host")
	if rep.Dir != other || rep.Scope != "host" {
		t.Errorf("with flags: checked %s (%s), want %s (host)", rep.Dir, rep.Scope, other)
	}
}

func TestDoctorUsage(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	for _, c := range []struct {
		args []string
		want string // in the first line of stderr
	}{
		{[]string{"doctor", "frob"}, `"frob"`},
		{[]string{"doctor"}, "SUBJECT"},
		{[]string{"doctor", "local", "extra"}, "SUBJECT"},
		{[]string{"doctor", "local", "--scope", "galaxy"}, "--scope"},
		{[]string{"doctor", "local", "--bogus"}, "-bogus"},
	} {
		r := s.run(t, c.args...)
		line, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 64 || !strings.Contains(line, c.want) || r.stdout != "" {
			t.Errorf("baton %q: exit %d, stderr %q, stdout %q; want exit 64 and an error naming %s", c.args, r.code, r.stderr, r.stdout, c.want)
		}
	}
	r := s.run(t, "doctor", "--help")
	for _, want := range []string{"baton doctor SUBJECT", "local", "Exit status", "64", "fs-type", "protected-regular", "tmp-cleaner", "lock-files", "tmpfiles.d", "2770", "-lock-dir", "-scope", "-json"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("baton doctor --help lacks %q", want)
		}
	}
	if r.code != 0 {
		t.Errorf("baton doctor --help: exit %d", r.code)
	}
}
