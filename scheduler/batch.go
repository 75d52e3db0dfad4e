package scheduler

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/batonhq/baton"
)

// A daemon records the starts and the outcomes of its runs in batches: a
// call waits a few milliseconds for others, and those gathered are written
// in one transaction, so that a busy daemon commits once per batch rather
// than once per run. Each call still gets its own answer, as if made alone:
// a batch whose transaction fails is written again one call at a time.

// gatherFor is how long a call waits for others to join its batch, and
// gatherMax the most calls one batch holds.
const (
	gatherFor = 2 * time.Millisecond
	gatherMax = 100
)

// batcher gathers calls of one kind and runs them together with do, which
// returns one answer per call, in order.
type batcher[Q, R any] struct {
	do      func(ctx context.Context, calls []Q) []R
	mu      sync.Mutex
	pending []batchCall[Q, R]
}

type batchCall[Q, R any] struct {
	q    Q
	done chan R
}

// call adds q to the next batch and waits for its answer.
func (b *batcher[Q, R]) call(q Q) R {
	c := batchCall[Q, R]{q, make(chan R, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	var full []batchCall[Q, R]
	switch {
	case len(b.pending) >= gatherMax:
		full, b.pending = b.pending, nil
	case len(b.pending) == 1:
		time.AfterFunc(gatherFor, b.flush)
	}
	b.mu.Unlock()
	if full != nil {
		b.run(full)
	}
	return <-c.done
}

func (b *batcher[Q, R]) flush() {
	b.mu.Lock()
	calls := b.pending
	b.pending = nil
	b.mu.Unlock()
	if len(calls) > 0 {
		b.run(calls)
	}
}

func (b *batcher[Q, R]) run(calls []batchCall[Q, R]) {
	qs := make([]Q, len(calls))
	for i, c := range calls {
		qs[i] = c.q
	}
	// Written whatever became of the callers: their runs happened.
	rs := b.do(context.Background(), qs)
	for i, c := range calls {
		c.done <- rs[i]
	}
}

// startCall is one StartAttemptInOrder of a batch, and startAnswer its
// answer.
type startCall struct {
	tick         baton.Tick
	prev         string
	daemon, host string
	term         *baton.Term
}

type startAnswer struct {
	attempt int
	err     error
}

// startBatch is StartAttemptInOrder for each call, in one transaction. The
// jobs' rows are locked in order of name, so that two daemons' batches do
// not wait for each other in a cycle.
func (s *Store) startBatch(ctx context.Context, calls []startCall) []startAnswer {
	out := make([]startAnswer, len(calls))
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(calls[a].tick.Job, calls[b].tick.Job), calls[a].tick.At.Compare(calls[b].tick.At))
	})
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if s.dialect == Postgres && len(calls) > 1 && distinctTicks(calls, func(c startCall) baton.Tick { return c.tick }) {
			return s.startAll(ctx, tx, calls, out)
		}
		for _, i := range order {
			c := calls[i]
			attempt, err := s.start(ctx, tx, c.tick, c.prev, c.daemon, c.host, c.term, c.tick.Kind == baton.TickScheduled)
			var ov *Overtaken
			if err != nil && !errors.As(err, &ov) {
				return err
			}
			// Overtaken: nothing of this call was written.
			out[i] = startAnswer{attempt, err}
		}
		return nil
	})
	if err != nil && len(calls) > 1 {
		for i, c := range calls {
			a, _, err := s.StartAttemptInOrder(ctx, c.tick, c.prev, c.daemon, c.host, c.term)
			out[i] = startAnswer{a, err}
		}
		return out
	}
	if err != nil {
		out[0] = startAnswer{0, err}
	}
	return out
}

// distinctTicks says no tick appears twice among calls (one statement
// updates a row once); tick is a call's tick.
func distinctTicks[C any](calls []C, tick func(C) baton.Tick) bool {
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		k := tick(c).IdempotencyKey()
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// startAll is startBatch's transaction in PostgreSQL: the jobs' rows locked
// in one statement (postgres/lock_jobs.sql), then every start in another
// (postgres/start_batch.sql), which reads the later starts after the locks,
// as start does call by call.
func (s *Store) startAll(ctx context.Context, tx *sql.Tx, calls []startCall, out []startAnswer) error {
	n := len(calls)
	jobs, prevs, runs, hosts, daemons := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats, tokens, inOrder := make([]time.Time, n), make([]int64, n), make([]bool, n)
	for i, c := range calls {
		jobs[i], ats[i], prevs[i] = c.tick.Job, c.tick.At.UTC().Truncate(time.Microsecond), c.prev
		runs[i], hosts[i], tokens[i], daemons[i] = c.term.Owner, c.host, c.term.Token, c.daemon
		inOrder[i] = c.tick.Kind == baton.TickScheduled
	}
	locked, err := tx.QueryContext(ctx, s.query("postgres/lock_jobs"), jobs)
	if err != nil {
		return s.translate(err, "locking the jobs of a batch of starts")
	}
	locked.Close()
	if err := locked.Err(); err != nil {
		return s.translate(err, "locking the jobs of a batch of starts")
	}
	rows, err := tx.QueryContext(ctx, s.query("postgres/start_batch"), jobs, ats, prevs, runs, hosts, tokens, daemons, inOrder)
	if err != nil {
		return s.translate(err, "starting a batch of attempts")
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var attempt sql.NullInt64
		var later sql.Null[dbTime]
		if err := rows.Scan(&i, &attempt, &later); err != nil {
			return s.translate(err, "starting a batch of attempts")
		}
		switch {
		case attempt.Valid:
			out[i-1] = startAnswer{attempt: int(attempt.Int64)}
		case later.Valid:
			// Overtaken: nothing of this call was written.
			out[i-1] = startAnswer{err: &Overtaken{Later: later.V.Time}}
		}
	}
	return s.translate(rows.Err(), "starting a batch of attempts")
}

// finishCall is one Finish of a batch, and finishAnswer its answer. A
// call with release gives that term back once the batch's outcomes are
// written (a run's lease, released right after its outcome as before).
type finishCall struct {
	tick    baton.Tick
	runID   string
	ending  Ending
	release *baton.Term
}

type finishAnswer struct {
	ok         bool
	err        error
	releaseErr error
}

// leaseBatcher is a Leaser that takes and gives back many leases in one
// statement each: postgres.Leaser. The daemon gathers its runs' lease
// acquisitions and releases as it gathers their starts and outcomes.
type leaseBatcher interface {
	AcquireAll(ctx context.Context, reqs []baton.AcquireRequest) ([]baton.Grant, []error)
	ReleaseAll(ctx context.Context, terms []*baton.Term) []error
}

// leaseAnswer is one acquisition of a batch.
type leaseAnswer struct {
	grant baton.Grant
	err   error
}

// acquireBatch is AcquireAll for a batch of the daemon's acquisitions.
func (d *Daemon) acquireBatch(ctx context.Context, reqs []baton.AcquireRequest) []leaseAnswer {
	grants, errs := d.batchLeaser.AcquireAll(ctx, reqs)
	out := make([]leaseAnswer, len(reqs))
	for i := range reqs {
		out[i] = leaseAnswer{grants[i], errs[i]}
	}
	return out
}

// finishBatch records a batch of outcomes, then releases the terms that
// the calls give back, in one statement when the Leaser can: only those
// whose outcome the store took (a call that failed keeps its term until
// its outcome is written, see record).
func (d *Daemon) finishBatch(ctx context.Context, calls []finishCall) []finishAnswer {
	out := d.Store.finishBatch(ctx, calls)
	var terms []*baton.Term
	var idx []int
	for i, c := range calls {
		if c.release != nil && out[i].err == nil {
			terms, idx = append(terms, c.release), append(idx, i)
		}
	}
	if len(terms) == 0 {
		return out
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var errs []error
	if d.batchLeaser != nil {
		errs = d.batchLeaser.ReleaseAll(rctx, terms)
	} else {
		for _, t := range terms {
			errs = append(errs, d.Leaser.Release(rctx, t))
		}
	}
	for k, i := range idx {
		out[i].releaseErr = errs[k]
	}
	return out
}

// finishBatch is Finish for each call, in one transaction: one statement
// in PostgreSQL (postgres/finish_batch.sql), one call after the other in
// SQLite (in the process: no round trips to save).
func (s *Store) finishBatch(ctx context.Context, calls []finishCall) []finishAnswer {
	out := make([]finishAnswer, len(calls))
	var err error
	if s.dialect == Postgres && len(calls) > 1 && distinctTicks(calls, func(c finishCall) baton.Tick { return c.tick }) && !noticed(calls) {
		err = s.finishAll(ctx, calls, out)
	} else {
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			for i, c := range calls {
				ok, err := s.finish(ctx, tx, c.tick, c.runID, c.ending)
				if err != nil {
					return err
				}
				out[i] = finishAnswer{ok: ok}
			}
			return nil
		})
	}
	if err != nil && len(calls) > 1 {
		for i, c := range calls {
			ok, err := s.Finish(ctx, c.tick, c.runID, c.ending)
			out[i] = finishAnswer{ok: ok, err: err}
		}
		return out
	}
	if err != nil {
		out[0] = finishAnswer{err: err}
	}
	return out
}

// noticed says a call may enqueue a notification: its outcome goes
// through finish, in a transaction (the one statement does not notify).
func noticed(calls []finishCall) bool {
	for _, c := range calls {
		if c.ending.Notice != nil {
			return true
		}
	}
	return false
}

// finishAll is finishBatch's one statement, in PostgreSQL.
func (s *Store) finishAll(ctx context.Context, calls []finishCall, out []finishAnswer) error {
	n := len(calls)
	jobs, runs, states, reasons, outputs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats := make([]time.Time, n)
	outcomes := make([]string, n)
	codes := make([]*int64, n)
	retries := make([]int64, n)
	for i, c := range calls {
		e := c.ending
		jobs[i], ats[i], runs[i], reasons[i], outputs[i] = c.tick.Job, c.tick.At.UTC().Truncate(time.Microsecond), c.runID, e.Reason, e.Output
		states[i] = baton.TickDone
		outcomes[i] = string(e.Outcome)
		if e.RetryAfter > 0 {
			states[i], retries[i] = baton.TickPending, ms(e.RetryAfter)
		}
		if e.ExitCode != nil {
			code := int64(*e.ExitCode)
			codes[i] = &code
		}
	}
	rows, err := s.db.QueryContext(ctx, s.query("postgres/finish_batch"), jobs, ats, runs, states, outcomes, reasons, codes, outputs, retries)
	if err != nil {
		return s.translate(err, "recording a batch of outcomes")
	}
	defer rows.Close()
	done := map[string]bool{}
	for rows.Next() {
		var t baton.Tick
		var at dbTime
		if err := rows.Scan(&t.Job, &at); err != nil {
			return s.translate(err, "recording a batch of outcomes")
		}
		t.At = at.Time
		done[t.IdempotencyKey()] = true
	}
	if err := rows.Err(); err != nil {
		return s.translate(err, "recording a batch of outcomes")
	}
	for i, c := range calls {
		out[i] = finishAnswer{ok: done[c.tick.IdempotencyKey()]}
	}
	return nil
}
