package scheduler

import (
	"context"
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
	out, _, err := s.claimDue(ctx, daemon, level, claimTTL, limit)
	return out, err
}

func (s *Store) ClaimOpenAt(ctx context.Context, daemon string, level int, claimTTL time.Duration, limit int) ([]Claim, error) {
	out, _, err := s.claimOpen(ctx, daemon, level, claimTTL, limit)
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
