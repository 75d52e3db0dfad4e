package main_test

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/jobfile"
	"go.yaml.in/yaml/v3"
)

// The tests of `baton import crontab` that run what it writes. Each
// imported job has a user: (cron ran every line as some user), and some a
// @reboot schedule or scope: host: the job file reads those once per-job
// users, @reboot and scopes are merged, and until then these tests fail
// at `baton validate`.

// importCrontab writes text as a crontab, imports it with args and returns
// the job file's path, checked by baton validate.
func importCrontab(t *testing.T, s store, text string, args ...string) string {
	t.Helper()
	tab := filepath.Join(t.TempDir(), "crontab")
	if err := os.WriteFile(tab, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, append(append([]string{"import", "crontab"}, args...), tab)...)
	if r.code != 0 {
		t.Fatalf("baton import crontab: exit %d: %s", r.code, r.stderr)
	}
	jobs := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(jobs, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := s.run(t, "validate", jobs); v.code != 0 {
		t.Fatalf("baton validate of the imported file: exit %d: %s\n%s", v.code, v.stderr, r.stdout)
	}
	return jobs
}

// jobNames are the names of the jobs of the job file at path, in order.
func jobNames(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Jobs []struct{ Name string } }
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range f.Jobs {
		names = append(names, j.Name)
	}
	return names
}

// triggerAll runs each job now, through the daemon (which publishes the
// jobs of its file shortly after it starts).
func triggerAll(t *testing.T, s store, names []string) {
	t.Helper()
	for _, name := range names {
		deadline := time.Now().Add(time.Minute)
		for {
			r := s.run(t, "trigger", name)
			if r.code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("baton trigger %s: exit %d: %s", name, r.code, r.stderr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// A user crontab, imported and run by a root daemon on the local store,
// does what cron does: its command is found through the crontab's PATH, a
// % gives the command its input, \% is a %, an environment line in the
// middle applies to the lines after it, SHELL is the shell, and the
// command runs in the user's HOME.
func TestImportedCrontabRunsAsCron(t *testing.T) {
	needRoot(t)
	t.Parallel()
	s := localStore(t)
	out := sharedDir(t)
	bin := filepath.Join(out, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "crontool"), []byte("#!/bin/sh\necho found on the crontab PATH\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := user.Lookup("root")
	if err != nil {
		t.Fatal(err)
	}
	tab := strings.NewReplacer("OUT", out, "BIN", bin).Replace(`# root's crontab
PATH=BIN:/usr/bin:/bin
SHELL=/bin/bash
0 0 1 1 * crontool > OUT/path
0 0 1 1 * cat > OUT/stdin%line one%line two
0 0 1 1 * echo "[$GREETING]" > OUT/before
GREETING = "hello world"
0 0 1 1 * echo "$GREETING ${BASH_VERSION:+bash}" > OUT/env
0 0 1 1 * echo "100\%" > OUT/percent
0 0 1 1 * pwd > OUT/pwd
`)
	jobs := importCrontab(t, s, tab, "--user", "root")
	d := s.startDaemon(t, "import", jobs)
	triggerAll(t, s, jobNames(t, jobs))
	for file, want := range map[string]string{
		"path":    "found on the crontab PATH",
		"stdin":   "line one\nline two",
		"before":  "[]",
		"env":     "hello world bash",
		"percent": "100%",
		"pwd":     root.HomeDir,
	} {
		if got := waitFile(t, filepath.Join(out, file), time.Minute); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon exit %d", code)
	}
}

// A system crontab's lines run as their users, with the HOME, LOGNAME and
// USER cron sets, and @reboot runs once each time a daemon starts.
func TestImportedSystemCrontabRunsAsUsers(t *testing.T) {
	needRoot(t)
	t.Parallel()
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no user postgres on this host")
	}
	s := localStore(t)
	out := sharedDir(t)
	tab := strings.NewReplacer("OUT", out).Replace(`# /etc/cron.d/app
MAILTO=""
0 0 1 1 * postgres echo "$(id -un) $HOME $LOGNAME $USER $(pwd)" > OUT/postgres
0 0 1 1 * root echo "$(id -un) $HOME" > OUT/root
@reboot root echo started >> OUT/reboot
`)
	jobs := importCrontab(t, s, tab, "--system")
	names := jobNames(t, jobs)
	d := s.startDaemon(t, "import-1", jobs)
	if got := waitFile(t, filepath.Join(out, "reboot"), time.Minute); got != "started" {
		t.Errorf("@reboot after the first start: %q", got)
	}
	triggerAll(t, s, names[:2])
	want := fmt.Sprintf("postgres %s postgres postgres %s", pg.HomeDir, pg.HomeDir)
	if got := waitFile(t, filepath.Join(out, "postgres"), time.Minute); got != want {
		t.Errorf("postgres's line: %q, want %q", got, want)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(out, "postgres"), &st); err != nil || fmt.Sprint(st.Uid) != pg.Uid {
		t.Errorf("postgres's file is owned by uid %d (%v), want %s", st.Uid, err, pg.Uid)
	}
	if got := waitFile(t, filepath.Join(out, "root"), time.Minute); !strings.HasPrefix(got, "root ") {
		t.Errorf("root's line: %q", got)
	}
	d.stop(t)
	d = s.startDaemon(t, "import-2", jobs)
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(out, "reboot"))
		if string(b) == "started\nstarted\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("@reboot after the second start: %q, want two runs in all", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.stop(t)
}

// A crontab the import cannot read as cron does is refused, each bad line
// named FILE:LINE, with exit 65, and nothing on stdout.
func TestImportCrontabRefusesBadLines(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	for _, tt := range []struct {
		name, text string
		args       []string
		want       []string
	}{
		{"user", "# ok\n@daily true\n0 30 2 * * * /bin/backup\nA=\"unterminated\n61 * * * * x\nCRON_TZ=Europe/Berlin 0 2 * * * x\n", []string{"--user", "root"},
			[]string{"user:3: 6 fields", "user:4: A=", "user:5: schedule \"61 * * * *\": minute", "user:6: CRON_TZ=Europe/Berlin: cron reads the whole line"}},
		{"system", "@daily root true\n@daily no-such-user-here x\n", []string{"--system"},
			[]string{"system:2: the line's user \"no-such-user-here\": does not exist on this host"}},
	} {
		path := filepath.Join(dir, tt.name)
		if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
			t.Fatal(err)
		}
		r := s.run(t, append(append([]string{"import", "crontab"}, tt.args...), path)...)
		if r.code != 65 || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, want 65 and nothing", tt.name, r.code, r.stdout)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.stderr, path+":"+strings.TrimPrefix(w, tt.name+":")) {
				t.Errorf("%s: stderr lacks %q:\n%s", tt.name, w, r.stderr)
			}
		}
	}
	if r := s.run(t, "import", "crontab", filepath.Join(dir, "missing")); r.code != 66 {
		t.Errorf("a missing file: exit %d, want 66: %s", r.code, r.stderr)
	}
	if r := s.run(t, "import", "crontab", "--scope", "everywhere", "-"); r.code != 64 {
		t.Errorf("--scope everywhere: exit %d, want 64: %s", r.code, r.stderr)
	}
}

// The golden job files of the crontab package's tests (a user crontab
// with %, \%, @reboot, env lines in the middle, CRON_TZ, MAILTO and its
// variants, comments; a system crontab, --scope host) are valid job files.
func TestImportedGoldensValidate(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob("../../crontab/testdata/*.yaml")
	if err != nil || len(paths) < 2 {
		t.Fatalf("golden job files: %q, %v", paths, err)
	}
	for _, path := range paths {
		f, err := jobfile.Load(path)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(f.Jobs) == 0 {
			t.Errorf("%s: no jobs", path)
		}
	}
}
