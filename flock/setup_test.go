package flock

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

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
