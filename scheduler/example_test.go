package scheduler_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
)

// A service runs a report every five minutes, once across all of its
// replicas: each replica runs this same code on the same PostgreSQL
// store. The function's ctx carries the fencing token (lease.Token) and the
// tick's idempotency key (lease.IdempotencyKey), and ends when the lease can
// no longer be trusted: the write is fenced, so a replica that was paused
// past its lease cannot land it after a newer run's.
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	db, err := postgres.Open(ctx, postgres.Config{DSN: os.Getenv("BATON_DB"), Application: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store := scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema())

	d := scheduler.New(store, postgres.NewLeaser(db), "billing")
	err = d.Func(baton.Job{
		Name:     "daily-totals",
		Schedule: "*/5 * * * *",
		Timezone: "Europe/Berlin",
		Timeout:  baton.Duration(2 * time.Minute),
		Retries:  baton.Retries{Count: 3, Backoff: baton.Duration(10 * time.Second)},
	}, func(ctx context.Context) error {
		// Fenced: refused (baton.EFENCED) once a newer run of the job holds
		// the lease. The key is the same on every retry of the tick.
		_, err := postgres.ExecFenced(ctx, db.Pool(), db.Schema(), "daily-totals", lease.Token(ctx),
			`insert into totals (key, total) select $1, sum(amount) from orders, baton_fence
			 on conflict (key) do nothing`, lease.IdempotencyKey(ctx))
		return err
	})
	if err != nil {
		log.Fatal(err) // names the field at fault
	}
	if err := d.Run(ctx); err != nil { // until SIGTERM; then the running functions' ctx ends
		log.Fatal(err)
	}
}

// A function scheduled every second on the local store (SQLite and lock
// files: one host), run until it has run once.
func ExampleDaemon_Func() {
	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	leaser, err := flock.Open(filepath.Join(dir, "locks"), flock.ScopeUser, true)
	if err != nil {
		log.Fatal(err)
	}

	d := scheduler.New(scheduler.NewStore(db.SQL(), scheduler.SQLite, ""), leaser, "example")
	ran := make(chan string, 1)
	err = d.Func(baton.Job{Name: "report", Schedule: "* * * * * *"}, func(ctx context.Context) error {
		select {
		case ran <- fmt.Sprintf("report ran under token %d", lease.Token(ctx)):
		default:
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	fmt.Println(<-ran)
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: report ran under token 1
}
