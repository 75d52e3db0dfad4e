package supervise

import (
	"github.com/batonhq/baton/procfs"
	"github.com/batonhq/baton/supervise/guard"
)

// walkTree lists the live processes that match start, and every descendant
// of theirs (guard.WalkTree).
func walkTree(start func(pid int, st procfs.Stat) bool) []int { return guard.WalkTree(start) }

// describe renders processes for a one-line note: "pid 12 (sleep 2), …".
func describe(ps []Process) string { return guard.Describe(ps) }
