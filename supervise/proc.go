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

// descendants lists every process below root: children by ppid, then
// theirs, from every /proc/PID/stat. A process that exits meanwhile is
// simply missing. The guard walks /proc only when the command has left a
// child behind, so the cost of the walk does not matter.
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
		// A zombie waits only to be reaped: it is no stray.
		if st, err := procfs.ReadStat(pid); err == nil && !st.Zombie() {
			children[st.PPID] = append(children[st.PPID], pid)
		}
	}
	var out []Process
	queue := children[root]
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		out = append(out, Process{PID: pid, Argv: procfs.Argv(pid)})
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
