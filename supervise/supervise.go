// Package supervise runs a command while holding a job's lease: it starts the
// command in its own process group, renews the lease about every TTL/3,
// forwards signals, and stops the whole group when its trust in the lease
// runs out. It wraps os/exec and the process-group calls of the kernel.
//
// Trust is kept on this process's monotonic clock, never compared with the
// store's: after a renewal sent at s succeeds, the term is trusted until
// s + TTL − kill-after − safety. At that instant the group gets TERM, and KILL
// kill-after later, so the command is gone before the store can expire the
// term (which it judges from an instant no earlier than s) and grant it anew.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/batonhq/baton"
)

// Supervisor runs one command under one term.
type Supervisor struct {
	Leaser    baton.Leaser
	KillAfter time.Duration // from TERM to KILL; clamped to TTL/3
	Stdin     io.Reader
	Stdout    io.Writer
	Stderr    io.Writer
	Env       []string // the command's environment before baton adds its own
	Dir       string
	// Logf reports what baton does (renewal trouble, lost lease); nil is quiet.
	Logf func(format string, args ...any)
}

// Result is how a supervised run ended.
type Result struct {
	// ExitCode is the command's own status, 128+n when a signal n ended it,
	// 127 when it could not be found and 126 when it could not be run.
	ExitCode int
	// LeaseLost is set when the lease was lost (or trust in it ran out) while
	// the command ran, and the command was stopped for it.
	LeaseLost error
	// ReleaseErr is set when the lease could not be released at the end; the
	// lease then expires by itself.
	ReleaseErr error
}

// Safety is the part of the trust window kept back for scheduling delays
// and clock-rate differences between this host and the store.
func Safety(ttl time.Duration) time.Duration {
	return max(ttl/10, 50*time.Millisecond)
}

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

// Run runs argv under term, which the caller acquired with a request sent at
// trustFrom, and releases the term when the command ends. Signals sent to
// this process are forwarded to the command's group; cancelling ctx sends it
// one TERM. A caller whose ctx is itself cancelled by those signals should
// pass context.WithoutCancel(ctx), or the command gets each signal twice.
func (s *Supervisor) Run(ctx context.Context, term *baton.Term, trustFrom time.Time, argv []string) Result {
	logf := s.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	killAfter := EffectiveKillAfter(term.TTL, s.KillAfter)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
	cmd.Env = append(append([]string{}, s.Env...), Env(term)...)
	cmd.Dir = s.Dir
	// Its own group, so that signals reach the whole tree and a terminal's
	// Ctrl-C reaches it only through baton; Pdeathsig, so that the command
	// dies if baton is killed and the store frees the lease.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	started := make(chan error, 1)
	exited := make(chan *os.ProcessState, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child exits, not
		// the process; this goroutine keeps its thread until the child ends.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		exited <- cmd.ProcessState
	}()
	if err := <-started; err != nil {
		res := Result{ExitCode: 126}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			res.ExitCode = 127
		}
		logf("cannot run %s: %v", argv[0], err)
		res.ReleaseErr = s.release(term)
		return res
	}
	pgid := cmd.Process.Pid

	interval := term.TTL / 3
	retry := max(term.TTL/15, 20*time.Millisecond)
	trustUntil := func(sent time.Time) time.Time {
		return sent.Add(term.TTL - killAfter - Safety(term.TTL))
	}
	lastSent := trustFrom
	renewAt := time.NewTimer(time.Until(lastSent.Add(interval)))
	defer renewAt.Stop()
	stopAt := time.NewTimer(time.Until(trustUntil(lastSent)))
	defer stopAt.Stop()
	failing := false
	cancelled := ctx.Done()

	var lost error
	for lost == nil {
		select {
		case ps := <-exited:
			return Result{ExitCode: exitCode(ps), ReleaseErr: s.release(term)}
		case sig := <-sigs:
			syscall.Kill(-pgid, sig.(syscall.Signal))
		case <-cancelled:
			// Ask once; the command's own exit (or the trust window) ends the run.
			cancelled = nil
			syscall.Kill(-pgid, syscall.SIGTERM)
		case <-stopAt.C:
			lost = baton.Errorf(baton.ELEASELOST, "no renewal of the lease of %s (token %d) succeeded in time; the store may grant it to another", term.Job, term.Token)
		case <-renewAt.C:
			sent := time.Now()
			rctx, cancel := context.WithDeadline(context.Background(), trustUntil(lastSent))
			err := s.Leaser.Renew(rctx, term)
			cancel()
			switch {
			case err == nil:
				if failing {
					logf("renewed the lease of %s (token %d) again", term.Job, term.Token)
					failing = false
				}
				lastSent = sent
				stopAt.Reset(time.Until(trustUntil(lastSent)))
				renewAt.Reset(time.Until(sent.Add(interval)))
			case baton.ErrorCode(err) == baton.ELEASELOST:
				lost = err
			default:
				if !failing {
					logf("renewing the lease of %s (token %d) failed, retrying: %v", term.Job, term.Token, err)
					failing = true
				}
				renewAt.Reset(retry)
			}
		}
	}

	// Trust is gone: stop the whole group, TERM then KILL, before the store
	// can hand the lease to another holder.
	syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(killAfter)
	defer grace.Stop()
	var ps *os.ProcessState
	select {
	case ps = <-exited:
	case <-grace.C:
		syscall.Kill(-pgid, syscall.SIGKILL)
		ps = <-exited
	}
	// The leader is gone; anything left in its group goes too.
	syscall.Kill(-pgid, syscall.SIGKILL)
	// Releasing would fail (the term is over or unreachable) and is not needed.
	return Result{ExitCode: exitCode(ps), LeaseLost: lost}
}

func (s *Supervisor) release(term *baton.Term) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Leaser.Release(ctx, term)
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
