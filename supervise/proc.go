package supervise

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Process is a process found in /proc.
type Process struct {
	PID  int      `json:"pid"`
	Argv []string `json:"argv"`
}

// descendants lists every process below root, from /proc: children, then
// theirs. A process that exits meanwhile is simply missing. It reads each
// process's /proc/PID/task/*/children, a few small files, and scans all of
// /proc only where the kernel lacks them.
func descendants(root int) []Process {
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"); err != nil {
		return descendantsByScan(root)
	}
	var out []Process
	queue := childrenOf(root)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		out = append(out, Process{PID: pid, Argv: argvOf(pid)})
		queue = append(queue, childrenOf(pid)...)
	}
	return out
}

// childrenOf reads the children of every thread of pid: an orphan adopted
// by a subreaper may be the child of any of its threads.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil && !isZombie(c) {
				out = append(out, c)
			}
		}
	}
	return out
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || len(b) < i+3 || b[i+2] == 'Z'
}

// descendantsByScan builds the process tree from every /proc/PID/stat.
func descendantsByScan(root int) []Process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []Process
	queue := children[root]
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		out = append(out, Process{PID: pid, Argv: argvOf(pid)})
		queue = append(queue, children[pid]...)
	}
	return out
}

// parentOf reads the ppid from /proc/PID/stat: the fourth field, counted
// after the command name, which may itself hold spaces and parentheses.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || f[0] == "Z" { // a zombie waits only to be reaped
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// argvOf reads a process's argv; while it is between fork and exec, or
// exiting, that is empty, and its name (from comm) stands in, in brackets.
func argvOf(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil {
			return []string{"[" + strings.TrimSpace(string(comm)) + "]"}
		}
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// describe renders processes for a one-line note: "pid 12 (sleep 2), …".
func describe(ps []Process) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, "pid "+strconv.Itoa(p.PID)+" ("+strings.Join(p.Argv, " ")+")")
	}
	return strings.Join(parts, ", ")
}
