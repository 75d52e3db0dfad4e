// Package testproc starts the servers that tests run as children of the
// test binary (PostgreSQL for pgtest, PgBouncer for bouncertest): from a
// thread that never exits, so that their parent-death signal fires only
// when the test binary dies; as the unprivileged user postgres when the
// tests run as root, since neither server runs as root; in a directory that
// user can reach; on a free loopback port.
package testproc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// launcher starts processes from one OS thread that never exits. The kernel
// sends the parent-death signal when the thread that forked the child exits,
// not the process (https://go.dev/issue/27505), and the Go runtime may retire
// an ordinary goroutine's thread at any time.
var launcher = sync.OnceValue(func() chan<- launchRequest {
	reqs := make(chan launchRequest)
	go func() {
		runtime.LockOSThread()
		// Never unlocked and never returns: the thread lives as long as the
		// process.
		for r := range reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return reqs
})

type launchRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// Start starts cmd (whose SysProcAttr should set Pdeathsig) from the
// launcher thread.
func Start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	launcher() <- launchRequest{cmd: cmd, done: done}
	return <-done
}

// FreePort returns a loopback TCP port that was free a moment ago. Another
// process may take it before the caller binds it: callers retry a start that
// fails to bind.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PostgresUser returns the credential of the system user postgres when the
// tests run as root, and nil otherwise. who names the caller and program in
// errors ("pgtest: initdb").
func PostgresUser(who string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%s refuses to run as root, and the tests run as root: create an unprivileged system user named postgres (Debian: adduser --system --group postgres, or install the postgresql package) or run the tests as a non-root user (%v)", who, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%s: user postgres has a non-numeric uid %q or gid %q", who, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// TempParent returns os.TempDir, or /tmp when the server runs as another
// user and some ancestor of os.TempDir is closed to others.
func TempParent(asOtherUser bool) string {
	parent := os.TempDir()
	if !asOtherUser {
		return parent
	}
	for p := parent; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if p == filepath.Dir(p) {
			return parent
		}
	}
}
