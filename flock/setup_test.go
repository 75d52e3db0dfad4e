package flock

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"golang.org/x/sys/unix"
)

// SetupHost makes the group, the directory (2770, setgid, group) and the
// membership, only what is missing: a second run changes nothing, and a
// directory whose mode was changed is mended.
func TestSetupHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestSetupHost needs root: it creates a group and a directory owned by it (run the suite as root, as ./test.sh does in CI)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	group := "bt" + hex.EncodeToString(b)
	t.Cleanup(func() { exec.Command("groupdel", group).Run() })
	dir := filepath.Join(t.TempDir(), "var", "locks")
	steps := func(users []string) []SetupStep {
		t.Helper()
		s, err := SetupHost(dir, group, users, false)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	check := func() {
		t.Helper()
		g, err := user.LookupGroup(group)
		if err != nil {
			t.Fatalf("group %s: %v", group, err)
		}
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			t.Fatal(err)
		}
		if strconv.Itoa(int(st.Gid)) != g.Gid || st.Uid != 0 || st.Mode&0o7777 != 0o2770 {
			t.Fatalf("%s: uid %d gid %d mode %o; want root, group %s (%s), 2770", dir, st.Uid, st.Gid, st.Mode&0o7777, group, g.Gid)
		}
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		if ids, _ := u.GroupIds(); !slices.Contains(ids, g.Gid) {
			t.Fatalf("nobody is not in group %s: %v", group, ids)
		}
	}

	dry, err := SetupHost(dir, group, []string{"nobody"}, true)
	if err != nil || len(dry) != 3 || dry[0].Done {
		t.Fatalf("dry run: %+v, %v; want three steps not done", dry, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the dry run created %s", dir)
	}
	first := steps([]string{"nobody"})
	want := []string{"groupadd --system " + group, "install -d -m 2770 -g " + group + " " + dir, "usermod -aG " + group + " nobody"}
	if got := stepNames(first); !slices.Equal(got, want) {
		t.Fatalf("first run: %q, want %q", got, want)
	}
	check()
	if again := steps([]string{"nobody"}); len(again) != 0 {
		t.Fatalf("second run: %+v, want nothing to do", again)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if mend := stepNames(steps(nil)); !slices.Equal(mend, []string{"chgrp " + group + " " + dir + " && chmod 2770 " + dir}) {
		t.Fatalf("after chmod 755: %q", mend)
	}
	check()
}

func stepNames(steps []SetupStep) []string {
	var names []string
	for _, s := range steps {
		if !s.Done {
			return append(names, "not done: "+s.Step)
		}
		names = append(names, s.Step)
	}
	return names
}

// newGroupName is a group name that no account has; SetupHost would create
// it, and the test removes it if it did.
func newGroupName(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	group := "bt" + hex.EncodeToString(b)
	t.Cleanup(func() { exec.Command("groupdel", group).Run() })
	return group
}

// unchanged fails if SetupHost made group, or changed dir from mode.
func unchanged(t *testing.T, group, dir string, mode uint32) {
	t.Helper()
	if _, err := user.LookupGroup(group); err == nil {
		t.Errorf("group %s was created", group)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != mode || st.Gid != 0 {
		t.Errorf("%s changed: mode %o gid %d, want %o gid 0", dir, st.Mode&0o7777, st.Gid, mode)
	}
}

// A lock directory named by a symbolic link is refused, dry run or not,
// before anything changes: the link's target is not what was named.
func TestSetupHostRefusesLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestSetupHostRefusesLink needs root: SetupHost refuses to start otherwise (run the suite as root, as ./test.sh does in CI)")
	}
	group := newGroupName(t)
	base := t.TempDir()
	target := filepath.Join(base, "real")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "locks")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		steps, err := SetupHost(link, group, []string{"nobody"}, dry)
		var e *baton.Error
		if !errors.As(err, &e) || e.Code != baton.EINVALID || e.Field != "lock-dir" ||
			!strings.Contains(e.Message, link+" is a symbolic link to "+target) || !strings.Contains(e.Message, "--lock-dir "+target) {
			t.Errorf("dry run %v: %+v, %v; want invalid lock-dir naming the link, its target and --lock-dir TARGET", dry, steps, err)
		}
		if len(steps) != 0 {
			t.Errorf("dry run %v: steps %+v before the refusal", dry, steps)
		}
	}
	unchanged(t, group, target, 0o755)
	// Something else than a directory at the path is refused too.
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SetupHost(file, group, nil, false); baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), "regular file, not a directory") {
		t.Errorf("a regular file: %v, want invalid", err)
	}
	unchanged(t, group, file, 0o644)
}

// An unknown --user is found before anything is made: no group, no
// directory.
func TestSetupHostChecksUsersFirst(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestSetupHostChecksUsersFirst needs root: SetupHost refuses to start otherwise (run the suite as root, as ./test.sh does in CI)")
	}
	group := newGroupName(t)
	dir := filepath.Join(t.TempDir(), "var", "locks")
	_, err := SetupHost(dir, group, []string{"nobody", "nosuchuser-" + group}, false)
	if baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), "--user") || !strings.Contains(err.Error(), "nosuchuser-"+group) {
		t.Errorf("SetupHost with an unknown user: %v; want invalid --user naming it", err)
	}
	if _, err := os.Lstat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after the refusal (%v)", filepath.Dir(dir), err)
	}
	if _, err := user.LookupGroup(group); err == nil {
		t.Errorf("group %s was created", group)
	}
}
