// Package runinit runs `baton run` with the local store (runcmd.Local) from
// its init function, before the rest of the binary initialises, as package
// supervise/guardinit does for the guard: such a run needs flock and
// supervise, not the PostgreSQL driver, SQLite, Prometheus or NATS, whose
// initialisation cost more than the run itself. Go initialises, each time,
// the ready package that sorts first by import path, so this init comes
// once its dependencies are done, after every ready package that sorts
// before the last of them. Its dependencies must therefore avoid packages
// that are ready only late and sort late (path/filepath, os/exec, os/user:
// see internal/spawn and flock.SetAccounts), or everything that sorts
// before them (golang.org/x/text, google.golang.org/protobuf, …) comes
// first; TestRunLocalStartsBeforeHeavyInits in cmd/baton checks it. A main
// package imports it blank:
//
//	import _ "github.com/batonhq/baton/internal/runcmd/runinit"
//
// A run it handles never returns into the rest of the program: its status
// is the process's exit status. Every other invocation, and every run
// that Local leaves to main, returns from init at once.
package runinit

import (
	"os"

	"github.com/batonhq/baton/internal/runcmd"
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		if status, handled := runcmd.Local(os.Args[2:]); handled {
			os.Exit(status)
		}
	}
}
