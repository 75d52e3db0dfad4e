// Command baton runs scheduled jobs once, and only once, on one host or across
// a fleet. This package only wires: each subcommand is a type in a file of its
// own, with Run(ctx, args) writing to the streams it is given.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/runcmd"
	// A run with the local store starts here, before the rest of baton
	// initialises (see the package's doc).
	_ "github.com/batonhq/baton/internal/runcmd/runinit"
	"github.com/batonhq/baton/supervise"
	// The guard of each run starts here, before the rest of baton
	// initialises (see the package's doc).
	_ "github.com/batonhq/baton/supervise/guardinit"
)

func main() {
	ctx, stop := notifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, LookupEnv: os.LookupEnv}))
}

// Interrupted is the cause of a context cancelled by a signal to baton.
type Interrupted = runcmd.Interrupted

// notifyContext is signal.NotifyContext with a cause that names the signal
// (Interrupted), so that a command stopped by it exits 128+n, as a shell
// reports a process that a signal ended.
func notifyContext(parent context.Context, sigs ...os.Signal) (context.Context, func()) {
	return runcmd.NotifyContext(parent, sigs...)
}

// interrupted returns the exit status for a ctx cancelled by a signal to
// baton, and whether it was.
func interrupted(ctx context.Context) (ExitError, bool) {
	e, ok := runcmd.InterruptedStatus(ctx)
	return ExitError{e.Code}, ok
}

// Env is what a subcommand may touch of the outside world.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// LookupEnv tells a variable set but empty from one unset; Getenv's
	// answer (set when not empty) stands in when it is nil.
	LookupEnv func(string) (string, bool)
	// Started is when this baton process started, recorded as the holder's
	// start time so that a reused pid is not mistaken for the holder.
	Started time.Time
}

func (e *Env) lookupEnv(name string) (string, bool) {
	if e.LookupEnv != nil {
		return e.LookupEnv(name)
	}
	v := e.Getenv(name)
	return v, v != ""
}

// Command is one subcommand.
type Command interface {
	Run(ctx context.Context, args []string) error
}

// ExitError ends baton with a given status and no message of its own, as
// when `baton put` passes on its command's status (`baton run`'s is
// runcmd.ExitError).
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

var commands = []struct {
	name, synopsis string
	make           func(*Env) Command
}{
	{"run", "run a command under a job's lease (a drop-in for flock -n)", func(e *Env) Command { return &RunCommand{env: e} }},
	{"leases", "list every lease with its holder, token and expiry", func(e *Env) Command { return &LeasesCommand{env: e} }},
	{"put", "write stdin to a file only if this run's fencing token is current", func(e *Env) Command { return &PutCommand{env: e} }},
	{"fence", "show or reset a resource's fencing high-water mark", func(e *Env) Command { return &FenceCommand{env: e} }},
	{"http", "send an HTTP write with an idempotency key, retrying it with the same key", func(e *Env) Command { return &HTTPCommand{env: e} }},
	{"migrate", "apply baton's schema migrations (PostgreSQL, or the local store's baton.db) and check its version", func(e *Env) Command { return &MigrateCommand{env: e} }},
	{"bench", "measure the outbox relay, schedule claims, leases and fences (bench outbox|claims|leases|fence)", func(e *Env) Command { return &BenchCommand{env: e} }},
	{"doctor", "check the lock directory (doctor local) or a PostgreSQL server's connection budget (doctor pg)", func(e *Env) Command { return &DoctorCommand{env: e} }},
	{"setup", "one-time set-up as root: the group and lock directory that users of baton share (setup local)", func(e *Env) Command { return &SetupCommand{env: e} }},
	{"next", "print the next fire times of a cron schedule", func(e *Env) Command { return &NextCommand{env: e} }},
	{"daemon", "run the jobs of a job file on their schedules", func(e *Env) Command { return &DaemonCommand{env: e} }},
	{"validate", "check a job file", func(e *Env) Command { return &ValidateCommand{env: e} }},
	{"import", "print a job file that runs a crontab's lines as cron does (import crontab)", func(e *Env) Command { return &ImportCommand{env: e} }},
	{"jobs", "list scheduled jobs: next tick, last outcome, drift", func(e *Env) Command { return &JobsCommand{env: e} }},
	{"status", "the dashboard's overview in the terminal: jobs, overdue, daemons, leases", func(e *Env) Command { return &StatusCommand{env: e} }},
	{"runs", "list recorded ticks and their outcomes", func(e *Env) Command { return &RunsCommand{env: e} }},
	{"logs", "print a job's output as the store keeps it (the last 4 KiB of a tick)", func(e *Env) Command { return &LogsCommand{env: e} }},
	{"trigger", "run a job now, through the daemons", func(e *Env) Command { return &TriggerCommand{env: e} }},
	{"pause", "stop scheduling a job", func(e *Env) Command { return &PauseCommand{env: e} }},
	{"resume", "schedule a paused job again", func(e *Env) Command { return &PauseCommand{env: e, resume: true} }},
	{"backfill", "record past ticks of a job for the daemons to run", func(e *Env) Command { return &BackfillCommand{env: e} }},
	{"relay", "deliver the outbox's events to a sink (webhook, NATS, command)", func(e *Env) Command { return &RelayCommand{env: e} }},
	{"outbox", "enqueue events, see the backlog, retry or skip dead events", func(e *Env) Command { return &OutboxCommand{env: e} }},
	{"notify", "send a run notification read from stdin as mail, a Slack message or text (an exec sink)", func(e *Env) Command { return &NotifyCommand{env: e} }},
	{"completion", "print a shell's completion script (completion bash|zsh|fish)", func(e *Env) Command { return &CompletionCommand{env: e} }},
	{"man", "write baton's man pages, made from the same help as --help", func(e *Env) Command { return &ManCommand{env: e} }},
	{"version", "print baton's version", func(e *Env) Command { return &VersionCommand{env: e} }},
}

// Main runs baton with args (without the program name) and returns its exit
// status. Errors are reported here, once.
func Main(ctx context.Context, args []string, env *Env) int {
	if env.Started.IsZero() {
		env.Started = time.Now()
	}
	if len(args) >= 2 && args[0] == "help" && args[1] != supervise.GuardCommand {
		// baton help CMD is baton CMD --help.
		args = []string{args[1], "--help"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stdout)
		if len(args) == 0 {
			return baton.ExitUsage
		}
		return baton.ExitOK
	}
	if args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	if args[0] == supervise.GuardCommand {
		return supervise.GuardMain(args[1:])
	}
	for _, c := range commands {
		if c.name == args[0] {
			return report(env.Stderr, c.name, c.make(env).Run(ctx, args[1:]))
		}
	}
	fmt.Fprintf(env.Stderr, "baton: unknown command %q\nRun 'baton --help' for the list of commands.\n", args[0])
	return baton.ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `baton runs scheduled jobs once, and only once, on one host or across a fleet.

Usage:
  baton COMMAND [flags] [arguments]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.synopsis)
	}
	fmt.Fprint(w, `
Store: the local store (flock files, one host) unless --db or BATON_DB
names a PostgreSQL database (postgres://… URL, or host=… dbname=…).

Run 'baton help COMMAND' (or 'baton COMMAND --help') for a command's flags
and exit statuses.

Examples:
  # run report under its job's lease, at most once at a time (as flock -n)
  baton run report -- /usr/local/bin/report --daily

  # run the jobs of a job file on their schedules
  baton daemon --config /etc/baton/jobs.yaml

  # the jobs, their next tick and last outcome
  baton jobs
`)
}

// report prints err once, on one line, and returns the exit status for it.
func report(stderr io.Writer, name string, err error) int {
	var exit ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return runcmd.Status(stderr, name, err)
}
