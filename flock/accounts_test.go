package flock

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// The files flock reads by itself find what os/user finds on this host,
// for every user and group of /etc/passwd and /etc/group (root and
// postgres, at least, on the test machines), by name and by id, and the
// same group memberships; and none of a name that does not exist.
func TestFileAccountsAreOSUsers(t *testing.T) {
	a := files{passwd: "/etc/passwd", group: "/etc/group"}
	var users, groups []string
	scan(a.passwd, func(f []string) bool { users = append(users, f[0]); return true })
	scan(a.group, func(f []string) bool { groups = append(groups, f[0]); return true })
	if !slices.Contains(users, "root") || !slices.Contains(groups, "root") {
		t.Fatalf("read users %q and groups %q: no root", users, groups)
	}
	for _, name := range users {
		want, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.LookupUser(name)
		if err != nil || got.Uid != want.Uid || got.Gid != want.Gid || got.Username != want.Username {
			t.Errorf("LookupUser(%q) = %+v, %v; os/user: %+v", name, got, err, want)
			continue
		}
		byID, err := a.LookupUserID(want.Uid)
		if wantByID, _ := user.LookupId(want.Uid); err != nil || byID.Username != wantByID.Username {
			t.Errorf("LookupUserID(%s) = %+v, %v; os/user: %+v", want.Uid, byID, err, wantByID)
		}
		ids, err := a.GroupIDs(got)
		wantIDs, _ := want.GroupIds()
		slices.Sort(ids)
		slices.Sort(wantIDs)
		if err != nil || !slices.Equal(slices.Compact(ids), slices.Compact(wantIDs)) {
			t.Errorf("GroupIDs(%s) = %q, %v; os/user: %q", name, ids, err, wantIDs)
		}
	}
	for _, name := range groups {
		want, err := user.LookupGroup(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.LookupGroup(name)
		if err != nil || *got != (Group{Gid: want.Gid, Name: want.Name}) {
			t.Errorf("LookupGroup(%q) = %+v, %v; os/user: %+v", name, got, err, want)
		}
		byID, err := a.LookupGroupID(want.Gid)
		if wantByID, _ := user.LookupGroupId(want.Gid); err != nil || byID.Name != wantByID.Name {
			t.Errorf("LookupGroupID(%s) = %+v, %v; os/user: %+v", want.Gid, byID, err, wantByID)
		}
	}
	if g, err := a.LookupGroup("baton-no-such-group"); err != ErrNoAccount {
		t.Errorf("LookupGroup of no group: %+v, %v", g, err)
	}
	if u, err := a.LookupUserID(strconv.Itoa(1 << 30)); err != ErrNoAccount {
		t.Errorf("LookupUserID of no user: %+v, %v", u, err)
	}
}

// Comments, NIS entries, blank lines and short lines are skipped;
// memberships come from the group list, the primary group first.
func TestFileAccountsRead(t *testing.T) {
	dir := t.TempDir()
	passwd, group := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	os.WriteFile(passwd, []byte("# comment\n+nis::0:0::/:/bin/sh\n\nshort:x\nalice:x:1001:1001:Alice:/home/alice:/bin/sh\n"), 0o644)
	os.WriteFile(group, []byte("-nis::0:\nalice:x:1001:\nbaton:x:999:bob,alice\nwheel:x:10:alicex\ndocker:x:998:alice\n"), 0o644)
	a := files{passwd: passwd, group: group}
	u, err := a.LookupUser("alice")
	if err != nil || *u != (User{Uid: "1001", Gid: "1001", Username: "alice"}) {
		t.Fatalf("alice: %+v, %v", u, err)
	}
	if _, err := a.LookupUser("nis"); err != ErrNoAccount {
		t.Errorf("a NIS entry was read: %v", err)
	}
	if _, err := a.LookupUser("short"); err != ErrNoAccount {
		t.Errorf("a short line was read: %v", err)
	}
	ids, err := a.GroupIDs(u)
	if want := []string{"1001", "999", "998"}; err != nil || !slices.Equal(ids, want) {
		t.Errorf("GroupIDs(alice) = %q, %v; want %q", ids, err, want)
	}
	if g, err := a.LookupGroupID("999"); err != nil || g.Name != "baton" {
		t.Errorf("LookupGroupID(999) = %+v, %v", g, err)
	}
}
