package scheduler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/sqldialect"
)

// What the tests of package scheduler_test reach inside for: the store's
// calls as a daemon of a given feature level makes them.

func (s *Store) PublishAt(ctx context.Context, jobs []baton.Job, host string, removed []string, level int) ([]string, error) {
	return s.publish(ctx, jobs, host, removed, level)
}

func (s *Store) ClaimDueAt(ctx context.Context, daemon string, level int, claimTTL time.Duration, limit int) ([]Claim, error) {
	out, _, _, err := s.claimDue(ctx, daemon, "", level, commandsOnly, claimTTL, limit, share{})
	return out, err
}

func (s *Store) ClaimOpenAt(ctx context.Context, daemon string, level int, claimTTL time.Duration, limit int) ([]Claim, error) {
	out, _, err := s.claimOpen(ctx, daemon, "", level, commandsOnly, claimTTL, limit)
	return out, err
}

// Exec runs q, written as the files of sql/ are (with their macros), as a
// binary that predates some change would.
func (s *Store) Exec(ctx context.Context, q string, args ...any) error {
	_, err := s.db.ExecContext(ctx, sqldialect.Render(q, s.dialect, s.schema), args...)
	return err
}

// SetAfterTick has the daemon call f after it has handled each claimed
// tick (before it handles the next of the same claim): a test widens the
// gap between a job's catch-up ticks with it, as a loaded machine does.
func (d *Daemon) SetAfterTick(f func(baton.Tick)) { d.afterTick = f }

// Explain is the plan of the store's query name, with args, as the
// store's database would run it: PostgreSQL's EXPLAIN in JSON, or SQLite's
// EXPLAIN QUERY PLAN, one step a line. With noSeqScan, PostgreSQL plans as
// if scanning a whole table cost too much, so that what an index can answer
// shows in the plan whatever the tables hold.
func (s *Store) Explain(ctx context.Context, name string, noSeqScan bool, args ...any) (string, error) {
	q := "explain (format json) " + s.query(name)
	if s.dialect == sqldialect.SQLite {
		q = "explain query plan " + s.query(name)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if noSeqScan && s.dialect == Postgres {
		if _, err := tx.ExecContext(ctx, "set local enable_seqscan = off"); err != nil {
			return "", err
		}
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var plan []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		switch v := vals[len(vals)-1].(type) {
		case []byte:
			plan = append(plan, string(v))
		default:
			plan = append(plan, fmt.Sprint(v))
		}
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// FinishBatch is the daemon's batched Finish: one answer per call.
func (s *Store) FinishBatch(ctx context.Context, ticks []baton.Tick, runIDs []string, endings []Ending) ([]bool, []error) {
	calls := make([]finishCall, len(ticks))
	for i := range ticks {
		calls[i] = finishCall{tick: ticks[i], runID: runIDs[i], ending: endings[i]}
	}
	oks, errs := make([]bool, len(calls)), make([]error, len(calls))
	for i, a := range s.finishBatch(ctx, calls) {
		oks[i], errs[i] = a.ok, a.err
	}
	return oks, errs
}

// StartBatch is the daemon's batched StartAttemptInOrder: one answer per
// call.
func (s *Store) StartBatch(ctx context.Context, ticks []baton.Tick, prevs []string, daemon, host string, terms []*baton.Term) ([]int, []error) {
	calls := make([]startCall, len(ticks))
	for i := range ticks {
		calls[i] = startCall{tick: ticks[i], prev: prevs[i], daemon: daemon, host: host, term: terms[i]}
	}
	attempts, errs := make([]int, len(calls)), make([]error, len(calls))
	for i, a := range s.startBatch(ctx, calls) {
		attempts[i], errs[i] = a.attempt, a.err
	}
	return attempts, errs
}

// ClaimDueOn and ClaimOpenOn claim as a daemon of this level on host.
func (s *Store) ClaimDueOn(ctx context.Context, daemon, host string, claimTTL time.Duration, limit int) ([]Claim, error) {
	out, _, _, err := s.claimDue(ctx, daemon, host, FeatureLevel, commandsOnly, claimTTL, limit, share{})
	return out, err
}

func (s *Store) ClaimOpenOn(ctx context.Context, daemon, host string, claimTTL time.Duration, limit int) ([]Claim, error) {
	out, _, err := s.claimOpen(ctx, daemon, host, FeatureLevel, commandsOnly, claimTTL, limit)
	return out, err
}

// RebootOn records the start ticks of a daemon on host, as Run does once.
func (s *Store) RebootOn(ctx context.Context, daemon, host string, claimTTL time.Duration, jobs []string) ([]Claim, error) {
	return s.reboot(ctx, daemon, host, FeatureLevel, claimTTL, jobs)
}
