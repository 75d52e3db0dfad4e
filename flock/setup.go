package flock

import (
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostSetup is the one-time fix, as root, that lets the calling user lock
// in dir for host scope: the group HostGroup, the directory as the
// package's tmpfiles.d line makes it (mode 2770, group HostGroup, setgid),
// and the user's membership. It names only the steps still missing, so that
// it can be pasted as it is.
func hostSetup(dir string) string {
	var steps []string
	g, err := user.LookupGroup(HostGroup)
	if err != nil {
		steps = append(steps, "groupadd --system "+HostGroup)
	}
	var st unix.Stat_t
	switch err := unix.Stat(dir, &st); {
	case err != nil:
		steps = append(steps, "install -d -m 2770 -g "+HostGroup+" "+shellQuote(dir))
	case g == nil || strconv.FormatUint(uint64(st.Gid), 10) != g.Gid || st.Mode&0o2070 != 0o2070:
		steps = append(steps, "chgrp "+HostGroup+" "+shellQuote(dir), "chmod 2770 "+shellQuote(dir))
	}
	uid := os.Getuid()
	name := userName(uint32(uid))
	member, inSession := false, false
	if g != nil {
		if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
			ids, _ := u.GroupIds()
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
	return "as root, once: " + strings.Join(steps, " && ") + then
}
