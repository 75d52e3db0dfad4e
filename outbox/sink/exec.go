package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
)

// ExitDataErr is the exit status (EX_DATAERR of sysexits(3)) by which an
// exec command refuses an event for good: the relay makes it dead at once.
const ExitDataErr = 65

// stderrTail is how much of the end of a failed command's standard error
// its error holds.
const stderrTail = 1 << 10

// Exec runs a command for each event, with the event's envelope on its
// standard input. Make one with Open or NewExec.
//
// The command runs without a shell, in a process group of its own, with
// nothing open but its standard input, output (/dev/null) and error.
// When it exits, or when the timeout ends its run, whatever is left of its
// process group is killed; if the relay dies, the command gets SIGKILL
// (its own children do not).
//
// To keep the command's descriptors to those three, each delivery marks
// every descriptor of this process above 2 close-on-exec (one close_range
// call). Go opens its own that way already; the others are ones this
// process inherited or C code opened, and no other child of this process
// gets them afterwards either: pass a descriptor to a child through
// exec.Cmd.ExtraFiles, which does not need it inheritable.
type Exec struct {
	path    string   // argv[0] resolved in PATH when the sink was made
	argv    []string // as given
	timeout time.Duration
}

func newExec(spec string, o Options) (*Exec, error) {
	argv := strings.Fields(spec[len("exec:"):])
	if len(argv) == 0 {
		return nil, baton.Invalid("--sink", "%q names no command: want exec:COMMAND [ARG…] (split on white space, run without a shell)", spec)
	}
	return NewExec(argv, o)
}

// NewExec returns an Exec sink running argv: argv[0] is looked up in PATH
// now, so that a missing command is a configuration error and not a
// retried delivery. Unlike the exec: spec, an argument may hold white
// space.
func NewExec(argv []string, o Options) (*Exec, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, baton.Invalid("--sink", "exec: names no command: want exec:COMMAND [ARG…]")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, baton.Invalid("--sink", "exec:%s: cannot run it: %v", argv[0], unwrapExecError(err))
	}
	return &Exec{path: path, argv: append([]string(nil), argv...), timeout: o.timeout()}, nil
}

func unwrapExecError(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// String names the command; its arguments are not shown, since they may
// hold credentials.
func (x *Exec) String() string {
	if len(x.argv) > 1 {
		return "exec:" + x.argv[0] + " …"
	}
	return "exec:" + x.argv[0]
}

// Close does nothing: no command outlives its Deliver.
func (x *Exec) Close() error { return nil }

// Deliver runs the command with e's envelope on standard input and
// BATON_EVENT_ID, BATON_EVENT_KEY, BATON_EVENT_TOPIC and BATON_EVENT_ATTEMPT
// added to this process's environment. Exit status 0 is a delivery,
// ExitDataErr a permanent refusal; any other status, a signal or the
// timeout is worth a retry, and the error holds the end of its standard
// error.
func (x *Exec) Deliver(ctx context.Context, e *outbox.Event) error {
	body, err := marshalEnvelope(e)
	if err != nil {
		return err
	}
	if strings.ContainsRune(e.Key, 0) {
		return outbox.Permanent(fmt.Errorf("%s: %s: its key holds a NUL byte and cannot be an environment variable", x, e))
	}
	cmd := &exec.Cmd{Path: x.path, Args: x.argv, Stdin: bytes.NewReader(body)}
	var stderr tailBuffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(),
		"BATON_EVENT_ID="+strconv.FormatInt(e.ID, 10),
		"BATON_EVENT_KEY="+e.Key,
		"BATON_EVENT_TOPIC="+e.Topic,
		"BATON_EVENT_ATTEMPT="+strconv.Itoa(e.Attempt),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A descendant that left the process group (setsid) may hold standard
	// error open after the kill; stop waiting for it then.
	cmd.WaitDelay = time.Second

	// Pdeathsig fires when the thread that forked the child ends, not the
	// process: keep this goroutine on its thread until the child is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	closeInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: cannot start: %w", x, unwrapExecError(err))
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		waitExitedNoReap(pid)
		close(exited)
	}()
	timer := time.NewTimer(x.timeout)
	defer timer.Stop()
	var stopped error
	select {
	case <-exited:
	case <-timer.C:
		stopped = fmt.Errorf("no exit within %s: its process group was killed", x.timeout)
	case <-ctx.Done():
		stopped = fmt.Errorf("its process group was killed: %w", ctx.Err())
	}
	// The command is not reaped yet, so its pid still names its process
	// group and no other: kill what is left of the group (all of it on a
	// timeout; strays in the background when it exited) before reaping.
	syscall.Kill(-pid, syscall.SIGKILL)
	<-exited
	err = cmd.Wait()

	st := cmd.ProcessState
	if st != nil && st.Success() {
		// Exit status 0 wins over a timeout that fired at the same time, and
		// over standard error that a descendant kept open (exec.ErrWaitDelay).
		return nil
	}
	tail := stderr.String()
	switch {
	case stopped != nil:
		return fmt.Errorf("%s: %w%s", x, stopped, tail)
	case st == nil:
		return fmt.Errorf("%s: %w%s", x, err, tail)
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		return fmt.Errorf("%s: killed by signal %d (%s)%s", x, ws.Signal(), ws.Signal(), tail)
	case st.ExitCode() == ExitDataErr:
		return outbox.Permanent(fmt.Errorf("%s: exit status %d (EX_DATAERR: the command refuses the event)%s", x, ExitDataErr, tail))
	}
	return fmt.Errorf("%s: exit status %d%s", x, st.ExitCode(), tail)
}

// waitExitedNoReap returns once process pid has exited, leaving it a
// zombie (WNOWAIT) so that its pid cannot be reused until cmd.Wait.
func waitExitedNoReap(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// closeInheritedOnExec marks every descriptor above standard error
// close-on-exec. Go opens its own that way, but this process may have
// inherited others from its parent (a shell's, a supervisor's), and
// os/exec passes on every descriptor that is not marked. This changes
// them for every later exec of this process: descriptors are meant to
// reach a child through exec.Cmd's ExtraFiles, which needs no inheritance.
func closeInheritedOnExec() {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return
	}
	// Before Linux 5.11: mark them one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, d := range entries {
		if fd, err := strconv.Atoi(d.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct {
	buf       []byte
	truncated bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTail; over > 0 {
		t.truncated = true
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return n, nil
}

// String is ": stderr: " and the tail, quoted, or "" when there was none.
func (t *tailBuffer) String() string {
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	if t.truncated {
		return ": stderr (last " + strconv.Itoa(stderrTail) + " bytes): " + strconv.Quote(s)
	}
	return ": stderr: " + strconv.Quote(s)
}
