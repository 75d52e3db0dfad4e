package jobfile_test

import (
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
)

// user and group name the account a job runs as; both may be defaults,
// a job's own replacing the default's.
func TestParseUserGroup(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "jobs.yaml", `defaults:
  user: postgres
jobs:
  - {name: dump, schedule: '@daily', command: pg_dumpall}
  - {name: sync, schedule: '@daily', command: date, user: nobody, group: nogroup}
  - {name: own-group, schedule: '@daily', command: date, group: adm}
`)
	for i, want := range [][2]string{{"postgres", ""}, {"nobody", "nogroup"}, {"postgres", "adm"}} {
		if j := f.Jobs[i]; j.User != want[0] || j.Group != want[1] {
			t.Errorf("%s: user %q group %q, want %q %q", j.Name, j.User, j.Group, want[0], want[1])
		}
	}
	// A job without user is the daemon's own: its version is as before.
	a, b := mustParse(t, "jobs.yaml", job()), mustParse(t, "jobs.yaml", job("user: postgres"))
	if a.Jobs[0].Version() == b.Jobs[0].Version() {
		t.Errorf("user: postgres leaves the version as it is (%s)", a.Jobs[0].Version())
	}
}

func TestParseUserGroupInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"user empty", job("user: ''"), "jobs.yaml:5:11: jobs[0](a).user: empty; want a user name such as postgres, or leave user out to run as the daemon's user"},
		{"user number", job("user: 1001"), "jobs.yaml:5:11: jobs[0](a).user: want a user name such as postgres, not the number 1001: a uid may name another user on another host"},
		{"user list", job("user: [a]"), "jobs.yaml:5:11: jobs[0](a).user: want a user name such as postgres, not a sequence"},
		{"user spaces", job("user: 'a b'"), `jobs.yaml:5:11: jobs[0](a).user: "a b" is not a user name`},
		{"group number", job("user: a", "group: 0"), "jobs.yaml:6:12: jobs[0](a).group: want a group name such as adm, not the number 0: a gid may name another group on another host"},
		{"group without user", job("group: adm"), "jobs.yaml:5:12: jobs[0](a).group: a group needs a user; give user (the job's or the defaults') too"},
		{"defaults user", "defaults:\n  user: ''\n" + job(), "jobs.yaml:2:9: defaults.user: empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			refused(t, tc.yaml, tc.want)
		})
	}
}

// CheckAccounts checks the names against this host's accounts, and, for
// a daemon that is not root, refuses a job of any other user.
func TestCheckAccounts(t *testing.T) {
	t.Parallel()
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody on this host")
	}
	f := mustParse(t, "jobs.yaml", `jobs:
  - {name: mine, schedule: '@daily', command: date}
  - {name: other, schedule: '@daily', command: date, user: nobody}
`)
	if err := f.CheckAccounts(0, 0); err != nil {
		t.Errorf("as root: %v", err)
	}
	if err := f.CheckAccounts(-1, -1); err != nil {
		t.Errorf("without a daemon's uid: %v", err)
	}
	nobody, _ := user.Lookup("nobody")
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	if err := f.CheckAccounts(uid, gid); err != nil {
		t.Errorf("as nobody itself: %v", err)
	}
	if err := f.CheckAccounts(uid, gid+1); err == nil || !strings.Contains(err.Error(), "jobs[1](other).group: runs with gid") {
		t.Errorf("as nobody with another group: %v", err)
	}
	err := f.CheckAccounts(uid+12345, gid)
	want := "jobs.yaml: jobs[1](other).user: runs as nobody, but this daemon runs as uid " + strconv.Itoa(uid+12345) +
		", not root: only a daemon running as root runs a job as another user (run the daemon as root: docs/SYSTEMD.md)"
	if err == nil || err.Error() != want {
		t.Errorf("as another user: %v\nwant %s", err, want)
	}
	checkError(t, err)

	bad := mustParse(t, "jobs.yaml", `jobs:
  - {name: a, schedule: '@daily', command: date, user: no-such-user-baton}
  - {name: b, schedule: '@daily', command: date, user: nobody, group: no-such-group-baton}
`)
	err = bad.CheckAccounts(0, 0)
	for _, want := range []string{
		`jobs.yaml: jobs[0](a).user: no user "no-such-user-baton" on this host`,
		`jobs.yaml: jobs[1](b).group: no group "no-such-group-baton" on this host`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("unknown accounts: %v\nwant a line %s", err, want)
		}
	}
	if os.Getuid() != 0 {
		return
	}
	// root's own: a job of user root is no one else's.
	if err := mustParse(t, "jobs.yaml", job("user: root")).CheckAccounts(0, 0); err != nil {
		t.Errorf("user root as root: %v", err)
	}
}
