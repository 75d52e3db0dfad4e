package guard

import (
	"os"
	"strconv"

	"github.com/batonhq/baton/procfs"
)

// Descendants lists every live process below root, from every
// /proc/PID/stat (see WalkTree). The guard walks /proc only when the command
// has left a child behind, so the cost of the walk does not matter.
func Descendants(root int) []Process {
	var out []Process
	for _, pid := range WalkTree(func(_ int, st procfs.Stat) bool { return st.PPID == root }) {
		out = append(out, Process{PID: pid, Argv: procfs.Argv(pid)})
	}
	return out
}

// WalkTree lists the live processes (a zombie only waits to be reaped)
// that match start, and every descendant of theirs, by ppid. A process that
// exits meanwhile is simply missing. This process is never listed.
func WalkTree(start func(pid int, st procfs.Stat) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	children := map[int][]int{}
	var queue []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		st, err := procfs.ReadStat(pid)
		if err != nil || st.Zombie() {
			continue
		}
		children[st.PPID] = append(children[st.PPID], pid)
		if start(pid, st) {
			queue = append(queue, pid)
		}
	}
	seen := map[int]bool{}
	var out []int
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out
}

// Describe renders processes for a one-line note: "pid 12 (sleep 2), …".
func Describe(ps []Process) string {
	var s string
	for i, p := range ps {
		if i > 0 {
			s += ", "
		}
		s += "pid " + strconv.Itoa(p.PID) + " ("
		for j, a := range p.Argv {
			if j > 0 {
				s += " "
			}
			s += a
		}
		s += ")"
	}
	return s
}
