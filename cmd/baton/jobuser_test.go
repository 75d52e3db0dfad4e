package main_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// account is a user of this host, as the tests expect a job run as it to
// see itself.
type account struct {
	name     string
	uid, gid int
	groups   string // id -G: the group first, then the user's others
	home     string
}

func lookupAccount(t *testing.T, name, group string) account {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no user %s on this host: %v", name, err)
	}
	a := account{name: name, home: u.HomeDir}
	a.uid, _ = strconv.Atoi(u.Uid)
	a.gid, _ = strconv.Atoi(u.Gid)
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			t.Skipf("no group %s on this host: %v", group, err)
		}
		a.gid, _ = strconv.Atoi(g.Gid)
	}
	ids, _ := u.GroupIds()
	groups := []string{strconv.Itoa(a.gid)}
	for _, id := range ids {
		if id != strconv.Itoa(a.gid) {
			groups = append(groups, id)
		}
	}
	a.groups = strings.Join(groups, " ")
	return a
}

// sharedDir is a directory every user may write in (t.TempDir's parent
// is private to root).
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "baton-users-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// whoami is a job's command that writes what it runs as to out: uid, id -G,
// HOME, LOGNAME, USER, its directory, then its stdin.
func whoami(out string) string {
	return `{ id -u; id -G; echo "$HOME"; echo "$LOGNAME"; echo "$USER"; pwd; cat; } > ` + out + `.tmp && mv ` + out + `.tmp ` + out + `; echo ran as $(id -un)`
}

// A daemon running as root runs a job with user: as that user, with its
// groups, HOME, LOGNAME and USER as cron sets them and its home as the
// directory; a job's env may set HOME (and the directory follows it), not
// LOGNAME or USER; group: replaces the primary group. Stdin, the output
// and a list-form command found on the job's PATH work as for any job.
func TestDaemonRunsJobAsUser(t *testing.T) {
	t.Parallel()
	needRoot(t)
	pg := lookupAccount(t, "postgres", "")
	nobody := lookupAccount(t, "nobody", "postgres")
	dir := sharedDir(t)
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	if err := os.WriteFile(filepath.Join(bin, "whoami-job"), []byte("#!/bin/sh\n"+whoami(filepath.Join(dir, "list"))+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := localStore(t)
	jobs := writeJobFile(t, `
defaults:
  user: postgres
jobs:
  - name: as-postgres
    schedule: "@every 1s"
    command: '`+whoami(filepath.Join(dir, "postgres"))+`'
    stdin: "from stdin\n"
  - name: as-nobody
    schedule: "@every 1s"
    user: nobody
    group: postgres
    env: {HOME: `+dir+`, LOGNAME: root, USER: root}
    command: '`+whoami(filepath.Join(dir, "nobody"))+`'
  - name: list-form
    schedule: "@every 1s"
    env: {PATH: `+bin+`:/usr/bin:/bin}
    command: [whoami-job]
`)
	d := s.startDaemon(t, "users", jobs)
	for _, tc := range []struct {
		job, file string
		a         account
		home, dir string
		stdin     string
	}{
		{"as-postgres", "postgres", pg, pg.home, homeDir(pg.home), "from stdin\n"},
		{"as-nobody", "nobody", nobody, dir, dir, ""},
		{"list-form", "list", pg, pg.home, homeDir(pg.home), ""},
	} {
		out := filepath.Join(dir, tc.file)
		got := waitFile(t, out, time.Minute)
		want := strings.Join([]string{strconv.Itoa(tc.a.uid), tc.a.groups, tc.home, tc.a.name, tc.a.name, tc.dir}, "\n") + "\n" + tc.stdin
		if want = strings.TrimSpace(want); got != want {
			t.Errorf("%s saw:\n%s\nwant:\n%s", tc.job, got, want)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != tc.a.uid || int(st.Gid) != tc.a.gid {
			t.Errorf("%s wrote a file of uid %d gid %d, want %d %d", tc.job, st.Uid, st.Gid, tc.a.uid, tc.a.gid)
		}
		ticks := s.waitDone(t, tc.job, 1, time.Minute, nil)
		if tr := ticks[0]; tr.Outcome != "succeeded" || !strings.Contains(tr.Output, "ran as "+tc.a.name) {
			t.Errorf("%s: first tick %s (%s), output %q; want succeeded with \"ran as %s\"", tc.job, tr.Outcome, tr.Reason, tr.Output, tc.a.name)
		}
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon exit %d", code)
	}
}

// homeDir is where a job of a user whose home is home runs: there, or /
// when it is not a directory.
func homeDir(home string) string {
	if fi, err := os.Stat(home); err == nil && fi.IsDir() {
		return home
	}
	return "/"
}

// A daemon that is not root refuses, at start (exit 64) and on reload
// (keeping the jobs it has), a job of another user, naming the job and
// the field and saying to run the daemon as root; a job of its own user
// it runs.
func TestDaemonNotRootRefusesOtherUsers(t *testing.T) {
	t.Parallel()
	needRoot(t)
	pg := lookupAccount(t, "postgres", "")
	dir := sharedDir(t)
	lockDir := userDir(t, pg.uid, pg.gid)
	config := filepath.Join(dir, "jobs.yaml")
	other := `jobs:
  - {name: other, schedule: "@every 1s", command: "id -u > ` + dir + `/other", user: nobody}
`
	own := `jobs:
  - {name: own, schedule: "@every 1s", command: "id -u > ` + dir + `/own.tmp && mv ` + dir + `/own.tmp ` + dir + `/own", user: postgres}
`
	os.WriteFile(config, []byte(other), 0o644)
	args := []string{"daemon", "--config", config, "--poll", "50ms", "--claim-ttl", "3s", "--grace", "10s"}
	env := []string{"BATON_LOCK_DIR=" + lockDir}
	r := runAs(t, uint32(pg.uid), uint32(pg.gid), env, args...)
	want := "jobs[0](other).user: runs as nobody, but this daemon runs as uid " + strconv.Itoa(pg.uid) + ", not root: only a daemon running as root runs a job as another user (run the daemon as root: docs/SYSTEMD.md)"
	if r.code != 64 || !strings.Contains(r.stderr, want) {
		t.Fatalf("daemon as postgres with a job of nobody: exit %d, stderr:\n%s\nwant 64 and %q", r.code, r.stderr, want)
	}

	os.WriteFile(config, []byte(own), 0o644)
	cmd := exec.CommandContext(context.Background(), batonBin, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(pg.uid), Gid: uint32(pg.gid), Groups: []uint32{uint32(pg.gid)}}}
	cmd.Dir = "/"
	logPath := filepath.Join(t.TempDir(), "daemon.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	logText := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	if got := waitFile(t, filepath.Join(dir, "own"), time.Minute); got != strconv.Itoa(pg.uid) {
		t.Errorf("the daemon's own user's job ran as uid %q", got)
	}
	// A reload to a job of another user is refused; the old job runs on.
	os.WriteFile(config, []byte(other), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(logText(), "reload refused"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no refused reload in the log:\n%s", logText())
		}
	}
	if !strings.Contains(logText(), "jobs[0](other).user: runs as nobody") {
		t.Errorf("the refused reload does not name the job's user:\n%s", logText())
	}
	os.Remove(filepath.Join(dir, "own"))
	waitFile(t, filepath.Join(dir, "own"), time.Minute)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, "other")); err == nil {
		t.Errorf("the other user's job ran")
	}
}

// baton validate, run by anyone, checks that a job's user and group exist
// on this host (64 naming the field when not), and notes that a job of
// another user needs a daemon running as root, without failing for it: a
// sysadmin validates as themselves before installing the file.
func TestValidateJobUsers(t *testing.T) {
	t.Parallel()
	needRoot(t)
	pg := lookupAccount(t, "postgres", "")
	lookupAccount(t, "nobody", "")
	dir := sharedDir(t)
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(`jobs:
  - {name: dump, schedule: '@daily', command: pg_dumpall, user: postgres}
  - {name: sync, schedule: '@daily', command: date, user: nobody, group: postgres}
`), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`jobs:
  - {name: a, schedule: '@daily', command: date, user: no-such-user-e2e}
  - {name: b, schedule: '@daily', command: date, user: nobody, group: no-such-group-e2e}
`), 0o644)
	r := runAs(t, uint32(pg.uid), uint32(pg.gid), nil, "validate", good)
	note := "baton validate: warning: job sync: runs as nobody: only a daemon running as root (or as nobody) runs it; the packaged baton.service runs as baton, see docs/SYSTEMD.md"
	if r.code != 0 || !strings.Contains(r.stderr, note) || strings.Contains(r.stderr, "job dump:") {
		t.Errorf("validate as postgres: exit %d, stderr:\n%s\nwant 0 and, for sync alone, %q", r.code, r.stderr, note)
	}
	r = runAs(t, uint32(pg.uid), uint32(pg.gid), nil, "validate", bad)
	for _, want := range []string{
		bad + `: jobs[0](a).user: no user "no-such-user-e2e" on this host`,
		bad + `: jobs[1](b).group: no group "no-such-group-e2e" on this host`,
	} {
		if r.code != 64 || !strings.Contains(r.stderr, want) {
			t.Errorf("validate of unknown accounts: exit %d, stderr:\n%s\nwant 64 and %q", r.code, r.stderr, want)
		}
	}
}
