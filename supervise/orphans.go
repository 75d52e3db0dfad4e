package supervise

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batonhq/baton/procfs"
	"golang.org/x/sys/unix"
)

// A guard that dies (SIGKILLed, OOM-killed) takes its command with it
// (Pdeathsig), but not the command's own children: they are orphaned, and
// the lease must not be released while any of them lives. The supervisor
// finds them by what they carry from the tree:
//
//   - the command's process group (its pid), which every descendant keeps
//     unless it starts a group or session of its own;
//   - BATON_RUN_ID=<the term's owner> in the environment it was exec'd with,
//     which every descendant keeps unless it scrubs its environment;
//   - with AdoptOrphans (baton run, a process with no other children), being
//     a descendant of the supervisor at all: it is a child subreaper, so the
//     orphans become its children whatever they did.
//
// and the descendants of any of those. A process that both left the group
// and scrubbed its environment escapes the daemon's search: the guard's
// death is the one case the guard cannot cover, and this is the best the
// supervisor can do without a cgroup.

// orphanSweepDelay delays killOrphans, for tests (SlowOrphanSweep).
var orphanSweepDelay atomic.Int64

// treeMember says whether a process, by its stat, belongs to the tree.
type treeMember func(pid int, st procfs.Stat) bool

// orphanFinder returns the test for a dead guard's tree: command is the
// command's pid (0 when the guard died before it reported one), runID the
// term's owner, and all says every descendant of this process counts.
func orphanFinder(command int, runID string) treeMember {
	marker := "BATON_RUN_ID=" + runID
	return func(pid int, st procfs.Stat) bool {
		return (command > 0 && st.PGRP == command) || (runID != "" && procfs.HasEnv(pid, marker))
	}
}

// findTree lists the live processes that match member, or descend from one
// that does, or (all) descend from this process.
func findTree(member treeMember, all bool) []int {
	self := os.Getpid()
	return walkTree(func(pid int, st procfs.Stat) bool {
		return member(pid, st) || (all && st.PPID == self)
	})
}

// killOrphans KILLs the tree of a dead guard until none of it is left (a
// tree that forks while it is killed is killed again), reaping the ones
// that are this process's children, for at most within. It returns the
// processes it killed and those still alive at the end.
func killOrphans(member treeMember, all bool, within time.Duration) (killed []Process, left []int) {
	time.Sleep(time.Duration(orphanSweepDelay.Load()))
	deadline := time.Now().Add(within)
	seen := map[int]bool{}
	for {
		tree := findTree(member, all)
		for _, pid := range tree {
			if !seen[pid] {
				seen[pid] = true
				killed = append(killed, Process{PID: pid, Argv: procfs.Argv(pid)})
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
		reapChildren(seen)
		if len(tree) == 0 || time.Now().After(deadline) {
			return killed, tree
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reapChildren reaps those of pids that are this process's children and
// have exited (adopted orphans, as a subreaper); others are not touched, so
// no exec.Cmd of this process loses its status.
func reapChildren(pids map[int]bool) {
	for pid := range pids {
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}
