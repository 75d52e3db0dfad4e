package runcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/batonhq/baton"
	"golang.org/x/sys/unix"
)

// ExitError ends baton with a given status and no message of its own, as
// when `baton run` passes on its command's status.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Interrupted is the cause of a context cancelled by a signal to baton.
type Interrupted struct{ Signal syscall.Signal }

func (i Interrupted) Error() string { return "interrupted by " + unix.SignalName(i.Signal) }

// NotifyContext is signal.NotifyContext with a cause that names the signal
// (Interrupted), so that a command stopped by it exits 128+n, as a shell
// reports a process that a signal ended.
func NotifyContext(parent context.Context, sigs ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	c := make(chan os.Signal, 1)
	signal.Notify(c, sigs...)
	go func() {
		select {
		case sig := <-c:
			cancel(Interrupted{sig.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(c); cancel(nil) }
}

// InterruptedStatus returns the exit status for a ctx cancelled by a signal
// to baton, and whether it was.
func InterruptedStatus(ctx context.Context) (ExitError, bool) {
	var i Interrupted
	if errors.As(context.Cause(ctx), &i) {
		return ExitError{128 + int(i.Signal)}, true
	}
	return ExitError{}, false
}

// Status prints err of command name once, on one line, and returns the
// exit status for it: an ExitError's code, 0 for help, else the status of
// err's code (64 with a pointer to --help for an invalid input).
func Status(stderr io.Writer, name string, err error) int {
	if err == nil {
		return baton.ExitOK
	}
	var exit ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	if errors.Is(err, flag.ErrHelp) {
		return baton.ExitOK
	}
	fmt.Fprintf(stderr, "baton %s: %s\n", name, OneLine(err.Error()))
	if baton.ErrorCode(err) == baton.EINVALID {
		fmt.Fprintf(stderr, "Run 'baton %s --help' for usage.\n", name)
	}
	return baton.ExitStatus(err)
}

// OneLine joins the lines of an error's text with a space, without the
// indentation of the lines after the first: pgx puts each address it tried
// on a line of its own, indented by a tab. Spaces within a line are kept
// (a quoted job name may hold several).
func OneLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = strings.TrimLeft(lines[i], " \t")
	}
	return strings.Join(lines, " ")
}
