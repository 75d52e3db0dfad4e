// Command riverbench is River's half of the outbox relay benchmark: the
// burn-down that baton's relay is measured on, done with River
// (github.com/riverqueue/river), each event a no-op job, so the two can be
// compared on one PostgreSQL.
//
// It runs River's migrations in the database of --dsn, empties river_job,
// inserts --events no-op jobs before any timing starts (the burn-down is of
// work that is already there), then starts a client with one queue and
// measures the wall time from Start until the last job's completion has been
// committed. It is a module of its own so that River never becomes a
// dependency of baton.
//
// Completions are counted from the client's subscription to job events, not
// by polling river_job: River's completer publishes a batch's events only
// after the transaction that marks it completed commits, so the count is of
// committed completions, and it costs the database nothing, where a
// `count(*) ... where state = 'completed'` every few milliseconds would scan
// the table River is working on and compete with it for the same two cores.
// River's own `river bench` counts the same way (cmd/river/riverbench). The
// database's count is checked once, after the clock has stopped.
//
// Two configurations, --config:
//
//	default  River's defaults (v0.51.2: FetchCooldown 100ms, FetchPollInterval
//	         1s, JobTimeout 1m, CompletedJobRetentionPeriod 24h) on a plain
//	         pgxpool (its default size, max(4, GOMAXPROCS) connections).
//	         MaxWorkers has no default (NewClient requires 1..10,000), so it is
//	         100, the value of River's documented example (the package doc's
//	         "Starting a client").
//	tuned    what River's own `river bench` uses for throughput
//	         (cmd/river/riverbench/river_bench.go in River's repository:
//	         FetchCooldown 2ms, FetchPollInterval 20ms, MaxWorkers 2,000,
//	         chosen as "much better than the client's default values"; its
//	         comment finds ~1,000 workers best, 500 and 2,000 a little worse,
//	         10,000 much worse; river#254 discusses the worker count), and a
//	         20-connection pool instead of pgxpool's 4 on two cores. In a
//	         burn-down FetchCooldown is the limit: since river#664 a fetch
//	         that comes back full asks for another as soon as a worker slot
//	         frees, at most once per FetchCooldown (river#651, #663 show the
//	         default's backlog waiting on it). On the 2-core machine where
//	         this was written, 1,000 and 2,000 workers were within noise of
//	         each other, 500 and 5,000 lower, a 4-connection pool as fast as
//	         20 (the pool is headroom, not a limit), and a 1ms or 10ms cooldown
//	         no better than 2ms, so it keeps River's values. --workers, --pool, --fetch-cooldown and
//	         --fetch-poll-interval change it.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

func main() {
	ctx := context.Background()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a wrong flag: exit status 2, with a hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg + " (see riverbench --help)" }

// options are the command line's.
type options struct {
	dsn     string
	events  int
	config  string
	timeout time.Duration
	json    bool

	// Only with --config tuned; zero keeps the tuned value.
	workers           int
	pool              int
	fetchCooldown     time.Duration
	fetchPollInterval time.Duration

	// Periodic jobs instead of a burn-down (periodic.go), when periodic > 0.
	periodic int
	every    time.Duration
	duration time.Duration
	warmup   time.Duration
	clients  int
}

// The tuned configuration (see the package comment for the sources).
const (
	tunedWorkers           = 2000
	tunedPool              = 20
	tunedFetchCooldown     = 2 * time.Millisecond
	tunedFetchPollInterval = 20 * time.Millisecond

	// defaultWorkers is River's documented example; MaxWorkers has no default.
	defaultWorkers = 100

	// insertBatch is the size of one InsertManyFast (COPY FROM), as River's
	// own benchmark inserts.
	insertBatch = 5000
)

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("riverbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "", "PostgreSQL URL of the database to use (required); River's tables are migrated into it and river_job is truncated")
	fs.IntVar(&o.events, "events", 100000, "no-op jobs to insert and burn down")
	fs.StringVar(&o.config, "config", "default", "default or tuned")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on the whole run; past it, exit non-zero with what completed")
	fs.BoolVar(&o.json, "json", false, "print one JSON line instead of text")
	fs.IntVar(&o.workers, "workers", 0, fmt.Sprintf("tuned only: the queue's MaxWorkers (default %d)", tunedWorkers))
	fs.IntVar(&o.pool, "pool", 0, fmt.Sprintf("tuned only: pgxpool MaxConns (default %d)", tunedPool))
	fs.DurationVar(&o.fetchCooldown, "fetch-cooldown", 0, fmt.Sprintf("tuned only: FetchCooldown (default %s)", tunedFetchCooldown))
	fs.DurationVar(&o.fetchPollInterval, "fetch-poll-interval", 0, fmt.Sprintf("tuned only: FetchPollInterval (default %s)", tunedFetchPollInterval))
	fs.IntVar(&o.periodic, "periodic", 0, "instead of a burn-down: this many periodic jobs (river.NewPeriodicJob, no-op), each every --every, on --clients clients; measure a window of --duration after --warmup (see periodic.go)")
	fs.DurationVar(&o.every, "every", time.Second, "--periodic: each job's interval (river.PeriodicInterval)")
	fs.DurationVar(&o.duration, "duration", time.Minute, "--periodic: the window measured")
	fs.DurationVar(&o.warmup, "warmup", 10*time.Second, "--periodic: how long the clients run (a leader elected, its first inserts) before the window")
	fs.IntVar(&o.clients, "clients", 3, "--periodic: clients, each with its own pool, in this process (the leader among them enqueues)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, usageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return o, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case o.dsn == "":
		return o, usageError{"--dsn is required, e.g. --dsn 'postgres://postgres@/bench?host=/tmp'"}
	case o.events < 1:
		return o, usageError{"--events must be at least 1"}
	case o.timeout <= 0:
		return o, usageError{"--timeout must be positive"}
	case o.config != "default" && o.config != "tuned":
		return o, usageError{fmt.Sprintf("--config is default or tuned, not %q", o.config)}
	case o.config == "default" && (o.workers != 0 || o.pool != 0 || o.fetchCooldown != 0 || o.fetchPollInterval != 0):
		return o, usageError{"--workers, --pool, --fetch-cooldown and --fetch-poll-interval change the tuned configuration; the default one is River's own (use --config tuned)"}
	case o.workers < 0 || o.workers > river.QueueNumWorkersMax:
		return o, usageError{fmt.Sprintf("--workers is 1..%d", river.QueueNumWorkersMax)}
	case o.pool < 0 || o.fetchCooldown < 0 || o.fetchPollInterval < 0:
		return o, usageError{"--pool, --fetch-cooldown and --fetch-poll-interval must not be negative"}
	case o.periodic < 0:
		return o, usageError{"--periodic must not be negative"}
	case o.periodic > 0 && (o.every < time.Second || o.duration < o.every || o.warmup < 0 || o.clients < 1):
		return o, usageError{"--periodic wants --every of at least 1s, a --duration of at least --every, --warmup not negative and --clients at least 1"}
	}
	return o, nil
}

// settings are what the run used: every value that differs between the two
// configurations and River's defaults that bear on a burn-down, resolved to
// what the client and the pool actually had.
type settings struct {
	RiverVersion                string   `json:"river_version"`
	MaxWorkers                  int      `json:"max_workers"`
	FetchCooldown               string   `json:"fetch_cooldown"`
	FetchPollInterval           string   `json:"fetch_poll_interval"`
	PoolMaxConns                int32    `json:"pool_max_conns"`
	JobTimeout                  string   `json:"job_timeout"`
	CompletedJobRetentionPeriod string   `json:"completed_job_retention_period"`
	Queues                      int      `json:"queues"`
	Completer                   string   `json:"completer"`
	Notifier                    string   `json:"notifier"`
	Logger                      string   `json:"logger"`
	Insert                      string   `json:"insert"`
	Measure                     string   `json:"measure"`
	GOMAXPROCS                  int      `json:"gomaxprocs"`
	ChangedFromDefaults         []string `json:"changed_from_defaults"`
}

// result is the one line printed.
type result struct {
	System    string   `json:"system"`
	Config    string   `json:"config"`
	Events    int      `json:"events"`
	Seconds   float64  `json:"seconds"`
	PerSecond float64  `json:"per_second"`
	Completed int      `json:"completed"`
	Failed    int      `json:"failed"`
	InDB      int      `json:"completed_in_db"`
	StartSecs float64  `json:"start_seconds"`
	TimedOut  bool     `json:"timed_out"`
	Settings  settings `json:"settings"`
}

// noopArgs is one event: the sequence number keeps rows distinct, like the
// payload of River's own benchmark job.
type noopArgs struct {
	Seq int `json:"seq"`
}

func (noopArgs) Kind() string { return "baton_bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// tune applies --config (and the tuned configuration's flags) to a client's
// configuration and its pool's: it returns MaxWorkers and what it changed
// from River's defaults.
func (o options) tune(cfg *river.Config, poolConfig *pgxpool.Config) (int, []string) {
	workers := defaultWorkers
	var changed []string
	if o.config == "tuned" {
		workers = cmp.Or(o.workers, tunedWorkers)
		poolConfig.MaxConns = int32(cmp.Or(o.pool, tunedPool))
		cfg.FetchCooldown = cmp.Or(o.fetchCooldown, tunedFetchCooldown)
		cfg.FetchPollInterval = cmp.Or(o.fetchPollInterval, tunedFetchPollInterval)
		changed = []string{"MaxWorkers", "FetchCooldown", "FetchPollInterval", "pgxpool MaxConns"}
	} else {
		changed = []string{"MaxWorkers (required, no default: River's documented example value)"}
	}
	cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}}
	return workers, changed
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if o.periodic > 0 {
		return runPeriodic(ctx, o, stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	poolConfig, err := pgxpool.ParseConfig(o.dsn)
	if err != nil {
		return usageError{fmt.Sprintf("--dsn: %v", err)}
	}
	cfg := &river.Config{
		// River's default logger writes warnings and errors to stdout; the
		// same level to stderr keeps stdout for the result.
		Logger:  slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Workers: river.NewWorkers(),
	}
	river.AddWorker(cfg.Workers, noopWorker{})
	workers, changed := o.tune(cfg, poolConfig)

	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)

	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	client, err := river.NewClient(driver, cfg)
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	// The same client inserts before it starts, as River's benchmark does.
	if err := prepare(ctx, pool, client, o.events); err != nil {
		return err
	}

	// A buffer for every event: River drops events a full subscriber
	// channel cannot take, and a dropped completion would never be counted.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: o.events,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer unsubscribe()

	res := result{System: "river", Config: o.config, Events: o.events}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start client: %w", err)
	}
	res.StartSecs = time.Since(start).Seconds()
	var last time.Time
	for res.Completed < o.events && !res.TimedOut {
		select {
		case ev, ok := <-events:
			if !ok {
				return errors.New("the client closed its subscription before the burn-down ended")
			}
			if ev.Kind == river.EventKindJobCompleted {
				res.Completed++
				last = time.Now()
			} else {
				res.Failed++
			}
		case <-ctx.Done():
			res.TimedOut = true
			last = time.Now()
		}
	}
	res.Seconds = last.Sub(start).Seconds()
	if res.Seconds > 0 {
		res.PerSecond = float64(res.Completed) / res.Seconds
	}

	// Stop and check outside the clock, and even past the timeout: with a
	// context of their own.
	after, cancelAfter := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelAfter()
	if err := client.Stop(after); err != nil {
		fmt.Fprintf(stderr, "riverbench: stop client: %v\n", err)
	}
	if err := pool.QueryRow(after, "select count(*) from river_job where state = 'completed'").Scan(&res.InDB); err != nil {
		return fmt.Errorf("count completed jobs: %w", err)
	}

	res.Settings = settings{
		RiverVersion:                moduleVersion("github.com/riverqueue/river"),
		MaxWorkers:                  workers,
		FetchCooldown:               cmp.Or(cfg.FetchCooldown, river.FetchCooldownDefault).String(),
		FetchPollInterval:           cmp.Or(cfg.FetchPollInterval, river.FetchPollIntervalDefault).String(),
		PoolMaxConns:                pool.Config().MaxConns,
		JobTimeout:                  river.JobTimeoutDefault.String() + " (default)",
		CompletedJobRetentionPeriod: "24h (default; no completed row is deleted during a run)",
		Queues:                      1,
		Completer:                   "batch (default)",
		Notifier:                    "LISTEN/NOTIFY (default; not poll-only)",
		Logger:                      "warn level (River's default level), to stderr",
		Insert:                      fmt.Sprintf("InsertManyFast (COPY FROM) in batches of %d into a truncated river_job, then VACUUM ANALYZE and CHECKPOINT, all before the clock starts", insertBatch),
		Measure:                     "from client.Start to the last job_completed event of a subscription (River publishes a batch's events after it commits); count(*) checked after",
		GOMAXPROCS:                  runtime.GOMAXPROCS(0),
		ChangedFromDefaults:         changed,
	}
	if err := report(stdout, o.json, res); err != nil {
		return err
	}
	switch {
	case res.TimedOut:
		return fmt.Errorf("timed out after %s: %d of %d jobs completed", o.timeout, res.Completed, o.events)
	case res.Failed > 0:
		return fmt.Errorf("%d jobs failed or were cancelled; a no-op job should not", res.Failed)
	case res.InDB != o.events:
		return fmt.Errorf("%d completion events but %d completed rows in river_job", res.Completed, res.InDB)
	}
	return nil
}

// prepare empties river_job and inserts n no-op jobs in batches, then has
// PostgreSQL vacuum and analyze the table, so that the burn-down starts on
// fresh statistics and set hint bits rather than paying for them itself, and
// autovacuum has no new rows left to react to when the clock starts; then a
// checkpoint.
func prepare(ctx context.Context, pool *pgxpool.Pool, client *river.Client[pgx.Tx], n int) error {
	if _, err := pool.Exec(ctx, "truncate river_job"); err != nil {
		return fmt.Errorf("truncate river_job: %w", err)
	}
	batch := make([]river.InsertManyParams, 0, insertBatch)
	for seq := 1; seq <= n; seq++ {
		batch = append(batch, river.InsertManyParams{Args: noopArgs{Seq: seq}})
		if len(batch) == insertBatch || seq == n {
			if _, err := client.InsertManyFast(ctx, batch); err != nil {
				return fmt.Errorf("insert jobs: %w", err)
			}
			batch = batch[:0]
		}
	}
	if _, err := pool.Exec(ctx, "vacuum analyze river_job"); err != nil {
		return fmt.Errorf("vacuum analyze river_job: %w", err)
	}
	// Every run then starts just after a checkpoint, rather than one falling
	// into some runs and not others (the inserts, updates and vacuums of
	// earlier runs in the same cluster fill WAL towards max_wal_size).
	if _, err := pool.Exec(ctx, "checkpoint"); err != nil {
		return fmt.Errorf("checkpoint (needs superuser or pg_checkpoint): %w", err)
	}
	return nil
}

func report(w io.Writer, asJSON bool, res result) error {
	if asJSON {
		return json.NewEncoder(w).Encode(res)
	}
	s := res.Settings
	_, err := fmt.Fprintf(w, "river %s (%s): %d of %d jobs in %.2f s, %.0f jobs/s (client start %.3f s; %d completed in river_job)\n"+
		"  MaxWorkers %d, FetchCooldown %s, FetchPollInterval %s, pool %d connections; changed from River's defaults: %s\n",
		s.RiverVersion, res.Config, res.Completed, res.Events, res.Seconds, res.PerSecond, res.StartSecs, res.InDB,
		s.MaxWorkers, s.FetchCooldown, s.FetchPollInterval, s.PoolMaxConns, strings.Join(s.ChangedFromDefaults, ", "))
	return err
}

// moduleVersion is the version of a module built into this binary.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "unknown"
}
