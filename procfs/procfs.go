// Package procfs reads what baton needs of Linux's /proc: a process's state,
// parent and start time from /proc/PID/stat, and its argv. One parser, for
// the supervisor (the job's process tree) and the local store (who holds a
// lock, and whether that holder still lives).
//
// The guard of every run imports it, and starts before the heavy packages of
// the binary initialise only while its imports are the few that every Go
// program initialises first (see package supervise/guard): so no fmt,
// strings or bytes here, but the small helpers at the end.
package procfs

import (
	"errors"
	"os"
	"strconv"
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
	i := len(b) - 1
	for i >= 0 && b[i] != ')' {
		i--
	}
	if i < 0 {
		return Stat{}, errors.New("no ')' after the command name")
	}
	f := fields(b[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 22-3+1 || len(f[0]) != 1 {
		return Stat{}, errors.New(strconv.Itoa(len(f)) + " fields after the command name, want at least 20")
	}
	ppid, err := strconv.Atoi(f[4-3])
	if err != nil {
		return Stat{}, fieldError{"ppid", err}
	}
	pgrp, err := strconv.Atoi(f[5-3])
	if err != nil {
		return Stat{}, fieldError{"pgrp", err}
	}
	ticks, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		return Stat{}, fieldError{"starttime", err}
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
			return []string{"[" + string(trim(comm, " \t\n", true)) + "]"}
		}
		return nil
	}
	return split(trim(b, "\x00", false), 0)
}

// HasEnv reports whether a process's environment, as it was at exec, holds
// the variable assignment kv ("NAME=value"). False when it cannot be read
// (gone, or another user's).
func HasEnv(pid int, kv string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, v := range split(b, 0) {
		if v == kv {
			return true
		}
	}
	return false
}

// fieldError is a field of /proc/PID/stat that does not parse.
type fieldError struct {
	field string
	err   error
}

func (e fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e fieldError) Unwrap() error { return e.err }

// fields splits b at runs of spaces and newlines (as strings.Fields does
// for what /proc/PID/stat holds after the command name).
func fields(b []byte) []string {
	var out []string
	start := -1
	for i, c := range b {
		space := c == ' ' || c == '\n' || c == '\t'
		switch {
		case space && start >= 0:
			out = append(out, string(b[start:i]))
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	if start >= 0 {
		out = append(out, string(b[start:]))
	}
	return out
}

// split splits b at every sep, keeping empty parts.
func split(b []byte, sep byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == sep {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return append(out, string(b[start:]))
}

// trim removes the bytes in cut from the end of b, and from its start too
// if both.
func trim(b []byte, cut string, both bool) []byte {
	in := func(c byte) bool {
		for i := 0; i < len(cut); i++ {
			if cut[i] == c {
				return true
			}
		}
		return false
	}
	for len(b) > 0 && in(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	for both && len(b) > 0 && in(b[0]) {
		b = b[1:]
	}
	return b
}
