package supervise

import (
	"os"
	"path"
	"sync"

	"golang.org/x/sys/unix"
)

// GuardName is the small guard's executable (cmd/baton-guard). A guard is
// started for every run; baton can be its own guard, but starting the
// whole baton binary costs several times what starting baton-guard does.
const GuardName = "baton-guard"

// GuardBeside is the guard to start for the commands of the executable
// exe: the baton-guard in exe's directory when there is one this process
// may execute, else exe itself. A baton-guard of another build refuses
// before it starts anything (guard.Protocol), and Run then guards the
// command with exe.
func GuardBeside(exe string) string {
	p := path.Join(path.Dir(exe), GuardName)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && unix.Access(p, unix.X_OK) == nil {
		return p
	}
	return exe
}

// refusedGuards holds the guards that refused this process's protocol:
// they are not asked again.
var refusedGuards sync.Map
