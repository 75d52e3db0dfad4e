// Package procfs reads what baton needs of Linux's /proc: a process's state,
// parent and start time from /proc/PID/stat, and its argv. One parser, for
// the supervisor (the job's process tree) and the local store (who holds a
// lock, and whether that holder still lives).
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is what baton reads of /proc/PID/stat.
type Stat struct {
	State      byte // R, S, D, Z (zombie: exited, not yet reaped), X, …
	PPID       int
	PGRP       int    // process group
	StartTicks uint64 // field 22, starttime: clock ticks after boot
}

// Zombie reports whether the process has exited and only waits to be reaped.
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// ParseStat parses a /proc/PID/stat line: "PID (COMM) STATE PPID … ". COMM
// is the executable's name as the process set it, and may hold spaces and
// parentheses, so the fields are counted after the last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("no ')' after the command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 22-3+1 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	ppid, err := strconv.Atoi(f[4-3])
	if err != nil {
		return Stat{}, fmt.Errorf("ppid: %w", err)
	}
	pgrp, err := strconv.Atoi(f[5-3])
	if err != nil {
		return Stat{}, fmt.Errorf("pgrp: %w", err)
	}
	ticks, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("starttime: %w", err)
	}
	return Stat{State: f[0][0], PPID: ppid, PGRP: pgrp, StartTicks: ticks}, nil
}

// ReadStat reads /proc/PID/stat; a process that is gone gives an error
// matching fs.ErrNotExist.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// Argv reads a process's argv. Between fork and exec, or while it exits,
// that is empty, and its name (from comm) stands in, in brackets; nil when
// the process is gone.
func Argv(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil {
			return []string{"[" + strings.TrimSpace(string(comm)) + "]"}
		}
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// HasEnv reports whether a process's environment, as it was at exec, holds
// the variable assignment kv ("NAME=value"). False when it cannot be read
// (gone, or another user's).
func HasEnv(pid int, kv string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for v := range bytes.SplitSeq(b, []byte{0}) {
		if string(v) == kv {
			return true
		}
	}
	return false
}
