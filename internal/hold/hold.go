// Package hold takes a job's lease and keeps it: the acquisition with a
// bounded, jittered wait, the renewals about every third of the TTL, and
// the trust window, the one rule by which a holder decides that it can no
// longer count on its term. baton run's supervisor (and through it the
// daemon) and lease.Run all keep their terms with it, so that a command
// and a Go function stop alike.
//
// The trust window is kept on this process's monotonic clock and never
// compared with the store's: after a request sent at s succeeds, the term
// is trusted until s + TTL − reserve − Safety(TTL), where reserve is the
// time the holder needs to stop its work once the window ends (baton run's
// kill-after; none for lease.Run). The store judges expiry from an instant
// no earlier than s, so the work is stopped before the store can grant
// the term to another.
package hold

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/batonhq/baton"
)

// Safety is the part of the trust window kept back for scheduling delays
// and clock-rate differences between this host and the store.
func Safety(ttl time.Duration) time.Duration {
	return max(ttl/10, 50*time.Millisecond)
}

// Window is how long after a successful request's send time a term of
// TTL ttl is trusted, with reserve kept for stopping the work.
func Window(ttl, reserve time.Duration) time.Duration {
	return ttl - reserve - Safety(ttl)
}

// Acquire tries for the lease until it is granted or wait has passed,
// backing off from 50ms to 2s with jitter so that waiters do not hammer the
// store in step. It returns the grant and the send time of the request that
// won it, from which the holder's trust window runs. A ctx that ends while
// it waits returns the last (busy) grant and no error.
func Acquire(ctx context.Context, l baton.Leaser, req baton.AcquireRequest, wait time.Duration) (baton.Grant, time.Time, error) {
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
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return grant, sent, nil
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// Fresh renews term before any work starts when its acquisition, sent at
// sent, took more than a third of its TTL (it waited for a row lock, or
// the network was slow): rather than start work only to stop it for want
// of trust. Nothing runs yet, so the renewal may take up to a third of the
// TTL. It returns the send time from which trust now runs.
func Fresh(l baton.Leaser, term *baton.Term, sent time.Time) (time.Time, error) {
	if time.Since(sent) <= term.TTL/3 {
		return sent, nil
	}
	sent = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), term.TTL/3)
	defer cancel()
	t := *term // Renew writes Until; the caller's term is left as it is
	if err := l.Renew(ctx, &t); err != nil {
		return sent, baton.Wrap(baton.ELEASELOST, err, "the lease of %s (token %d) could not be renewed before its work started", term.Job, term.Token)
	}
	return sent, nil
}

// Config says what a Keeper keeps.
type Config struct {
	Leaser baton.Leaser
	Term   *baton.Term
	// Reserve is kept back from the end of the trust window for the
	// holder to stop its work once the window ends (see Window).
	Reserve time.Duration
	// Logf reports renewal trouble and recovery; nil is quiet.
	Logf func(format string, args ...any)
	// Renewed, when set, is called after each successful renewal with the
	// new end of the trust window, from the Keeper's goroutine.
	Renewed func(until time.Time)
}

// Keeper renews a term about every third of its TTL and ends its trust
// window (Lost) when no renewal succeeded in time, or at once when the
// store answers that the term is over (ELEASELOST). Other renewal errors
// (the store unreachable) are retried every TTL/15 until the window ends.
//
// The window's end is a timer of its own, not a check between renewals:
// a renewal that hangs past it (a frozen connection) does not delay it.
// Once ended, the window stays ended, even if a renewal in flight
// succeeds afterwards.
type Keeper struct {
	cfg    Config
	term   baton.Term // the Keeper's copy, which Renew writes (Until)
	window time.Duration

	mu      sync.Mutex
	until   time.Time
	err     error         // why trust ended; set once
	lost    chan struct{} // closed when err is set
	stopped bool
	timer   *time.Timer

	quit context.CancelFunc
	done chan struct{}
}

// Keep starts keeping cfg.Term, whose last successful request (the
// acquisition, or a renewal) was sent at sent.
func Keep(cfg Config, sent time.Time) *Keeper {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	k := &Keeper{cfg: cfg, term: *cfg.Term, window: Window(cfg.Term.TTL, cfg.Reserve), lost: make(chan struct{}), done: make(chan struct{})}
	k.until = sent.Add(k.window)
	k.timer = time.AfterFunc(time.Until(k.until), k.expire)
	ctx, quit := context.WithCancel(context.Background())
	k.quit = quit
	go k.renew(ctx, sent)
	return k
}

// Lost is closed when the trust window has ended; Err then says why.
func (k *Keeper) Lost() <-chan struct{} { return k.lost }

// Err is the ELEASELOST error that ended the trust window, or nil while
// it is open.
func (k *Keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Until is the current end of the trust window, on this process's
// monotonic clock.
func (k *Keeper) Until() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.until
}

// Check ends the trust window now if its end has passed, without waiting
// for the window's timer to run (after a pause of the whole process, the
// timer runs only once the scheduler gets to it), and returns Err.
func (k *Keeper) Check() error {
	k.expire()
	return k.Err()
}

// Stop ends the renewals, waiting for one in flight, and says whether the
// trust window was still open. Stop may be called more than once.
func (k *Keeper) Stop() (held bool) {
	k.quit()
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	k.timer.Stop()
	return k.err == nil
}

// expire is the window's timer: it ends trust unless a renewal moved the
// window's end since the timer was set.
func (k *Keeper) expire() {
	k.mu.Lock()
	late := !time.Now().Before(k.until)
	k.mu.Unlock()
	if late {
		k.end(baton.Errorf(baton.ELEASELOST, "no renewal of the lease of %s (token %d) succeeded in time; the store may grant it to another", k.term.Job, k.term.Token))
	}
}

func (k *Keeper) end(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil || k.stopped {
		return
	}
	k.err = err
	close(k.lost)
}

// extend moves the window's end after a renewal sent at sent succeeded,
// unless the window has already ended.
func (k *Keeper) extend(sent time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil || k.stopped {
		return
	}
	k.until = sent.Add(k.window)
	k.timer.Reset(time.Until(k.until))
	if k.cfg.Renewed != nil {
		k.cfg.Renewed(k.until)
	}
}

func (k *Keeper) renew(ctx context.Context, sent time.Time) {
	defer close(k.done)
	interval := k.term.TTL / 3
	retry := max(k.term.TTL/15, 20*time.Millisecond)
	next := time.NewTimer(time.Until(sent.Add(interval)))
	defer next.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.lost:
			return
		case <-next.C:
		}
		sent := time.Now()
		// A renewal is worth nothing once the window it would extend has
		// ended: it is cut off then.
		rctx, cancel := context.WithDeadline(ctx, k.Until())
		err := k.cfg.Leaser.Renew(rctx, &k.term)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if failing {
				k.cfg.Logf("renewed the lease of %s (token %d) again", k.term.Job, k.term.Token)
				failing = false
			}
			k.extend(sent)
			next.Reset(time.Until(sent.Add(interval)))
		case baton.ErrorCode(err) == baton.ELEASELOST:
			k.end(err)
			return
		default:
			if !failing {
				k.cfg.Logf("renewing the lease of %s (token %d) failed, retrying: %v", k.term.Job, k.term.Token, err)
				failing = true
			}
			next.Reset(retry)
		}
	}
}

// Context returns ctx as the holder's work sees it: ctx, whose cancel is
// cancel, with an Err that also reads the clock. Work that resumes after a
// pause of the whole process (a GC pause, SIGSTOP, a frozen VM) past the
// end of the trust window finds its ctx cancelled, with k's ELEASELOST
// error as the cause, at its first check, before the window's timer has
// had a chance to run. Done closes when the holder cancels ctx, which it
// does once Lost is closed (a moment later, after such a pause).
//
// cancel must cancel ctx or one of its parents. Give the work the
// returned ctx itself: a context derived from it has an Err of its own,
// which does not read the clock.
func (k *Keeper) Context(ctx context.Context, cancel context.CancelCauseFunc) context.Context {
	return trustCtx{ctx, k, cancel}
}

type trustCtx struct {
	context.Context
	keeper *Keeper
	cancel context.CancelCauseFunc
}

func (c trustCtx) Err() error {
	if c.Context.Err() == nil {
		if lost := c.keeper.Check(); lost != nil {
			c.cancel(lost)
		}
	}
	return c.Context.Err()
}
