// Package runinit runs `baton run` with the local store (runcmd.Local) from
// its init function, before the rest of the binary initialises, as package
// supervise/guardinit does for the guard: such a run needs flock, supervise
// and uuid, not the PostgreSQL driver, SQLite, Prometheus or NATS, whose
// initialisation cost more than the run itself. Go initialises the
// packages that are ready in import-path order, so this init comes before
// every package it does not depend on that sorts after it or depends on
// one that does (github.com/jackc/…, github.com/prometheus/…, modernc.org/…,
// google.golang.org/…). A main package imports it blank:
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
