package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
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
	schedule := "0 0 1 1 *" // one tick per job and round: the next is a year off
	if c.every != 0 {
		if c.every < time.Second || c.every%time.Second != 0 {
			return baton.Invalid("--every", "want whole seconds, at least 1s, got %s", c.every)
		}
		if c.funcs {
			return baton.Invalid("--funcs", "measures the burst of jobs due at once; leave it out with --every")
		}
		if c.duration < c.every {
			return baton.Invalid("--duration", "the window must hold at least one tick of --every %s, got %s", c.every, c.duration)
		}
		schedule = "@every " + c.every.String()
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
		jobs[i] = baton.Job{Name: fmt.Sprintf("bench-claims-%06d", i), Schedule: schedule, Command: []string{"true"}}
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
	if c.every != 0 {
		return c.sustained(ctx, stores, daemons, host)
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
		if c.funcs {
			r, err := c.funcRound(ctx, stores[:n], host, jobs)
			if err != nil {
				return err
			}
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
	r.Seconds = c.burn(ctx, rctx, cancel, ds, all).Seconds()
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
	r.Seconds = c.burn(ctx, rctx, cancel, ds, all).Seconds()
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

// EveryBenchResult is one round of `baton bench claims --every`: a window
// of a sustained schedule, run by Daemons daemons.
type EveryBenchResult struct {
	Daemons     int       `json:"daemons"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	// Due are the ticks whose instants fall in the window (jobs × its
	// length / --every); Ran, those of them started by the window's end
	// and 10 s more (or once all had); NotRun, the others (late past that,
	// or recorded skipped-missed); Duplicates, the runs of a tick beyond
	// its first.
	Due        int `json:"due"`
	Ran        int `json:"ran"`
	NotRun     int `json:"not_run"`
	Duplicates int `json:"duplicates"`
	// Runs are the runs started within the window, of any of the round's
	// ticks; PerSec, per second of the window.
	Runs   int     `json:"runs"`
	PerSec float64 `json:"per_sec"`
	// The lag from a due tick's instant to the start of its first run.
	LagP50ms float64 `json:"lag_p50_ms"`
	LagP99ms float64 `json:"lag_p99_ms"`
	LagMaxMs float64 `json:"lag_max_ms"`
	// CPUSeconds is this process's CPU (user and system, every daemon's)
	// over the window; the database's is not in it.
	CPUSeconds float64 `json:"cpu_seconds"`
}

// sustainedWarmup is how long the daemons run before a window opens;
// sustainedSettle, how long after it closes its ticks may still start.
const (
	sustainedWarmup = 2 * time.Second
	sustainedSettle = 10 * time.Second
)

// sustained runs a round of --every for each count of daemons and prints
// the results.
func (c *BenchCommand) sustained(ctx context.Context, stores []*store, daemons []int, host string) error {
	if err := analyze(ctx, stores[0]); err != nil {
		return err
	}
	var results []EveryBenchResult
	for _, n := range daemons {
		r, err := c.sustainedRound(ctx, stores[:n], host)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			Jobs    int                `json:"jobs"`
			Every   string             `json:"every"`
			Results []EveryBenchResult `json:"results"`
		}{c.jobs, c.every.String(), results})
	}
	info := stores[0].leaser.Info()
	window := c.duration.Truncate(c.every)
	fmt.Fprintf(c.env.Stdout, "store: %s %s; %d jobs every %s, with their leases; a window of %s after %s\n",
		info.Kind, info.Location, c.jobs, c.every, window, sustainedWarmup)
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "daemons\tdue\tran\tnot run\ttwice\truns/s\tlag p50\tp99\tmax\tCPU s\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.0f\t%.0fms\t%.0fms\t%.0fms\t%.2f\t\n", r.Daemons, r.Due, r.Ran, r.NotRun,
			r.Duplicates, r.PerSec, r.LagP50ms, r.LagP99ms, r.LagMaxMs, r.CPUSeconds)
	}
	return tw.Flush()
}

// sustainedRound runs len(stores) daemons, each on its own store, through
// the daemon's own path (claims, leases, starts, outcomes) with a no-op in
// place of the command, on the jobs' schedule of --every, and measures a
// window of --duration (whole --every) after a warm-up.
func (c *BenchCommand) sustainedRound(ctx context.Context, stores []*store, host string) (EveryBenchResult, error) {
	r := EveryBenchResult{Daemons: len(stores)}
	window := c.duration.Truncate(c.every)
	begin := time.Now()
	r.WindowStart = begin.Add(sustainedWarmup).Truncate(time.Second).Add(time.Second)
	r.WindowEnd = r.WindowStart.Add(window)
	r.Due = c.jobs * int(window/c.every)
	type tickKey struct {
		job string
		at  int64
	}
	var (
		mu   sync.Mutex
		seen = make(map[tickKey]int)
		lags []time.Duration
	)
	all := make(chan struct{})
	action := func(j baton.Job, t baton.Tick, _ *baton.Term) scheduler.Ending {
		now := time.Now()
		code := 0
		end := scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}
		if t.At.Before(begin) {
			return end // an earlier round's
		}
		mu.Lock()
		defer mu.Unlock()
		if !now.Before(r.WindowStart) && now.Before(r.WindowEnd) {
			r.Runs++
		}
		k := tickKey{t.Job, t.At.UnixNano()}
		seen[k]++
		if seen[k] > 1 {
			r.Duplicates++
			return end
		}
		if !t.At.Before(r.WindowStart) && t.At.Before(r.WindowEnd) {
			lags = append(lags, max(now.Sub(t.At), 0))
			if len(lags) == r.Due {
				close(all)
			}
		}
		return end
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ds []*scheduler.Daemon
	for i, st := range stores {
		d := &scheduler.Daemon{
			Store: st.schedule, Leaser: st.leaser, ID: fmt.Sprintf("bench-%d-%s", i, uuid.NewString()[:8]), Host: host,
			Config: "bench", MaxConcurrent: c.maxConcurrent, ClaimTTL: time.Minute, Action: action,
		}
		if err := st.schedule.Register(ctx, scheduler.DaemonInfo{ID: d.ID, Host: host, PID: os.Getpid(), Config: "bench",
			FeatureLevel: d.Level()}); err != nil {
			return r, err
		}
		ds = append(ds, d)
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() { d.Run(rctx) })
	}
	var cpu0, cpu1 time.Duration
	for _, at := range []struct {
		t   time.Time
		cpu *time.Duration
	}{{r.WindowStart, &cpu0}, {r.WindowEnd, &cpu1}} {
		select {
		case <-time.After(time.Until(at.t)):
			*at.cpu = processCPU()
		case <-ctx.Done():
		}
	}
	select {
	case <-all:
	case <-time.After(time.Until(r.WindowEnd.Add(sustainedSettle))):
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	r.CPUSeconds = (cpu1 - cpu0).Seconds()
	r.Ran = len(lags)
	r.NotRun = r.Due - r.Ran
	r.PerSec = float64(r.Runs) / window.Seconds()
	if len(lags) > 0 {
		slices.Sort(lags)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		r.LagP50ms = ms(lags[min(len(lags)-1, len(lags)/2)])
		r.LagP99ms = ms(lags[min(len(lags)-1, len(lags)*99/100)])
		r.LagMaxMs = ms(lags[len(lags)-1])
	}
	return r, ctx.Err()
}

// processCPU is this process's CPU so far, user and system, all threads.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// burn runs the daemons ds on rctx until every job has run (all is
// closed), a bound for a bench that stalls (so that it still ends and says
// so), or ctx ends; then it stops them (cancel) and waits for them to
// drain, every outcome recorded and every lease released. It returns how
// long that took.
func (c *BenchCommand) burn(ctx, rctx context.Context, cancel context.CancelFunc, ds []*scheduler.Daemon, all <-chan struct{}) time.Duration {
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
	return time.Since(start)
}
