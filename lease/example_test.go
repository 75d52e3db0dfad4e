package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

// Every replica of a service runs the daily report; one at a time gets
// the lease, and its write to PostgreSQL is fenced: it lands only while
// no newer term of the job exists, however long this replica was paused.
// The results table may be in any database where baton migrate has run
// (here, the store's own).
func ExampleRun() {
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: os.Getenv("BATON_DB")})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	leaser := postgres.NewLeaser(db)

	err = lease.Run(ctx, leaser, "daily-report", lease.Options{TTL: 30 * time.Second}, func(ctx context.Context) error {
		total, err := computeReport(ctx) // honours ctx: stops when the lease is lost
		if err != nil {
			return err
		}
		// One statement, fenced by the job's lease (the term is in ctx).
		_, err = postgres.ExecFencedCtx(ctx, db.Pool(), "",
			"insert into reports (day, total) select current_date, $1 from baton_fence", total)
		return err
	})
	switch baton.ErrorCode(err) {
	case "":
	case baton.EBUSY:
		// Another replica has it: nothing to do.
	case baton.ELEASELOST, baton.EFENCED:
		log.Printf("the report lost its lease; the replica that took over writes it: %v", err)
	default:
		log.Fatal(err)
	}
}

// Several writes in one transaction, fenced once: FenceLeaseCtx locks the
// lease row until the transaction ends.
func ExampleRun_transaction() {
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: os.Getenv("BATON_DB")})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	err = lease.Run(ctx, postgres.NewLeaser(db), "rollup", lease.Options{}, func(ctx context.Context) error {
		return pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
			if err := postgres.FenceLeaseCtx(ctx, tx, ""); err != nil {
				return err // EFENCED: a newer term exists
			}
			if _, err := tx.Exec(ctx, "delete from rollup"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "insert into rollup select day, sum(total) from reports group by day")
			return err
		})
	})
	if err != nil && baton.ErrorCode(err) != baton.EBUSY {
		log.Fatal(err)
	}
}

// Wait for a busy lease instead of giving up: here the local store (one
// host, lock files), two runs one after the other, each with a higher
// token.
func ExampleRun_wait() {
	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	leaser, err := flock.Open(dir, flock.ScopeUser, true)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	holding := make(chan struct{})
	first := make(chan error)
	go func() {
		first <- lease.Run(ctx, leaser, "report", lease.Options{}, func(ctx context.Context) error {
			close(holding)
			time.Sleep(200 * time.Millisecond) // the work
			fmt.Println("first run, token", lease.Token(ctx))
			return nil
		})
	}()
	<-holding

	// Without Wait, a busy lease is an EBUSY error at once.
	err = lease.Run(ctx, leaser, "report", lease.Options{}, func(ctx context.Context) error { return nil })
	fmt.Println("busy:", baton.ErrorCode(err) == baton.EBUSY)

	// With Wait, Run tries again until the lease is free.
	err = lease.Run(ctx, leaser, "report", lease.Options{Wait: time.Minute}, func(ctx context.Context) error {
		fmt.Println("second run, token", lease.Token(ctx))
		return nil
	})
	if err := errors.Join(err, <-first); err != nil {
		log.Fatal(err)
	}
	// Output:
	// busy: true
	// first run, token 1
	// second run, token 2
}

// computeReport stands for work that takes a while and honours ctx.
func computeReport(ctx context.Context) (int64, error) {
	select {
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	case <-time.After(10 * time.Millisecond):
		return 42, nil
	}
}
