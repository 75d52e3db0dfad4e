package supervise

import "github.com/batonhq/baton/supervise/guard"

// GuardCommand is the hidden subcommand under which baton re-executes itself
// as the guard of a command's process tree (package guard).
const GuardCommand = guard.Command

// GuardMain is the guard's main; it returns the guard's exit status (see
// package guard, and supervise/guardinit, which calls it before the rest of
// a binary initialises).
func GuardMain(args []string) int { return guard.Main(args) }

// The guard's descriptors and signals, as the supervisor passes them.
const (
	guardResultFD     = guard.FDResult
	sigStopTree       = guard.SigStopTree
	sigSupervisorGone = guard.SigSupervisorGone
)

// guardReport is what the guard writes on its result descriptor.
type guardReport = guard.Report

// guardResult is the guard's final report.
type guardResult = guardReport

// Process is a process found in /proc.
type Process = guard.Process
