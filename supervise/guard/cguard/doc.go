// Package cguard is the guard of package supervise/guard written in C, for
// cmd/baton-guard: a C constructor that runs when the program is started
// as a guard (os.Args[1] is guard.Command), before the Go runtime starts,
// and exits when the tree it guards is gone. A guard starts for every run
// a daemon or baton run makes, and on a small VM the Go runtime's start
// alone costs several times an exec of /bin/true: the C guard saves that
// (docs/BENCHMARKS.md, "the guard in C").
//
// It keeps the Go guard's protocol to the letter: the same flags,
// descriptors, signals, reports and tree guarantees, so the supervisor
// cannot tell them apart, and the tests of package cmd/baton, which run
// every command under the baton-guard beside baton, hold both to the same
// promises (the ones without a baton-guard beside baton run the Go guard).
// Whatever the C guard does not fully understand (a flag it does not know,
// a value it cannot parse, a protocol it does not speak) it leaves to the
// Go guard by returning, so every refusal and usage error is the Go
// guard's own. A run as another user (--cred, from a job's user:) is one
// of them: the Go guard changes the command's credential. With
// BATON_GUARD_GO set in its environment it leaves every
// run to the Go guard (for tests that compare the two).
//
// Without cgo (CGO_ENABLED=0) the package is empty and baton-guard is the
// Go guard alone.
package cguard
