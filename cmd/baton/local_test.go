package main_test

// The traps of flock(1) in a crontab, each reproduced, and what baton's local
// store does instead.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Trap: a background child inherits flock's descriptor and keeps the lock
// after the job exits, so later runs are refused for no visible reason.
// baton: the child never holds the lock; with --strays=report the next run
// goes ahead at once although the child still runs.
func TestTrapInheritedDescriptor(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()

	// flock(1): the stray sleep keeps the lock.
	lockfile := filepath.Join(dir, "flock.lock")
	if out, err := exec.Command("flock", "-n", lockfile, "sh", "-c", "sleep 3 >/dev/null 2>&1 &").CombinedOutput(); err != nil {
		t.Fatalf("flock: %v %s", err, out)
	}
	err := exec.Command("flock", "-n", lockfile, "true").Run()
	if code := exitStatusOf(err); code != 1 {
		t.Fatalf("flock -n after a stray: exit %d; this test expects flock's trap (exit 1)", code)
	}

	// baton: the stray does not hold the lock.
	r := s.run(t, "run", "--strays", "report", "job", "--", "sh", "-c",
		`sleep 3 >/dev/null 2>&1 & while [ "$(cat /proc/$!/comm)" != sleep ]; do :; done`)
	if r.code != 0 || !strings.Contains(r.stderr, "sleep 3") {
		t.Fatalf("first run: exit %d, stderr %q; want 0 and the stray named", r.code, r.stderr)
	}
	r = s.run(t, "run", "job", "--", "sh", "-c", "echo $BATON_FENCING_TOKEN")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
		t.Fatalf("next run while the stray lives: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func exitStatusOf(err error) int {
	if err == nil {
		return 0
	}
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	return -1
}

// --strays=wait (the default): the lease stays held, visibly, until the
// job's background child exits.
func TestStraysWait(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	exited := filepath.Join(dir, "exited")
	// The shell exits once its background sleep has exec'd, so that the
	// stray is a sleep, by name, when baton lists it.
	first, out := s.start(t, "run", "job", "--", "sh", "-c",
		`sleep 2 >/dev/null 2>&1 & while [ "$(cat /proc/$!/comm)" != sleep ]; do :; done; echo > `+exited)
	waitFile(t, exited, 10*time.Second)
	time.Sleep(100 * time.Millisecond) // the shell is gone; only the sleep is left
	r := s.run(t, "run", "job", "--", "true")
	if r.code != 75 {
		t.Fatalf("run beside a stray: exit %d, want 75", r.code)
	}
	if code := exitCode(t, first); code != 0 {
		t.Fatalf("first run: exit %d", code)
	}
	if !strings.Contains(out.String(), "--strays=wait") || !strings.Contains(out.String(), "sleep 2") {
		t.Fatalf("first run did not name its stray:\n%s", out)
	}
	if r := s.run(t, "run", "job", "--", "true"); r.code != 0 {
		t.Fatalf("run after the stray exited: exit %d %s", r.code, r.stderr)
	}
}

// --strays=kill: the stray is stopped and the lease free at once.
func TestStraysKill(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	r := s.run(t, "run", "--strays", "kill", "job", "--", "sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $! > "+pidFile)
	if r.code != 0 || !strings.Contains(r.stderr, "--strays=kill") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if pid := atoi(t, waitFile(t, pidFile, time.Second)); alive(pid) {
		t.Fatalf("stray %d survived --strays=kill", pid)
	}
	if r := s.run(t, "run", "job", "--", "true"); r.code != 0 {
		t.Fatalf("next run: exit %d %s", r.code, r.stderr)
	}
}

// Trap: baton (like flock) killed while the job runs; with flock the kernel
// frees the lock and the job runs on. baton's guard kills the whole tree,
// setsid'd daemons included, before the lock is free.
func TestTrapBatonKilled(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	script := `sleep 60 >/dev/null 2>&1 & a=$!; setsid sleep 60 >/dev/null 2>&1 & b=$!; echo "$$ $a $b" > ` + pids + `; wait`
	hold, _ := s.start(t, "run", "job", "--", "sh", "-c", script)
	tree := strings.Fields(waitFile(t, pids, 10*time.Second))
	hold.Process.Signal(syscall.SIGKILL)
	exitCode(t, hold)
	deadline := time.Now().Add(time.Second)
	for _, f := range tree {
		pid := atoi(t, f)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Fatalf("pid %d of the job's tree outlived baton by a second", pid)
		}
	}
	r := s.run(t, "run", "--wait", "2s", "job", "--", "sh", "-c", "echo $BATON_FENCING_TOKEN")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
		t.Fatalf("next run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// --max-run stops the whole tree and exits 124; --json-result says so.
func TestMaxRun(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	resultFile := filepath.Join(dir, "result.jsonl")
	// On a busy machine sh may not have started its background child before
	// a short --max-run fires; then there is nothing to check, so the run is
	// repeated with a longer limit rather than judged on a tree that never grew.
	var r result
	for _, maxRun := range []string{"500ms", "3s", "15s"} {
		r = s.run(t, "run", "--max-run", maxRun, "--kill-after", "200ms", "--json-result", resultFile, "job", "--",
			"sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $! > "+pidFile+"; wait")
		if r.code != 124 {
			t.Fatalf("--max-run %s: exit %d, want 124; stderr %q", maxRun, r.code, r.stderr)
		}
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		t.Logf("--max-run %s fired before the job started its child; trying a longer limit", maxRun)
	}
	if pid := atoi(t, waitFile(t, pidFile, time.Second)); alive(pid) {
		t.Fatalf("background pid %d survived --max-run", pid)
	}
	b, err := os.ReadFile(resultFile)
	if err != nil || !bytes.Contains(b, []byte(`"outcome":"timed-out"`)) || !bytes.Contains(b, []byte(`"token":1`)) {
		t.Fatalf("json result %q (%v)", b, err)
	}
	// Busy and bad-input runs are reported too.
	ready := filepath.Join(dir, "ready")
	hold, _ := s.start(t, "run", "job", "--", "sh", "-c", "echo > "+ready+"; sleep 600")
	waitFile(t, ready, 10*time.Second)
	if r = s.run(t, "run", "--json-result", resultFile, "job", "--", "true"); r.code != 75 {
		t.Fatalf("run beside a holder: exit %d", r.code)
	}
	hold.Process.Signal(syscall.SIGTERM)
	exitCode(t, hold)
	b, _ = os.ReadFile(resultFile)
	if !bytes.Contains(b, []byte(`"outcome":"skipped-overlap"`)) {
		t.Fatalf("no skipped-overlap line in %s", b)
	}
}

// runAs runs baton as another (possibly nonexistent) uid with the given
// group, the way two accounts on one host would.
func runAs(t *testing.T, uid, gid uint32, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, batonBin, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{gid}}}
	cmd.Dir = "/"
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("running baton as uid %d: %v", uid, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// userDir makes a home directory for uid where uid can reach it (t.TempDir's
// parent is private to root).
func userDir(t *testing.T, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "baton-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs baton as other users and needs root; CI runs as root")
	}
}

// Trap: per-user lock directories let the same job run once per account.
// baton's default scope is the host: two users, one run. --scope user is the
// explicit choice, and then both run.
func TestTrapScope(t *testing.T) {
	needRoot(t)
	t.Parallel()
	const gid = 54321
	shared, err := os.MkdirTemp("", "baton-host-scope-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chown(shared, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	homes := []string{userDir(t, 60001, gid), userDir(t, 60002, gid)}
	script := "sleep 1; echo ran"
	both := func(args ...string) []result {
		done := make(chan result, 2)
		for i := range 2 {
			go func() {
				env := []string{"HOME=" + homes[i], "BATON_LOCK_DIR=" + shared}
				if args[1] == "--scope" {
					env = env[:1]
				}
				done <- runAs(t, uint32(60001+i), gid, env, args...)
			}()
		}
		return []result{<-done, <-done}
	}
	rs := both("run", "job", "--", "sh", "-c", script)
	if codes := []int{rs[0].code, rs[1].code}; !(codes[0] == 0 && codes[1] == 75 || codes[0] == 75 && codes[1] == 0) {
		t.Fatalf("host scope, two users: exits %v (%q, %q); want one run and one 75", codes, rs[0].stderr, rs[1].stderr)
	}
	rs = both("run", "--scope", "user", "job", "--", "sh", "-c", script)
	for _, r := range rs {
		if r.code != 0 || strings.TrimSpace(r.stdout) != "ran" {
			t.Fatalf("user scope, two users: exit %d, stdout %q, stderr %q; want both to run", r.code, r.stdout, r.stderr)
		}
	}
	r := runAs(t, 60001, gid, []string{"HOME=" + homes[0]}, "leases", "--scope", "user")
	if r.code != 0 || !strings.Contains(r.stdout, "scope: user") {
		t.Fatalf("leases --scope user: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// A missing or unusable lock directory is a clear error, never a silent
// fall back to a per-user directory.
func TestLockDirProblems(t *testing.T) {
	needRoot(t)
	t.Parallel()
	home := userDir(t, 60003, 60003)
	// Host scope, default directory, as a user who cannot create or write it.
	r := runAs(t, 60003, 60003, []string{"HOME=" + home}, "run", "job", "--", "true")
	if r.code != 69 || !strings.Contains(r.stderr, "/var/lib/baton/locks") || !strings.Contains(r.stderr, "--scope user") {
		t.Fatalf("unusable host directory: exit %d, stderr %q; want 69 naming the directory and the way out", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".local", "state", "baton")); err == nil {
		t.Fatal("baton fell back to a per-user directory")
	}
	// A read-only directory on tmpfs.
	ro, err := os.MkdirTemp("/dev/shm", "baton-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ro) })
	os.Chmod(ro, 0o555)
	r = runAs(t, 60003, 60003, []string{"HOME=" + home, "BATON_LOCK_DIR=" + ro}, "run", "job", "--", "true")
	if r.code != 69 || !strings.Contains(r.stderr, ro) {
		t.Fatalf("read-only lock directory: exit %d, stderr %q", r.code, r.stderr)
	}
}

// An ordinary user whose host lock directory is missing or not theirs to
// write is told at once (no --db-wait retry), exit 69, with the exact
// one-time set-up for root: the group, the directory as the package's
// tmpfiles.d makes it (2770, group baton), and the user's membership.
func TestFirstRunAsOrdinaryUser(t *testing.T) {
	needRoot(t)
	t.Parallel()
	home := userDir(t, 60005, 60005)
	notMine, err := os.MkdirTemp("", "baton-root-locks-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(notMine) })
	os.Chmod(notMine, 0o755)
	for _, c := range []struct {
		name string
		env  []string
		want []string
	}{
		// The default directory: missing on a fresh machine, or made by
		// root's first run without the group.
		{"default", []string{"HOME=" + home}, []string{"/var/lib/baton/locks", "usermod -aG baton 60005", "log in again"}},
		{"root's directory", []string{"HOME=" + home, "BATON_LOCK_DIR=" + notMine},
			[]string{"cannot create lock files in " + notMine, "chgrp baton " + notMine + " && chmod 2770 " + notMine, "usermod -aG baton 60005"}},
	} {
		r := runAs(t, 60005, 60005, c.env, "run", "--db-wait", "10m", "demo", "--", "echo", "ran")
		if r.code != 69 || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want 69 and no run", c.name, r.code, r.stdout)
		}
		if strings.Contains(r.stderr, "retrying") {
			t.Errorf("%s: retried a permission problem: %q", c.name, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr %q does not say %q", c.name, r.stderr, w)
			}
		}
		if _, err := user.LookupGroup("baton"); err != nil && !strings.Contains(r.stderr, "groupadd --system baton && ") {
			t.Errorf("%s: no group baton on this host, and stderr %q does not create it first", c.name, r.stderr)
		}
	}
}

// On a read-only file system no set-up as root helps: baton run says so and
// suggests a writable directory, not usermod or chmod.
func TestRunReadOnlyLockDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(readOnlyDir(t), "locks")
	s := store{name: "local", env: []string{"BATON_LOCK_DIR=" + dir}}
	r := s.run(t, "run", "job", "--", "true")
	if r.code != 69 || !strings.Contains(r.stderr, "read-only") || strings.Contains(r.stderr, "chmod") || strings.Contains(r.stderr, "usermod") {
		t.Fatalf("exit %d, stderr %q; want 69 and a writable directory suggested", r.code, r.stderr)
	}
}

// A lock file that cannot be opened as one is not a store that is away:
// a symbolic link (baton never follows one to a lock file: whoever can
// write the lock directory could point it at any file) or a directory in
// its place. baton run says what it found at once, exit 69, runs nothing,
// and does not retry it for --db-wait, which is PostgreSQL's wait; the
// link's target is left as it was.
func TestRunUnusableLockFileIsNotRetried(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := store{name: "local", env: []string{"BATON_LOCK_DIR=" + dir}}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("not a lock file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "link.lock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ job, says string }{
		{"link", "is a symbolic link"},
		{"dir", "is a directory"},
	} {
		// s.run kills baton after a minute: a retry for --db-wait 10m fails here.
		r := s.run(t, "run", "--db-wait", "10m", c.job, "--", "echo", "ran")
		if r.code != 69 || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want 69 and no run (stderr %q)", c.job, r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stderr, "retrying") {
			t.Errorf("%s: retried a lock file that waiting does not mend: %q", c.job, r.stderr)
		}
		want := "lock file " + filepath.Join(dir, c.job+".lock") + " " + c.says
		if !strings.Contains(r.stderr, want) {
			t.Errorf("%s: stderr %q does not say %q", c.job, r.stderr, want)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "not a lock file\n" {
		t.Errorf("the link's target: %q, %v; want it untouched", b, err)
	}
}
