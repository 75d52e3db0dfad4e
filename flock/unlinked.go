package flock

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockedUnlinked looks for a lock on an earlier file at the path file that was
// removed (or replaced by a rename over it) while held: its holder still
// holds a lock that nobody else can see at the path, so a new lock file there
// would let a second holder in. The kernel knows: /proc/locks lists every
// flock with its inode and locking pid, and that pid's descriptor on the old
// file reads "<path> (deleted)". It returns the holder's recorded state.
//
// Only processes whose descriptors this user may inspect (its own, or all
// for root) can be found; /proc/locks itself is readable by everyone.
//
// elsewhere lists the inodes of locks this process holds for other paths:
// none of them can be the earlier file at that path, so their holder's
// descriptors are not read. A daemon holds the lock of every job it runs,
// and reading all its descriptors once for each of those locks, on every
// acquisition, was a measurable part of its CPU per run.
func lockedUnlinked(file string, dev uint64, elsewhere map[uint64]bool) (*state, bool) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, false
	}
	// The candidates: flocks on this device, by locking process. Each
	// process's descriptors are read once, however many locks it holds.
	major, minor := unix.Major(dev), unix.Minor(dev)
	byPID := map[string]map[uint64]bool{}
	var pids []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		var k inodeKey
		if _, err := fmt.Sscanf(fields[5], "%x:%x:%d", &k.major, &k.minor, &k.ino); err != nil || k.major != major || k.minor != minor || elsewhere[k.ino] {
			continue
		}
		if onScan != nil {
			onScan(k.ino)
		}
		pid := fields[4]
		if byPID[pid] == nil {
			byPID[pid] = map[uint64]bool{}
			pids = append(pids, pid)
		}
		byPID[pid][k.ino] = true
	}
	want := file + " (deleted)"
	for _, pid := range pids {
		if onFdDir != nil {
			onFdDir(atoiOr(pid))
		}
		fdDir := path.Join("/proc", pid, "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(path.Join(fdDir, fd.Name()))
			if err != nil || target != want {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(path.Join(fdDir, fd.Name()), &st) != nil || !byPID[pid][st.Ino] {
				continue
			}
			f, err := os.Open(path.Join(fdDir, fd.Name()))
			if err != nil {
				return &state{PID: atoiOr(pid)}, true
			}
			s, _ := readState(f)
			f.Close()
			return &s, true
		}
	}
	return nil, false
}

func atoiOr(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// onScan, when set (by tests), is called with the inode of each lock whose
// holder's descriptors lockedUnlinked reads.
var onScan func(ino uint64)

// onFdDir, when set (by tests), is called with each process whose
// descriptors lockedUnlinked reads.
var onFdDir func(pid int)

// heldElsewhere is the inodes of the lock files this Leaser holds for other
// paths than path, current and stale (see lockedUnlinked).
func (l *Leaser) heldElsewhere(path string) map[uint64]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	inos := map[uint64]bool{}
	add := func(f *os.File) {
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil {
			inos[st.Ino] = true
		}
	}
	for _, hl := range l.held {
		if hl.path == path {
			continue
		}
		add(hl.f)
		for _, f := range hl.stale {
			add(f)
		}
	}
	return inos
}
