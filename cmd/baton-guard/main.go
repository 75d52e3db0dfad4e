// Command baton-guard is the guard of each command that baton runs: a child
// subreaper between baton and the command that reaps the command's whole
// tree, applies the strays policy, stops the tree when the lease's trust
// window ends, and dies with baton, killing the tree as it goes (package
// supervise/guard).
//
// A guard is started for every run, so its start-up is paid on every run.
// baton itself can be the guard (it re-executes itself), but it is a large
// binary, and starting it costs several times what this small one does.
// So baton starts the baton-guard that lies beside its own executable,
// when there is one that speaks its guard protocol (supervise.GuardBeside), and
// itself otherwise. Install both from the same build.
//
// It is not a command to run by hand: baton starts it as
//
//	baton-guard __guard --protocol P --ppid PID --path PATH [--trust] [--strays S] [--kill-after D] -- COMMAND...
//
// with the descriptors and signals that package supervise/guard describes.
package main

import (
	"os"

	"github.com/batonhq/baton/supervise/guard"
	_ "github.com/batonhq/baton/supervise/guard/cguard" // the guard in C, before Go starts
)

const usage = `baton-guard: the guard that baton starts for each command it runs.
It is not a command to run by hand; baton finds it beside its own executable.
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == guard.Command {
		os.Exit(guard.Main(os.Args[2:]))
	}
	os.Stderr.WriteString(usage + guard.ProtocolLine + guard.Protocol + "\n")
	if len(os.Args) > 1 && (os.Args[1] == "--help" || os.Args[1] == "-h" || os.Args[1] == "--version") {
		os.Exit(0)
	}
	os.Exit(64) // EX_USAGE
}
