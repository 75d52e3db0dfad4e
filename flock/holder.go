package flock

// Who holds a lock file. A lock file records the process that acquired it:
// enough to tell, later, whether that very process still runs. A pid alone
// cannot: pids are reused, and after a reboot every pid is someone else's.
// The kernel's boot id and the process's start time (in clock ticks since
// boot) make the pair unique: same boot, same pid, same start ticks is the
// same process.
//
// The record says who acquired the lock, not who holds it now: flock(2)
// belongs to an open file description, which a child can inherit and keep
// after its parent died, and a job may be run under flock(1) beside baton.
// So the listing also scans /proc/*/fd for every descriptor open on a lock
// file. That scan is for `baton leases` only: it reads every process's
// descriptors, which takes a while on a big host.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/procfs"
	"golang.org/x/sys/unix"
)

// currentBootID is read once per process: it changes only with a reboot.
var currentBootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// self is what Acquire records of the calling process beyond what the
// request says: read once, so that acquiring stays a few system calls.
type self struct {
	startTicks uint64 // 0 when /proc/self/stat could not be read
	uid        int
}

var selfProcess = sync.OnceValue(func() self {
	s := self{uid: os.Geteuid()}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		if st, err := procfs.ParseStat(b); err == nil {
			s.startTicks = st.StartTicks
		}
	}
	return s
})

// holderAlive says whether the process recorded in st still runs, judged
// on this host (host is its name, boot its boot id). nil means that it
// cannot tell: nothing recorded, a record from an older baton, or one from
// another host sharing the directory, whose processes are not in our /proc.
func holderAlive(st state, boot, host string) *bool {
	yes, no := true, false
	switch {
	case st.PID <= 0 || st.BootID == "" || boot == "":
		return nil
	case st.BootID != boot:
		if st.Host != "" && st.Host != host {
			return nil
		}
		return &no // this host rebooted since: every process of that boot is gone
	}
	ps, err := procfs.ReadStat(st.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &no
	case err != nil:
		return nil
	case ps.Zombie():
		// A zombie has closed its descriptors: it holds nothing.
		return &no
	case st.StartTicks == 0:
		return nil // a pid but no start time: it may be reused
	case ps.StartTicks != st.StartTicks:
		return &no // the pid was reused
	}
	return &yes
}

// fileID is an inode as stat(2) names it.
type fileID struct{ dev, ino uint64 }

func (id fileID) lockKey() inodeKey {
	return inodeKey{unix.Major(id.dev), unix.Minor(id.dev), id.ino}
}

// descriptor is one open descriptor on a lock file, found in /proc.
type descriptor struct {
	pid, fd   int
	path      string // the link's target, without " (deleted)"
	id        fileID
	nlink     uint64
	regular   bool
	holdsLock bool // the kernel lists a flock of this open file in fdinfo
}

func (d descriptor) procPath() string {
	return "/proc/" + strconv.Itoa(d.pid) + "/fd/" + strconv.Itoa(d.fd)
}

// scanDescriptors finds every descriptor, in every process it may read, open
// on a *.lock file in one of dirs (the lock directory under its names).
// Only the link targets are read for the others: stat(2) of an unrelated
// file could hang on a dead network mount. Processes whose descriptors it
// may not read (other users', unless root) are counted, not fatal.
func scanDescriptors(ctx context.Context, dirs []string) (map[fileID][]descriptor, int, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, 0, err
	}
	out := map[fileID][]descriptor{}
	denied := 0
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		fdDir := "/proc/" + p.Name() + "/fd"
		fds, err := readNames(fdDir)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				denied++
			}
			continue // or the process exited meanwhile
		}
		for _, name := range fds {
			fd, err := strconv.Atoi(name)
			if err != nil {
				continue
			}
			target, err := os.Readlink(fdDir + "/" + name)
			if err != nil || !strings.HasPrefix(target, "/") {
				continue // gone, or a socket, pipe or anon inode
			}
			path := strings.TrimSuffix(target, " (deleted)")
			if !strings.HasSuffix(path, ".lock") || !inDirs(path, dirs) {
				continue
			}
			d := descriptor{pid: pid, fd: fd, path: path}
			var st unix.Stat_t
			if err := unix.Stat(d.procPath(), &st); err != nil {
				continue
			}
			d.id = fileID{uint64(st.Dev), st.Ino}
			d.nlink = uint64(st.Nlink)
			d.regular = st.Mode&unix.S_IFMT == unix.S_IFREG
			d.holdsLock = fdHoldsFlock(pid, name)
			out[d.id] = append(out[d.id], d)
		}
	}
	return out, denied, nil
}

// readNames lists a directory without sorting or stat-ing its entries.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func inDirs(file string, dirs []string) bool {
	d := path.Dir(file)
	for _, dir := range dirs {
		if d == dir {
			return true
		}
	}
	return false
}

// fdHoldsFlock reads /proc/PID/fdinfo/FD, whose "lock:" lines list the
// locks that this open file holds: for flock(2), every descriptor sharing
// the open file description (dup'ed or inherited) shows the lock.
func fdHoldsFlock(pid int, fd string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "lock:"); ok && strings.Contains(rest, " FLOCK ") {
			return true
		}
	}
	return false
}

// processes describes the processes behind ds, one entry per process,
// ordered by pid.
func processes(ds []descriptor) []baton.Process {
	byPID := map[int]*baton.Process{}
	for _, d := range ds {
		p := byPID[d.pid]
		if p == nil {
			p = &baton.Process{PID: d.pid, Argv: procfs.Argv(d.pid)}
			if st, err := procfs.ReadStat(d.pid); err == nil {
				p.PPID = st.PPID
			}
			byPID[d.pid] = p
		}
		p.HoldsLock = p.HoldsLock || d.holdsLock
	}
	out := make([]baton.Process, 0, len(byPID))
	for _, p := range byPID {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// anyHoldsLock says whether one of ds holds the flock.
func anyHoldsLock(ds []descriptor) bool {
	for _, d := range ds {
		if d.holdsLock {
			return true
		}
	}
	return false
}

// lockingPIDs names the processes that hold the flock among ds, or, when
// fdinfo showed no lock (an old kernel), every process with it open.
func lockingPIDs(ds []descriptor) string {
	seen := map[int]bool{}
	var pids []int
	for _, locking := range []bool{true, false} {
		for _, d := range ds {
			if d.holdsLock == locking && !seen[d.pid] {
				seen[d.pid] = true
				pids = append(pids, d.pid)
			}
		}
		if len(pids) > 0 {
			break
		}
	}
	sort.Ints(pids)
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	if len(s) == 1 {
		return "pid " + s[0]
	}
	return "pids " + strings.Join(s, ", ")
}
