package flock

import (
	"errors"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/spawn"
	"golang.org/x/sys/unix"
)

// hostSetup is the one-time fix, as root, that lets the calling user lock
// in dir for host scope: the group HostGroup, the directory as the
// package's tmpfiles.d line makes it (mode 2770, group HostGroup, setgid),
// and the user's membership. It names only the steps still missing, so that
// it can be pasted as it is.
func hostSetup(dir string) string {
	var steps []string
	g, err := accounts.LookupGroup(HostGroup)
	if err != nil {
		steps = append(steps, "groupadd --system "+HostGroup)
	}
	var st unix.Stat_t
	switch err := unix.Stat(dir, &st); {
	case err != nil:
		steps = append(steps, "install -d -m 2770 -g "+HostGroup+" "+baton.ShellQuote(dir))
	case g == nil || strconv.FormatUint(uint64(st.Gid), 10) != g.Gid || st.Mode&0o2070 != 0o2070:
		steps = append(steps, "chgrp "+HostGroup+" "+baton.ShellQuote(dir), "chmod 2770 "+baton.ShellQuote(dir))
	}
	uid := os.Getuid()
	name := userName(uint32(uid))
	member, inSession := false, false
	if g != nil {
		if u, err := accounts.LookupUserID(strconv.Itoa(uid)); err == nil {
			ids, _ := accounts.GroupIDs(u)
			member = slices.Contains(ids, g.Gid)
		}
		gid, _ := strconv.Atoi(g.Gid)
		groups, _ := os.Getgroups()
		inSession = os.Getegid() == gid || slices.Contains(groups, gid)
	}
	var then string
	switch {
	case uid == 0 || inSession:
	case member:
		then = "; " + name + " is in group " + HostGroup + " but this session is not yet: log in again (or run newgrp " + HostGroup + ")"
	default:
		steps = append(steps, "usermod -aG "+HostGroup+" "+name)
		then = ", then log in again (group membership counts from the next login)"
	}
	if len(steps) == 0 {
		if then == "" { // set up as it should be, and still refused (an ACL, a mount option)
			return "fix its owner, group or mode"
		}
		return strings.TrimPrefix(then, "; ")
	}
	setup := "baton setup local"
	if dir != HostDir {
		setup += " --lock-dir " + baton.ShellQuote(dir)
	}
	if slices.ContainsFunc(steps, func(s string) bool { return strings.HasPrefix(s, "usermod ") }) {
		setup += " --user " + baton.ShellQuote(name)
	}
	return "as root, once: " + setup + " (by hand: " + strings.Join(steps, " && ") + ")" + then
}

// A SetupStep is one thing SetupHost did, or found done.
type SetupStep struct {
	// Step is the command it stands for, as hostSetup names it: what an
	// operator would run by hand to do the same.
	Step string `json:"step"`
	// Done is false when it was already so (nothing changed), or under a
	// dry run.
	Done bool `json:"done"`
}

// SetupHost does, as root, the one-time set-up that lets every member of
// group lock in dir for host scope, as the package's sysusers.d and
// tmpfiles.d entries do: the group (a system group), the directory (mode
// 2770, owner root, the group, setgid, its parents 0755) and each user's
// membership. It changes only what is missing, so running it again changes
// nothing. With dryRun it changes nothing and reports the steps it would
// take (Done false). Host scope's group is HostGroup; group is a parameter
// for tests.
//
// It checks all of its input before it changes anything: dir must be a
// directory or not exist, and never a symbolic link (whose target it would
// change while naming only the link), and every user must exist; a
// refusal (EINVALID, field lock-dir or --user) leaves the host as it was.
func SetupHost(dir, group string, users []string, dryRun bool) ([]SetupStep, error) {
	if target, isLink, _ := linkTarget(dir); isLink {
		return nil, baton.Invalid("lock-dir", "%s is a symbolic link to %s; baton setup local sets up the directory it is named, never a link's target: %s", dir, target, linkAdvice(target))
	}
	var st unix.Stat_t
	statErr := unix.Lstat(dir, &st)
	switch {
	case errors.Is(statErr, unix.ENOENT):
	case statErr != nil:
		return nil, baton.Wrap(baton.EUNAVAILABLE, statErr, "%s", dir)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, baton.Invalid("lock-dir", "%s is a %s, not a directory: move it away, or choose another --lock-dir", dir, fileKind(st.Mode))
	}
	accountsOf := make([]*User, len(users))
	for i, name := range users {
		u, err := accounts.LookupUser(name)
		if err != nil {
			return nil, baton.Invalid("--user", "no user %q: %v", name, err)
		}
		accountsOf[i] = u
	}

	var steps []SetupStep
	do := func(step string, f func() error) error {
		if dryRun {
			steps = append(steps, SetupStep{Step: step})
			return nil
		}
		if err := f(); err != nil {
			return err
		}
		steps = append(steps, SetupStep{Step: step, Done: true})
		return nil
	}
	run := func(name string, args ...string) func() error {
		return func() error {
			out, err := spawn.CombinedOutput(name, args...)
			if err != nil {
				return baton.Errorf(baton.EUNAVAILABLE, "%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
			}
			return nil
		}
	}
	if !dryRun && os.Geteuid() != 0 {
		return nil, &baton.Error{Code: baton.EUNAVAILABLE, Message: "setting up " + dir + " needs root (run it with sudo, or see what it would do with --dry-run)"}
	}
	if _, err := accounts.LookupGroup(group); err != nil {
		if err := do("groupadd --system "+group, run("groupadd", "--system", group)); err != nil {
			return steps, err
		}
	}
	gid := func() (int, error) {
		g, err := accounts.LookupGroup(group)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(g.Gid)
	}
	switch {
	case errors.Is(statErr, unix.ENOENT):
		err := do("install -d -m 2770 -g "+group+" "+baton.ShellQuote(dir), func() error {
			if err := os.MkdirAll(path.Dir(dir), 0o755); err != nil {
				return baton.Wrap(baton.EUNAVAILABLE, err, "creating %s", path.Dir(dir))
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				return baton.Wrap(baton.EUNAVAILABLE, err, "creating %s", dir)
			}
			return ownAndMode(dir, gid)
		})
		if err != nil {
			return steps, err
		}
	default:
		want, err := gid()
		if (err != nil && dryRun) || (err == nil && int(st.Gid) != want) || st.Mode&0o7777 != 0o2770 {
			err := do("chgrp "+group+" "+baton.ShellQuote(dir)+" && chmod 2770 "+baton.ShellQuote(dir), func() error { return ownAndMode(dir, gid) })
			if err != nil {
				return steps, err
			}
		}
	}
	for i, name := range users {
		u := accountsOf[i]
		if g, err := accounts.LookupGroup(group); err == nil {
			if ids, err := accounts.GroupIDs(u); err == nil && slices.Contains(ids, g.Gid) {
				continue
			}
		}
		if err := do("usermod -aG "+group+" "+name, run("usermod", "-aG", group, name)); err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// ownAndMode gives dir to root and the group, mode 2770. chmod comes after
// chown, which clears the setgid bit. Through a descriptor opened without
// following a link: a directory swapped for a link since it was checked is
// refused (ELOOP), not followed.
func ownAndMode(dir string, gid func() (int, error)) error {
	g, err := gid()
	if err == nil {
		var fd int
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Fchown(fd, 0, g)
			if err == nil {
				err = unix.Fchmod(fd, 0o2770)
			}
			unix.Close(fd)
		}
	}
	if err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "setting the group and mode of %s", dir)
	}
	return nil
}
