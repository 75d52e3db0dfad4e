package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/idempotency"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/google/uuid"
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

// acquireAfterFailover acquires job with a short TTL, waiting out the hold
// that follows a new epoch (see TestLeasesHeldBackAfterFailover).
func acquireAfterFailover(t *testing.T, l *postgres.Leaser, job string) *baton.Term {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		g, err := l.Acquire(context.Background(), baton.AcquireRequest{Job: job, TTL: 2 * time.Second, Owner: uuid.NewString(), Host: "h", PID: 1, Argv: []string{"true"}})
		switch {
		case err == nil && !g.Busy():
			return g.Term
		case err == nil:
			t.Fatalf("acquire %s: busy, held by %+v", job, g.Holder)
		case baton.ErrorCode(err) != baton.EUNAVAILABLE || time.Now().After(deadline):
			t.Fatalf("acquire %s: %v", job, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
			term := acquireAfterFailover(t, l, "job")
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
			return acquireAfterFailover(t, postgres.NewLeaser(db), "job").Token
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
	holder := acquireAfterFailover(t, l, "job")
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

// A holder whose acquisition the failover lost still runs: nothing on the
// promoted standby says so. Its renewals fail, and it stops within its
// TTL; until then no lease is granted, or its job would run twice at once
// (issue 17).
func TestLeasesHeldBackAfterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 3 * time.Second
	pair := pgtest.NewPair(t)
	db := open(t, pair.Primary.DSN())
	l := postgres.NewLeaser(db)
	leasetest.MustAcquire(t, l, "other", time.Millisecond) // a job known before
	pair.WaitCaughtUp()
	pair.StopStandby()
	lost := leasetest.MustAcquire(t, l, "job", ttl) // the zombie: still running
	db.Close()
	pair.KillPrimary()
	pair.StartStandby()
	pair.Promote()

	db = open(t, pair.Standby.DSN())
	l = postgres.NewLeaser(db)
	first := time.Now()
	for _, job := range []string{"job", "other", "new"} {
		_, err := l.Acquire(ctx, baton.AcquireRequest{Job: job, TTL: ttl, Owner: uuid.NewString(), Host: "h", PID: 1, Argv: []string{"true"}})
		if baton.ErrorCode(err) != baton.EUNAVAILABLE || !strings.Contains(err.Error(), "held back") {
			t.Fatalf("acquire %s right after the failover: %v, want it held back while the lost term (token %d) may run", job, err, lost.Token)
		}
	}
	var term *baton.Term
	for term == nil {
		g, err := l.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: ttl, Owner: uuid.NewString(), Host: "h", PID: 1, Argv: []string{"true"}})
		switch {
		case err == nil && !g.Busy():
			term = g.Term
		case baton.ErrorCode(err) == baton.EUNAVAILABLE:
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("acquire after the hold: %v (grant %+v)", err, g)
		}
		if time.Since(first) > time.Minute {
			t.Fatal("still held back a minute after the failover")
		}
	}
	if waited := time.Since(first); waited < ttl*9/10 {
		t.Errorf("granted %v after the first acquisition on the promoted standby, before the lost term's TTL (%v) could end", waited, ttl)
	}
	if term.Token <= lost.Token {
		t.Errorf("token %d after the failover, not above the lost term's %d", term.Token, lost.Token)
	}
	// The hold is once per epoch: the next acquisitions are not held back.
	if err := l.Release(ctx, term); err != nil {
		t.Fatal(err)
	}
	leasetest.MustAcquire(t, l, "job", ttl)
}
