package main

// River as a scheduler: --periodic P gives every client the same P periodic
// jobs (river.NewPeriodicJob with river.PeriodicInterval(--every), a no-op
// worker), as a service of several processes would; River elects one client
// leader, and only the leader's periodic job enqueuer inserts the jobs, each
// with its scheduled_at set to its instant, 100 ms early at most; every
// client's producer fetches and works them. --clients clients run in this
// process, each with its own pool, as baton bench claims --every runs its
// daemons; its window and its figures are the same (cmd/baton/benchclaims.go).
//
// A tick is a (job, scheduled_at) pair. The worker notes when each starts:
// the lag is from scheduled_at to the start of the tick's first run, and a
// second run of the same pair is a duplicate. River keeps no record of a
// tick it did not insert or did not run: what is not run by the window's end
// and 10 s more counts as not run here.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// periodicSettle is how long after the window its ticks may still start.
const periodicSettle = 10 * time.Second

// periodicArgs is one tick of periodic job Job.
type periodicArgs struct {
	Job int `json:"job"`
}

func (periodicArgs) Kind() string { return "baton_bench_periodic" }

type periodicWorker struct {
	river.WorkerDefaults[periodicArgs]
	tally *tally
}

func (w *periodicWorker) Work(_ context.Context, job *river.Job[periodicArgs]) error {
	w.tally.ran(job.Args.Job, job.ScheduledAt, time.Now())
	return nil
}

// windowResult has the fields, names and meaning of baton bench claims
// --every's EveryBenchResult; Daemons are clients here.
type windowResult struct {
	Daemons     int       `json:"daemons"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	Due         int       `json:"due"`
	Ran         int       `json:"ran"`
	NotRun      int       `json:"not_run"`
	Duplicates  int       `json:"duplicates"`
	Runs        int       `json:"runs"`
	PerSec      float64   `json:"per_sec"`
	LagP50ms    float64   `json:"lag_p50_ms"`
	LagP99ms    float64   `json:"lag_p99_ms"`
	LagMaxMs    float64   `json:"lag_max_ms"`
	CPUSeconds  float64   `json:"cpu_seconds"`
}

// tally counts the runs of a window's ticks.
type tally struct {
	mu    sync.Mutex
	r     windowResult
	begin time.Time
	seen  map[tickKey]int
	lags  []time.Duration
	all   chan struct{}
}

type tickKey struct {
	job int
	at  int64
}

func (t *tally) ran(job int, at, now time.Time) {
	if at.Before(t.begin) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !now.Before(t.r.WindowStart) && now.Before(t.r.WindowEnd) {
		t.r.Runs++
	}
	k := tickKey{job, at.UnixNano()}
	t.seen[k]++
	if t.seen[k] > 1 {
		t.r.Duplicates++
		return
	}
	if !at.Before(t.r.WindowStart) && at.Before(t.r.WindowEnd) {
		t.lags = append(t.lags, max(now.Sub(at), 0))
		if len(t.lags) == t.r.Due {
			close(t.all)
		}
	}
}

func runPeriodic(ctx context.Context, o options, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// Migrate and empty River's tables with a pool of their own.
	setup, err := pgxpool.New(ctx, o.dsn)
	if err != nil {
		return usageError{fmt.Sprintf("--dsn: %v", err)}
	}
	defer setup.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(setup), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := setup.Exec(ctx, "truncate river_job, river_leader"); err != nil {
		return fmt.Errorf("truncate river_job, river_leader: %w", err)
	}
	if _, err := setup.Exec(ctx, "vacuum analyze river_job"); err != nil {
		return fmt.Errorf("vacuum analyze river_job: %w", err)
	}

	window := o.duration.Truncate(o.every)
	t := &tally{begin: time.Now(), seen: make(map[tickKey]int), all: make(chan struct{})}
	t.r.Daemons = o.clients
	t.r.WindowStart = t.begin.Add(o.warmup).Truncate(time.Second).Add(time.Second)
	t.r.WindowEnd = t.r.WindowStart.Add(window)
	t.r.Due = o.periodic * int(window/o.every)

	var (
		clients []*river.Client[pgx.Tx]
		pools   []*pgxpool.Pool
		workers int
		changed []string
		maxConn int32
	)
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i := range o.clients {
		poolConfig, err := pgxpool.ParseConfig(o.dsn)
		if err != nil {
			return usageError{fmt.Sprintf("--dsn: %v", err)}
		}
		cfg := &river.Config{
			ID:      fmt.Sprintf("riverbench_%d_%d", os.Getpid(), i),
			Logger:  logger,
			Workers: river.NewWorkers(),
		}
		river.AddWorker(cfg.Workers, &periodicWorker{tally: t})
		workers, changed = o.tune(cfg, poolConfig)
		for job := range o.periodic {
			cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(o.every),
				func() (river.JobArgs, *river.InsertOpts) { return periodicArgs{Job: job}, nil }, nil))
		}
		pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		pools = append(pools, pool)
		maxConn = pool.Config().MaxConns
		client, err := river.NewClient(riverpgxv5.New(pool), cfg)
		if err != nil {
			return fmt.Errorf("river client: %w", err)
		}
		clients = append(clients, client)
	}
	for _, c := range clients {
		if err := c.Start(ctx); err != nil {
			return fmt.Errorf("start client: %w", err)
		}
	}
	var cpu0, cpu1 time.Duration
	for _, at := range []struct {
		t   time.Time
		cpu *time.Duration
	}{{t.r.WindowStart, &cpu0}, {t.r.WindowEnd, &cpu1}} {
		select {
		case <-time.After(time.Until(at.t)):
			*at.cpu = processCPU()
		case <-ctx.Done():
		}
	}
	select {
	case <-t.all:
	case <-time.After(time.Until(t.r.WindowEnd.Add(periodicSettle))):
	case <-ctx.Done():
	}
	timedOut := ctx.Err() != nil
	after, cancelAfter := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelAfter()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			if err := c.Stop(after); err != nil {
				fmt.Fprintf(stderr, "riverbench: stop client: %v\n", err)
			}
		})
	}
	wg.Wait()

	t.mu.Lock()
	r := t.r
	lags := t.lags
	t.mu.Unlock()
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
	out := struct {
		System   string         `json:"system"`
		Config   string         `json:"config"`
		Jobs     int            `json:"jobs"`
		Every    string         `json:"every"`
		Results  []windowResult `json:"results"`
		Settings map[string]any `json:"settings"`
	}{"river", o.config, o.periodic, o.every.String(), []windowResult{r}, map[string]any{
		"river_version":         moduleVersion("github.com/riverqueue/river"),
		"clients":               o.clients,
		"max_workers":           workers,
		"fetch_cooldown":        o.fetchCooldownOr(),
		"fetch_poll_interval":   o.fetchPollIntervalOr(),
		"pool_max_conns":        maxConn,
		"schedule":              fmt.Sprintf("river.PeriodicInterval(%s), RunOnStart false", o.every),
		"warmup":                o.warmup.String(),
		"gomaxprocs":            runtime.GOMAXPROCS(0),
		"changed_from_defaults": changed,
	}}
	if o.json {
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "river %s (%s): %d periodic jobs every %s, %d clients; window %s: due %d, ran %d, not run %d, twice %d, %.0f runs/s, lag p50 %.0f ms p99 %.0f ms max %.0f ms, CPU %.2f s\n",
			out.Settings["river_version"], o.config, o.periodic, o.every, o.clients, window, r.Due, r.Ran, r.NotRun, r.Duplicates,
			r.PerSec, r.LagP50ms, r.LagP99ms, r.LagMaxMs, r.CPUSeconds)
	}
	if timedOut {
		return fmt.Errorf("timed out after %s", o.timeout)
	}
	return nil
}

// fetchCooldownOr and fetchPollIntervalOr are the values a client of
// --config had.
func (o options) fetchCooldownOr() string {
	if o.config == "tuned" {
		return cmp.Or(o.fetchCooldown, tunedFetchCooldown).String()
	}
	return river.FetchCooldownDefault.String()
}

func (o options) fetchPollIntervalOr() string {
	if o.config == "tuned" {
		return cmp.Or(o.fetchPollInterval, tunedFetchPollInterval).String()
	}
	return river.FetchPollIntervalDefault.String()
}

// processCPU is this process's CPU so far, user and system, all threads.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
