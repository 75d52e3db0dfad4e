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

// descendants lists every process below root, from /proc: children by ppid,
// then theirs. A process that exits meanwhile is simply missing.
func descendants(root int) []Process {
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

func argvOf(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
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
