package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ClaimBenchResult is one measured configuration of `baton bench claims`.
type ClaimBenchResult struct {
	Daemons int     `json:"daemons"`
	Lease   bool    `json:"lease"` // each tick also took and released the job's lease
	Func    bool    `json:"func"`  // the daemons were a service's replicas running no-op Go functions
	Ticks   int     `json:"ticks"`
	Errors  int     `json:"errors"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"` // ticks claimed, started and recorded per second
}

// claims measures the daemon's path with a no-op action: every job is made
// due at once, and --clients daemons (each with its own pool, at
// --max-concurrent) claim, start and record them (succeeded) as 'baton
// daemon' does, first with a lease that is always free and then with the
// job's own. No process is started.
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
	if c.maxConcurrent < 1 {
		return baton.Invalid("--max-concurrent", "must be at least 1, got %d", c.maxConcurrent)
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
			r, err := c.claimRound(ctx, stores[:n], host, lease)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	// Last: the jobs become Go functions' (their definitions change).
	for _, n := range daemons {
		if !c.funcs {
			break
		}
		r, err := c.funcRound(ctx, stores[:n], host, jobs)
		if err != nil {
			return err
		}
		results = append(results, r)
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
		lease := fmt.Sprint(r.Lease)
		if r.Func {
			lease += " (Go functions)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.2f\t%.0f\t\n", r.Daemons, lease, r.Ticks, r.Errors, r.Seconds, r.PerSec)
	}
	return tw.Flush()
}

// claimRound makes every job due and runs len(stores) daemons, each on
// its own store, through the daemon's own path (claims, leases, starts,
// outcomes, at --max-concurrent) with a no-op in place of the command,
// until every job's tick has run and every daemon has drained.
func (c *BenchCommand) claimRound(ctx context.Context, stores []*store, host string, lease bool) (ClaimBenchResult, error) {
	r := ClaimBenchResult{Daemons: len(stores), Lease: lease}
	// now: a new instant each round, so each round's ticks are new, and one
	// tick per job (the schedule's next instant is a year off)
	if err := stores[0].schedule.SetNextTick(ctx, time.Now().Add(-time.Second)); err != nil {
		return r, err
	}
	if err := analyze(ctx, stores[0]); err != nil {
		return r, err
	}
	var ran atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	action := func(baton.Job, baton.Tick, *baton.Term) scheduler.Ending {
		if ran.Add(1) >= int64(c.jobs) {
			once.Do(func() { close(all) })
		}
		code := 0
		return scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ds []*scheduler.Daemon
	for i, st := range stores {
		d := &scheduler.Daemon{
			Store: st.schedule, Leaser: st.leaser, ID: fmt.Sprintf("bench-%d-%s", i, uuid.NewString()[:8]), Host: host,
			Config: "bench", MaxConcurrent: c.maxConcurrent, ClaimTTL: time.Minute, Action: action,
		}
		if !lease {
			d.Leaser = freeLeaser{st.leaser}
		}
		if err := st.schedule.Register(ctx, scheduler.DaemonInfo{ID: d.ID, Host: host, PID: os.Getpid(), Config: "bench",
			FeatureLevel: d.Level()}); err != nil {
			return r, err
		}
		ds = append(ds, d)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for _, d := range ds {
		wg.Go(func() { d.Run(rctx) })
	}
	// Bounded, so that a bench that stalls still ends and says so.
	limit := time.NewTimer(time.Duration(c.jobs)*10*time.Millisecond + time.Minute)
	defer limit.Stop()
	select {
	case <-all:
	case <-limit.C:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait() // drained: every outcome recorded, every lease released
	r.Seconds = time.Since(start).Seconds()
	r.Ticks = int(ran.Load())
	r.Errors = c.jobs - r.Ticks
	r.PerSec = float64(r.Ticks) / r.Seconds
	return r, ctx.Err()
}

// funcRound is claimRound for a service's replicas (scheduler.New), each
// on its own store, with every job registered as a no-op Go function: the
// scheduler's path without exec, with the lease, its renewals and the
// function's ctx. The replicas publish the jobs before the clock starts.
func (c *BenchCommand) funcRound(ctx context.Context, stores []*store, host string, jobs []baton.Job) (ClaimBenchResult, error) {
	r := ClaimBenchResult{Daemons: len(stores), Lease: true, Func: true}
	var ran atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	noop := func(context.Context) error {
		if ran.Add(1) >= int64(c.jobs) {
			once.Do(func() { close(all) })
		}
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ds []*scheduler.Daemon
	for i, st := range stores {
		d := scheduler.New(st.schedule, st.leaser, "bench")
		d.ID, d.Host = fmt.Sprintf("bench-%d-%s", i, uuid.NewString()[:8]), host
		d.MaxConcurrent, d.ClaimTTL, d.Log = c.maxConcurrent, time.Minute, slog.New(slog.DiscardHandler)
		for _, j := range jobs {
			if err := d.Func(baton.Job{Name: j.Name, Schedule: j.Schedule}, noop); err != nil {
				return r, err
			}
		}
		if err := d.Publish(ctx); err != nil {
			return r, err
		}
		ds = append(ds, d)
	}
	if err := stores[0].schedule.SetNextTick(ctx, time.Now().Add(-time.Second)); err != nil {
		return r, err
	}
	if err := analyze(ctx, stores[0]); err != nil {
		return r, err
	}
	var wg sync.WaitGroup
	start := time.Now()
	for _, d := range ds {
		wg.Go(func() { d.Run(rctx) })
	}
	limit := time.NewTimer(time.Duration(c.jobs)*10*time.Millisecond + time.Minute)
	defer limit.Stop()
	select {
	case <-all:
	case <-limit.C:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	r.Ticks = int(ran.Load())
	r.Errors = c.jobs - r.Ticks
	r.PerSec = float64(r.Ticks) / r.Seconds
	return r, ctx.Err()
}

// freeLeaser grants every lease at once and keeps no state: the bench's
// configuration without the lease.
type freeLeaser struct{ baton.Leaser }

func (freeLeaser) Acquire(_ context.Context, req baton.AcquireRequest) (baton.Grant, error) {
	return baton.Grant{Term: &baton.Term{Job: req.Job, Owner: req.Owner, Token: 1, TTL: req.TTL}}, nil
}
func (freeLeaser) Renew(context.Context, *baton.Term) error   { return nil }
func (freeLeaser) Release(context.Context, *baton.Term) error { return nil }

// analyze gives the planner statistics of the bench's tables, as
// autovacuum keeps them for a store in use. The bench's schema is new:
// without them, the planner took its tables for empty, and the daemons'
// search for open ticks scanned every tick (18 ms a claim at 20,000).
func analyze(ctx context.Context, st *store) error {
	if st.db == nil {
		return nil
	}
	rows, err := st.db.Pool().Query(ctx, "select tablename from pg_tables where schemaname = $1", st.db.Schema())
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := st.db.Pool().Exec(ctx, "analyze "+pgx.Identifier{st.db.Schema(), t}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}
