package flock

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/batonhq/baton"
	"golang.org/x/sys/unix"
)

// Levels of a Finding. Only LevelError means baton run fails or keeps no
// promise; LevelWarn means it works today but something will bite.
const (
	LevelOK    = "ok"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Finding is one result of CheckDir: how bad it is, which check found it,
// and a message that says what to do about it.
type Finding struct {
	Level   string `json:"level"`
	Check   string `json:"check"`
	Message string `json:"message"`
}

// Report is what CheckDir found about a lock directory.
type Report struct {
	Dir      string    `json:"dir"`
	Scope    string    `json:"scope"`
	Findings []Finding `json:"findings"`
	// Tmpfiles is a tmpfiles.d(5) line that creates Dir at boot with the
	// owner, group and mode that host scope wants, and Install the command
	// that does the same now. Both are empty for user scope: baton creates
	// a user's directory itself.
	Tmpfiles string `json:"tmpfiles"`
	Install  string `json:"install"`
}

// HasErrors says whether any finding is at LevelError.
func (r Report) HasErrors() bool {
	for _, f := range r.Findings {
		if f.Level == LevelError {
			return true
		}
	}
	return false
}

// SetupNeeded says whether the directory needs Tmpfiles or Install: it is
// host scope and a check that they fix (exists, group, owner, mode) is not
// ok. A directory that is as host scope wants it needs neither, whatever
// else warns.
func (r Report) SetupNeeded() bool {
	if r.Tmpfiles == "" {
		return false
	}
	for _, f := range r.Findings {
		switch f.Check {
		case "exists", "group", "owner", "mode":
			if f.Level != LevelOK {
				return true
			}
		}
	}
	return false
}

func (r *Report) add(level, check, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Level: level, Check: check, Message: fmt.Sprintf(format, args...)})
}

// What CheckDir reads of the machine besides the directory itself; tests
// replace them to reach the branches that depend on the host.
var (
	protectedRegularPath = "/proc/sys/fs/protected_regular"
	lookupGroup          = func(name string) (*Group, error) { return accounts.LookupGroup(name) }
	geteuid              = os.Geteuid
	access               = unix.Access // access(2): EROFS needs a read-only mount
)

// writableDirHint is the advice for a lock directory on a read-only file
// system (EROFS): a mount option, not a permission, is in the way.
const writableDirHint = "set BATON_LOCK_DIR (or --lock-dir) to a directory on a writable, persistent local file system, such as " + HostDir + ", or remount this one read-write"

// CheckDir checks the lock directory dir of scope as Open(dir, scope,
// create) would use it, without creating or changing anything: whether it
// exists or would be created, its file system, owner, group and mode, whether
// this user can create lock files in it, the kernel's protected_regular
// setting, exposure to /tmp cleaners, and the lock files already there.
func CheckDir(dir, scope string, create bool) Report {
	r := Report{Dir: dir, Scope: scope}
	if scope != ScopeHost && scope != ScopeUser {
		r.add(LevelError, "scope", "%q: want host or user", scope)
		return r
	}
	if dir == "" {
		r.add(LevelError, "exists", "the lock directory is empty: name one with --lock-dir")
		return r
	}
	if abs, err := absPath(dir); err == nil {
		r.Dir = abs
	}
	dir = r.Dir
	if scope == ScopeHost {
		r.Tmpfiles = fmt.Sprintf("d %s 2770 root %s -", tmpfilesQuote(dir), HostGroup)
		r.Install = fmt.Sprintf("install -d -m 2770 -g %s %s", HostGroup, baton.ShellQuote(dir))
	}

	if target, ok, exists := linkTarget(dir); ok {
		if !exists {
			r.add(LevelError, "link", "%s is a symbolic link to %s, which does not exist, so baton run cannot create the lock directory: %s", dir, target, linkAdvice(target))
			return r
		}
		r.add(LevelWarn, "link", "%s is a symbolic link to %s: baton run follows it, but whoever may change the link moves every job's lock files, and with them their fencing tokens, and baton setup local refuses it: %s", dir, target, linkAdvice(target))
	}
	var st unix.Stat_t
	err := unix.Stat(dir, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		anc := existingAncestor(dir)
		r.checkMissing(create, anc)
		r.checkFSType(anc, fmt.Sprintf(" (of %s, where it would be created)", anc))
		if scope == ScopeHost {
			r.checkHostGroup()
		}
		r.checkTmpCleaner()
		return r
	case err != nil:
		r.add(LevelError, "exists", "cannot stat %s (%v): baton run cannot use it either; fix the path or its parents' permissions, or choose another --lock-dir", dir, err)
		return r
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		r.add(LevelError, "exists", "%s is a %s, not a directory: move it away, or choose another --lock-dir", dir, fileKind(st.Mode))
		return r
	}
	r.add(LevelOK, "exists", "%s is a directory", dir)
	r.checkFSType(dir, "")
	if scope == ScopeHost {
		r.checkHostGroup()
	}
	r.checkOwner(&st)
	r.checkMode(st.Mode)
	r.checkAccess()
	r.checkProtectedRegular(st.Mode)
	r.checkTmpCleaner()
	r.checkLockFiles(&st)
	return r
}

// checkMissing says whether baton run would create the missing directory,
// by the rule of Open: it does when the directory was named explicitly, for
// user scope, or as root.
func (r *Report) checkMissing(create bool, anc string) {
	dir := r.Dir
	if !create && geteuid() != 0 {
		r.add(LevelError, "exists", "%s does not exist, and baton run creates a host-scope lock directory only as root or when named by --lock-dir or $BATON_LOCK_DIR. The fix baton run names: %s (for the directory, %s or the tmpfiles.d line below); or choose --scope user", dir, hostSetup(dir), r.Install)
		return
	}
	if err := access(anc, unix.W_OK|unix.X_OK); err != nil {
		if errors.Is(err, unix.EROFS) {
			r.add(LevelError, "exists", "%s does not exist, and cannot be created: %s is on a read-only file system (%v): %s", dir, anc, err, writableDirHint)
			return
		}
		r.add(LevelError, "exists", "%s does not exist, and uid %d cannot create it in %s (%v): create it yourself, or choose another --lock-dir", dir, os.Getuid(), anc, err)
		return
	}
	if r.Scope == ScopeUser {
		r.add(LevelOK, "exists", "%s does not exist yet; baton run creates it, mode 0700, on first use", dir)
		return
	}
	r.add(LevelWarn, "exists", "%s does not exist; baton run would create it on first use, with group %s and mode 2770 only if that group exists. Create it now, before any run, so that every user of the host can lock there: %s", dir, HostGroup, r.Install)
}

// zfsSuperMagic is ZFS on Linux's f_type, which the kernel headers lack.
const zfsSuperMagic = 0x2fc12fc1

// fsTypes are the file systems CheckDir knows, by statfs(2) f_type, with
// what is wrong with keeping lock files on them ("" when nothing is).
var fsTypes = map[uint32]struct{ name, problem string }{
	unix.EXT4_SUPER_MAGIC:      {"ext2/ext3/ext4", ""}, // one magic for the three
	unix.XFS_SUPER_MAGIC:       {"xfs", ""},
	unix.BTRFS_SUPER_MAGIC:     {"btrfs", ""},
	unix.F2FS_SUPER_MAGIC:      {"f2fs", ""},
	unix.BCACHEFS_SUPER_MAGIC:  {"bcachefs", ""},
	unix.OVERLAYFS_SUPER_MAGIC: {"overlayfs", ""},
	zfsSuperMagic:              {"zfs", ""},
	unix.TMPFS_MAGIC:           {"tmpfs", inMemory},
	unix.RAMFS_MAGIC:           {"ramfs", inMemory},
	unix.NFS_SUPER_MAGIC: {"nfs", "flock(2) on NFS is emulated with byte-range locks kept by the server, " +
		"which are lost when this client's lease with the server lapses (a network cut, a paused VM), and another host may then take the job. " +
		"Keep the lock directory on a local file system; for leases shared by a fleet, use --db"},
	unix.CIFS_SUPER_MAGIC: {"cifs", smbProblem},
	unix.SMB2_SUPER_MAGIC: {"smb2", smbProblem},
	unix.FUSE_SUPER_MAGIC: {"fuse", "flock(2) on FUSE is what the file system's daemon makes of it: locks may be kept only by this host's kernel, or lost with the daemon. " +
		"Keep the lock directory on a local file system"},
}

const (
	inMemory = "it is in memory: lock files, and with them the jobs' fencing tokens, do not survive a reboot. " +
		"Tokens then start again at 1, and a result store that kept a higher one refuses every write. " +
		"Use a directory on persistent storage, such as " + HostDir
	smbProblem = "flock(2) on SMB/CIFS is emulated with byte-range locks kept by the server (or, with the nobrl mount option, only by this host), " +
		"and lost when the connection drops. Keep the lock directory on a local file system"
)

func (r *Report) checkFSType(path, note string) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		r.add(LevelWarn, "fs-type", "statfs %s: %v", path, err)
		return
	}
	magic := uint32(st.Type) // f_type is signed on some architectures
	fs, known := fsTypes[magic]
	switch {
	case !known:
		r.add(LevelWarn, "fs-type", "file system type 0x%x%s is not one baton knows: make sure it is local (flock(2) locks kept by this kernel) and persistent across reboots", magic, note)
	case fs.problem != "":
		r.add(LevelWarn, "fs-type", "%s%s: %s", fs.name, note, fs.problem)
	default:
		r.add(LevelOK, "fs-type", "%s%s", fs.name, note)
	}
}

// checkHostGroup checks that HostGroup exists: without it a host-scope
// directory can be shared only by root.
func (r *Report) checkHostGroup() {
	g, err := lookupGroup(HostGroup)
	if err != nil {
		r.add(LevelWarn, "group", "group %s does not exist, so a host-scope directory is shared only by root, unless you give it another group that every user of baton is in. "+
			"To share it: groupadd --system %s; usermod -aG %s USER for each user that runs baton; then %s", HostGroup, HostGroup, HostGroup, r.Install)
		return
	}
	r.add(LevelOK, "group", "group %s exists (gid %s)", HostGroup, g.Gid)
}

func (r *Report) checkOwner(st *unix.Stat_t) {
	owner, group := userName(st.Uid), groupName(st.Gid)
	if r.Scope == ScopeUser {
		if uid := geteuid(); int(st.Uid) != uid {
			r.add(LevelWarn, "owner", "owned by %s, not by you (%s): that user can delete or replace your lock files; chown %s %s, or choose another --lock-dir", owner, userName(uint32(uid)), userName(uint32(uid)), baton.ShellQuote(r.Dir))
			return
		}
		r.add(LevelOK, "owner", "owner %s, group %s", owner, group)
		return
	}
	if g, err := lookupGroup(HostGroup); err == nil && g.Gid != strconv.Itoa(int(st.Gid)) {
		r.add(LevelWarn, "owner", "group is %s, not %s, so members of %s cannot create lock files here: chgrp %s %s", group, HostGroup, HostGroup, HostGroup, baton.ShellQuote(r.Dir))
		return
	}
	r.add(LevelOK, "owner", "owner %s, group %s", owner, group)
}

func (r *Report) checkMode(mode uint32) {
	perm := mode & 0o7777
	dir := baton.ShellQuote(r.Dir)
	sticky := mode&unix.S_ISVTX != 0
	before := len(r.Findings)
	if perm&0o002 != 0 && !sticky {
		// Anyone can unlink a held lock file and create another at its
		// path: two holders at once, and a fencing token that starts over.
		fix := fmt.Sprintf("chmod 2770 %s and chgrp %s %s (only the group may create lock files), or at least chmod +t %s (mode 1777, like /tmp: only a file's owner may delete or rename it)", dir, HostGroup, dir, dir)
		if r.Scope == ScopeUser {
			fix = fmt.Sprintf("chmod 700 %s, or at least chmod +t %s", dir, dir)
		}
		r.add(LevelError, "mode", "%s is world-writable (%04o) without the sticky bit: any user can delete, rename or replace lock files, and with them the jobs' fencing tokens, so two runs may hold one job at once: %s", dir, perm, fix)
	}
	if r.Scope == ScopeUser {
		if perm&0o022 != 0 && len(r.Findings) == before {
			r.add(LevelWarn, "mode", "%04o lets other users create lock files here, which they may then hold or make unusable for you: chmod 700 %s", perm, dir)
		}
		if len(r.Findings) == before {
			r.add(LevelOK, "mode", "%04o", perm)
		}
		return
	}
	if perm&0o002 != 0 && sticky {
		r.add(LevelWarn, "mode", "%04o is world-writable: any user of the host can create a job's lock file, with a mode that shuts the others out: chmod 2770 %s, with group %s", perm, dir, HostGroup)
	}
	if mode&unix.S_ISGID == 0 {
		r.add(LevelWarn, "mode", "%04o lacks the setgid bit: new lock files get their creator's primary group instead of the directory's, so other users cannot lock them: chmod g+s %s", perm, dir)
	}
	if perm&0o070 != 0o070 {
		r.add(LevelWarn, "mode", "%04o does not let the directory's group create files, so only its owner can add lock files: chmod g+rwx %s", perm, dir)
	}
	if len(r.Findings) == before {
		r.add(LevelOK, "mode", "%04o (setgid: lock files inherit the group, which can create them)", perm)
	}
}

func (r *Report) checkAccess() {
	uid := os.Getuid()
	if err := access(r.Dir, unix.W_OK|unix.X_OK); err != nil {
		if errors.Is(err, unix.EROFS) {
			r.add(LevelError, "access", "%s is on a read-only file system (%v), so no one, root included, can create lock files here and baton run fails; no owner, group or mode changes that: %s", r.Dir, err, writableDirHint)
			return
		}
		hint := fmt.Sprintf("add the user to group %s (usermod -aG %s %s; membership counts from the next login) and make the directory group-writable (chmod 2770); the fix baton run names: %s; or choose --scope user", HostGroup, HostGroup, userName(uint32(uid)), hostSetup(r.Dir))
		if r.Scope == ScopeUser {
			hint = fmt.Sprintf("fix its owner or mode (chown %s; chmod 700), or choose another --lock-dir", userName(uint32(uid)))
		}
		r.add(LevelError, "access", "%s (uid %d) cannot create lock files here (%v), so baton run fails: %s", userName(uint32(uid)), uid, err, hint)
		return
	}
	r.add(LevelOK, "access", "%s (uid %d) can create lock files here", userName(uint32(uid)), uid)
}

// checkProtectedRegular: with fs.protected_regular set, the kernel refuses
// an open with O_CREAT of an existing file owned by someone else (even to
// root) in a sticky directory that others (1) or the group (2) may write.
// baton's own open is not affected, as it creates with O_EXCL and opens
// existing files without O_CREAT, but flock(1) and `exec 9>FILE` are.
func (r *Report) checkProtectedRegular(mode uint32) {
	b, err := os.ReadFile(protectedRegularPath)
	if err != nil {
		r.add(LevelOK, "protected-regular", "%s cannot be read (%v): this kernel has no such protection", protectedRegularPath, err)
		return
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		r.add(LevelWarn, "protected-regular", "%s holds %q, not a number", protectedRegularPath, strings.TrimSpace(string(b)))
		return
	}
	sticky := mode&unix.S_ISVTX != 0
	var who string
	switch {
	case sticky && mode&0o002 != 0 && v >= 1:
		who = "world-writable"
	case sticky && mode&0o020 != 0 && v >= 2:
		who = "group-writable"
	}
	if who != "" {
		r.add(LevelWarn, "protected-regular", "fs.protected_regular = %d and the directory is %s with the sticky bit (like /tmp): "+
			"an open with O_CREAT of a lock file that another user owns fails with EACCES, even as root. "+
			"baton opens existing lock files without O_CREAT, but flock(1) and shell redirections (9>FILE) sharing them will fail: "+
			"use a directory of mode 2770 with group %s instead", v, who, HostGroup)
		return
	}
	if !sticky {
		r.add(LevelOK, "protected-regular", "fs.protected_regular = %d; does not apply: the directory has no sticky bit", v)
		return
	}
	r.add(LevelOK, "protected-regular", "fs.protected_regular = %d; does not apply to this directory's mode", v)
}

// checkTmpCleaner warns of directories that age-based cleaners empty.
func (r *Report) checkTmpCleaner() {
	paths := []string{r.Dir}
	if real := resolve(r.Dir); real != r.Dir {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for _, tmp := range []string{"/tmp", "/var/tmp"} {
			if p == tmp || strings.HasPrefix(p, tmp+"/") {
				r.add(LevelWarn, "tmp-cleaner", "%s is under %s, where systemd-tmpfiles, tmpreaper or tmpwatch delete files unused for some days: "+
					"the lock file of a job that runs rarely may go, and with it the job's fencing token. "+
					"Use a directory under /var/lib (%s), or exempt this one from cleaning with the tmpfiles.d line: x %s",
					p, tmp, HostDir, tmpfilesQuote(r.Dir))
				return
			}
		}
	}
	r.add(LevelOK, "tmp-cleaner", "not under /tmp or /var/tmp, which age-based cleaners empty (/var/lib and /run are not aged)")
}

// checkLockFiles checks the files baton would open: <job>.lock.
func (r *Report) checkLockFiles(dirSt *unix.Stat_t) {
	entries, err := os.ReadDir(r.Dir)
	if err != nil {
		r.add(LevelWarn, "lock-files", "cannot list %s: %v", r.Dir, err)
		return
	}
	var n, others int
	var odd, unshared, foreign, corrupt []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			others++
			continue
		}
		n++
		file := path.Join(r.Dir, e.Name())
		var st unix.Stat_t
		if err := unix.Lstat(file, &st); err != nil {
			continue // removed since ReadDir
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			odd = append(odd, fmt.Sprintf("%s (%s)", e.Name(), fileKind(st.Mode)))
			continue
		}
		if r.Scope == ScopeHost {
			if st.Mode&0o060 != 0o060 {
				unshared = append(unshared, fmt.Sprintf("%s (%04o)", e.Name(), st.Mode&0o7777))
			}
			if st.Gid != dirSt.Gid {
				foreign = append(foreign, fmt.Sprintf("%s (%s)", e.Name(), groupName(st.Gid)))
			}
		}
		if unreadable(file) {
			corrupt = append(corrupt, e.Name())
		}
	}
	dir := baton.ShellQuote(r.Dir)
	if len(odd) > 0 {
		r.add(LevelError, "lock-files", "%d of %d lock files are not regular files, so baton run fails for their jobs: %s. baton makes no such thing: find out what did, then move them away", len(odd), n, list(odd))
	}
	if len(corrupt) > 0 {
		r.add(LevelError, "lock-files", "%d of %d lock files are damaged (empty, truncated, or not one record with a token in 1..2^62), so baton run refuses their jobs rather than restart or guess a fencing token: %s. When no run of the job is going, write its last token (or a higher one) back, e.g. echo '{\"token\":N}' > %s/JOB.lock; removing the file would restart the token at 1", len(corrupt), n, list(corrupt), dir)
	}
	if len(unshared) > 0 {
		r.add(LevelWarn, "lock-files", "%d of %d lock files are not group-read-writable, so other users cannot open them to lock: %s. chmod g+rw %s/*.lock", len(unshared), n, list(unshared), dir)
	}
	if len(foreign) > 0 {
		r.add(LevelWarn, "lock-files", "%d of %d lock files have another group than the directory's (%s), so its members cannot open them: %s. chgrp %s %s/*.lock", len(foreign), n, groupName(dirSt.Gid), list(foreign), groupName(dirSt.Gid), dir)
	}
	if len(odd)+len(corrupt)+len(unshared)+len(foreign) > 0 {
		return
	}
	msg := fmt.Sprintf("%d lock files", n)
	if n > 0 && r.Scope == ScopeHost {
		msg += ", all regular, readable and group-read-writable"
	}
	if others > 0 {
		msg += fmt.Sprintf("; %d other entries, which baton ignores", others)
	}
	r.add(LevelOK, "lock-files", "%s", msg)
}

// unreadable says whether a lock file that this user can read holds no
// state readState accepts. O_NONBLOCK: the file may have become a FIFO since
// it was checked.
func unreadable(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false // not ours to judge: the mode checks say who may open it
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	_, err = readState(f)
	return err != nil
}

func list(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "file of unknown type"
}

// existingAncestor returns the nearest ancestor of dir that exists.
func existingAncestor(dir string) string {
	for {
		parent := path.Dir(dir)
		if _, err := os.Stat(parent); err == nil || parent == dir {
			return parent
		}
		dir = parent
	}
}

// linkTarget says whether dir itself (not one of its parents) is a
// symbolic link, where it leads (with no link left in it, or as the link
// says, made absolute, when that does not exist) and whether that exists.
func linkTarget(dir string) (target string, isLink, exists bool) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return "", false, false
	}
	if real, err := evalSymlinks(dir); err == nil {
		return real, true, true
	}
	target, err := os.Readlink(dir)
	if err != nil {
		return "?", true, false
	}
	if !path.IsAbs(target) {
		target = path.Join(path.Dir(dir), target)
	}
	return target, true, false
}

// linkAdvice is what to do about a lock directory named by a link to target.
func linkAdvice(target string) string {
	return "name the directory itself (--lock-dir " + baton.ShellQuote(target) + ", or BATON_LOCK_DIR), or replace the link with a directory"
}

// resolve returns dir with the symbolic links of its existing part resolved.
func resolve(dir string) string {
	if real, err := evalSymlinks(dir); err == nil {
		return real
	}
	anc := existingAncestor(dir)
	real, err := evalSymlinks(anc)
	if err != nil {
		return dir
	}
	// anc is dir or one of its ancestors, as existingAncestor walked up to
	// it: what follows it in dir is the part that does not exist.
	return path.Join(real, strings.TrimPrefix(path.Clean(dir), anc))
}

func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := accounts.LookupUserID(id); err == nil {
		return u.Username
	}
	return id
}

func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := accounts.LookupGroupID(id); err == nil {
		return g.Name
	}
	return id
}

// tmpfilesQuote quotes a path for tmpfiles.d(5), which splits fields on
// white space and reads C-style escapes inside double quotes.
func tmpfilesQuote(s string) string {
	if strings.ContainsAny(s, " \t\n\"'\\") {
		return strconv.Quote(s)
	}
	return s
}
