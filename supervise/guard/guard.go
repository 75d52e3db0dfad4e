// Package guard is the guard process of baton's supervision (see package
// supervise): a child subreaper between the supervisor and the command that
// reaps the command's whole tree, applies the strays policy, stops the tree
// when the trust deadline passes, and dies with its supervisor, killing the
// tree as it goes.
//
// The guard is baton re-executed, once per run, so its start-up is paid on
// every run. This package therefore imports only the parts of the standard
// library that every Go program initialises first (os, syscall, time,
// strconv, …): no fmt, encoding/json, flag or golang.org/x/sys/unix. Then a
// package that calls Main from its init (supervise/guardinit) runs the guard
// before the heavy packages of the binary initialise: Go initialises a
// package as soon as its imports are, taking the ready packages in
// import-path order, so the guard starts before any package it does not
// import that depends on more than those. TestGuardStartsBeforeHeavyInits in
// cmd/baton holds that line.
//
// The protocol with the supervisor: the guard writes one JSON Report on
// fdResult when the command has started (Started), and a last one (Done)
// when the whole tree is gone, then exits. Signals: SigStopTree stops the
// tree (TERM, KILL after the grace), SigSupervisorGone (the supervisor's
// Pdeathsig) kills it at once; INT, TERM, HUP and QUIT are passed on to the
// command's process group.
package guard

import (
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// This file and the others of the package import no strings, bytes, fmt
// or encoding/json: see the package's doc.

// Command is the hidden subcommand under which baton re-executes itself as
// the guard of a command's process tree.
const Command = "__guard"

// The guard's descriptors, as the supervisor passes them.
const (
	FDResult = 3 // the guard writes its Reports here, then exits
	FDLock   = 4 // optional: the local lock, held until the tree is gone
	FDTrust  = 5 // with --trust: the trust cell (trust.go)
)

// Signals between supervisor and guard. Others (INT, TERM, HUP, QUIT) are
// passed on to the command's process group.
const (
	SigStopTree       = syscall.SIGUSR1 // TERM the whole tree, KILL after the grace
	SigSupervisorGone = syscall.SIGUSR2 // the supervisor died (Pdeathsig): KILL the tree now
)

// The exit statuses the guard reports, as baton's (the root package's
// ExitInternal and ExitLeaseLost; a test keeps them equal).
const (
	ExitInternal  = 70
	ExitLeaseLost = 76
)

// Process is a process found in /proc.
type Process struct {
	PID  int      `json:"pid"`
	Argv []string `json:"argv"`
}

// Report is what the guard writes on FDResult: first the command's pid once
// it runs (Started), then, when the tree is gone, the result (Done). The
// supervisor reads it with encoding/json; the guard writes it by hand
// (AppendJSON), to stay clear of encoding/json's start-up.
type Report struct {
	Started  int       `json:"started,omitempty"` // the command's pid and process group
	Done     bool      `json:"done,omitempty"`
	ExitCode int       `json:"exit_code"`
	Strays   []Process `json:"strays,omitempty"`
	Error    string    `json:"error,omitempty"`
	// TrustExpired says the guard stopped the tree itself because the
	// trust deadline passed without an extension from the supervisor.
	TrustExpired bool `json:"trust_expired,omitempty"`
	// Refused says the guard speaks another protocol than its supervisor
	// asked for (it is from another build) and started nothing.
	Refused bool `json:"refused,omitempty"`
}

// options are the guard's flags, as the supervisor passes them.
type options struct {
	protocol  string
	strays    string
	killAfter time.Duration
	ppid      int
	path      string
	trust     bool
	cred      *syscall.Credential // with --cred: the command's user and groups
	dir       string              // with --cred: where the command starts, entered as its user
	argv      []string
}

// parseArgs reads "--name value", "--name=value" (one dash or two) and the
// boolean --trust, up to "--" or the first word that is not a flag; the
// rest is the command.
func parseArgs(args []string) (options, bool) {
	o := options{strays: "wait", killAfter: 10 * time.Second}
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			args = args[1:]
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		name := a[1:]
		if name[0] == '-' {
			name = name[1:]
		}
		args = args[1:]
		value, inline := "", false
		for i := 0; i < len(name); i++ {
			if name[i] == '=' {
				name, value, inline = name[:i], name[i+1:], true
				break
			}
		}
		if name == "trust" {
			o.trust = !inline || value == "true"
			continue
		}
		if !inline {
			if len(args) == 0 {
				return o, false
			}
			value, args = args[0], args[1:]
		}
		var err error
		switch name {
		case "protocol":
			o.protocol = value
		case "strays":
			o.strays = value
		case "kill-after":
			o.killAfter, err = time.ParseDuration(value)
		case "ppid":
			o.ppid, err = strconv.Atoi(value)
		case "path":
			o.path = value
		case "cred":
			o.cred, err = parseCred(value)
		case "dir":
			o.dir = value
		default:
			return o, false
		}
		if err != nil {
			return o, false
		}
	}
	o.argv = args
	return o, len(args) > 0
}

// Main is the guard's main; it returns the guard's exit status. The guard
// sits between baton and the command, so that the command's whole tree,
// however it forks, setsids or daemonises, has an ancestor that outlives it:
//
//   - it is a child subreaper, so every orphaned descendant becomes its child
//     and can be found, waited for or killed;
//   - it dies-with (Pdeathsig) its supervisor and then kills the whole tree
//     before exiting, and it holds the local lock's descriptor while it does,
//     so "lock released, job still running" cannot happen;
//   - it reports the command's status and the strays it saw.
func Main(args []string) int {
	o, ok := parseArgs(args)
	if !ok {
		os.Stderr.WriteString("baton: " + Command + " is internal to baton run\n")
		return ExitInternal
	}
	g := &guard{strays: o.strays, killAfter: o.killAfter, self: os.Getpid()}
	result := os.NewFile(FDResult, "result")
	if o.protocol != Protocol {
		exe, _ := os.Executable()
		return g.finish(result, Report{ExitCode: ExitInternal, Refused: true,
			Error: exe + " speaks guard protocol " + Protocol + ", not " + o.protocol + " as this baton does: it is from another build; install baton and baton-guard from the same build"})
	}
	syscall.CloseOnExec(FDResult)
	syscall.CloseOnExec(FDLock) // EBADF when there is no lock: fine
	if o.trust {
		syscall.CloseOnExec(FDTrust)
		cell, err := MapTrustCell(os.NewFile(FDTrust, "trust"))
		if err != nil {
			return g.finish(result, Report{ExitCode: ExitInternal, Error: "cannot read the lease's trust window: " + err.Error()})
		}
		g.trust = cell
	}

	// The command's Pdeathsig is tied to the thread that forks it: keep
	// main on one thread for the guard's whole life.
	runtime.LockOSThread()
	if err := setChildSubreaper(); err != nil {
		return g.finish(result, Report{ExitCode: ExitInternal, Error: "cannot become a child subreaper: " + err.Error()})
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, SigStopTree, SigSupervisorGone)
	if os.Getppid() != o.ppid {
		return g.finish(result, Report{ExitCode: ExitInternal, Error: "supervisor gone before the command started"})
	}

	// A supervisor frozen between taking the term and starting this guard
	// hands it a deadline already past: the command must not start at all.
	if g.trust != nil && BootNow() >= g.trust.Load() {
		return g.finish(result, Report{ExitCode: ExitLeaseLost, TrustExpired: true, Error: "the lease's trust window ended before the command could start; not started"})
	}
	// Only the command changes user (--cred): the guard keeps baton's
	// privileges, so that it can signal, reap and kill the tree whoever it
	// runs as. The command enters its directory as its user, as cron's
	// child does; its Pdeathsig is set after the change, which clears it.
	pid, err := syscall.ForkExec(o.path, o.argv, &syscall.ProcAttr{
		Dir:   o.dir,
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: o.cred},
	})
	if err != nil {
		return g.finish(result, Report{ExitCode: 126, Error: "cannot run " + o.argv[0] + ": " + err.Error()})
	}
	g.main = pid
	result.Write(Report{Started: pid}.AppendJSON(nil))
	return g.finish(result, g.supervise(sigs))
}

type guard struct {
	strays    string
	killAfter time.Duration
	self      int
	main      int        // the command's pid, also its process group
	trust     *TrustCell // nil: a lease that cannot expire while the guard lives
}

type reaped struct {
	pid    int
	status syscall.WaitStatus
}

// supervise reaps every child until none is left, acting on signals and on
// the command's exit by the strays policy.
func (g *guard) supervise(sigs <-chan os.Signal) Report {
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

	var res Report
	var grace <-chan time.Time
	// The trust window: when it ends without an extension, the tree is
	// stopped as the supervisor would stop it (TERM, KILL after the grace),
	// even if the supervisor is frozen, deadlocked or too slow to ask.
	var trust *time.Timer
	var trustC <-chan time.Time
	if g.trust != nil {
		trust = time.NewTimer(time.Duration(g.trust.Load() - BootNow()))
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
		left := Descendants(g.self)
		if len(left) == 0 {
			return false
		}
		res.Strays = left
		n := strconv.Itoa(len(left))
		switch g.strays {
		case "report":
			os.Stderr.WriteString("baton: the command exited and left " + n + " process(es) running, released anyway (--strays=report): " + Describe(left) + "\n")
			return true
		case "kill":
			os.Stderr.WriteString("baton: the command exited and left " + n + " process(es) running; stopping them (--strays=kill): " + Describe(left) + "\n")
			g.signalTree(syscall.SIGTERM)
			grace = time.After(g.killAfter)
		default:
			os.Stderr.WriteString("baton: the command exited and left " + n + " process(es) running; the lease stays held until they exit (--strays=wait): " + Describe(left) + "\n")
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
			if left := g.trust.Load() - BootNow(); left > 0 {
				trust.Reset(time.Duration(left)) // extended meanwhile
				continue
			}
			trustC = nil
			res.TrustExpired = true
			os.Stderr.WriteString("baton: no renewal of the lease reached the guard before its trust window ended; stopping the command's tree (TERM, KILL after " + g.killAfter.String() + ")\n")
			g.signalTree(syscall.SIGTERM)
			if grace == nil {
				grace = time.After(g.killAfter)
			}
		case sig := <-sigs:
			switch sig {
			case SigSupervisorGone:
				g.killTree()
			case SigStopTree:
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
	for _, p := range Descendants(g.self) {
		syscall.Kill(p.PID, sig)
	}
}

// killTree KILLs until no descendant is left: a tree that forks while it is
// being killed is killed again.
func (g *guard) killTree() {
	for range 50 {
		g.signalTree(syscall.SIGKILL)
		if len(Descendants(g.self)) == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (g *guard) finish(result *os.File, res Report) int {
	if res.Error != "" && !res.Refused { // a refusal is the supervisor's to tell
		os.Stderr.WriteString("baton: " + res.Error + "\n")
	}
	res.Done = true
	result.Write(res.AppendJSON(nil))
	result.Close()
	return 0
}

// setChildSubreaper makes this process the reaper of its orphaned
// descendants (prctl PR_SET_CHILD_SUBREAPER).
func setChildSubreaper() error {
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return e
	}
	return nil
}

// hasChildren reports whether any child is left, without reaping it
// (waitid P_ALL, WEXITED|WNOHANG|WNOWAIT).
func hasChildren() bool {
	const pAll = 0
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOHANG|syscall.WNOWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return e != syscall.ECHILD
	}
}

func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// parseCred reads --cred's UID:GID:GROUP,GROUP,… (the groups may be
// none).
func parseCred(s string) (*syscall.Credential, error) {
	var fields [3]string
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			if n == 2 {
				return nil, syscall.EINVAL
			}
			n++
			continue
		}
		fields[n] += s[i : i+1]
	}
	if n != 2 {
		return nil, syscall.EINVAL
	}
	uid, err := strconv.ParseUint(fields[0], 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(fields[1], 10, 32)
	if err != nil {
		return nil, err
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	for start, i := 0, 0; fields[2] != "" && i <= len(fields[2]); i++ {
		if i < len(fields[2]) && fields[2][i] != ',' {
			continue
		}
		id, err := strconv.ParseUint(fields[2][start:i], 10, 32)
		if err != nil {
			return nil, err
		}
		c.Groups = append(c.Groups, uint32(id))
		start = i + 1
	}
	return c, nil
}
