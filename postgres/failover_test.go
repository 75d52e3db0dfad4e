package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/idempotency"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
)

// failoverTokens issues tokens on both sides of a failover that loses
// commits: some before replication is cut (the standby has them), some after
// (only the primary had them, and they are lost with it), then more on the
// promoted standby. issue takes the next token from a store on db.
type tokenIssuer func(t *testing.T, db *postgres.DB) int64

// failover runs the lost-commits scenario and returns the highest token
// issued before the failover and every token issued after it.
func failover(t *testing.T, issue tokenIssuer) (before int64, after []int64) {
	pair := pgtest.NewPair(t)
	db := open(t, pair.Primary.DSN())
	for range 3 {
		before = max(before, issue(t, db))
	}
	pair.WaitCaughtUp()
	pair.StopStandby()
	for range 5 { // committed on the primary only
		before = max(before, issue(t, db))
	}
	db.Close()
	pair.KillPrimary()
	pair.StartStandby()
	pair.Promote()
	if tl := pair.Standby.Timeline(t); tl < 2 {
		t.Fatalf("the promoted standby is on timeline %d, want a new one", tl)
	}

	db = open(t, pair.Standby.DSN())
	for range 3 {
		after = append(after, issue(t, db))
	}
	return before, after
}

func checkAbove(t *testing.T, before int64, after []int64) {
	t.Helper()
	t.Logf("highest token before the failover %d, after it %v", before, after)
	for _, tok := range after {
		if tok <= before {
			t.Errorf("token %d issued after the failover is not above %d, issued before it (after: %v)", tok, before, after)
		}
	}
}

// With asynchronous replication, the last acquisitions before a failover
// are lost with the primary. The promoted standby must still hand out
// tokens above every token issued before, or a zombie holder's token would
// pass the fences.
func TestTokensMonotonicAcrossFailover(t *testing.T) {
	t.Parallel()
	t.Run("lease", func(t *testing.T) {
		t.Parallel()
		before, after := failover(t, func(t *testing.T, db *postgres.DB) int64 {
			l := postgres.NewLeaser(db)
			term := leasetest.MustAcquire(t, l, "job", time.Minute)
			if err := l.Release(context.Background(), term); err != nil {
				t.Fatal(err)
			}
			return term.Token
		})
		checkAbove(t, before, after)
	})
	t.Run("new lease row", func(t *testing.T) {
		t.Parallel()
		// A job whose row the failover lost altogether starts again from
		// the floor of deleted rows, which the failover lost too.
		before, after := failover(t, func(t *testing.T, db *postgres.DB) int64 {
			if _, err := db.Pool().Exec(context.Background(), "delete from baton.job_leases where job_key = 'job'"); err != nil {
				t.Fatal(err)
			}
			return leasetest.MustAcquire(t, postgres.NewLeaser(db), "job", time.Minute).Token
		})
		checkAbove(t, before, after)
	})
	t.Run("steps", func(t *testing.T) {
		t.Parallel()
		before, after := failover(t, func(t *testing.T, db *postgres.DB) int64 {
			s := idempotency.NewStore(db.SQL(), idempotency.Postgres, db.Schema())
			var token int64
			errStep := errors.New("step fails, leaving the key in flight")
			_, _, err := s.Steps(context.Background(), "scope", "key", "fp", idempotency.Policy{}, time.Minute, []idempotency.Step{{
				Name: "only",
				Run: func(ctx context.Context, tx *sql.Tx, rec *idempotency.Recovery) error {
					token = rec.Token()
					return errStep
				},
			}})
			if !errors.Is(err, errStep) {
				t.Fatalf("Steps: %v, want the step's error", err)
			}
			return token
		})
		checkAbove(t, before, after)
	})
}

// A zombie that took its token before the failover, in a commit the
// failover lost, is refused by both fences once a holder of the new
// primary has written (issue 17).
func TestZombieTokenLosesAfterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := pgtest.NewPair(t)
	db := open(t, pair.Primary.DSN())
	l := postgres.NewLeaser(db)
	write := func(db *postgres.DB, token int64) error {
		_, err := db.Pool().Exec(ctx, "select baton.fence('report', $1)", token)
		return err
	}
	term := leasetest.MustAcquire(t, l, "job", time.Millisecond)
	if err := write(db, term.Token); err != nil {
		t.Fatal(err)
	}
	pair.WaitCaughtUp()
	pair.StopStandby()
	var zombie *baton.Term
	for range 3 { // lost with the primary: the last of them is the zombie's
		time.Sleep(2 * time.Millisecond)
		zombie = leasetest.MustAcquire(t, l, "job", time.Millisecond)
	}
	if err := write(db, zombie.Token); err != nil {
		t.Fatal(err)
	}
	db.Close()
	pair.KillPrimary()
	pair.StartStandby()
	pair.Promote()

	db = open(t, pair.Standby.DSN())
	l = postgres.NewLeaser(db)
	holder := leasetest.MustAcquire(t, l, "job", time.Minute)
	if err := write(db, holder.Token); err != nil {
		t.Fatalf("the new holder's write (token %d): %v", holder.Token, err)
	}
	if err := write(db, zombie.Token); sqlState(err) != "BF001" {
		t.Errorf("baton.fence accepted or failed otherwise the zombie's token %d after the new holder's %d: %v", zombie.Token, holder.Token, err)
	}
	_, err := db.Pool().Exec(ctx, "select baton.fence_lease('job', $1)", zombie.Token)
	if sqlState(err) != "BF001" {
		t.Errorf("baton.fence_lease accepted or failed otherwise the zombie's token %d beside the holder's %d: %v", zombie.Token, holder.Token, err)
	}
}
