package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/backoff"
	"github.com/batonhq/baton/internal/hold"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/supervise"
	"github.com/google/uuid"
)

// Scheduled Go functions: a service registers jobs in code (Func), each
// with a func(ctx) error, and runs a Daemon in-process (New, Run). Any
// number of replicas of the service share the store, with each other and
// with the daemons of job files: each tick runs once, under the job's lease,
// with the outcomes, retries, notifications and history of a command.
//
// A function's job is stored with Job.Func, the service's name, and no
// command. A daemon claims its ticks only if it is a daemon of that service
// (the claim queries compare the service) and registered the function (the
// claim leaves the others to the replicas that did); a job file's daemon
// claims no function, and a service's daemon no command. Older daemons
// leave such a job alone: it needs feature level 4.
//
// The function's ctx carries the term (lease.Term, lease.Token) and the
// tick's idempotency key (lease.IdempotencyKey), the same on every retry.
// It is cancelled, with a cause, when the term's trust window ends (code
// baton.ELEASELOST: the same rule and code as a command's, internal/hold, on
// the monotonic clock; its Err reads the clock, as lease.Run's fn's does),
// at the job's timeout (its deadline), when a newer tick replaces the run
// (overlap replace), and when the daemon stops. A function that has not
// returned when its lease may be granted to another (kill_after after a
// timeout or a stop; the term's expiry after a loss) has outlived its
// lease: Go cannot stop it, so the daemon records the attempt lost-lease,
// counts it (FuncObserver), keeps the lease unreleased, and moves on. Only
// a fence (the token in ctx) keeps such a function's late writes out.

// FuncConfig is the start of the Config a service's daemon registers:
// "go:" and the service's name. Status shows it where a job file's daemon
// shows its file.
const FuncConfig = "go:"

// FuncObserver is an Observer that is also told of scheduled Go functions
// that outlived their lease (package metrics: baton_func_outlived_total).
type FuncObserver interface {
	// FuncOutlived: an attempt of job, a Go function, did not return when
	// its lease could no longer be trusted; it may still run.
	FuncOutlived(job string)
}

// funcSet is what a service registered with Func.
type funcSet struct {
	service string
	jobs    []baton.Job
	fns     map[string]func(ctx context.Context) error
	sealed  bool // Publish began: no more Func
	done    bool // Publish succeeded
}

// New returns a daemon for the Go service named service: register its
// jobs with Func, then Run it. Each replica of the service makes its own,
// on the same store. It runs only the functions it registered, never a
// job file's commands; the fields that New sets (ID, Host, Config, Log)
// may be changed before Run.
func New(store *Store, leaser baton.Leaser, service string) *Daemon {
	host, _ := os.Hostname()
	return &Daemon{
		Store: store, Leaser: leaser, Host: host, ID: host + "-" + uuid.NewString()[:8],
		Config: FuncConfig + service, Log: slog.Default(),
		fx: &funcSet{service: service, fns: map[string]func(ctx context.Context) error{}},
	}
}

// Func registers fn as the work of job j, on the schedule and with the
// policies j says (as a job file's entry would, less what a command has:
// command, shell, stdin, env, dir, output). Call it before Run; every
// replica of the service registers the same jobs. Errors name the field
// at fault (code baton.EINVALID).
func (d *Daemon) Func(j baton.Job, fn func(ctx context.Context) error) error {
	if d.fx == nil {
		return baton.Invalid("daemon", "Func needs a daemon made by scheduler.New (a job file's daemon runs commands)")
	}
	if d.fx.sealed {
		return baton.Invalid("job", "%s: Func is called before Publish and Run", j.Name)
	}
	if fn == nil {
		return baton.Invalid("fn", "job %s: the function is nil", j.Name)
	}
	if err := baton.ValidateJobName(j.Name); err != nil {
		return err
	}
	if _, ok := d.fx.fns[j.Name]; ok {
		return baton.Invalid("job", "%s is registered twice", j.Name)
	}
	if err := checkFuncJob(j); err != nil {
		return fmt.Errorf("job %s: %w", j.Name, err)
	}
	j.Func = d.fx.service
	if _, err := Compile(j); err != nil {
		return fmt.Errorf("job %s: %w", j.Name, err)
	}
	d.fx.jobs = append(d.fx.jobs, j)
	d.fx.fns[j.Name] = fn
	return nil
}

// checkFuncJob checks what a job file's parser would check of a function's
// job: no command, and policies that exist.
func checkFuncJob(j baton.Job) error {
	no := func(field string, set bool) error {
		if set {
			return baton.Invalid(field, "a Go function's job has no %s (its work is the function)", field)
		}
		return nil
	}
	var ds []string
	for name, v := range map[string]baton.Duration{"ttl": j.TTL, "timeout": j.Timeout, "kill_after": j.KillAfter, "jitter": j.Jitter,
		"catchup.window": j.Catchup.Window, "retries.backoff": j.Retries.Backoff, "retries.max_backoff": j.Retries.MaxBackoff,
		"history.max_age": j.History.MaxAge, "key_retention": j.KeyRetention} {
		if v < 0 {
			ds = append(ds, name)
		}
	}
	slices.Sort(ds)
	j = j.WithDefaults()
	var bad []error
	bad = append(bad, no("command", len(j.Command) > 0), no("shell", j.Shell), no("stdin", j.Stdin != ""),
		no("env", len(j.Env) > 0), no("dir", j.Dir != ""), no("output", j.Output != ""),
		no("user", j.User != ""), no("group", j.Group != ""))
	// A function runs once per tick across the service's replicas: a
	// host's own instances and @reboot are a job file's (per host, at a
	// daemon's start).
	if j.Scope != "" && j.Scope != baton.ScopeFleet {
		bad = append(bad, baton.Invalid("scope", "%q: a Go function runs once per tick across the service's replicas; scope: host is for job files", j.Scope))
	}
	if isReboot(j) {
		bad = append(bad, baton.Invalid("schedule", "@reboot is for job files (once per daemon start on each host); a Go function runs at its startup in your own code"))
	}
	if len(ds) > 0 {
		bad = append(bad, baton.Invalid(ds[0], "is negative"))
	}
	switch j.Overlap.Policy {
	case baton.OverlapSkip, baton.OverlapQueueOne, baton.OverlapReplace:
	case baton.OverlapAllow:
		if j.Overlap.Allow < 2 {
			bad = append(bad, baton.Invalid("overlap.allow", "%d: allow needs at least 2 runs at once", j.Overlap.Allow))
		}
	default:
		bad = append(bad, baton.Invalid("overlap.policy", "%q: want skip, queue-one, replace or allow", j.Overlap.Policy))
	}
	switch j.Catchup.Policy {
	case baton.CatchupSkip, baton.CatchupLatest, baton.CatchupAll:
	default:
		bad = append(bad, baton.Invalid("catchup.policy", "%q: want skip, latest or all", j.Catchup.Policy))
	}
	if j.Retries.Count < 0 {
		bad = append(bad, baton.Invalid("retries.count", "%d is negative", j.Retries.Count))
	}
	if j.History.Keep < 0 {
		bad = append(bad, baton.Invalid("history.keep", "%d is negative", j.History.Keep))
	}
	if n := j.Notify; n != nil {
		if n.After < 1 {
			bad = append(bad, baton.Invalid("notify.after", "%d: want 1 or more", n.After))
		}
		for _, k := range n.On {
			if !slices.Contains(baton.NotifyAllKinds, k) {
				bad = append(bad, baton.Invalid("notify.on", "%q: want one of %s", k, strings.Join(baton.NotifyAllKinds, ", ")))
			}
		}
	}
	return errors.Join(bad...)
}

// Publish writes the registered functions' jobs to the store and
// registers the daemon, waiting for a store that is away (with backoff)
// until ctx ends; Func may not be called after it. Run calls it first when
// it has not been called: call it yourself to fail fast at start-up.
func (d *Daemon) Publish(ctx context.Context) error {
	if d.fx == nil {
		return baton.Invalid("daemon", "Publish needs a daemon made by scheduler.New (a job file's daemon loads its file with Load)")
	}
	return d.loadFuncs(ctx)
}

// loadFuncs publishes the registered functions' jobs once (Publish).
func (d *Daemon) loadFuncs(ctx context.Context) error {
	if d.fx == nil || d.fx.done {
		return nil
	}
	d.fx.sealed = true
	retry := backoff.Loop{Min: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: true}
	for tries := 1; ; tries++ {
		err := d.Load(ctx, d.fx.jobs)
		if err == nil {
			d.fx.done = true
		}
		if err == nil || baton.ErrorCode(err) == baton.EINVALID {
			return err
		}
		if tries == 1 {
			d.Log.Error("cannot publish the service's jobs yet; retrying", "service", d.fx.service, "err", err)
		}
		if !sleep(ctx, retry.Next()) {
			return err
		}
	}
}

// runnable is which jobs a daemon runs: commands (a job file's daemon), or
// the Go functions it registered. The claim queries select by kind and
// service (cheap, whatever the number of functions); the store then leaves
// a function this daemon did not register (runs) to another replica.
type runnable struct {
	commands bool
	service  string
	fns      map[string]func(ctx context.Context) error
}

// commandsOnly is what a job file's daemon runs.
var commandsOnly = runnable{commands: true}

// runs says a daemon that runs r runs j (as the claim queries decide).
func (r runnable) runs(j baton.Job) bool {
	if j.Func == "" {
		return r.commands
	}
	return r.fns[j.Name] != nil
}

func (d *Daemon) runnable() runnable {
	if d.fx == nil {
		return commandsOnly
	}
	return runnable{service: d.fx.service, fns: d.fx.fns}
}

// ownsUnnamed says a job of the store that this daemon did not load (v) is
// drift to report: a job file's command, for a job file's daemon.
func (d *Daemon) ownsUnnamed(v Version) bool { return v.Func == "" && d.fx == nil }

// funcMacros fills in the macros of the queries that tell functions from
// commands: @job_func@ (the service of a job's function, NULL for a
// command) and @job_func(alias)@ (the same of the jobs row alias).
func funcMacros(q map[string]string, dialect Dialect) {
	jf := "(%sdefinition->>'func')"
	if dialect == SQLite {
		jf = "json_extract(%sdefinition, '$.func')"
	}
	for name, text := range q {
		text = strings.ReplaceAll(text, "@job_func@", fmt.Sprintf(jf, ""))
		q[name] = jobFuncOf.ReplaceAllStringFunc(text, func(m string) string {
			return fmt.Sprintf(jf, jobFuncOf.FindStringSubmatch(m)[1]+".")
		})
	}
}

var jobFuncOf = regexp.MustCompile(`@job_func\((\w+)\)@`)

// funcPanic is a function's panic, recovered.
type funcPanic struct {
	value any
	stack []byte
}

func (p *funcPanic) Error() string { return fmt.Sprintf("panicked: %v", p.value) }

// maxFuncReason bounds the error text of a failed function kept as the
// tick's reason.
const maxFuncReason = 1024

// runFunc is run for a Go function: it runs the registered function of j
// under term, keeps the term as a command's supervisor does (internal/hold:
// renewals about every TTL/3, the trust window keeping kill_after back),
// and cancels the function's ctx when trust in the term ends, at the
// timeout, or when a is stopped (replaced, or the daemon drains).
// survivors is non-empty when the function outlived its lease: the term is
// then left to expire, never released while the function may still run.
func (d *Daemon) runFunc(j baton.Job, t baton.Tick, term *baton.Term, sent time.Time, attempt int, a *active, obs Observer, log interface {
	Info(string, ...any)
}) (e Ending, lost bool, survivors []int) {
	var fn func(ctx context.Context) error
	if d.fx != nil {
		fn = d.fx.fns[j.Name]
	}
	if fn == nil { // claims leave the functions this daemon did not register
		return Ending{Outcome: baton.OutcomeFailed, Reason: "this daemon has no function registered for job " + j.Name}, false, nil
	}
	leaser := observedLeaser{Leaser: d.Leaser, job: j.Name, obs: obs}
	// As for a command: trusted until a renewal's send time + TTL − kill
	// after − safety (hold.Window); the function then has kill_after to
	// return before the store may expire the term and grant it to another.
	killAfter := supervise.EffectiveKillAfter(term.TTL, j.KillAfter.D())
	// An acquisition that took long leaves little of the window: renew
	// before starting, as the supervisor does.
	sent, err := hold.Fresh(leaser, term, sent)
	if err != nil {
		return Ending{Outcome: baton.OutcomeLostLease, Reason: err.Error()}, true, nil
	}
	keeper := hold.Keep(hold.Config{Leaser: leaser, Term: term, Reserve: killAfter,
		Logf: func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }}, sent)
	defer keeper.Stop()
	// expires is when the store may expire the term, less the safety
	// margin: kill_after after the trust window's end.
	expires := func() time.Time { return keeper.Until().Add(killAfter) }

	base, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	run := base // the daemon's view of the function's ctx, which does not read the clock
	if j.Timeout > 0 {
		var stop context.CancelFunc
		run, stop = context.WithTimeoutCause(run, j.Timeout.D(), fmt.Errorf("job %s ran past its timeout of %s", j.Name, j.Timeout))
		defer stop()
	}
	// The function gets a copy of the term (the Keeper's renewals write
	// its own), and a ctx whose Err reads the clock, as lease.Run's fn.
	own := *term
	run = lease.WithIdempotencyKey(lease.NewContext(run, &own), t.IdempotencyKey())
	ctx := keeper.Context(run, cancel)
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- &funcPanic{value: r, stack: debug.Stack()}
			}
		}()
		done <- fn(ctx)
	}()

	var maxRun <-chan time.Time
	if j.Timeout > 0 {
		tm := time.NewTimer(j.Timeout.D())
		defer tm.Stop()
		maxRun = tm.C
	}
	stopped := a.stop
	trustEnded := keeper.Lost()
	var why string         // why the ctx was cancelled: "" (it was not), lost, timeout, stopped
	var lostErr error      // the loss, once trust ran out or a renewal was refused
	var giveUp *time.Timer // set once ctx is cancelled: when the function counts as outliving its lease
	var giveUpAt time.Time
	var giveUpC <-chan time.Time
	end := func(cause error, w string, grace time.Time) {
		if why == "" {
			why = w
			cancel(cause)
		}
		switch {
		case giveUp == nil:
			giveUpAt = grace
			giveUp = time.NewTimer(time.Until(grace))
			giveUpC = giveUp.C
		case grace.Before(giveUpAt):
			giveUpAt = grace
			giveUp.Reset(time.Until(grace))
		}
	}
	defer func() {
		if giveUp != nil {
			giveUp.Stop()
		}
	}()
	for {
		select {
		case err := <-done:
			if why == "" && errors.Is(run.Err(), context.DeadlineExceeded) {
				// The deadline came before maxRun's timer, made just after it.
				why = "timeout"
			}
			// Trust that ended before the return was seen (the function's
			// ctx found it so after a pause, or the window's timer ran
			// meanwhile) makes the attempt lost, as in lease.Run. The
			// Keeper stopped, its verdict is final.
			keeper.Stop()
			if lostErr == nil {
				lostErr = keeper.Err()
			}
			return funcEnding(j, err, why, lostErr, a, log), lostErr != nil, nil
		case <-trustEnded:
			// The window ended (no renewal in time), or the store said the
			// term is over. Once: it stays ended.
			trustEnded = nil
			lostErr = keeper.Err()
			end(lostErr, "lost", expires())
		case <-maxRun:
			maxRun = nil
			end(context.Cause(run), "timeout", time.Now().Add(killAfter))
		case <-stopped:
			stopped = nil // a closed channel: select it once
			end(errors.New(a.stopping), "stopped", time.Now().Add(killAfter))
		case <-giveUpC:
			if obs, ok := d.observer().(FuncObserver); ok {
				obs.FuncOutlived(j.Name)
			}
			reason := fmt.Sprintf("the function did not return after its ctx ended (%s) and outlived its lease (token %d); it may still run, and only a fence keeps its writes out", funcWhy(why, lostErr, j), term.Token)
			log.Info("function outlived its lease", "token", term.Token, "reason", reason)
			return Ending{Outcome: baton.OutcomeLostLease, Reason: reason}, true, []int{0}
		}
	}
}

// funcWhy says why a function's ctx was cancelled.
func funcWhy(why string, lost error, j baton.Job) string {
	switch why {
	case "lost":
		return lost.Error()
	case "timeout":
		return fmt.Sprintf("it ran past its timeout of %s", j.Timeout)
	}
	return "it was stopped"
}

// funcEnding is how an attempt of a function that returned err ended.
func funcEnding(j baton.Job, err error, why string, lost error, a *active, log interface{ Info(string, ...any) }) Ending {
	var p *funcPanic
	switch {
	case why == "lost" || lost != nil:
		return Ending{Outcome: baton.OutcomeLostLease, Reason: lost.Error()}
	case why == "stopped" && a.drained:
		return Ending{Outcome: baton.OutcomeFailed, Reason: a.stopping}
	case why == "stopped":
		return Ending{Outcome: baton.OutcomeLostLease, Reason: a.stopping}
	case why == "timeout":
		return Ending{Outcome: baton.OutcomeTimedOut, Reason: fmt.Sprintf("ran past its timeout of %s; its ctx was cancelled", j.Timeout)}
	case errors.As(err, &p):
		if l, ok := log.(interface{ Error(string, ...any) }); ok {
			l.Error("function panicked", "panic", fmt.Sprint(p.value), "stack", string(p.stack))
		} else {
			log.Info("function panicked", "panic", fmt.Sprint(p.value), "stack", string(p.stack))
		}
		return Ending{Outcome: baton.OutcomeFailed, Reason: clip(p.Error())}
	case err == nil:
		return Ending{Outcome: baton.OutcomeSucceeded}
	case baton.ErrorCode(err) == baton.EFENCED:
		return Ending{Outcome: baton.OutcomeFenced, Reason: clip("a write was refused for a stale fencing token: " + err.Error())}
	}
	return Ending{Outcome: baton.OutcomeFailed, Reason: clip(err.Error())}
}

func clip(s string) string {
	if len(s) > maxFuncReason {
		return s[:maxFuncReason] + "…"
	}
	return s
}

// Owns says whether daemon d is one that defines job j, so that d lacking
// j is drift: a job file's daemon owns the commands, a service's daemon
// (Config "go:<service>") only the functions it registered, which its
// versions name.
func Owns(d DaemonInfo, j baton.Job) bool {
	if j.Func == "" {
		return !strings.HasPrefix(d.Config, FuncConfig)
	}
	_, ok := d.Versions[j.Name]
	return ok
}
