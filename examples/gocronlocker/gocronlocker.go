// Package gocronlocker is a distributed Locker for gocron v2
// (github.com/go-co-op/gocron/v2) on baton's leases: several replicas of a
// service schedule the same jobs, and each run of a job happens on the one
// replica that holds the job's lease.
//
// Unlike a plain lock with an expiry, the lease is renewed while the job
// runs (about every TTL/3), so the TTL need not exceed the job's longest
// run; the job's ctx ends, with a cause of code baton.ELEASELOST, as soon
// as this replica can no longer be sure that it holds the lease (the rule
// of lease.Run: the send time of the last successful renewal plus the TTL
// minus a safety margin, on the monotonic clock); and the job gets the
// term's fencing token, which the store of its results checks so that a
// replica that was paused past its lease cannot write over the next
// holder's work.
//
// gocron hands the task nothing from the locker, so wrap the task with
// Locker.Task, under the job's name:
//
//	locker := gocronlocker.New(postgres.NewLeaser(db), gocronlocker.Options{HoldAtLeast: time.Second})
//	s, _ := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//	s.NewJob(gocron.CronJob("0 2 * * *", false),
//		locker.Task("nightly-report", report), // report(ctx): lease.Token(ctx) is the token
//		gocron.WithName("nightly-report"))
package gocronlocker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/lease"
	"github.com/go-co-op/gocron/v2"
)

// Locker takes baton leases for gocron's jobs, one lease per job name.
// It implements gocron.Locker: give it to gocron.WithDistributedLocker or
// gocron.WithDistributedJobLocker.
type Locker struct {
	leaser baton.Leaser
	opts   lease.Options
	least  time.Duration

	mu   sync.Mutex
	held map[string]*Lock // by job name: the lock this process holds
}

var _ gocron.Locker = (*Locker)(nil)

// Options tune a Locker. The zero value is ready to use.
type Options struct {
	// TTL is how long a lease lasts without a renewal, by the store's
	// clock; the Locker renews it about every TTL/3 while the job runs, so
	// it need not exceed the job's longest run. Zero means lease.DefaultTTL
	// (30 s). A shorter TTL lets another replica take over sooner after
	// this one dies mid-run.
	TTL time.Duration
	// HoldAtLeast keeps the lease for at least this long after Lock, even
	// if the job ends sooner. A lock keeps a second replica out only while
	// it is held: the replicas' schedulers fire a tick at slightly
	// different times (their clocks differ, a scheduler runs late), and a
	// job quicker than that gap runs twice. Set it above the gap you
	// expect and below the interval between ticks (1 s for a job that
	// runs every minute). Zero: the lease is released when the job ends.
	HoldAtLeast time.Duration
	// Logger hears of renewal trouble, of a lost lease and of a task that
	// ran on after it lost its lease (lease.Run's log). nil means
	// slog.Default().
	Logger *slog.Logger
}

// New returns a Locker whose leases live in leaser (postgres.NewLeaser for
// replicas on several hosts, flock.Open for one host).
func New(leaser baton.Leaser, opts Options) *Locker {
	return &Locker{
		leaser: leaser,
		opts:   lease.Options{TTL: opts.TTL, Logger: opts.Logger},
		least:  opts.HoldAtLeast,
		held:   map[string]*Lock{},
	}
}

// Lock takes the lease of the job named key and keeps renewing it until
// Unlock. If another replica holds it, Lock returns an error of code
// baton.EBUSY and gocron skips the tick (its AfterLockError listeners hear
// the error). A store that cannot be reached is an error of code
// baton.EUNAVAILABLE, and the tick is skipped too.
//
// The lease's ctx, the one the task gets from Task, is ctx's child: it
// ends when gocron ends the job (ctx is the job's), and when the lease is
// lost.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	if err := baton.ValidateJobName(key); err != nil {
		// gocron names an unnamed job after its function, package path
		// and all.
		return nil, baton.Wrap(baton.EINVALID, err, "gocronlocker: give the job a name that can name its lease with gocron.WithName")
	}
	lk := &Lock{locker: l, key: key, taken: time.Now(), unlock: make(chan struct{}), done: make(chan struct{})}
	held := make(chan struct{})
	// lease.Run holds the lease, renews it and applies the trust rule
	// while its fn runs: here fn lasts from Lock to Unlock, on a goroutine
	// of its own, and hands its ctx out.
	go func() {
		defer close(lk.done)
		lk.err = lease.Run(ctx, l.leaser, key, l.opts, func(ctx context.Context) error {
			least := time.NewTimer(l.least)
			defer least.Stop()
			lk.ctx = ctx
			close(held)
			// Not ctx.Done(): the task runs on until gocron calls Unlock,
			// and Run logs a task that outlives its lease.
			<-lk.unlock
			select {
			case <-least.C:
			case <-ctx.Done(): // nothing left to hold
			}
			return nil
		})
	}()
	select {
	case <-held:
	case <-lk.done:
		return nil, lk.err
	}
	l.mu.Lock()
	l.held[key] = lk
	l.mu.Unlock()
	return lk, nil
}

// Context is the ctx of the lock this process holds on job, which carries
// the term (lease.Token, lease.Term and the fence helpers read it) and
// ends when the lease is lost; nil when this process holds none. Task
// reads it for you.
func (l *Locker) Context(job string) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lk := l.held[job]; lk != nil {
		return lk.ctx
	}
	return nil
}

// Task wraps fn as gocron's task for the job named job (which must be the
// name given with gocron.WithName): fn gets the lease's ctx, which carries
// the term (lease.Token(ctx), lease.Term(ctx), and the fence helpers such
// as postgres.ExecFencedCtx read it) and ends with a cause of code
// baton.ELEASELOST when the lease is lost. fn should stop then; a write it
// makes anyway is refused by a fence once another replica holds a newer
// term.
//
// If the job runs without its lease (a name that is not the job's, or a
// job with the locker disabled), the task fails with an error instead of
// running unfenced.
func (l *Locker) Task(job string, fn func(ctx context.Context) error) gocron.Task {
	return gocron.NewTask(func() error {
		ctx := l.Context(job)
		if ctx == nil {
			return baton.Errorf(baton.EINVALID, "gocronlocker: job %q runs without its lease: give the gocron job the same name with gocron.WithName(%q), and the scheduler this Locker", job, job)
		}
		return fn(ctx)
	})
}

func (l *Locker) forget(lk *Lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A lock lost and taken again by a later tick is that tick's now.
	if l.held[lk.key] == lk {
		delete(l.held, lk.key)
	}
}

// Lock is a held lease of a job: gocron.Lock, with the term.
type Lock struct {
	locker *Locker
	key    string
	taken  time.Time       // about when Lock was called: HoldAtLeast counts from here
	ctx    context.Context // lease.Run's fn ctx
	unlock chan struct{}   // closed by Unlock: fn returns
	done   chan struct{}   // closed when lease.Run has returned err
	err    error
	once   sync.Once
}

// Context carries the term and ends when the lease is lost (cause of code
// baton.ELEASELOST) or when gocron ends the job.
func (lk *Lock) Context() context.Context { return lk.ctx }

// Token is the term's fencing token.
func (lk *Lock) Token() int64 { return lease.Token(lk.ctx) }

// Unlock releases the exact term (never a newer holder's), so that the
// next tick need not wait for the TTL, and stops renewing it. It returns
// an error of code baton.ELEASELOST if the lease was lost while held
// (gocron ignores it; the Locker's logger has said so). Calling it again
// returns the same.
//
// With Options.HoldAtLeast, a lease taken less than that long ago is kept
// and renewed until then, and released afterwards in the background:
// Unlock then returns at once, nil unless the lease was already lost.
func (lk *Lock) Unlock(ctx context.Context) error {
	lk.once.Do(func() {
		lk.locker.forget(lk)
		close(lk.unlock)
	})
	if time.Since(lk.taken) < lk.locker.least {
		select {
		case <-lk.done:
			return lk.err
		default:
			return nil
		}
	}
	select {
	case <-lk.done:
		return lk.err
	case <-ctx.Done():
		// The release goes on without us; it is bounded by lease.Run.
		return context.Cause(ctx)
	}
}
