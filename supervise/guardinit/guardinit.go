// Package guardinit runs baton's guard (supervise.GuardMain) from its init
// function, before the rest of the binary initialises, when the process was
// started as a guard (os.Args[1] is supervise.GuardCommand).
//
// A binary that re-executes itself as the guard of every command it runs
// pays its own start-up once more per run. In baton that start-up is mostly
// package initialisation it does not need for the guard: Prometheus
// registering its collectors, the SQLite C runtime, NATS, protobuf
// descriptors, the PostgreSQL driver. Go initialises packages in dependency
// order, and among the packages that are ready in import-path order
// (the Go specification, "Package initialization"), so a package that
// depends only on supervise and the standard library runs its init before
// every package it does not depend on that sorts after it, or that depends
// on a package that does. A main package imports it first, blank:
//
//	import _ "github.com/batonhq/baton/supervise/guardinit"
//
// The guard then never returns into the rest of the program: GuardMain's
// status is the process's exit status. Every other invocation returns from
// init at once.
package guardinit

import (
	"os"

	"github.com/batonhq/baton/supervise/guard"
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == guard.Command {
		os.Exit(guard.Main(os.Args[2:]))
	}
}
