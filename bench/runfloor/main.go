// Command runfloor is `baton run` with the local store and nothing else
// linked: the early path of cmd/baton (package internal/runcmd/runinit,
// with flock, supervise and their dependencies), without PostgreSQL,
// SQLite, Prometheus, NATS or the rest of baton's commands. A run it
// cannot handle (--db, --help, a flag in error, …) exits 2 with nothing
// said.
//
// bench/overhead.sh times it beside baton: the difference is what the
// rest of the binary costs a run (its packages' initialisation before the
// run's last dependency, and the Go runtime's start on a larger binary),
// and its own ratio to `flock -n true` is the floor of a Go `baton run`
// however its packages were ordered. It is a measuring tool, not a
// command to install.
package main

import (
	"os"

	_ "github.com/batonhq/baton/internal/runcmd/runinit"
)

func main() { os.Exit(2) }
