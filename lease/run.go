package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/hold"
	"github.com/google/uuid"
)

// DefaultTTL is the lease's TTL when Options.TTL is zero: baton run's.
const DefaultTTL = 30 * time.Second

// MinTTL is the shortest TTL Run accepts, as baton run's --ttl.
const MinTTL = 100 * time.Millisecond

// Options tune Run. The zero value is ready to use: a 30 s TTL, no wait
// for a busy lease, and slog.Default for the log.
type Options struct {
	// TTL is how long the lease lasts without a renewal, by the store's
	// clock; Run renews it about every TTL/3. Zero means DefaultTTL. A
	// longer TTL rides out longer store outages; a shorter one lets
	// another replica take over sooner after this one dies.
	TTL time.Duration
	// Wait is how long Run waits for a lease held elsewhere, trying again
	// with jittered backoff (50 ms up to 2 s). Zero: a busy lease returns
	// an EBUSY error at once.
	Wait time.Duration
	// Logger hears of renewal trouble, of a lost lease and of a fn that
	// outlived its lease, with the job and the token as attributes. nil
	// means slog.Default().
	Logger *slog.Logger
	// Argv describes the holder in `baton leases` (with this host and
	// pid); nil means os.Args.
	Argv []string
}

// started is when this process started, near enough: the holder's start
// time that baton leases shows.
var started = time.Now()

// Run runs fn while it holds job's lease in leaser, and returns fn's
// error.
//
// It takes the lease first. A lease held elsewhere returns an error of
// code baton.EBUSY at once without calling fn, unless opts.Wait is
// positive: Run then tries again, with jittered backoff, for up to that
// long (or until ctx ends). A store that cannot be reached is an error of
// code baton.EUNAVAILABLE, at once: whether to try again later is the
// caller's choice.
//
// While fn runs, Run renews the lease about every TTL/3. The ctx given to
// fn carries the term (Term, Token; the fence helpers read it there: fn's
// own copy, whose Until is the acquisition's) and
// is cancelled when Run can no longer trust that it holds the lease, with
// a cause (context.Cause) of code baton.ELEASELOST: at once when the store
// answers a renewal that the term is over (expired, taken over, revoked),
// and otherwise when the trust window ends: the send time of the last
// successful renewal plus TTL minus a safety margin (TTL/10, at least
// 50 ms), on this process's monotonic clock. Renewals that fail for other
// reasons (the store unreachable) are retried until then. The store
// cannot grant the lease to another before the window ends, so a fn that
// stops when its ctx is done never runs beside the next holder. It is
// also cancelled when ctx ends, with ctx's cause.
//
// When fn returns, Run releases the lease, so that the next holder need
// not wait for the TTL, and returns fn's error. If the lease was lost
// while fn ran, Run returns an error of code baton.ELEASELOST that wraps
// fn's error (errors.Is finds it).
//
// Go cannot stop a goroutine: a fn that ignores its ctx runs on after its
// lease is lost, perhaps while another replica holds it. Run waits for fn
// to return however long that takes, so that fn never runs on behind its
// caller's back, and logs an error once the store may have granted the
// lease to another (a safety margin after the window ended). It then
// returns an ELEASELOST error saying that fn outlived its lease. What
// protects your data from such a fn is the fence: a write that carries
// the stale token is refused once a newer term exists (see the package
// documentation). Release names the exact term, so the stale Run can
// never end the term of the replica that took over.
//
// fn runs on the caller's goroutine; a panic in fn releases the lease and
// goes on up.
func Run(ctx context.Context, leaser baton.Leaser, job string, opts Options, fn func(ctx context.Context) error) error {
	if err := baton.ValidateJobName(job); err != nil {
		return err
	}
	ttl := opts.TTL
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < MinTTL:
		return baton.Invalid("TTL", "must be at least %s, got %s", MinTTL, ttl)
	}
	if opts.Wait < 0 {
		return baton.Invalid("Wait", "must not be negative, got %s", opts.Wait)
	}
	if leaser == nil || fn == nil {
		return baton.Errorf(baton.EINVALID, "lease.Run needs a Leaser and a fn")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	argv := opts.Argv
	if argv == nil {
		argv = os.Args
	}
	host, _ := os.Hostname()
	req := baton.AcquireRequest{Job: job, TTL: ttl, Owner: uuid.NewString(), Host: host, PID: os.Getpid(), Argv: argv, StartedAt: started}
	grant, sent, err := hold.Acquire(ctx, leaser, req, opts.Wait)
	if err != nil {
		return err
	}
	if grant.Busy() {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return baton.Errorf(baton.EBUSY, "job %s not run: its lease is held%s", job, heldBy(grant.Holder))
	}
	term := grant.Term
	log = log.With("job", job, "token", term.Token)
	// release gives the term back. Release ends only this exact term, and
	// only while the store still has it unexpired: a term that expired or
	// was taken over is refused (ELEASELOST) and left to its new holder.
	// A lost term is still given back, briefly and quietly, for what the
	// store keeps of it in this process (the local store's lock file
	// descriptor); the store may well be unreachable then.
	release := func(lost bool) {
		wait := 5 * time.Second
		if lost {
			wait = hold.Safety(ttl)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
		defer cancel()
		if err := leaser.Release(rctx, term); err != nil && !lost && baton.ErrorCode(err) != baton.ELEASELOST {
			log.Warn("cannot release the lease; it expires by itself", "err", err)
		}
	}
	if sent, err = hold.Fresh(leaser, term, sent); err != nil {
		release(true)
		return err
	}
	keeper := hold.Keep(hold.Config{
		Leaser: leaser, Term: term,
		Logf: func(format string, args ...any) { log.Warn(fmt.Sprintf(format, args...)) },
	}, sent)

	// fn gets a copy of the term: the Keeper's renewals write its own.
	own := *term
	cctx, cancel := context.WithCancelCause(NewContext(ctx, &own))
	defer cancel(nil)
	// fn's Err also reads the clock (see hold.Keeper.Context).
	fctx := keeper.Context(cctx, cancel)
	returned := make(chan struct{})
	watched := make(chan time.Time, 1) // when the window ended, if it did before fn returned
	go func() {
		defer close(watched)
		select {
		case <-returned:
			return
		case <-keeper.Lost():
		}
		lost := keeper.Err()
		cancel(lost)
		ended := time.Now()
		watched <- ended
		log.Warn("lease lost; fn's ctx is cancelled", "err", lost)
		grace := time.NewTimer(hold.Safety(ttl))
		defer grace.Stop()
		select {
		case <-returned:
		case <-grace.C:
			log.Error("fn has not returned though its lease was lost: it may go on writing with a stale fencing token, which fences refuse once a newer term exists", "lost_for", time.Since(ended).Round(time.Millisecond))
		}
	}()

	var fnErr error
	func() {
		defer func() {
			close(returned)
			release(!keeper.Stop())
		}()
		fnErr = fn(fctx)
	}()
	// The watcher ends now that fn has returned: nothing is logged after
	// Run returns. No end on record: the window ended as fn returned.
	var ended time.Time
	for t := range watched {
		ended = t
	}
	lost := keeper.Err()
	if lost == nil {
		return fnErr
	}
	took := time.Duration(0)
	if !ended.IsZero() {
		took = time.Since(ended)
	}
	if took <= hold.Safety(ttl) {
		if errors.Is(fnErr, lost) {
			return fnErr
		}
		return &baton.Error{Code: baton.ELEASELOST, Message: lost.Error(), Err: fnErr}
	}
	msg := fmt.Sprintf("fn outlived the lease of %s (token %d): it returned %s after its ctx was cancelled for a lost lease",
		job, term.Token, took.Round(time.Millisecond))
	if !errors.Is(fnErr, lost) {
		// fn's own error does not say why: the cause does (once).
		msg += fmt.Sprintf(" (%v)", lost)
	}
	return &baton.Error{Code: baton.ELEASELOST, Err: fnErr, Message: msg + "; a write it made meanwhile is safe only if fenced"}
}

func heldBy(h *baton.Holder) string {
	if h == nil || h.Token == 0 && h.PID == 0 {
		return " by a holder the store cannot name"
	}
	s := fmt.Sprintf(" with token %d", h.Token)
	if h.Host != "" {
		s += fmt.Sprintf(" by %s pid %d", h.Host, h.PID)
	}
	return s
}
