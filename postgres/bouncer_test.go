package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/bouncertest"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

// bouncerDSN is a fresh database, reached through a PgBouncer of its own in
// transaction mode.
func bouncerDSN(t *testing.T) string {
	t.Helper()
	return bouncertest.DSN(t, database(t, pgtest.DSN(t)))
}

// The lease conformance suite, word for word, through PgBouncer in
// transaction mode: no lease operation relies on session state.
func TestBouncerConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Store{
		Expires: true,
		New: func(t *testing.T) func(t *testing.T) baton.Leaser {
			dsn := bouncerDSN(t)
			return func(t *testing.T) baton.Leaser { return postgres.NewLeaser(open(t, dsn)) }
		},
	})
}

// Concurrent first uses migrate through the bouncer: the migration lock is
// pg_advisory_xact_lock, which ends with its transaction, so it holds
// whichever server connection each transaction gets.
func TestBouncerConcurrentMigrations(t *testing.T) {
	t.Parallel()
	dsn := bouncerDSN(t)
	const opens = 2 * bouncertest.PoolSize
	errs := make(chan error, opens)
	for range opens {
		go func() {
			db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn})
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	for range opens {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent first use through the bouncer: %v", err)
		}
	}
}

// Both fences hold through the bouncer: each runs inside the caller's
// transaction, which PgBouncer keeps on one server connection until it ends.
func TestBouncerFences(t *testing.T) {
	t.Parallel()
	db := open(t, bouncerDSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	if _, err := db.Pool().Exec(ctx, "create table results (token bigint)"); err != nil {
		t.Fatal(err)
	}
	count := func() int { return resultRows(t, db) }

	t.Run("HighWater", func(t *testing.T) {
		write := func(token int64) error {
			return pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
				if err := postgres.Fence(ctx, tx, "", "report", token); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "insert into results values ($1)", token)
				return err
			})
		}
		before := count()
		for _, tok := range []int64{33, 34, 34} {
			if err := write(tok); err != nil {
				t.Fatalf("write with token %d: %v", tok, err)
			}
		}
		if err := write(33); baton.ErrorCode(err) != baton.EFENCED {
			t.Fatalf("write with token 33 after 34: %v, want fenced", err)
		}
		if n := count() - before; n != 3 {
			t.Fatalf("%d rows written, want 3: the stale write must roll back with its fence", n)
		}
		if err := db.Advance(ctx, "report", 30); baton.ErrorCode(err) != baton.EFENCED {
			t.Fatalf("Advance below the mark: %v, want fenced", err)
		}
		if err := db.Advance(ctx, "report", 35); err != nil {
			t.Fatalf("Advance above the mark: %v", err)
		}
	})

	// The same-database fence: a takeover waits for a fenced transaction of
	// the old term (its FOR KEY SHARE lock lives on the transaction's server
	// connection), and the old term is refused once the new one exists.
	t.Run("Lease", func(t *testing.T) {
		old := leasetest.MustAcquire(t, l, "job", 300*time.Millisecond)
		tx, err := db.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := postgres.FenceLease(ctx, tx, "", "job", old.Token); err != nil {
			t.Fatalf("fence of the current term: %v", err)
		}
		if _, err := tx.Exec(ctx, "insert into results values ($1)", old.Token); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond) // the old term expires meanwhile
		granted := make(chan *baton.Term, 1)
		go func() {
			g, err := l.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "00000000-0000-4000-8000-000000000002"})
			if err != nil || g.Busy() {
				t.Errorf("takeover: %+v %v", g, err)
				granted <- nil
				return
			}
			granted <- g.Term
		}()
		select {
		case <-granted:
			t.Fatal("takeover granted while a fenced transaction of the old term was open")
		case <-time.After(300 * time.Millisecond):
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		cur := <-granted
		if cur == nil || cur.Token != old.Token+1 {
			t.Fatalf("takeover term %+v, want token %d", cur, old.Token+1)
		}
		err = pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
			return postgres.FenceLease(ctx, tx, "", "job", old.Token)
		})
		if baton.ErrorCode(err) != baton.EFENCED {
			t.Fatalf("fence of the old term after takeover: %v, want fenced", err)
		}
		err = pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
			return postgres.FenceLease(ctx, tx, "", "job", cur.Token)
		})
		if err != nil {
			t.Fatalf("fence of the current term after takeover: %v", err)
		}

		// The fence in the write's own statement, through the bouncer.
		write := func(token int64) error {
			return pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
				_, err := postgres.ExecFenced(ctx, tx, "", "job", token, "insert into results select fencing_token from baton_fence")
				return err
			})
		}
		before := count()
		if err := write(cur.Token); err != nil {
			t.Fatalf("ExecFenced with the current term: %v", err)
		}
		if err := write(old.Token); baton.ErrorCode(err) != baton.EFENCED {
			t.Fatalf("ExecFenced with the old term: %v, want fenced", err)
		}
		if n := count() - before; n != 1 {
			t.Fatalf("ExecFenced wrote %d rows, want the current term's 1", n)
		}
	})
}
