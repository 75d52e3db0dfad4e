package main_test

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// noNewHostGroup fails the test, and removes the group, if group baton did
// not exist before it and does after: baton setup local makes it, and a
// refused set-up must not.
func noNewHostGroup(t *testing.T) {
	t.Helper()
	if _, err := user.LookupGroup("baton"); err == nil {
		return
	}
	t.Cleanup(func() {
		if _, err := user.LookupGroup("baton"); err == nil {
			t.Error("group baton was created")
			exec.Command("groupdel", "baton").Run()
		}
	})
}

// baton setup local --lock-dir LINK refuses the link, dry run or not,
// naming the link, its target and the --lock-dir to give instead, and
// changes nothing: before, it changed the target's group and mode (2770)
// while naming only the link.
func TestSetupLocalRefusesLinkedDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("baton setup local needs root; CI runs as root")
	}
	noNewHostGroup(t)
	base := t.TempDir()
	target := filepath.Join(base, "real")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "locks")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	s := store{name: "local"}
	for _, args := range [][]string{
		{"setup", "local", "--dry-run", "--lock-dir", link},
		{"setup", "local", "--lock-dir", link},
	} {
		r := s.run(t, args...)
		if r.code != 64 || !strings.Contains(r.stderr, "--lock-dir: "+link+" is a symbolic link to "+target) ||
			!strings.Contains(r.stderr, "--lock-dir "+target) || r.stdout != "" {
			t.Errorf("baton %s: exit %d\nstdout %q\nstderr %q\nwant 64 naming the link, its target and --lock-dir %s", strings.Join(args, " "), r.code, r.stdout, r.stderr, target)
		}
	}
	// From the environment, the message names BATON_LOCK_DIR.
	r := store{name: "local", env: []string{"BATON_LOCK_DIR=" + link}}.run(t, "setup", "local")
	if r.code != 64 || !strings.Contains(r.stderr, "BATON_LOCK_DIR: "+link+" is a symbolic link") {
		t.Errorf("BATON_LOCK_DIR=LINK baton setup local: exit %d: %s", r.code, r.stderr)
	}
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o755 || st.Gid != 0 {
		t.Errorf("the link's target was changed: mode %o gid %d, want 755 gid 0", st.Mode&0o7777, st.Gid)
	}
}

// An unknown --user is refused (64) before anything is made: the
// directory does not exist afterwards, nor does its parent.
func TestSetupLocalChecksUsersFirst(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("baton setup local needs root; CI runs as root")
	}
	noNewHostGroup(t)
	dir := filepath.Join(t.TempDir(), "var", "locks")
	r := store{name: "local"}.run(t, "setup", "local", "--user", "nobody", "--user", "nosuchuser-e2e", "--lock-dir", dir)
	if r.code != 64 || !strings.Contains(r.stderr, `--user: no user "nosuchuser-e2e"`) {
		t.Errorf("baton setup local --user nosuchuser-e2e: exit %d: %s%s; want 64 naming the user", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after the refusal (%v)", filepath.Dir(dir), err)
	}
}
