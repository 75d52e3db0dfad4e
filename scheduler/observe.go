package scheduler

import (
	"context"
	"database/sql"
	"os"
	"time"

	"github.com/batonhq/baton"
)

// Observer is told what a daemon does as it happens: package metrics turns
// it into Prometheus metrics. The daemon calls it from many goroutines at
// once, so its methods must be safe for concurrent use, cheap, and never
// block. An implementation that embeds NopObserver keeps compiling when
// methods are added here.
//
// job is always a job's name, never a tick, run id or host: an observer may
// use it as a label.
type Observer interface {
	// JobsLoaded gives the names of the jobs of this daemon's job file, on
	// start and on every reload (an observer may forget the jobs that left).
	JobsLoaded(jobs []string)
	// RunStarted: an attempt of a tick of job starts, under a term just
	// taken. lag is how late it starts: after the tick's instant (plus its
	// jitter, for a scheduled tick), on this host's clock. It is negative
	// when lateness is by design: a retry, or a backfilled tick.
	RunStarted(job string, lag time.Duration)
	// RunEnded: an attempt of job ended with outcome, after took. took is
	// negative when this daemon did not run it: an attempt whose daemon
	// stopped renewing its claim (died, or cut off), ended lost-lease by the
	// daemon that took its tick over.
	RunEnded(job string, outcome baton.Outcome, took time.Duration)
	// TicksSkipped: n ticks of job ended without a run, for reason.
	TicksSkipped(job string, reason SkipReason, n int)
	// LeaseAcquired: a term of one of job's leases was granted with token.
	// lease is the job's name, or job#N for the extra leases of overlap
	// "allow: N", each of which has tokens of its own.
	LeaseAcquired(job, lease string, token int64)
	// LeaseBusy: a tick of job found all of the job's leases held (it then
	// waits, queues, replaces or is skipped, by its overlap policy).
	LeaseBusy(job string)
	// LeaseLost: a term of job ended without being released by a holder
	// that still trusted it: its renewal was refused or trust in it ran out
	// while the command ran, or its daemon died and another took the tick
	// over.
	LeaseLost(job string)
	// LeaseRenewed: a renewal of a term of job returned after took, with err
	// nil, an ELEASELOST error (the term is gone) or another error (its fate
	// is unknown; the holder retries).
	LeaseRenewed(job string, took time.Duration, err error)
}

// SkipReason says why a tick ended without a run. The set is fixed, so that
// it can be a label.
type SkipReason string

const (
	// SkipOverlap: the job's lease was held (overlap skip, or every lease
	// of "allow: N" taken). Outcome skipped-overlap.
	SkipOverlap SkipReason = "overlap"
	// SkipQueueFull: overlap queue-one, and another tick already waited for
	// the lease. Outcome skipped-overlap.
	SkipQueueFull SkipReason = "queue_full"
	// SkipReplaceFailed: overlap replace, and the running tree could not be
	// stopped (or not in time). Outcome skipped-overlap.
	SkipReplaceFailed SkipReason = "replace_failed"
	// SkipMissed: the tick fell due while no daemon ran, and the catch-up
	// policy did not run it. Outcome skipped-missed.
	SkipMissed SkipReason = "missed"
	// SkipBehind: the tick fell due while a daemon ran, but the daemons
	// claimed it late (busy, paused, cut off from the store), and the
	// catch-up policy did not run it. Outcome skipped-missed.
	SkipBehind SkipReason = "behind"
	// SkipOvertaken: a later tick of the job started before this one could
	// (its daemon died, froze or fell behind before running it, and the
	// claim was taken over or came late): a job's scheduled ticks start in
	// tick order, so it is not run. Outcome skipped-missed. (A tick that
	// had attempts ends with its last attempt's outcome, not retried.)
	SkipOvertaken SkipReason = "overtaken"
	// SkipJobRemoved: the job was removed from the store before its claimed
	// tick ran. Outcome skipped-missed.
	SkipJobRemoved SkipReason = "job_removed"
)

// SkipReasons lists every SkipReason.
var SkipReasons = []SkipReason{SkipOverlap, SkipQueueFull, SkipReplaceFailed, SkipMissed, SkipBehind, SkipOvertaken, SkipJobRemoved}

// NopObserver observes nothing. Embed it to implement part of Observer.
type NopObserver struct{}

func (NopObserver) JobsLoaded([]string)                           {}
func (NopObserver) RunStarted(string, time.Duration)              {}
func (NopObserver) RunEnded(string, baton.Outcome, time.Duration) {}
func (NopObserver) TicksSkipped(string, SkipReason, int)          {}
func (NopObserver) LeaseAcquired(string, string, int64)           {}
func (NopObserver) LeaseBusy(string)                              {}
func (NopObserver) LeaseLost(string)                              {}
func (NopObserver) LeaseRenewed(string, time.Duration, error)     {}

// observer is d.Observer, or one that observes nothing.
func (d *Daemon) observer() Observer {
	if d.Observer == nil {
		return NopObserver{}
	}
	return d.Observer
}

// skipReason is why acquire skipped a tick of j: it skips only when the
// tick may not wait, so the job's overlap policy says which case it was.
func skipReason(j baton.Job) SkipReason {
	switch j.Overlap.Policy {
	case baton.OverlapQueueOne:
		return SkipQueueFull
	case baton.OverlapReplace:
		return SkipReplaceFailed
	}
	return SkipOverlap
}

// runLag is how late an attempt starts (see Observer.RunStarted).
func runLag(j baton.Job, t baton.Tick, attempt int, now time.Time) time.Duration {
	if attempt != 1 || t.Kind == baton.TickBackfill {
		return -1
	}
	due := t.At
	if t.Kind == baton.TickScheduled {
		due = due.Add(Jitter(j, t.At))
	}
	return max(now.Sub(due), 0)
}

// observedLeaser times the supervisor's renewals of one job's term. It
// keeps the lock file of a local lease visible to the supervisor, which
// hands it to the guard so that the lock outlives baton until the tree is
// gone.
type observedLeaser struct {
	baton.Leaser
	job string
	obs Observer
}

func (l observedLeaser) Renew(ctx context.Context, term *baton.Term) error {
	start := time.Now()
	err := l.Leaser.Renew(ctx, term)
	l.obs.LeaseRenewed(l.job, time.Since(start), err)
	return err
}

// LockFile is supervise's lockFiler: the inner leaser's lock file, or nil
// when its leases are not files.
func (l observedLeaser) LockFile(term *baton.Term) *os.File {
	if lf, ok := l.Leaser.(interface{ LockFile(*baton.Term) *os.File }); ok {
		return lf.LockFile(term)
	}
	return nil
}

// Stats are the statistics of the store's connection pool (database/sql's),
// for metrics. On PostgreSQL the store borrows its connections from the
// pgx pool, whose own statistics are the ones that count (postgres.DB.Pool).
func (s *Store) Stats() sql.DBStats { return s.db.Stats() }
