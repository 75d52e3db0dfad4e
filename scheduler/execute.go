package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/supervise"
	"github.com/google/uuid"
)

// OutputTail bounds the output kept with each tick.
const OutputTail = 4096

// handle drives one claimed tick to its outcome (or, when the daemon
// drains before it starts, gives the claim back).
func (d *Daemon) handle(ctx context.Context, c Claim) {
	// Later ticks of the job yield to this one (earlierPending) until it has
	// the lease, which then keeps them out itself, or has ended.
	held := true
	unhold := func() {
		if held {
			held = false
			d.dropPending(c)
		}
	}
	defer unhold()
	bg := context.WithoutCancel(ctx)
	log := d.Log.With("job", c.Tick.Job, "tick", baton.FormatTick(c.At))
	if c.Job.Name == "" {
		if d.end(bg, c.Tick, c.RunID, baton.OutcomeSkippedMissed, "the job was removed from the store before this tick ran", log) {
			d.observer().TicksSkipped(c.Tick.Job, SkipJobRemoved, 1)
		}
		return
	}
	j := c.Job.WithDefaults()
	if ctx.Err() != nil {
		d.giveBack(bg, c, log)
		return
	}
	if c.Kind == baton.TickScheduled && c.Attempts == 0 {
		if wait := time.Until(c.At.Add(Jitter(j, c.At))); wait > 0 {
			// Not in hand while it waits out its jitter: the daemon claims
			// other jobs' ticks meanwhile.
			d.inHand.Add(-1)
			slept := sleep(ctx, wait)
			d.inHand.Add(1)
			if !slept {
				d.giveBack(bg, c, log)
				return
			}
		}
	}
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		d.giveBack(bg, c, log)
		return
	}
	defer func() { <-d.slots }()

	prev, attempts := c.RunID, c.Attempts
	// A tick taken over from a daemon that died, a queued one, a backfilled
	// one, a catch-up one and a retry wait for the lease; a fresh tick meets
	// the overlap policy.
	wait := c.State != baton.TickPending || c.Kind == baton.TickBackfill || attempts > 0 || c.CatchUp
	takeover := c.State == baton.TickRunning
	for {
		// While it waits for the lease, a scheduled tick that a later tick
		// overtakes can never start (a job's scheduled ticks start in tick
		// order): it ends then, not when the lease next frees. Not a tick
		// taken over while it ran: its tree may live until the lease is ours.
		overtakable := c.Kind == baton.TickScheduled && !takeover
		term, sent, busy, err := d.acquire(ctx, j, c, prev, wait, overtakable)
		var ov *Overtaken
		switch {
		case err == errDraining:
			d.giveBack(bg, c, log)
			return
		case errors.As(err, &ov):
			d.endOvertaken(bg, c, prev, attempts, ov, log)
			return
		case err != nil:
			log.Error("cannot take the job's lease; the tick stays claimed and is retried", "err", err)
			if !sleep(ctx, d.Poll*4) {
				d.giveBack(bg, c, log)
				return
			}
			continue
		case term == nil:
			if d.end(bg, c.Tick, prev, baton.OutcomeSkippedOverlap, busy, log) {
				d.observer().TicksSkipped(j.Name, skipReason(j), 1)
			}
			return
		}
		unhold()
		if takeover {
			// The lease is ours, so the taken-over attempt is over: it ended
			// with its daemon, or recorded itself (then the tick is done).
			takeover = false
			reason := "its daemon stopped renewing its claim (crashed or cut off) while it ran"
			if attempts > j.Retries.Count {
				// The attempt's own token and run time went with its daemon.
				lost := Ending{Outcome: baton.OutcomeLostLease, Reason: reason, Notice: d.notice(j, c, attempts, 0, 0)}
				if d.endWith(bg, c.Tick, prev, lost, log) {
					d.observer().LeaseLost(j.Name)
					d.observer().RunEnded(j.Name, baton.OutcomeLostLease, -1)
				}
				d.release(term, log)
				return
			}
			if ok, err := d.Store.Finish(bg, c.Tick, prev, Ending{Outcome: baton.OutcomeLostLease, Reason: reason, RetryAfter: time.Millisecond}); err == nil && ok {
				d.observer().LeaseLost(j.Name)
				d.observer().RunEnded(j.Name, baton.OutcomeLostLease, -1)
			}
		}
		attempt, ok, err := d.startAttempt(bg, c, prev, attempts, term, log)
		if err != nil {
			log.Error("cannot record the attempt's start; not running it yet", "err", err)
			d.release(term, log)
			if !sleep(ctx, d.Poll*4) {
				d.giveBack(bg, c, log)
				return
			}
			continue
		}
		if !ok {
			log.Info("the tick was ended or taken over elsewhere; not running it")
			d.release(term, log)
			return
		}
		from := prev
		prev, attempts = term.Owner, attempt
		began := time.Now()
		ending, survivors := d.execute(j, c.Tick, term, sent, attempt, runLag(j, c.Tick, attempt, time.Now()), log)
		ending.Notice = d.notice(j, c, attempt, term.Token, time.Since(began))
		if ending.Outcome != baton.OutcomeSucceeded && ending.Outcome != baton.OutcomeFenced && ending.Outcome != baton.OutcomeUnknown && attempt <= j.Retries.Count {
			ending.RetryAfter = Backoff(j, attempt)
		}
		ok, err = d.record(ctx, c.Tick, from, term, ending, len(survivors) == 0, log)
		if ending.RetryAfter == 0 || err != nil || !ok {
			return
		}
		log.Info("retrying", "attempt", attempt+1, "after", ending.RetryAfter)
		if !sleep(ctx, ending.RetryAfter) {
			d.giveBack(bg, c, log)
			return
		}
		wait = true
	}
}

// giveBack returns a claimed tick to the store for another daemon.
func (d *Daemon) giveBack(ctx context.Context, c Claim, log interface{ Warn(string, ...any) }) {
	if err := d.Store.ReleaseClaim(ctx, c.Tick, d.ID); err != nil {
		log.Warn("cannot give the tick back; it is taken over when this daemon's claim lapses", "err", err)
	}
}

// end records a tick's outcome without an attempt of this daemon's, and
// says whether it did.
func (d *Daemon) end(ctx context.Context, t baton.Tick, runID string, o baton.Outcome, reason string, log interface {
	Info(string, ...any)
	Error(string, ...any)
	Log(context.Context, slog.Level, string, ...any)
}) bool {
	return d.endWith(ctx, t, runID, Ending{Outcome: o, Reason: reason}, log)
}

// endWith is end with a whole Ending.
func (d *Daemon) endWith(ctx context.Context, t baton.Tick, runID string, e Ending, log interface {
	Info(string, ...any)
	Error(string, ...any)
	Log(context.Context, slog.Level, string, ...any)
}) bool {
	o, reason := e.Outcome, e.Reason
	ok, err := d.Store.Finish(ctx, t, runID, e)
	if err != nil {
		log.Error("cannot record the outcome", "outcome", o, "err", err)
		return false
	}
	if !ok {
		log.Info("the tick was ended or taken over elsewhere", "outcome", o, "reason", reason)
		return false
	}
	log.Log(ctx, outcomeLevel(o), "tick ended", "outcome", o, "reason", reason)
	return true
}

func (d *Daemon) release(term *baton.Term, log interface{ Warn(string, ...any) }) {
	if err := d.releaseOnce(term); err != nil {
		log.Warn("cannot release the lease; it expires by itself", "lease", term.Job, "token", term.Token, "err", err)
	}
}

// releaseOnce gives term back, within 5 s; a term already gone (lost,
// expired, taken over) is no error.
func (d *Daemon) releaseOnce(term *baton.Term) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Leaser.Release(ctx, term); err != nil && baton.ErrorCode(err) != baton.ELEASELOST {
		return err
	}
	return nil
}

// leaseKeys are the lease names a job's runs may hold: the job's own, and
// for "allow: N" N−1 more (`job#2` … `job#N`), each with its own tokens.
func leaseKeys(j baton.Job) []string {
	keys := []string{j.Name}
	if j.Overlap.Policy == baton.OverlapAllow {
		for i := 2; i <= j.Overlap.Allow; i++ {
			keys = append(keys, j.Name+"#"+strconv.Itoa(i))
		}
	}
	return keys
}

// acquire takes one of the job's leases per its overlap policy. It returns
// the term and when the request that won it was sent (the term's trust
// window runs from then), or nil and why the tick is skipped; errDraining
// when the daemon began draining while it waited.
//
// With overtakable, a wait for the lease ends with an *Overtaken error once
// a later scheduled tick of the job has started (checked once a second).
func (d *Daemon) acquire(ctx context.Context, j baton.Job, c Claim, runID string, wait, overtakable bool) (term *baton.Term, sent time.Time, busy string, err error) {
	term, busy, err = d.acquireTerm(ctx, j, c, runID, wait, overtakable, &sent)
	return term, sent, busy, err
}

func (d *Daemon) acquireTerm(ctx context.Context, j baton.Job, c Claim, runID string, wait, overtakable bool, sent *time.Time) (*baton.Term, string, error) {
	keys := leaseKeys(j)
	try := func() (*baton.Term, *baton.Holder, error) {
		var holder *baton.Holder
		for _, key := range keys {
			*sent = time.Now()
			g, err := d.acquireLease(ctx, baton.AcquireRequest{
				Job: key, TTL: j.TTL.D(), Owner: uuid.NewString(), Host: d.Host, PID: os.Getpid(),
				Argv: []string{"baton", "daemon", "tick", c.IdempotencyKey()}, StartedAt: time.Now(),
			})
			if err != nil {
				return nil, nil, err
			}
			if !g.Busy() {
				d.observer().LeaseAcquired(j.Name, key, g.Term.Token)
				return g.Term, nil, nil
			}
			if holder == nil {
				holder = g.Holder
			}
		}
		return nil, holder, nil
	}
	// A scheduled tick yields to the earlier ones of its job this daemon
	// still holds (a claim's catch-up ticks, run one after the other): it
	// does not take the lease while they wait for their turn, since a tick
	// that started before them would leave them never to start. It meets
	// its overlap policy as if their run held the lease.
	earlier := func() time.Time {
		if c.Kind != baton.TickScheduled {
			return time.Time{}
		}
		return d.earlierPending(c.Tick)
	}
	var term *baton.Term
	var holder *baton.Holder
	first := earlier()
	if first.IsZero() {
		var err error
		term, holder, err = try()
		if err != nil || term != nil {
			return term, "", err
		}
	}
	d.observer().LeaseBusy(j.Name)
	var bound time.Time // zero: wait as long as it takes
	if !wait && !first.IsZero() && j.Overlap.Policy != baton.OverlapQueueOne {
		return nil, fmt.Sprintf("an earlier tick of the job, %s, is still to run on this daemon, and a job's ticks start in tick order (overlap %s)",
			baton.FormatTick(first), j.Overlap.Policy), nil
	}
	if !wait {
		switch j.Overlap.Policy {
		case baton.OverlapQueueOne:
			ok, err := d.Store.Queue(ctx, c.Tick, runID)
			if err != nil {
				return nil, "", err
			}
			if !ok {
				return nil, "the lease is held and another tick already waits for it (overlap queue-one)" + heldBy(holder), nil
			}
		case baton.OverlapReplace:
			if holder == nil {
				return nil, "the lease is held by a holder the store cannot name (overlap replace)", nil
			}
			if why := d.replace(ctx, j, holder.Token, c); why != "" {
				return nil, why + heldBy(holder), nil
			}
			bound = time.Now().Add(2*j.TTL.D() + j.KillAfter.D())
		default:
			return nil, "the lease is held (overlap " + j.Overlap.Policy + ")" + heldBy(holder), nil
		}
	}
	every := min(max(j.TTL.D()/20, 50*time.Millisecond), time.Second)
	var checked time.Time
	for {
		if !sleep(ctx, every) {
			return nil, "", errDraining
		}
		if earlier().IsZero() {
			var err error
			term, holder, err = try()
			if err != nil || term != nil {
				return term, "", err
			}
		}
		if overtakable && time.Since(checked) >= time.Second {
			checked = time.Now()
			later, err := d.Store.LaterStart(ctx, c.Tick)
			if err != nil {
				return nil, "", err
			}
			if !later.IsZero() {
				return nil, "", &Overtaken{Later: later}
			}
		}
		if !bound.IsZero() && time.Now().After(bound) {
			return nil, "the running tree did not give up the lease in time (overlap replace)" + heldBy(holder), nil
		}
	}
}

// acquireLease is the Leaser's Acquire, gathered with the daemon's other
// acquisitions into one statement when the Leaser batches. A term granted
// to a batch after this daemon began draining is given back: no run starts
// on it.
func (d *Daemon) acquireLease(ctx context.Context, req baton.AcquireRequest) (baton.Grant, error) {
	if d.leases == nil {
		return d.Leaser.Acquire(ctx, req)
	}
	a := d.leases.call(req)
	if a.err == nil && a.grant.Term != nil && ctx.Err() != nil {
		d.release(a.grant.Term, d.Log)
		return baton.Grant{}, ctx.Err()
	}
	return a.grant, a.err
}

func heldBy(h *baton.Holder) string {
	if h == nil {
		return ""
	}
	s := fmt.Sprintf(": held with token %d", h.Token)
	if h.Host != "" {
		s += " on " + h.Host
	}
	return s
}

// replace asks the run holding token to stop: directly when it is one of
// this daemon's, through the store when it can revoke terms. It returns why
// it cannot.
func (d *Daemon) replace(ctx context.Context, j baton.Job, token int64, c Claim) string {
	why := "replaced by tick " + c.IdempotencyKey()
	d.mu.Lock()
	for _, a := range d.active[j.Name] {
		if a.token == token {
			a.halt(why, false)
			d.mu.Unlock()
			return ""
		}
	}
	d.mu.Unlock()
	r, ok := d.Leaser.(baton.Revoker)
	if !ok {
		return "the lease is held by a run outside this daemon and the store cannot revoke it (overlap replace)"
	}
	if err := r.Revoke(ctx, j.Name, token); err != nil {
		return "revoking the running term failed: " + err.Error()
	}
	return ""
}

// execute runs one attempt under term and says how it ended. It logs one
// line when the attempt starts and one when it ends, whatever happens in
// between, with the same attribute names every time (docs/METRICS.md):
// job and tick (from log), token, attempt, run_id, then outcome, exit_code
// (when the command ran), duration_seconds and reason (when there is one).
func (d *Daemon) execute(j baton.Job, t baton.Tick, term *baton.Term, sent time.Time, attempt int, lag time.Duration, log interface {
	Info(string, ...any)
	Log(context.Context, slog.Level, string, ...any)
}) (Ending, []int) {
	obs := d.observer()
	log.Info("run start", "token", term.Token, "attempt", attempt, "run_id", term.Owner)
	obs.RunStarted(j.Name, lag)
	started := time.Now()
	e, lost, survivors := d.run(j, t, term, sent, attempt, obs, log)
	took := time.Since(started)
	attrs := []any{"token", term.Token, "attempt", attempt, "run_id", term.Owner, "outcome", e.Outcome}
	if e.ExitCode != nil {
		attrs = append(attrs, "exit_code", *e.ExitCode)
	}
	attrs = append(attrs, "duration_seconds", took.Seconds())
	if e.Reason != "" {
		attrs = append(attrs, "reason", e.Reason)
	}
	log.Log(context.Background(), outcomeLevel(e.Outcome), "run end", attrs...)
	if lost {
		obs.LeaseLost(j.Name)
	}
	obs.RunEnded(j.Name, e.Outcome, took)
	return e, survivors
}

// run is execute's attempt itself; lost says the term was lost while the
// command ran (a replaced run ends lost-lease too, but its term was
// revoked on purpose).
func (d *Daemon) run(j baton.Job, t baton.Tick, term *baton.Term, sent time.Time, attempt int, obs Observer, log interface {
	Info(string, ...any)
}) (e Ending, lost bool, survivors []int) {
	a := &active{token: term.Token, stop: make(chan struct{})}
	d.mu.Lock()
	d.active[j.Name] = append(d.active[j.Name], a)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		runs := d.active[j.Name]
		for i, x := range runs {
			if x == a {
				d.active[j.Name] = append(runs[:i:i], runs[i+1:]...)
				break
			}
		}
		if len(d.active[j.Name]) == 0 {
			delete(d.active, j.Name)
		}
		d.mu.Unlock()
	}()

	if d.Action != nil {
		return d.Action(j, t, term), false, nil
	}
	if j.Func != "" {
		return d.runFunc(j, t, term, sent, attempt, a, obs, log)
	}
	env, dir, cred, err := commandEnv(j, d.Env)
	if err != nil {
		return Ending{Outcome: baton.OutcomeFailed, Reason: "cannot run the command as its user: " + err.Error()}, false, nil
	}
	tail := &tailBuffer{max: OutputTail}
	stdout, stderr, copied, err := d.captureOutput(j, t, attempt, tail)
	if err != nil {
		return Ending{Outcome: baton.OutcomeFailed, Reason: "cannot create a pipe for the output: " + err.Error()}, false, nil
	}

	sup := supervise.Supervisor{
		Leaser:    observedLeaser{Leaser: d.Leaser, job: j.Name, obs: obs},
		KillAfter: j.KillAfter.D(), MaxRun: j.Timeout.D(), Stop: a.stop,
		OwnSignals: true, KeepLease: true, Stdout: stdout, Stderr: stderr, Env: env, Dir: dir,
		GuardPath: d.GuardPath, Stdin: jobStdin(j), Credential: cred,
		ExtraEnv: []string{
			"BATON_JOB=" + j.Name,
			"BATON_TICK=" + baton.FormatTick(t.At),
			"BATON_IDEMPOTENCY_KEY=" + t.IdempotencyKey(),
			"BATON_ATTEMPT=" + strconv.Itoa(attempt),
		},
		Logf: func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) },
	}
	// Trust runs from the acquisition's request, not from now: a daemon
	// slowed or frozen between the two must not start a command on a term
	// that may have expired meanwhile (the supervisor renews first then).
	res := sup.Run(context.Background(), term, sent, j.Command)
	closeOutput(stdout, stderr)
	select { // strays left behind may hold the pipe open; do not wait for them
	case <-copied:
	case <-time.After(100 * time.Millisecond):
	}
	code := res.ExitCode
	e = Ending{ExitCode: &code, Output: tail.String()}
	switch {
	case res.LeaseLost != nil:
		e.Outcome, e.Reason, lost = baton.OutcomeLostLease, res.LeaseLost.Error(), true
	case res.Stopped:
		// Replaced: its term is revoked, as far as it is concerned. Drained:
		// it was stopped before it could finish, which is a failure.
		e.Outcome, e.Reason = baton.OutcomeLostLease, a.stopping
		if a.drained {
			e.Outcome = baton.OutcomeFailed
		}
	case res.GuardDied:
		e.Outcome, e.Reason = baton.OutcomeFailed, "the command's guard died (killed?); the processes its command left were killed before the lease was released"
	case res.TimedOut:
		e.Outcome, e.Reason = baton.OutcomeTimedOut, fmt.Sprintf("ran past its timeout of %s; its tree was stopped", j.Timeout)
	case code == 0:
		e.Outcome = baton.OutcomeSucceeded
	case code == baton.ExitFenced:
		e.Outcome, e.Reason = baton.OutcomeFenced, "the command exited 77: a write was refused for a stale fencing token"
	case code == baton.ExitUnknown:
		// Not retried: whether the write happened is for an operator (or a
		// reconciling job) to find out; running it again may do it twice.
		e.Outcome, e.Reason = baton.OutcomeUnknown, "the command exited 78: a write got no answer and the far side may have done it; reconcile before running it again"
	case code == 127:
		e.Outcome, e.Reason = baton.OutcomeFailed, "command not found: "+j.Command[0]
	case code == 126:
		e.Outcome, e.Reason = baton.OutcomeFailed, "command could not be run: "+j.Command[0]
	default:
		e.Outcome = baton.OutcomeFailed
	}
	if len(res.Survivors) > 0 {
		e.Reason = fmt.Sprintf("the command's guard died and %d of its processes could not be killed; the lease is kept until it expires", len(res.Survivors))
	}
	return e, lost, res.Survivors
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// notice is the notification of claim c's attempt, for the store to send
// if j's rule makes one of its outcome; nil when j has no rule.
func (d *Daemon) notice(j baton.Job, c Claim, attempt int, token int64, took time.Duration) *Notice {
	if j.Notify == nil {
		return nil
	}
	return &Notice{Rule: *j.Notify, Link: d.NotifyLink, Attempt: attempt, Host: d.Host, Daemon: d.ID,
		Token: token, Duration: took, TickKind: c.Kind}
}
