package supervise

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"golang.org/x/sys/unix"
)

// GuardCommand is the hidden subcommand under which baton re-executes itself
// as the guard of a command's process tree.
const GuardCommand = "__guard"

// The guard's descriptors, as the supervisor passes them.
const (
	guardResultFD = 3 // the guard writes its guardReports here, then exits
	guardLockFD   = 4 // optional: the local lock, held until the tree is gone
	guardTrustFD  = 5 // with --trust: the trust cell (trust.go)
)

// Signals between supervisor and guard. Others (INT, TERM, HUP, QUIT) are
// passed on to the command's process group.
const (
	sigStopTree       = syscall.SIGUSR1 // TERM the whole tree, KILL after the grace
	sigSupervisorGone = syscall.SIGUSR2 // the supervisor died (Pdeathsig): KILL the tree now
)

// guardReport is what the guard writes on its result descriptor: first the
// command's pid once it runs (Started), then, when the tree is gone, the
// result (Done).
type guardReport struct {
	Started  int       `json:"started,omitempty"` // the command's pid and process group
	Done     bool      `json:"done,omitempty"`
	ExitCode int       `json:"exit_code"`
	Strays   []Process `json:"strays,omitempty"`
	Error    string    `json:"error,omitempty"`
	// TrustExpired says the guard stopped the tree itself because the
	// trust deadline passed without an extension from the supervisor.
	TrustExpired bool `json:"trust_expired,omitempty"`
}

// guardResult is the guard's final report.
type guardResult = guardReport

// GuardMain is the guard's main; it returns the guard's exit status. The guard
// sits between baton and the command, so that the command's whole tree,
// however it forks, setsids or daemonises, has an ancestor that outlives it:
//
//   - it is a child subreaper, so every orphaned descendant becomes its child
//     and can be found, waited for or killed;
//   - it dies-with (Pdeathsig) its supervisor and then kills the whole tree
//     before exiting, and it holds the local lock's descriptor while it does,
//     so "lock released, job still running" cannot happen;
//   - it reports the command's status and the strays it saw.
func GuardMain(args []string) int {
	flags := flag.NewFlagSet(GuardCommand, flag.ContinueOnError)
	strays := flags.String("strays", "wait", "")
	killAfter := flags.Duration("kill-after", 10*time.Second, "")
	ppid := flags.Int("ppid", 0, "")
	path := flags.String("path", "", "")
	// The term can expire (PostgreSQL): guardTrustFD is its trust cell,
	// which the supervisor extends after each renewal. Without it the lease
	// lasts as long as the lock's descriptor, which the guard holds (flock).
	trust := flags.Bool("trust", false, "")
	if err := flags.Parse(args); err != nil || flags.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "baton: __guard is internal to baton run")
		return 70
	}
	argv := flags.Args()
	g := &guard{strays: *strays, killAfter: *killAfter, self: os.Getpid()}
	result := os.NewFile(guardResultFD, "result")
	syscall.CloseOnExec(guardResultFD)
	syscall.CloseOnExec(guardLockFD) // EBADF when there is no lock: fine
	if *trust {
		syscall.CloseOnExec(guardTrustFD)
		cell, err := mapTrustCell(os.NewFile(guardTrustFD, "trust"))
		if err != nil {
			return g.finish(result, guardResult{ExitCode: 70, Error: "cannot read the lease's trust window: " + err.Error()})
		}
		g.trust = cell
	}

	// The command's Pdeathsig is tied to the thread that forks it: keep
	// main on one thread for the guard's whole life.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return g.finish(result, guardResult{ExitCode: 70, Error: "cannot become a child subreaper: " + err.Error()})
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, sigStopTree, sigSupervisorGone)
	if os.Getppid() != *ppid {
		return g.finish(result, guardResult{ExitCode: 70, Error: "supervisor gone before the command started"})
	}

	// A supervisor frozen between taking the term and starting this guard
	// hands it a deadline already past: the command must not start at all.
	if g.trust != nil && BootNow() >= g.trust.load() {
		return g.finish(result, guardResult{ExitCode: baton.ExitLeaseLost, TrustExpired: true, Error: "the lease's trust window ended before the command could start; not started"})
	}
	pid, err := syscall.ForkExec(*path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return g.finish(result, guardResult{ExitCode: 126, Error: fmt.Sprintf("cannot run %s: %v", argv[0], err)})
	}
	g.main = pid
	json.NewEncoder(result).Encode(guardReport{Started: pid})
	return g.finish(result, g.supervise(sigs))
}

type guard struct {
	strays    string
	killAfter time.Duration
	self      int
	main      int        // the command's pid, also its process group
	trust     *trustCell // nil: a lease that cannot expire while the guard lives
}

type reaped struct {
	pid    int
	status syscall.WaitStatus
}

// supervise reaps every child until none is left, acting on signals and on
// the command's exit by the strays policy.
func (g *guard) supervise(sigs <-chan os.Signal) guardResult {
	reapedc := make(chan reaped, 16)
	allGone := make(chan struct{})
	go func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil { // ECHILD: the whole tree is gone
				close(allGone)
				return
			}
			reapedc <- reaped{pid, ws}
		}
	}()

	var res guardResult
	var grace <-chan time.Time
	// The trust window: when it ends without an extension, the tree is
	// stopped as the supervisor would stop it (TERM, KILL after the grace),
	// even if the supervisor is frozen, deadlocked or too slow to ask.
	var trust *time.Timer
	var trustC <-chan time.Time
	if g.trust != nil {
		trust = time.NewTimer(time.Duration(g.trust.load() - BootNow()))
		defer trust.Stop()
		trustC = trust.C
	}
	// onReaped acts on one reaped child; it returns true when the guard is
	// done (strays reported and left behind).
	onReaped := func(r reaped) bool {
		if r.pid != g.main {
			return false
		}
		res.ExitCode = exitStatus(r.status)
		if !hasChildren() {
			return false // the common case, without a walk through /proc
		}
		left := descendants(g.self)
		if len(left) == 0 {
			return false
		}
		res.Strays = left
		switch g.strays {
		case "report":
			fmt.Fprintf(os.Stderr, "baton: the command exited and left %d process(es) running, released anyway (--strays=report): %s\n", len(left), describe(left))
			return true
		case "kill":
			fmt.Fprintf(os.Stderr, "baton: the command exited and left %d process(es) running; stopping them (--strays=kill): %s\n", len(left), describe(left))
			g.signalTree(syscall.SIGTERM)
			grace = time.After(g.killAfter)
		default:
			fmt.Fprintf(os.Stderr, "baton: the command exited and left %d process(es) running; the lease stays held until they exit (--strays=wait): %s\n", len(left), describe(left))
		}
		return false
	}
	for {
		select {
		case r := <-reapedc:
			if onReaped(r) {
				return res
			}
		case <-allGone:
			// The reaper queued every child before it saw ECHILD.
			for {
				select {
				case r := <-reapedc:
					onReaped(r)
				default:
					return res
				}
			}
		case <-grace:
			g.signalTree(syscall.SIGKILL)
		case <-trustC:
			if left := g.trust.load() - BootNow(); left > 0 {
				trust.Reset(time.Duration(left)) // extended meanwhile
				continue
			}
			trustC = nil
			res.TrustExpired = true
			fmt.Fprintf(os.Stderr, "baton: no renewal of the lease reached the guard before its trust window ended; stopping the command's tree (TERM, KILL after %s)\n", g.killAfter)
			g.signalTree(syscall.SIGTERM)
			if grace == nil {
				grace = time.After(g.killAfter)
			}
		case sig := <-sigs:
			switch sig {
			case sigSupervisorGone:
				g.killTree()
			case sigStopTree:
				g.signalTree(syscall.SIGTERM)
				if grace == nil {
					grace = time.After(g.killAfter)
				}
			default:
				syscall.Kill(-g.main, sig.(syscall.Signal))
			}
		}
	}
}

// signalTree signals the command's group and every other descendant.
func (g *guard) signalTree(sig syscall.Signal) {
	syscall.Kill(-g.main, sig)
	for _, p := range descendants(g.self) {
		syscall.Kill(p.PID, sig)
	}
}

// killTree KILLs until no descendant is left: a tree that forks while it is
// being killed is killed again.
func (g *guard) killTree() {
	for range 50 {
		g.signalTree(syscall.SIGKILL)
		if len(descendants(g.self)) == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (g *guard) finish(result *os.File, res guardResult) int {
	if res.Error != "" {
		fmt.Fprintln(os.Stderr, "baton: "+res.Error)
	}
	res.Done = true
	json.NewEncoder(result).Encode(res)
	result.Close()
	return 0
}

// hasChildren reports whether any child is left, without reaping it.
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != unix.ECHILD
}

func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
