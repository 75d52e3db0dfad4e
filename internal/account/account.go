// Package account looks up the user (and group) a job runs as, on the
// host that runs it, and says what a process needs to run a command as
// that user: the credential (uid, gid, supplementary groups, as
// initgroups(3) gives them) and the variables cron sets from the user's
// passwd entry (HOME, LOGNAME, USER).
//
// Lookups go through os/user: with cgo, the C library (NSS); without it,
// as baton is released, /etc/passwd and /etc/group alone.
//
// Names are looked up on every run, as cron reads passwd for each line it
// runs: an account changed on a host applies to its next run, and the same
// name may have another uid on another host of the fleet.
package account

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"
)

// Account is a job's user, looked up on this host.
type Account struct {
	Name   string
	UID    int
	GID    int   // the job's group when it names one, else the user's primary group
	Groups []int // the user's groups (its primary among them), as initgroups gives them
	Home   string
}

// UnknownError is a user or group that this host does not have.
type UnknownError struct {
	Field string // "user" or "group"
	Name  string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("no %s %q on this host", e.Field, e.Name)
}

// Lookup finds name, and group when it is not "", on this host.
func Lookup(name, group string) (*Account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, ok := err.(user.UnknownUserError); ok {
			return nil, &UnknownError{"user", name}
		}
		return nil, fmt.Errorf("looking up user %q: %w", name, err)
	}
	a := &Account{Name: u.Username, Home: u.HomeDir}
	if a.UID, err = strconv.Atoi(u.Uid); err != nil {
		return nil, fmt.Errorf("user %q has uid %q, not a number", name, u.Uid)
	}
	if a.GID, err = strconv.Atoi(u.Gid); err != nil {
		return nil, fmt.Errorf("user %q has gid %q, not a number", name, u.Gid)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("looking up the groups of user %q: %w", name, err)
	}
	for _, id := range ids {
		if gid, err := strconv.Atoi(id); err == nil && !slices.Contains(a.Groups, gid) {
			a.Groups = append(a.Groups, gid)
		}
	}
	if !slices.Contains(a.Groups, a.GID) {
		a.Groups = append([]int{a.GID}, a.Groups...)
	}
	if group == "" {
		return a, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		if _, ok := err.(user.UnknownGroupError); ok {
			return nil, &UnknownError{"group", group}
		}
		return nil, fmt.Errorf("looking up group %q: %w", group, err)
	}
	if a.GID, err = strconv.Atoi(g.Gid); err != nil {
		return nil, fmt.Errorf("group %q has gid %q, not a number", group, g.Gid)
	}
	return a, nil
}

// Refusal says why a process running as uid and gid cannot run a command
// as a, and which of the job's fields it is about (user or group): only
// root changes to another user or group, and a process that is not root
// runs a only when a is itself (same uid, and the group it runs with).
// msg is "" when it can.
func (a *Account) Refusal(uid, gid int) (field, msg string) {
	switch {
	case uid == 0 || a.UID == uid && a.GID == gid:
		return "", ""
	case a.UID == uid:
		return "group", fmt.Sprintf("runs with gid %d, but this daemon runs with gid %d, not as root: only a daemon running as root changes a job's group", a.GID, gid)
	}
	return "user", fmt.Sprintf("runs as %s, but this daemon runs as uid %d, not root: only a daemon running as root runs a job as another user", a.Name, uid)
}

// Credential is what a process running as uid changes to to run a
// command as a: nil when it runs as a already (a daemon that is not root
// runs the jobs of its own user as they are).
func (a *Account) Credential(uid, gid int) *syscall.Credential {
	if uid != 0 && a.UID == uid && a.GID == gid {
		return nil
	}
	groups := make([]uint32, len(a.Groups))
	for i, g := range a.Groups {
		groups[i] = uint32(g)
	}
	return &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: groups}
}

// Env is what cron sets from the user's passwd entry: HOME (a job's env
// may replace it, as a crontab may), then LOGNAME and USER (which it may
// not). home goes before the job's env, name after it.
func (a *Account) Env() (home, name []string) {
	return []string{"HOME=" + a.Home}, []string{"LOGNAME=" + a.Name, "USER=" + a.Name}
}

// Dir is the directory a command runs in when its job names none: home
// (the user's, or the HOME its job's env sets), as cron runs a command in
// HOME, or / when home is not a directory (nobody's /nonexistent), where
// cron would not run the command at all.
func Dir(home string) string {
	if fi, err := os.Stat(home); err == nil && fi.IsDir() {
		return home
	}
	return "/"
}
