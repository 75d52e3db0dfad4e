package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/supervise"
	"github.com/google/uuid"
)

const runHelp = `
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
`

// RunCommand is `baton run`.
type RunCommand struct {
	env   *Env
	store storeFlags

	wait      time.Duration
	ttl       time.Duration
	killAfter time.Duration
	busyCode  int
	quiet     bool
	strays    string
	maxRun    time.Duration
	result    string
	password  bool
}

// Run parses args, takes the lease and supervises the command.
func (c *RunCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("run", c.env.Stdout, runHelp)
	c.store.register(fs)
	durationFlag(fs, &c.wait, "wait", 0, "wait up to `DURATION` for the lease instead of giving up at once")
	durationFlag(fs, &c.ttl, "ttl", 30*time.Second, "lease `TTL`, judged by the store's clock; renewed about every TTL/3")
	durationFlag(fs, &c.killAfter, "kill-after", 10*time.Second, "after TERM, wait `DURATION` before KILL (at most TTL/3)")
	fs.IntVar(&c.busyCode, "busy-exit-code", baton.ExitBusy, "exit status when the lease is held elsewhere (0-255)")
	fs.BoolVar(&c.quiet, "quiet", false, "say nothing when the lease is busy")
	fs.StringVar(&c.strays, "strays", "wait", "processes the command leaves running when it exits: wait (hold the lease until they exit), kill (TERM, then KILL after --kill-after) or report (release at once)")
	durationFlag(fs, &c.maxRun, "max-run", 0, "stop the command's whole tree after `DURATION` and exit 124 (0: no limit)")
	fs.StringVar(&c.result, "json-result", "", "append a JSON line describing the run to `FILE` (- for stderr)")
	passwordFlag(fs, &c.password)

	// Everything after the first "--" is the command, never flags.
	sep := slices.Index(args, "--")
	var command []string
	if sep >= 0 {
		command = args[sep+1:]
		args = args[:sep]
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := c.validate(pos, sep, command); err != nil {
		return err
	}
	job := pos[0]
	rep := &runReport{Job: job, StartedAt: time.Now().UTC(), start: time.Now()}
	err = c.run(ctx, job, command, rep)
	if c.result != "" {
		if werr := rep.write(c.result, c.env.Stderr, err); werr != nil {
			fmt.Fprintf(c.env.Stderr, "baton: warning: --json-result: %v\n", werr)
		}
	}
	return err
}

func (c *RunCommand) run(ctx context.Context, job string, command []string, rep *runReport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.store.open(ctx, c.env, "run", true)
	if err != nil {
		return c.stopped(ctx, job, err)
	}
	defer st.close()
	info := st.leaser.Info()
	rep.Store, rep.Scope = info.Kind, info.Scope
	if c.store.verbose {
		fmt.Fprintf(c.env.Stderr, "baton: store %s at %s, scope %s\n", info.Kind, info.Location, info.Scope)
	}

	host, _ := os.Hostname()
	req := baton.AcquireRequest{
		Job: job, TTL: c.ttl, Owner: uuid.NewString(), Host: host, PID: os.Getpid(),
		Argv: command, StartedAt: c.env.Started,
	}
	var grant baton.Grant
	var sent time.Time
	begun := time.Now()
	err = c.store.retryUnavailable(ctx, c.env, "taking the lease", func() error {
		var err error
		grant, sent, err = acquire(ctx, st.leaser, req, c.wait)
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
		return c.stopped(ctx, job, err)
	}
	if e, ok := interrupted(ctx); ok && grant.Busy() {
		return c.stopped(ctx, job, e)
	}
	if grant.Busy() {
		rep.Outcome = baton.OutcomeSkippedOverlap
		if !c.quiet {
			fmt.Fprintf(c.env.Stderr, "baton: job %s not run: its lease is held%s\n", job, describeHolder(grant.Holder))
		}
		return ExitError{c.busyCode}
	}
	rep.RunID, rep.Token = grant.Term.Owner, grant.Term.Token
	if c.store.verbose {
		fmt.Fprintf(c.env.Stderr, "baton: job %s acquired, token %d, run %s\n", job, grant.Term.Token, grant.Term.Owner)
	}

	sup := &supervise.Supervisor{
		Leaser: st.leaser, KillAfter: c.killAfter, Strays: c.strays, MaxRun: c.maxRun,
		Stdin: c.env.Stdin, Stdout: c.env.Stdout, Stderr: c.env.Stderr,
		Env: c.store.jobEnviron(c.env, c.password),
		// baton run has no other children: whatever its guard leaves behind
		// if it dies is the run's, and is killed before the lease is released.
		AdoptOrphans: true,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(c.env.Stderr, "baton: "+format+"\n", args...)
		},
	}
	// Signals reach the command through the supervisor's own forwarding;
	// main's signal-cancelled ctx must not deliver them a second time.
	res := sup.Run(context.WithoutCancel(ctx), grant.Term, sent, command)
	rep.ExitCode, rep.Strays = &res.ExitCode, res.Strays
	switch {
	case res.LeaseLost != nil:
		rep.Outcome = baton.OutcomeLostLease
		fmt.Fprintf(c.env.Stderr, "baton: lease lost: %v; the command was stopped (its status was %d)\n", res.LeaseLost, res.ExitCode)
		return ExitError{baton.ExitLeaseLost}
	case res.TimedOut:
		rep.Outcome = baton.OutcomeTimedOut
		fmt.Fprintf(c.env.Stderr, "baton: job %s ran past --max-run %s; its tree was stopped (its status was %d)\n", job, c.maxRun, res.ExitCode)
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
		fmt.Fprintf(c.env.Stderr, "baton: warning: could not release the lease of %s (token %d); it expires by itself: %v\n", job, grant.Term.Token, res.ReleaseErr)
	}
	return ExitError{res.ExitCode}
}

// stopped is the error of a run that ended before its command started:
// err, unless a signal to baton ended it (while it opened the store or
// waited for the lease); then it says so and exits 128+n, as a shell
// reports a process that signal ended, never busy (75) or unavailable (69).
func (c *RunCommand) stopped(ctx context.Context, job string, err error) error {
	e, ok := interrupted(ctx)
	if !ok {
		return err
	}
	fmt.Fprintf(c.env.Stderr, "baton: job %s not run: %v before its lease was taken\n", job, context.Cause(ctx))
	return e
}

func (c *RunCommand) validate(pos []string, sep int, command []string) error {
	switch {
	case len(pos) == 0:
		return baton.Invalid("JOB", "missing: want baton run [flags] JOB -- COMMAND [ARGS…]")
	case sep < 0:
		return baton.Invalid("--", "missing between JOB and COMMAND: want baton run [flags] JOB -- COMMAND [ARGS…]")
	case len(pos) > 1:
		return baton.Invalid("JOB", "want one job name before --, got %d words: %s", len(pos), strings.Join(pos, " "))
	case len(command) == 0 || command[0] == "":
		return baton.Invalid("COMMAND", "missing after --")
	case c.ttl <= 0:
		return baton.Invalid("--ttl", "must be positive, got %s", c.ttl)
	case c.ttl < 100*time.Millisecond:
		return baton.Invalid("--ttl", "must be at least 100ms, got %s", c.ttl)
	case c.killAfter < 0:
		return baton.Invalid("--kill-after", "must not be negative, got %s", c.killAfter)
	case c.wait < 0:
		return baton.Invalid("--wait", "must not be negative, got %s", c.wait)
	case c.busyCode < 0 || c.busyCode > 255:
		return baton.Invalid("--busy-exit-code", "must be 0-255, got %d", c.busyCode)
	case c.strays != "wait" && c.strays != "kill" && c.strays != "report":
		return baton.Invalid("--strays", "%q: want wait, kill or report", c.strays)
	case c.maxRun < 0:
		return baton.Invalid("--max-run", "must not be negative, got %s", c.maxRun)
	}
	return baton.ValidateJobName(pos[0])
}

// acquire tries for the lease until it is granted or wait has passed,
// backing off from 50ms to 2s with jitter so that waiters do not hammer the
// store in step. It returns the grant and the send time of the request that
// won it, from which the holder's trust window runs.
func acquire(ctx context.Context, l baton.Leaser, req baton.AcquireRequest, wait time.Duration) (baton.Grant, time.Time, error) {
	deadline := time.Now().Add(wait)
	backoff := 50 * time.Millisecond
	for {
		sent := time.Now()
		grant, err := l.Acquire(ctx, req)
		if err != nil || !grant.Busy() {
			return grant, sent, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return grant, sent, nil
		}
		sleep := min(backoff/2+rand.N(backoff/2+1), left)
		select {
		case <-ctx.Done():
			return grant, sent, nil
		case <-time.After(sleep):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
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
