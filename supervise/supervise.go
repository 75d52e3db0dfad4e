// Package supervise runs a command while holding a job's lease. It wraps
// process creation and the kernel's process-tree controls (process groups,
// Pdeathsig, child subreapers, /proc).
//
// Two processes of baton's share the work:
//
//	baton run (Supervisor)  holds the lease: renews it about every TTL/3,
//	  │                     forwards signals, keeps the trust window and
//	  │                     sends each new deadline to the guard
//	  └─ baton-guard        a child subreaper: every orphaned descendant of
//	       │                the command becomes its child; it reaps them all,
//	       │                applies the strays policy, stops the tree when
//	       │                the trust deadline passes, and dies with baton
//	       │                (Pdeathsig), killing the whole tree as it goes
//	       └─ COMMAND …     in its own process group, with BATON_* set
//
// A guard starts once per run, so its start-up is paid on every run. Its
// code is package supervise/guard, built small as cmd/baton-guard, which
// Run starts when it lies beside this executable (GuardBeside) and speaks
// the same guard protocol; otherwise baton is its own guard (its __guard
// subcommand). The guard package keeps to the packages every Go program
// initialises first, so that a binary that blank-imports
// supervise/guardinit starts its guards before the rest of it initialises.
// Built with cgo, cmd/baton-guard also carries the same guard in C
// (supervise/guard/cguard), which runs before the Go runtime starts at all.
//
// The lease is released only when the guard reports that the whole tree is
// gone. For the local store the guard also holds a copy of the lock's
// descriptor (never the command), so even when baton is SIGKILLed the lock
// outlives the tree.
//
// Trust is kept on this process's monotonic clock, never compared with the
// store's, by package internal/hold, which lease.Run keeps its terms with
// too: after a renewal sent at s succeeds, the term is trusted until
// s + TTL − kill-after − safety. At that instant the tree gets TERM, and KILL
// kill-after later, so the command is gone before the store can expire the
// term (which it judges from an instant no earlier than s) and grant it anew.
//
// The guard keeps the same deadline, which the supervisor sends it after
// each renewal (on the boot clock, which both processes read alike), and
// acts on it alone: a supervisor that is frozen or deadlocked cannot keep
// the tree alive past its term. A guard that dies leaves the command's
// children behind (the command itself dies with it); the supervisor then
// kills them (see orphans.go) before it releases anything. A guard that is
// frozen or stuck when the tree must stop is backed by the supervisor, which
// signals the tree itself on the guard's schedule (TERM at once when the
// guard is stopped, KILL kill-after later), so that only a supervisor and a
// guard frozen at once leave the tree running past its term.
package supervise

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/hold"
	"github.com/batonhq/baton/internal/spawn"
	"github.com/batonhq/baton/procfs"
	"github.com/batonhq/baton/supervise/guard"
	"golang.org/x/sys/unix"
)

// Supervisor runs one command under one term.
type Supervisor struct {
	Leaser    baton.Leaser
	KillAfter time.Duration // from TERM to KILL; clamped to TTL/3
	// Strays says what to do with processes the command leaves behind when
	// it exits: "wait" (the default: the lease stays held until they exit),
	// "kill" (TERM, then KILL after KillAfter) or "report" (release at once).
	Strays string
	// MaxRun, when positive, bounds the run: the whole tree is stopped then.
	MaxRun time.Duration
	// Stop, when closed, stops the whole tree (TERM, then KILL after
	// KillAfter): a run being replaced, or a daemon past its drain grace.
	Stop <-chan struct{}
	// OwnSignals says the caller handles this process's signals itself (the
	// daemon: TERM drains, HUP reloads), so none is forwarded to the command.
	OwnSignals bool
	// KeepLease leaves the term held when Run returns, for a caller that
	// must record the run's outcome before another holder can start (the
	// daemon); the caller then releases it.
	KeepLease bool
	Stdin     io.Reader
	Stdout    io.Writer
	Stderr    io.Writer
	Env       []string // the command's environment before baton adds its own
	// ExtraEnv is added after baton's own variables (the daemon's BATON_TICK
	// and BATON_IDEMPOTENCY_KEY); it wins over them.
	ExtraEnv []string
	Dir      string
	// Credential, when set, is the user and groups the command runs as (a
	// job's user:); only root may give another. The guard keeps this
	// process's user, so that its trust window and kills reach the tree.
	Credential *syscall.Credential
	// GuardPath is the executable that runs GuardMain when called with
	// GuardCommand as its first argument; default: GuardBeside this
	// executable. A guard that refuses the protocol is replaced by this
	// executable.
	GuardPath string
	// Logf reports what baton does (renewal trouble, lost lease); nil is quiet.
	Logf func(format string, args ...any)
	// AdoptOrphans makes this process a child subreaper, so that if the
	// guard dies, every process its command left becomes this process's
	// child and is killed before the lease is released, however it escaped
	// its group. Only for a process whose other children are none of its
	// business to kill: it has none (baton run).
	AdoptOrphans bool
}

// Result is how a supervised run ended.
type Result struct {
	// ExitCode is the command's own status, 128+n when a signal n ended it,
	// 127 when it could not be found and 126 when it could not be run.
	ExitCode int
	// LeaseLost is set when the lease was lost (or trust in it ran out) while
	// the command ran, and the command's tree was stopped for it.
	LeaseLost error
	// TimedOut is set when MaxRun passed and the tree was stopped for it.
	TimedOut bool
	// Stopped is set when Stop was closed and the tree was stopped for it.
	Stopped bool
	// Strays are the processes the command left behind when it exited.
	Strays []Process
	// ReleaseErr is set when the lease could not be released at the end; the
	// lease then expires by itself.
	ReleaseErr error
	// Survivors are processes of the run still alive when Run returned: the
	// guard died and they could not be killed. The lease was not released,
	// and a caller that keeps it (KeepLease) must not release it either.
	Survivors []int
	// GuardDied is set when the guard died without a report (it was
	// killed): the command's status is unknown, and whatever the command
	// left was killed before anything was released.
	GuardDied bool
}

// Safety is the part of the trust window kept back for scheduling delays
// and clock-rate differences between this host and the store (hold.Safety:
// lease.Run keeps the same).
func Safety(ttl time.Duration) time.Duration { return hold.Safety(ttl) }

// EffectiveKillAfter clamps kill-after so that TERM, the grace period and the
// safety all fit inside one TTL.
func EffectiveKillAfter(ttl, killAfter time.Duration) time.Duration {
	return min(killAfter, ttl/3)
}

// Env returns the variables baton gives the command for term.
func Env(term *baton.Term) []string {
	return []string{
		"BATON_JOB=" + term.Job,
		fmt.Sprintf("BATON_FENCING_TOKEN=%d", term.Token),
		"BATON_RUN_ID=" + term.Owner,
		"BATON_LEASE_TTL=" + term.TTL.String(),
	}
}

// lockFiler is a Leaser whose lease is an open file (flock): the guard keeps
// a copy of the descriptor so that the lock outlives baton until the
// command's tree is gone.
type lockFiler interface {
	LockFile(term *baton.Term) *os.File
}

// Run runs argv under term, which the caller acquired with a request sent at
// trustFrom, and releases the term when the command's tree is gone (or, with
// Strays "report", when the command itself is). The command runs below a
// guard process (see GuardMain). Signals sent to this process are forwarded
// to the command's group; cancelling ctx sends it one TERM. A caller whose
// ctx is itself cancelled by those signals should pass
// context.WithoutCancel(ctx), or the command gets each signal twice.
func (s *Supervisor) Run(ctx context.Context, term *baton.Term, trustFrom time.Time, argv []string) Result {
	logf := s.logf()
	self, err := executable()
	if err != nil && s.GuardPath == "" {
		logf("cannot find baton's own executable to guard the command: %v", err)
		return Result{ExitCode: baton.ExitInternal, ReleaseErr: s.release(term)}
	}
	guardPath := s.GuardPath
	if guardPath == "" {
		guardPath = GuardBeside(self)
	}
	if _, no := refusedGuards.Load(guardPath); no && self != "" {
		guardPath = self
	}
	res, refused := s.run(ctx, term, trustFrom, argv, guardPath)
	if refused == "" {
		return res
	}
	// A guard of another build, or one that could not be started, started
	// nothing: this process's own guard takes the run, and the other is
	// not asked again.
	if self == "" || self == guardPath {
		logf("%s", refused)
		return Result{ExitCode: baton.ExitInternal, ReleaseErr: s.release(term)}
	}
	refusedGuards.Store(guardPath, true)
	logf("%s; baton guards its commands itself meanwhile (a slower start for each run)", refused)
	res, refused = s.run(ctx, term, trustFrom, argv, self)
	if refused != "" {
		logf("%s", refused)
		return Result{ExitCode: baton.ExitInternal, ReleaseErr: s.release(term)}
	}
	return res
}

// executable is this process's executable, looked up once: the guard of
// every run falls back to it.
var executable = sync.OnceValues(os.Executable)

func (s *Supervisor) logf() func(format string, args ...any) {
	if s.Logf == nil {
		return func(string, ...any) {}
	}
	return s.Logf
}

// run is Run with the guard at guardPath. refused is set, and nothing was
// started or released, when that guard speaks another protocol or cannot
// be started.
func (s *Supervisor) run(ctx context.Context, term *baton.Term, trustFrom time.Time, argv []string, guardPath string) (_ Result, refused string) {
	logf := s.logf()
	// The trust window keeps kill-after back: TERM at its end, KILL
	// kill-after later, and the tree is gone before the store can expire
	// the term.
	killAfter := EffectiveKillAfter(term.TTL, s.KillAfter)
	window := hold.Window(term.TTL, killAfter)
	// An acquisition that took long (it waited for a row lock, or the
	// network was slow) leaves little of the trust window: renew before
	// starting anything, rather than start a command only to stop it.
	trustFrom, err := hold.Fresh(s.Leaser, term, trustFrom)
	if err != nil {
		return Result{ExitCode: baton.ExitLeaseLost, ReleaseErr: s.release(term), LeaseLost: err}, ""
	}
	// Resolved here, as a shell would before exec: with the PATH of the
	// command's environment when it sets one (a job's env: PATH), else
	// baton's own.
	path, err := spawn.LookPathIn(argv[0], commandPath(s.Env, s.ExtraEnv))
	if err != nil {
		code := 126
		if errors.Is(err, spawn.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		logf("cannot run %s: %v", argv[0], err)
		return Result{ExitCode: code, ReleaseErr: s.release(term)}, ""
	}
	results, resultW, err := os.Pipe()
	if err != nil {
		logf("cannot create a pipe: %v", err)
		return Result{ExitCode: baton.ExitInternal, ReleaseErr: s.release(term)}, ""
	}
	defer results.Close()
	extra := []*os.File{resultW, nil}
	if lf, ok := s.Leaser.(lockFiler); ok {
		extra[1] = lf.LockFile(term)
	}
	strays := cmp.Or(s.Strays, "wait")
	guardArgs := []string{GuardCommand, "--protocol", guard.Protocol, "--strays", strays, "--kill-after", killAfter.String(),
		"--ppid", strconv.Itoa(os.Getpid()), "--path", path}
	if c := s.Credential; c != nil {
		guardArgs = append(guardArgs, "--cred", credArg(c))
		if s.Dir != "" {
			guardArgs = append(guardArgs, "--dir", s.Dir)
		}
	}
	// A lease that can expire (it is not a lock the guard holds too) gets a
	// trust window in the guard as well: the guard stops the tree when it
	// ends, whatever becomes of this process (see trust below).
	var cell *trustCell
	if extra[1] == nil {
		cell, err = newTrustCell(trustFrom.Add(window))
		if err != nil {
			resultW.Close()
			logf("cannot share the trust window with the guard: %v", err)
			return Result{ExitCode: baton.ExitInternal, ReleaseErr: s.release(term)}, ""
		}
		defer cell.close()
		extra = append(extra, cell.F)
		guardArgs = append(guardArgs, "--trust")
	}
	if s.AdoptOrphans {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			logf("cannot become a child subreaper (orphans of a dead guard are then found by their group and environment only): %v", err)
		}
	}
	guardArgv := append(append(append([]string{"baton"}, guardArgs...), "--"), argv...)
	env := append(append(append([]string{}, s.Env...), Env(term)...), s.ExtraEnv...)
	// Its own group, so that a terminal's Ctrl-C reaches the command only
	// through baton; the guard learns of baton's death by sigSupervisorGone.
	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sigSupervisorGone}
	var cmd *spawn.Child

	sigs := make(chan os.Signal, 4)
	if !s.OwnSignals {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
		defer signal.Stop(sigs)
	}

	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		// Pdeathsig fires when the thread that forked the child exits, not
		// the process; this goroutine keeps its thread until the child ends.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c, err := spawn.Start(guardPath, guardArgv, env, s.Dir, s.Stdin, s.Stdout, s.Stderr, extra, sys)
		if err != nil {
			started <- err
			return
		}
		cmd = c
		started <- nil
		c.Wait()
		close(exited)
	}()
	err = <-started
	resultW.Close()
	if errors.Is(err, syscall.E2BIG) {
		// The guard's exec carries the command's arguments and environment:
		// the kernel refuses them, as it would the command's own exec.
		logf("cannot run %s: its arguments and environment are larger than the kernel accepts (E2BIG)", argv[0])
		return Result{ExitCode: 126, ReleaseErr: s.release(term)}, ""
	}
	if err != nil {
		// Run decides: another guard (baton itself) takes the run when
		// this one was a baton-guard that cannot be started (another
		// architecture, damaged).
		return Result{}, "cannot start the guard " + guardPath + " of the command: " + err.Error()
	}
	guard := cmd.Process.Pid
	var commandPID atomic.Int64 // the command's pid, once the guard says
	report := make(chan guardResult, 1)
	go func() {
		dec := json.NewDecoder(results)
		for {
			var r guardReport
			if err := dec.Decode(&r); err != nil {
				report <- guardResult{ExitCode: baton.ExitInternal, Error: "the guard of the command died without a report"}
				return
			}
			if r.Done {
				report <- r
				return
			}
			if r.Started > 0 {
				commandPID.Store(int64(r.Started))
			}
		}
	}()
	// The term is renewed from here until it is released (or given to a
	// caller that keeps it): while the command runs, and while a dead
	// guard's orphans are found and killed, which on a loaded machine or
	// with a large tree can outlast the TTL (a lapsed lease would go to
	// another run while they live). Each new deadline goes to the guard.
	keeper := hold.Keep(hold.Config{Leaser: s.Leaser, Term: term, Reserve: killAfter, Logf: logf,
		Renewed: func(until time.Time) {
			if cell != nil {
				cell.set(until)
			}
		}}, trustFrom)
	defer keeper.Stop()
	// release stops the renewals, then gives the term back.
	release := func() error {
		keeper.Stop()
		return s.release(term)
	}

	// finish turns the guard's report into the run's result. A guard that
	// died without one left its command's children behind: they are killed
	// before anything is released.
	finish := func(r guardResult, res Result) Result {
		res.ExitCode, res.Strays = r.ExitCode, r.Strays
		if r.TrustExpired && res.LeaseLost == nil {
			res.LeaseLost = baton.Errorf(baton.ELEASELOST, "no renewal of the lease of %s (token %d) reached the command's guard before the trust window ended (was baton frozen or stuck?); the guard stopped the command's tree", term.Job, term.Token)
		}
		if r.Done {
			return res
		}
		res.GuardDied = true
		killed, left := killOrphans(orphanFinder(int(commandPID.Load()), term.Owner), s.AdoptOrphans, killAfter+5*time.Second)
		msg := "the guard of the command died without a report"
		if len(killed) > 0 {
			msg += fmt.Sprintf("; killed the %d process(es) its command left: %s", len(killed), describe(killed))
		}
		if len(left) > 0 {
			// Not released: the lease expires by itself (PostgreSQL) or
			// with this process (flock), as late as it can.
			logf("%s; %d of them could not be killed, so the lease is not released: pids %v", msg, len(left), left)
			res.ExitCode, res.Survivors = baton.ExitInternal, left
			res.ReleaseErr = baton.Errorf(baton.EINTERNAL, "not released: %d process(es) of the run are still alive", len(left))
			return res
		}
		logf("%s", msg)
		res.ExitCode = baton.ExitInternal
		return res
	}

	var maxRun <-chan time.Time
	if s.MaxRun > 0 {
		t := time.NewTimer(s.MaxRun)
		defer t.Stop()
		maxRun = t.C
	}
	cancelled := ctx.Done()
	trustEnded := keeper.Lost()

	var lost error
	timedOut, stopped := false, false
	for {
		if lost != nil || timedOut || stopped {
			// A guard that has already exited ended by itself, before this
			// process decided to stop it: the command's exit is the run's
			// ending. A supervisor frozen after the exit, and thawed past its
			// trust window, finds its timers and the exit ready at once; the
			// exit came first. (Had the guard stopped the tree for the trust
			// window, its report says so.)
			if !guardExited(guard, exited) {
				break
			}
			lost, timedOut, stopped = nil, false, false
		}
		select {
		case <-exited:
			r := <-report
			if r.Refused {
				return Result{}, r.Error
			}
			if r.Error != "" && r.ExitCode == baton.ExitInternal && r.Done {
				logf("%s", r.Error)
			}
			res := finish(r, Result{})
			if res.LeaseLost == nil && res.Survivors == nil {
				res.ReleaseErr = release()
			}
			return res, ""
		case sig := <-sigs:
			syscall.Kill(guard, sig.(syscall.Signal))
		case <-cancelled:
			// Ask once; the command's own exit (or the trust window) ends the run.
			cancelled = nil
			syscall.Kill(guard, syscall.SIGTERM)
		case <-maxRun:
			timedOut = true
		case <-s.Stop:
			stopped = true
		case <-trustEnded:
			// The window ended (no renewal in time), or the store said
			// the term is over. Once: it stays ended.
			trustEnded = nil
			lost = keeper.Err()
		}
	}

	// Trust is gone, or time is up: the guard stops the whole tree, TERM then
	// KILL after the grace, before the store can hand the lease to another.
	// A guard that cannot (frozen, stuck) is backed by this process, which
	// signals the tree itself on the guard's own schedule: TERM now if the
	// guard is stopped, KILL kill-after later if it has not exited by then.
	// Killing only the guard, later, would kill the command (Pdeathsig) too
	// late: after the term expires when the safety is under that delay.
	// The KILL is due kill-after from the trust window's end, however late
	// this process came to it (a busy host), and before the slow part, the
	// search of /proc for the tree to TERM.
	syscall.Kill(guard, sigStopTree)
	killAt := time.Now().Add(killAfter)
	if lost != nil {
		if end := keeper.Until().Add(killAfter); end.Before(killAt) {
			killAt = end
		}
	}
	backstop := time.NewTimer(time.Until(killAt))
	defer backstop.Stop()
	if guardStopped(guard) {
		logf("the guard of the command is stopped (SIGSTOP?); baton stops the command's tree itself (TERM, KILL after %s)", killAfter)
		signalTree(int(commandPID.Load()), term.Owner, guard, syscall.SIGTERM)
	}
	select {
	case <-exited:
	case <-backstop.C:
		// The guard KILLs the tree now too; the same KILL from here does
		// no harm, and is the one that counts when the guard cannot act.
		signalTree(int(commandPID.Load()), term.Owner, guard, syscall.SIGKILL)
		deadline := time.NewTimer(time.Second)
		defer deadline.Stop()
		select {
		case <-exited:
		case <-deadline.C:
			// The guard is stuck; what its command left is killed in finish.
			syscall.Kill(guard, syscall.SIGKILL)
			<-exited
		}
	}
	res := finish(<-report, Result{LeaseLost: lost, TimedOut: timedOut, Stopped: stopped})
	if res.LeaseLost == nil && res.Survivors == nil {
		res.ReleaseErr = release()
	}
	return res, ""
}

// guardStopped says the guard, pid, is stopped (SIGSTOP, a debugger), and
// so cannot act on the trust window or sigStopTree until it is continued.
func guardStopped(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && (st.State == 'T' || st.State == 't')
}

// signalTree sends sig to every process of the tree of command (its pid, 0
// when the guard has not said it) in the run runID, not to the guard: a
// guard that can act reports the command's status. The command's group
// first, in one call, before the slower search of /proc.
func signalTree(command int, runID string, guard int, sig syscall.Signal) {
	if command > 0 {
		syscall.Kill(-command, sig)
	}
	for _, pid := range findTree(orphanFinder(command, runID), false) {
		if pid != guard {
			syscall.Kill(pid, sig)
		}
	}
}

// guardExited says the guard, pid, has exited: its waiter saw it (exited is
// closed), or it is a zombie not yet reaped (waitid WNOWAIT leaves it to
// that waiter).
func guardExited(pid int, exited <-chan struct{}) bool {
	select {
	case <-exited:
		return true
	default:
	}
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err == unix.ECHILD {
		return true // reaped by its waiter since
	}
	// si_pid, after si_signo, si_errno, si_code and padding: zero when no
	// child has changed state (WNOHANG).
	raw := (*[unsafe.Sizeof(info)]byte)(unsafe.Pointer(&info))
	return err == nil && binary.NativeEndian.Uint32(raw[16:20]) != 0
}

func (s *Supervisor) release(term *baton.Term) error {
	if s.KeepLease {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Leaser.Release(ctx, term)
}

// commandPath is the PATH that envs (a command's environment in parts,
// later entries winning) set, or this process's own when they set none.
func commandPath(envs ...[]string) string {
	for i := len(envs) - 1; i >= 0; i-- {
		for j := len(envs[i]) - 1; j >= 0; j-- {
			if p, ok := strings.CutPrefix(envs[i][j], "PATH="); ok {
				return p
			}
		}
	}
	return os.Getenv("PATH")
}

// credArg is c as the guard's --cred reads it: UID:GID:GROUP,GROUP,….
func credArg(c *syscall.Credential) string {
	groups := make([]string, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = strconv.FormatUint(uint64(g), 10)
	}
	return fmt.Sprintf("%d:%d:%s", c.Uid, c.Gid, strings.Join(groups, ","))
}
