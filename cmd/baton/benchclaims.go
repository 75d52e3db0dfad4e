package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
	"github.com/google/uuid"
)

// ClaimBenchResult is one measured configuration of `baton bench claims`.
type ClaimBenchResult struct {
	Daemons int     `json:"daemons"`
	Lease   bool    `json:"lease"` // each tick also took and released the job's lease
	Ticks   int     `json:"ticks"`
	Errors  int     `json:"errors"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"` // ticks claimed, started and recorded per second
}

// claims measures the schedule's claim path with a no-op action: every job
// is made due at once, and --clients daemons (each with its own pool) claim
// them in batches, record each tick's start and its outcome (succeeded),
// and, in the second configuration, take and release the job's lease as a
// daemon does. No process is started.
func (c *BenchCommand) claims(ctx context.Context, fs *flagSet) error {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "clients" })
	if !set {
		c.clients = "1,3"
	}
	daemons, err := parseCounts(c.clients)
	if err != nil {
		return err
	}
	if c.jobs < 1 {
		return baton.Invalid("--jobs", "must be at least 1, got %d", c.jobs)
	}
	maxD := 0
	for _, d := range daemons {
		maxD = max(maxD, d)
	}
	var stores []*store
	defer func() {
		for _, st := range stores {
			st.close()
		}
	}()
	for range maxD {
		st, err := c.store.openSchedule(ctx, c.env, "bench")
		if err != nil {
			return err
		}
		stores = append(stores, st)
	}
	jobs := make([]baton.Job, c.jobs)
	for i := range jobs {
		jobs[i] = baton.Job{Name: fmt.Sprintf("bench-claims-%06d", i), Schedule: "0 0 1 1 *", Command: []string{"true"}}
	}
	host, _ := os.Hostname()
	if _, err := stores[0].schedule.Publish(ctx, jobs, host, nil); err != nil {
		return err
	}
	if c.borrowed {
		// Not the bench's own schema, which it would drop: take its jobs
		// out of the schedule it shares.
		names := make([]string, len(jobs))
		for i, j := range jobs {
			names[i] = j.Name
		}
		defer stores[0].schedule.Publish(context.WithoutCancel(ctx), nil, host, names)
	}
	var results []ClaimBenchResult
	for _, lease := range []bool{false, true} {
		for _, n := range daemons {
			// now: a new instant each round, so each round's ticks are new,
			// and one tick per job (the schedule's next instant is a year off)
			due := time.Now().Add(-time.Second)
			if err := stores[0].schedule.SetNextTick(ctx, due); err != nil {
				return err
			}
			r := ClaimBenchResult{Daemons: n, Lease: lease}
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := time.Now()
			for d := range n {
				st := stores[d]
				id := fmt.Sprintf("bench-%d", d)
				wg.Go(func() {
					ticks, errs := claimAll(ctx, st, id, host, lease)
					mu.Lock()
					r.Ticks += ticks
					r.Errors += errs
					mu.Unlock()
				})
			}
			wg.Wait()
			r.Seconds = time.Since(start).Seconds()
			r.PerSec = float64(r.Ticks) / r.Seconds
			results = append(results, r)
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			Jobs    int                `json:"jobs"`
			Results []ClaimBenchResult `json:"results"`
		}{c.jobs, results})
	}
	info := stores[0].leaser.Info()
	fmt.Fprintf(c.env.Stdout, "store: %s %s; %d jobs due at once, claimed in batches of 100\n", info.Kind, info.Location, c.jobs)
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "daemons\tlease\tticks\terrors\tseconds\tticks/s\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%v\t%d\t%d\t%.2f\t%.0f\t\n", r.Daemons, r.Lease, r.Ticks, r.Errors, r.Seconds, r.PerSec)
	}
	return tw.Flush()
}

// claimAll claims due ticks until none is left, recording each as a
// daemon would around a command that does nothing.
func claimAll(ctx context.Context, st *store, id, host string, lease bool) (ticks, errs int) {
	for {
		claims, err := st.schedule.ClaimDue(ctx, id, time.Minute, 100)
		if err != nil {
			errs++
			if ctx.Err() != nil || errs > 100 {
				return ticks, errs
			}
			continue
		}
		if len(claims) == 0 {
			return ticks, errs
		}
		for _, c := range claims {
			term := &baton.Term{Job: c.Tick.Job, Owner: uuid.NewString(), Token: 1, TTL: time.Minute}
			if lease {
				g, err := st.leaser.Acquire(ctx, baton.AcquireRequest{Job: c.Tick.Job, TTL: time.Minute, Owner: term.Owner, Host: host, PID: os.Getpid()})
				if err != nil || g.Busy() {
					errs++
					continue
				}
				term = g.Term
			}
			if _, ok, err := st.schedule.StartAttempt(ctx, c.Tick, "", id, host, term); err != nil || !ok {
				errs++
				continue
			}
			code := 0
			if _, err := st.schedule.Finish(ctx, c.Tick, term.Owner, scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}); err != nil {
				errs++
				continue
			}
			if lease {
				if err := st.leaser.Release(ctx, term); err != nil {
					errs++
				}
			}
			ticks++
		}
	}
}
