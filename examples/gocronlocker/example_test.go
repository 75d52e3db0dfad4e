package gocronlocker_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/batonhq/baton/examples/gocronlocker"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/lease"
	"github.com/go-co-op/gocron/v2"
)

// A gocron scheduler whose jobs take baton leases: here the local store
// (lock files, one host); postgres.NewLeaser(db) for replicas on several
// hosts. The task, wrapped by Task under the job's name, gets the lease's
// ctx: it carries the fencing token and ends if the lease is lost.
func Example() {
	dir, err := os.MkdirTemp("", "gocronlocker")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	leaser, err := flock.Open(dir, flock.ScopeUser, true)
	if err != nil {
		log.Fatal(err)
	}

	locker := gocronlocker.New(leaser, gocronlocker.Options{HoldAtLeast: time.Second})
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		locker.Task("report", func(ctx context.Context) error {
			defer close(done)
			// Pass ctx to the work and to the fenced write
			// (postgres.ExecFencedCtx reads the token from it).
			fmt.Println("report runs with token", lease.Token(ctx))
			return nil
		}),
		gocron.WithName("report"))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	<-done
	if err := s.Shutdown(); err != nil {
		log.Fatal(err)
	}
	// Output: report runs with token 1
}
