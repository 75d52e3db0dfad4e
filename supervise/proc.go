package supervise

import (
	"os"
	"strconv"
	"strings"

	"github.com/batonhq/baton/procfs"
)

// Process is a process found in /proc.
type Process struct {
	PID  int      `json:"pid"`
	Argv []string `json:"argv"`
}

// descendants lists every live process below root, from every
// /proc/PID/stat (see walkTree). The guard walks /proc only when the command
// has left a child behind, so the cost of the walk does not matter.
func descendants(root int) []Process {
	var out []Process
	for _, pid := range walkTree(func(_ int, st procfs.Stat) bool { return st.PPID == root }) {
		out = append(out, Process{PID: pid, Argv: procfs.Argv(pid)})
	}
	return out
}

// walkTree lists the live processes (a zombie only waits to be reaped)
// that match start, and every descendant of theirs, by ppid. A process that
// exits meanwhile is simply missing. This process is never listed.
func walkTree(start func(pid int, st procfs.Stat) bool) []int {
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

// describe renders processes for a one-line note: "pid 12 (sleep 2), …".
func describe(ps []Process) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, "pid "+strconv.Itoa(p.PID)+" ("+strings.Join(p.Argv, " ")+")")
	}
	return strings.Join(parts, ", ")
}
