// Package runcmd is `baton run`: it takes a job's lease, runs a command
// below supervise's guard while it holds it, and reports how that ended.
//
// It lives apart from package main so that the run of the common case, the
// local store, can start from an early init (package runinit) before the
// rest of the binary initialises: a run needs flock, supervise and uuid, not
// the PostgreSQL driver, SQLite, Prometheus or NATS, whose initialisation
// would otherwise cost more than the run itself (docs/BENCHMARKS.md,
// "`baton run` against `flock -n`"). cmd/baton's `run` goes through the
// same Options.Run with the store its flags open.
package runcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/hold"
	"github.com/batonhq/baton/supervise"
)

// Help is `baton run --help` before its flags.
const Help = `
Usage: baton run [flags] JOB -- COMMAND [ARGS…]

Runs COMMAND while holding the lease of JOB, so that it never runs twice at
once: on this host with the local store (the default), or on every host that
uses the same PostgreSQL database (--db or BATON_DB). A drop-in for
"flock -n LOCKFILE COMMAND" in crontabs and timers:

  */5 * * * * baton run report -- /usr/local/bin/report --daily

The command runs in its own process group with stdin, stdout and stderr
passed through, and with these in its environment:

  BATON_JOB            the job's name
  BATON_FENCING_TOKEN  this run's token: greater than every earlier run's
  BATON_RUN_ID         this run's unique ID (a UUID)
  BATON_LEASE_TTL      the lease's TTL, e.g. 30s
  BATON_DB             the PostgreSQL store in use, without its password
                       (and no PGPASSWORD) unless --pass-db-password

The command runs below a guard process that baton starts: a child subreaper,
so every process of the command's tree, even one that double-forks or calls
setsid, stays a descendant of baton's. The lease is held until the whole tree
has exited (--strays), and if baton is killed, the guard kills the tree
before the lock is released. The lock's descriptor is never inherited by the
command.

The lease is renewed about every TTL/3. If no renewal succeeds in time (the
store is unreachable, or the lease was taken over), baton sends TERM to the
command's group, KILL after --kill-after, and exits 76: the group is stopped
before the store can grant the lease to anyone else. INT, TERM, HUP and QUIT
sent to baton are passed to the group. When the command ends, the lease is
released at once.

Exit status:
  the command's own   it ran (128+N if signal N ended it; 127 not found, 126 not runnable)
  75                  not run: the lease is held elsewhere (--busy-exit-code)
  64                  usage error: bad flag, job name or argument
  69                  the store is unavailable (unreachable, refused, too many clients)
  70                  internal error
  76                  the lease was lost while the command ran; it was stopped
  124                 --max-run passed; the command's tree was stopped
  (77 from the command, e.g. from baton put, is recorded as outcome "fenced")

--json-result FILE appends one JSON line per run (FILE "-" is stderr):
  {"job", "run_id", "token", "outcome", "exit_code", "started_at",
   "duration_ms", "strays", "store", "scope", "error"}
with outcome one of succeeded, failed, fenced, skipped-overlap,
lost-lease, timed-out, error.

Examples:
  # run report under its job's lease; exit 75 at once while another run holds it
  baton run report -- /usr/local/bin/report --daily

  # wait up to 10 minutes for the lease, and stop the report after an hour
  baton run --wait 10m --max-run 1h report -- /usr/local/bin/report --daily

  # one lease for every host that uses the database
  baton run --db postgres://db1/app report -- /usr/local/bin/report --daily
`

// Options are `baton run`'s own flags; the store's are its caller's.
type Options struct {
	Wait      time.Duration
	TTL       time.Duration
	KillAfter time.Duration
	BusyCode  int
	Quiet     bool
	Strays    string
	MaxRun    time.Duration
	Result    string
	Password  bool
	// Notify is the sink a failed run's notification goes to (--notify);
	// cmd/baton sends it (the early path leaves such runs to it).
	Notify string

	last *Report // the run's report, once finish has it
}

// Register defines the flags of Options in fs.
func (o *Options) Register(fs *flag.FlagSet) {
	DurationVar(fs, &o.Wait, "wait", 0, "wait up to `DURATION` for the lease instead of giving up at once")
	DurationVar(fs, &o.TTL, "ttl", 30*time.Second, "lease `TTL`, judged by the store's clock; renewed about every TTL/3")
	DurationVar(fs, &o.KillAfter, "kill-after", 10*time.Second, "after TERM, wait `DURATION` before KILL (at most TTL/3)")
	fs.IntVar(&o.BusyCode, "busy-exit-code", baton.ExitBusy, "exit status when the lease is held elsewhere (0-255)")
	fs.BoolVar(&o.Quiet, "quiet", false, "say nothing when the lease is busy, as flock -n (by default one line on stderr, which cron mails)")
	fs.StringVar(&o.Strays, "strays", "wait", "processes the command leaves running when it exits: wait (hold the lease until they exit), kill (TERM, then KILL after --kill-after) or report (release at once)")
	DurationVar(fs, &o.MaxRun, "max-run", 0, "stop the command's whole tree after `DURATION` and exit 124 (0: no limit)")
	fs.StringVar(&o.Result, "json-result", "", "append a JSON line describing the run to `FILE` (- for stderr)")
	fs.StringVar(&o.Notify, "notify", "", "when the run fails, send a notification to `SINK` (as baton relay's --sink) through the store's outbox (docs/NOTIFY.md)")
	PasswordVar(fs, &o.Password)
}

// PasswordVar defines --pass-db-password, of the commands that run jobs.
func PasswordVar(fs *flag.FlagSet, p *bool) {
	fs.BoolVar(p, "pass-db-password", false, "give the command the store's password: BATON_DB as given, and PGPASSWORD (default: BATON_DB without its password, no PGPASSWORD)")
}

// Validate checks the words before "--" (pos), where "--" was (sep, -1
// if absent) and the command after it, against the options.
func (o *Options) Validate(pos []string, sep int, command []string) error {
	switch {
	case len(pos) == 0:
		return baton.Invalid("JOB", "missing: want baton run [flags] JOB -- COMMAND [ARGS…]")
	case sep < 0:
		return baton.Invalid("--", "missing between JOB and COMMAND: want baton run [flags] JOB -- COMMAND [ARGS…]")
	case len(pos) > 1:
		return baton.Invalid("JOB", "want one job name before --, got %d words: %s", len(pos), strings.Join(pos, " "))
	case len(command) == 0 || command[0] == "":
		return baton.Invalid("COMMAND", "missing after --")
	case o.TTL <= 0:
		return baton.Invalid("--ttl", "must be positive, got %s", o.TTL)
	case o.TTL < 100*time.Millisecond:
		return baton.Invalid("--ttl", "must be at least 100ms, got %s", o.TTL)
	case o.KillAfter < 0:
		return baton.Invalid("--kill-after", "must not be negative, got %s", o.KillAfter)
	case o.Wait < 0:
		return baton.Invalid("--wait", "must not be negative, got %s", o.Wait)
	case o.BusyCode < 0 || o.BusyCode > 255:
		return baton.Invalid("--busy-exit-code", "must be 0-255, got %d", o.BusyCode)
	case o.Strays != "wait" && o.Strays != "kill" && o.Strays != "report":
		return baton.Invalid("--strays", "%q: want wait, kill or report", o.Strays)
	case o.MaxRun < 0:
		return baton.Invalid("--max-run", "must not be negative, got %s", o.MaxRun)
	}
	return baton.ValidateJobName(pos[0])
}

// Streams are the run's standard streams, passed through to the command,
// and when this baton process started (recorded as the holder's start
// time, so that a reused pid is not mistaken for the holder).
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Started        time.Time
}

// Store is an open store as a run uses it.
type Store struct {
	Leaser baton.Leaser
	Close  func()
	// Verbose says which store and scope are in use, and the token.
	Verbose bool
	// Environ is the command's environment (see Environ).
	Environ []string
	// Retry calls try until it succeeds or fails for good; cmd/baton's
	// retries an unavailable store for --db-wait, saying so on stderr.
	Retry func(ctx context.Context, what string, try func() error) error
}

// Run runs command under job's lease in the store that open opens, appends
// the --json-result line, and returns what ends baton: an ExitError with
// the command's status (or 75, 76, 124, 128+n), or the error that stopped
// the run before its command started.
func (o *Options) Run(ctx context.Context, job string, command []string, s Streams, open func(context.Context) (*Store, error)) error {
	rep := newReport(job)
	err := o.run(ctx, job, command, s, open, rep)
	return o.finish(rep, s.Stderr, err)
}

// Last is the report of the run Run ran (nil before).
func (o *Options) Last() *Report { return o.last }

// finish ends rep with err and appends its --json-result line, if asked
// for.
func (o *Options) finish(rep *Report, stderr io.Writer, err error) error {
	rep.end(err)
	o.last = rep
	if o.Result != "" {
		if werr := rep.write(o.Result, stderr, err); werr != nil {
			fmt.Fprintf(stderr, "baton: warning: --json-result: %v\n", werr)
		}
	}
	return err
}

func (o *Options) run(ctx context.Context, job string, command []string, s Streams, open func(context.Context) (*Store, error), rep *Report) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := open(ctx)
	if err != nil {
		return stopped(ctx, s.Stderr, job, err)
	}
	defer st.Close()
	info := st.Leaser.Info()
	rep.Store, rep.Scope = info.Kind, info.Scope
	if st.Verbose {
		fmt.Fprintf(s.Stderr, "baton: store %s at %s, scope %s\n", info.Kind, info.Location, info.Scope)
	}

	owner, err := newOwner()
	if err != nil {
		return stopped(ctx, s.Stderr, job, &baton.Error{Code: baton.EINTERNAL, Message: "a run ID: " + err.Error()})
	}
	host, _ := os.Hostname()
	req := baton.AcquireRequest{
		Job: job, TTL: o.TTL, Owner: owner, Host: host, PID: os.Getpid(),
		Argv: command, StartedAt: s.Started,
	}
	var grant baton.Grant
	var sent time.Time
	begun := time.Now()
	err = st.Retry(ctx, "taking the lease", func() error {
		var err error
		grant, sent, err = hold.Acquire(ctx, st.Leaser, req, o.Wait)
		// An acquisition whose answer was lost (the connection broke after
		// the commit) shows up on the retry as busy with our own owner: the
		// term is ours.
		if err == nil && grant.Busy() && grant.Holder != nil && grant.Holder.Owner == req.Owner {
			grant = baton.Grant{Term: &baton.Term{Job: req.Job, Owner: req.Owner, Token: grant.Holder.Token, TTL: req.TTL, Until: grant.Holder.Until}}
			// The term began at a lost attempt: trust it only from the
			// first one sent (the supervisor renews before starting).
			sent = begun
		}
		return err
	})
	if err != nil {
		return stopped(ctx, s.Stderr, job, err)
	}
	if e, ok := InterruptedStatus(ctx); ok && grant.Busy() {
		return stopped(ctx, s.Stderr, job, e)
	}
	if grant.Busy() {
		rep.Outcome = baton.OutcomeSkippedOverlap
		if !o.Quiet {
			fmt.Fprintf(s.Stderr, "baton: job %s not run: its lease is held%s\n", job, describeHolder(grant.Holder))
		}
		return ExitError{o.BusyCode}
	}
	rep.RunID, rep.Token = grant.Term.Owner, grant.Term.Token
	if st.Verbose {
		fmt.Fprintf(s.Stderr, "baton: job %s acquired, token %d, run %s\n", job, grant.Term.Token, grant.Term.Owner)
	}

	sup := &supervise.Supervisor{
		Leaser: st.Leaser, KillAfter: o.KillAfter, Strays: o.Strays, MaxRun: o.MaxRun,
		Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr,
		Env: st.Environ,
		// baton run has no other children: whatever its guard leaves behind
		// if it dies is the run's, and is killed before the lease is released.
		AdoptOrphans: true,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(s.Stderr, "baton: "+format+"\n", args...)
		},
	}
	// Signals reach the command through the supervisor's own forwarding;
	// main's signal-cancelled ctx must not deliver them a second time.
	res := sup.Run(context.WithoutCancel(ctx), grant.Term, sent, command)
	rep.ExitCode, rep.Strays = &res.ExitCode, res.Strays
	switch {
	case res.LeaseLost != nil:
		rep.Outcome = baton.OutcomeLostLease
		fmt.Fprintf(s.Stderr, "baton: lease lost: %v; the command was stopped (its status was %d)\n", res.LeaseLost, res.ExitCode)
		return ExitError{baton.ExitLeaseLost}
	case res.TimedOut:
		rep.Outcome = baton.OutcomeTimedOut
		fmt.Fprintf(s.Stderr, "baton: job %s ran past --max-run %s; its tree was stopped (its status was %d)\n", job, o.MaxRun, res.ExitCode)
		return ExitError{baton.ExitTimedOut}
	case res.ExitCode == 0:
		rep.Outcome = baton.OutcomeSucceeded
	case res.ExitCode == baton.ExitUnknown:
		// baton http (or any tool that follows baton's exit statuses): the
		// far side may or may not have done it.
		rep.Outcome = baton.OutcomeUnknown
	case res.ExitCode == baton.ExitFenced:
		// The command's write was refused by a fence (baton put, or any
		// tool that follows baton's exit statuses): a newer term exists.
		rep.Outcome = baton.OutcomeFenced
	default:
		rep.Outcome = baton.OutcomeFailed
	}
	if res.ReleaseErr != nil {
		fmt.Fprintf(s.Stderr, "baton: warning: could not release the lease of %s (token %d); it expires by itself: %v\n", job, grant.Term.Token, res.ReleaseErr)
	}
	return ExitError{res.ExitCode}
}

// stopped is the error of a run that ended before its command started:
// err, unless a signal to baton ended it (while it opened the store or
// waited for the lease); then it says so and exits 128+n, as a shell
// reports a process that signal ended, never busy (75) or unavailable (69).
func stopped(ctx context.Context, stderr io.Writer, job string, err error) error {
	e, ok := InterruptedStatus(ctx)
	if !ok {
		return err
	}
	fmt.Fprintf(stderr, "baton: job %s not run: %v before its lease was taken\n", job, context.Cause(ctx))
	return e
}

func describeHolder(h *baton.Holder) string {
	if h == nil || h.Token == 0 && h.PID == 0 {
		// Locked, but not by baton: flock(1) on the same file, say.
		return " by a process that did not record itself (not baton?); baton leases shows who has the lock file open"
	}
	s := fmt.Sprintf(" by %s pid %d (token %d", h.Host, h.PID, h.Token)
	if !h.AcquiredAt.IsZero() {
		s += ", since " + h.AcquiredAt.UTC().Format(time.RFC3339)
	}
	if !h.Until.IsZero() {
		s += ", until " + h.Until.UTC().Format(time.RFC3339)
	}
	return s + ")"
}
