package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/postgres"
	"github.com/google/uuid"
)

const benchHelp = `
Usage: baton bench outbox [flags]
       baton bench claims [flags]
       baton bench leases [flags]
       baton bench fence [flags]     (PostgreSQL)

Where the benchmarks write: never where production's jobs, leases and
events live. Against PostgreSQL (--db or BATON_DB) each run creates a
schema of its own, baton_bench_PID (PID: the bench's process id),
migrates it, works in it alone and drops it at the end: after an error and
after an interrupt (Ctrl-C, SIGTERM) too. BATON_SCHEMA is ignored. A daemon
or relay on another schema never sees a bench's rows, and a bench never
sees theirs. A run holds a session advisory lock on its schema while it
works; if it was killed (kill -9, a lost connection) its schema stays, and
the next baton bench on that database drops every baton_bench_* schema
whose lock is free. To drop one by hand:

  psql DBNAME -c 'drop schema baton_bench_PID cascade'

With --schema NAME a bench runs in NAME instead: created and dropped if it
does not exist; left in place if it does. It refuses (exit 64) baton's
default schema (baton) and a schema that holds daemons, relays, or jobs,
ticks, leases, fence marks, events or idempotency keys that no bench
wrote, unless --allow-production-schema is given.

On the local store each run works in a new temporary directory,
baton-bench-*, with lock files and a baton.db of its own, under $TMPDIR
(default /tmp), or under --lock-dir DIR when given (to measure that file
system), and removes it at the end. BATON_LOCK_DIR is ignored: the lock
directory and baton.db in use are never touched. A killed run leaves its
directory behind: rm -r $TMPDIR/baton-bench-*.

bench outbox measures the outbox relay, in the bench's own schema or
directory. Burn-down (default): --events events (topic bench.burn) are
inserted at once, then --clients relays (default 1,3; each with its own
pool, in this process) deliver them with --until-idle, to each sink in
--sinks: noop (in-process, no I/O) and http (a webhook on loopback in this
process answering 204). With --rate R it measures steady state instead: R
events per second, one per transaction, for --duration, and reports
commit-to-delivery latency for three wake-ups: the in-process nudge
(writer and relay share the store), LISTEN/NOTIFY (PostgreSQL; separate
stores), and polling alone. It empties its outbox before each round.

bench claims measures the durable schedule with a no-op action, in the
bench's own schema or directory: --jobs jobs named bench-claims-* are
made due at once and --clients daemons (default 1,3; each with its own
pool, and --max-concurrent runs at once, default 64) run their ticks
through baton daemon's own path: claims in batches (FOR UPDATE SKIP
LOCKED), the lease, each tick's start and its outcome, with a no-op in
place of the command. First with a lease that is always free (no lease),
then with the job's own lease; with --funcs, then as a service's replicas
running the jobs as no-op Go functions (scheduler.New: the function's
own path, with the lease, its renewals and its ctx). No process is
started. With --every D it measures a sustained schedule instead: the
jobs run every D (schedule @every D) with their own leases, and for each
number of daemons, after a warm-up of 2 s, a window of --duration: the
ticks due in it, those run (by the end of the window and 10 s more) and
not, those run twice, the lag from each tick's instant to its start (p50,
p99, max), the runs started in the window per second, and this process's
CPU over the window.

bench fence measures the cost of the fences, in the bench's own schema:
committed writes per second (one insert per transaction, into its table
bench_fence_results) by --clients concurrent writers of one job, with no
fence, with the same-database fence (postgres.FenceLease), with that
fence queued in the write's own batch (postgres.QueueFenceLease, no round
trip of its own), with the fence in the write's own statement
(postgres.ExecFenced, no statement of its own) and with the high-water
fence (postgres.Fence, one resource: it serialises writers). The five
take turns in quarter-second slices until each has had --duration, so
that ratios hold on a machine whose speed drifts.

bench leases:
Measures acquire+release cycles per second against the store in use (in
the bench's own schema or directory), for each number of concurrent
clients in --clients, over distinct job keys (one per client: the store's
raw rate) and over one shared key (contention: most attempts find the lease
busy). Prints throughput and latency percentiles of one cycle. Against
PostgreSQL, compare with pgbench running the very same SQL, in a schema of
its own (default baton_pgbench; --schema to choose):

  baton migrate --db URL --schema baton_pgbench
  baton bench leases --pgbench-script > leases.pgbench
  pgbench -n -M prepared -f leases.pgbench -c 4 -j 4 -T 10 DBNAME
  psql DBNAME -c 'drop schema baton_pgbench cascade'

--allow-production-schema lets --schema name baton's default schema or a
schema that production uses. Then the bench works among production's
rows and does not drop the schema: bench leases and fence leave bench-*
leases and fence marks; bench claims makes every job of the schema due,
claims its ticks and records them succeeded without running them (its
bench-claims-* jobs are marked removed at the end); bench outbox deletes
every event of the outbox, pending ones included, and delivers what is
pending to its own sink; a relay of production's meanwhile delivers the
bench's events to production's sink. Never on a live fleet.

Exit status: 0 done; 64 usage error (a production schema refused
included); 69 store unavailable; 70 internal error; 128+N interrupted by
signal N (the bench's schema or directory is removed first).

Examples:
  # lease cycles per second on the local store, with 1 and 4 clients
  baton bench leases --clients 1,4 --duration 2s

  # the outbox relay's burn-down on PostgreSQL, in a schema of its own
  baton bench outbox --db postgres://baton@db1/app --events 10000

  # 1,000 jobs every second on 3 daemons, a 60 s window
  baton bench claims --db postgres://baton@db1/app --jobs 1000 --every 1s --duration 60s --clients 3
`

// BenchCommand is `baton bench`.
type BenchCommand struct {
	env      *Env
	store    storeFlags
	clients  string
	keys     string
	duration time.Duration
	ttl      time.Duration
	json     bool
	script   bool
	jobs     int
	// maxConcurrent is bench claims' --max-concurrent, as the daemon's
	maxConcurrent int
	// funcs is bench claims' --funcs: also as scheduled Go functions.
	funcs bool
	// every is bench claims' --every: a sustained schedule instead of one
	// burst (0)
	every  time.Duration
	outbox outboxBenchFlags
	// allowProduction is --allow-production-schema; borrowed says the
	// bench runs in a schema it did not create, and so must clean up
	// after itself where it can.
	allowProduction bool
	borrowed        bool
}

// BenchResult is one measured configuration.
type BenchResult struct {
	Keys     string  `json:"keys"`
	Clients  int     `json:"clients"`
	Cycles   int     `json:"cycles"`  // acquisitions granted and released
	Busy     int     `json:"busy"`    // attempts that found the lease held
	Errors   int     `json:"errors"`  // failed calls
	Seconds  float64 `json:"seconds"` // measured wall time
	PerSec   float64 `json:"per_sec"` // cycles per second
	P50Micro int64   `json:"p50_us"`  // latency of one attempt (acquire, and release if granted)
	P90Micro int64   `json:"p90_us"`
	P99Micro int64   `json:"p99_us"`
	MaxMicro int64   `json:"max_us"`
}

// Run measures.
func (c *BenchCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("bench", c.env.Stdout, benchHelp)
	c.store.register(fs)
	// A bench's own, whatever BATON_SCHEMA and BATON_LOCK_DIR say.
	fs.Lookup("schema").Usage = "PostgreSQL: run in schema `NAME` instead of a new baton_bench_PID (refused if production's: see above); with --pgbench-script, the script's schema (default " + postgres.PgbenchSchema + ")"
	fs.Lookup("lock-dir").Usage = "local store: make the bench's temporary directory in `DIR` instead of $TMPDIR (BATON_LOCK_DIR is ignored)"
	fs.Lookup("db").Usage = "the PostgreSQL database to measure, by a `DSN` (postgres://… URL or host=… dbname=…); the bench works in a schema of its own there (see above); default $BATON_DB, else (both unset) the local store"
	maxConns := fs.Lookup("db-max-conns")
	maxConns.Usage, maxConns.DefValue = "PostgreSQL: the most connections (`N`) the bench opens (default: one per client, the largest of --clients)", "0"
	fs.StringVar(&c.clients, "clients", "1,4,16", "comma-separated numbers of concurrent clients")
	fs.StringVar(&c.keys, "keys", "distinct,shared", "which key sets to measure: distinct, shared or both")
	durationFlag(fs, &c.duration, "duration", 5*time.Second, "measure each configuration for `DURATION`")
	durationFlag(fs, &c.ttl, "ttl", 30*time.Second, "lease `TTL` of each acquisition")
	fs.BoolVar(&c.json, "json", false, "print results as JSON")
	fs.BoolVar(&c.script, "pgbench-script", false, "print the equivalent pgbench script and exit")
	fs.IntVar(&c.jobs, "jobs", 10000, "bench claims: number of jobs made due at once")
	fs.IntVar(&c.maxConcurrent, "max-concurrent", 64, "bench claims: runs at once in each daemon, as baton daemon's --max-concurrent")
	fs.BoolVar(&c.funcs, "funcs", false, "bench claims: then run the jobs as no-op scheduled Go functions too (scheduler.New, each daemon a service's replica, with the lease)")
	durationFlag(fs, &c.every, "every", 0, "bench claims: give the jobs a schedule of @every `DURATION` and measure a window of --duration (see above), instead of making them due at once")
	fs.BoolVar(&c.allowProduction, "allow-production-schema", false, "let --schema name baton's default schema or one that production uses (destructive: see above)")
	c.outbox.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	what := strings.Join(pos, " ")
	if !slices.Contains([]string{"leases", "fence", "claims", "outbox"}, what) {
		return baton.Invalid("WHAT", "want baton bench leases, fence, claims or outbox, got %q", what)
	}
	if what == "leases" && c.script {
		return c.pgbenchScript(fs)
	}
	cleanup, err := c.sandbox(ctx, fs, what)
	if err != nil {
		return err
	}
	defer cleanup()
	switch what {
	case "fence":
		err = c.fence(ctx, fs)
	case "claims":
		err = c.claims(ctx, fs)
	case "outbox":
		err = c.outboxBench(ctx, fs)
	default:
		err = c.leases(ctx, fs)
	}
	if e, ok := interrupted(ctx); ok {
		return e
	}
	return err
}

func (c *BenchCommand) pgbenchScript(fs *flagSet) error {
	if c.schemaNamed(fs) && c.store.schema == postgres.DefaultSchema && !c.allowProduction {
		return c.refuseDefault()
	}
	schema := ""
	if c.schemaNamed(fs) {
		schema = c.store.schema
	}
	s, err := postgres.PgbenchScript(schema, c.ttl)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(c.env.Stdout, s)
	return err
}

// schemaNamed says --schema was given; BATON_SCHEMA does not count.
func (c *BenchCommand) schemaNamed(fs *flagSet) bool {
	named := false
	fs.Visit(func(f *flag.Flag) { named = named || f.Name == "schema" })
	return named
}

func (c *BenchCommand) refuseDefault() error {
	return baton.Invalid("--schema", "%s is baton's default schema, where production's jobs, leases and events live; leave --schema out (each bench makes a schema of its own and drops it), or give --allow-production-schema to bench there anyway (see baton bench --help)", postgres.DefaultSchema)
}

// sandbox points c.store at a place of the bench's own: a new PostgreSQL
// schema (or the one --schema names, unless production's) or a new
// temporary directory for the local store. The returned func removes it.
func (c *BenchCommand) sandbox(ctx context.Context, fs *flagSet, what string) (func(), error) {
	dsn, _, err := c.store.dsn(c.env)
	if err != nil {
		return nil, err
	}
	if dsn == "" {
		if what == "fence" {
			return nil, baton.Invalid("--db", "baton bench fence measures the PostgreSQL fences: give --db or BATON_DB")
		}
		return c.tempLockDir()
	}
	named := c.schemaNamed(fs)
	if !named {
		c.store.schema = "" // the bench's own
	} else if c.store.schema == postgres.DefaultSchema && !c.allowProduction {
		return nil, c.refuseDefault()
	}
	// The bench's session: one connection of its own, outside the pools
	// measured, in no schema of production's.
	admin := c.store
	admin.schema, admin.maxConns = postgres.DefaultSchema, 1
	st, err := admin.open(ctx, c.env, "bench", false)
	if err != nil {
		return nil, err
	}
	var hold *postgres.BenchSchema
	err = admin.retryUnavailable(ctx, c.env, "opening the store", func() error {
		var err error
		hold, err = st.db.HoldBenchSchema(ctx, c.store.schema)
		return err
	})
	if err != nil {
		st.close()
		return nil, err
	}
	for _, name := range hold.Dropped {
		fmt.Fprintf(c.env.Stderr, "baton: dropped schema %s, left behind by a bench that is gone\n", name)
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := hold.Close(ctx); err != nil {
			later := ""
			if strings.HasPrefix(hold.Name, postgres.BenchSchemaPrefix) {
				later = " (or the next baton bench on this database drops it)"
			}
			fmt.Fprintf(c.env.Stderr, "baton: %v; drop it by hand: psql DBNAME -c 'drop schema %s cascade'%s\n", err, hold.Name, later)
		}
		st.close()
	}
	if named && hold.Existed && !c.allowProduction {
		prod, err := hold.Production(ctx)
		if err == nil && len(prod) > 0 {
			err = baton.Invalid("--schema", "schema %s is production's: it holds %s; name a schema of the bench's own, or leave --schema out (each bench makes one and drops it), or give --allow-production-schema to bench there anyway (see baton bench --help)", hold.Name, strings.Join(prod, ", "))
		}
		if err != nil {
			cleanup()
			return nil, err
		}
	}
	c.store.schema = hold.Name
	c.borrowed = hold.Existed
	return cleanup, nil
}

// tempLockDir makes the local store's bench directory: lock files and a
// baton.db of its own, under --lock-dir (to measure that file system) or
// $TMPDIR. BATON_LOCK_DIR is production's, and not looked at.
func (c *BenchCommand) tempLockDir() (func(), error) {
	base, field := c.store.lockDir, "--lock-dir"
	if base == "" {
		base, field = os.TempDir(), "TMPDIR"
	}
	dir, err := os.MkdirTemp(base, "baton-bench-")
	if err != nil {
		return nil, baton.Invalid(field, "cannot make the bench's directory in %s: %v", base, err)
	}
	c.store.lockDir = dir
	return func() { os.RemoveAll(dir) }, nil
}

// leases is `baton bench leases`.
func (c *BenchCommand) leases(ctx context.Context, fs *flagSet) error {
	clients, err := parseCounts(c.clients)
	if err != nil {
		return err
	}
	var keySets []string
	for _, k := range strings.Split(c.keys, ",") {
		if k != "distinct" && k != "shared" {
			return baton.Invalid("--keys", "%q: want distinct, shared or both (comma-separated)", k)
		}
		keySets = append(keySets, k)
	}
	if c.duration <= 0 {
		return baton.Invalid("--duration", "must be positive, got %s", c.duration)
	}
	if c.ttl <= 0 {
		return baton.Invalid("--ttl", "must be positive, got %s", c.ttl)
	}
	st, err := c.open(ctx, fs, clients)
	if err != nil {
		return err
	}
	defer st.close()
	info := st.leaser.Info()
	var results []BenchResult
	for _, keys := range keySets {
		for _, n := range clients {
			r, err := benchLeases(ctx, st.leaser, keys, n, c.duration, c.ttl)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			Store   baton.StoreInfo `json:"store"`
			Results []BenchResult   `json:"results"`
		}{info, results})
	}
	fmt.Fprintf(c.env.Stdout, "store: %s %s (scope: %s)\n", info.Kind, info.Location, info.Scope)
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "keys\tclients\tcycles\tbusy\terrors\tcycles/s\tp50\tp90\tp99\tmax\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t\n", r.Keys, r.Clients, r.Cycles, r.Busy, r.Errors,
			r.PerSec, micro(r.P50Micro), micro(r.P90Micro), micro(r.P99Micro), micro(r.MaxMicro))
	}
	return tw.Flush()
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, baton.Invalid("--clients", "%q: want comma-separated counts from 1 to 1024", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func micro(us int64) string {
	return (time.Duration(us) * time.Microsecond).String()
}

// benchLeases runs n clients for d, each looping acquire then release.
func benchLeases(ctx context.Context, l baton.Leaser, keys string, n int, d time.Duration, ttl time.Duration) (BenchResult, error) {
	host, _ := os.Hostname()
	var mu sync.Mutex
	res := BenchResult{Keys: keys, Clients: n}
	var lat []time.Duration
	var firstErr error
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range n {
		job := "bench-shared"
		if keys == "distinct" {
			job = fmt.Sprintf("bench-%d", i) // as pgbench's :client_id, from 0
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var cycles, busy, errs int
			var lastErr error
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				g, err := l.Acquire(ctx, baton.AcquireRequest{Job: job, TTL: ttl, Owner: uuid.NewString(), Host: host, PID: os.Getpid()})
				switch {
				case err != nil:
					errs++
					lastErr = err
				case g.Busy():
					busy++
				default:
					if err := l.Release(ctx, g.Term); err != nil {
						errs++
						lastErr = err
					} else {
						cycles++
					}
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			res.Cycles += cycles
			res.Busy += busy
			res.Errors += errs
			lat = append(lat, mine...)
			if firstErr == nil && lastErr != nil {
				firstErr = lastErr
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.PerSec = float64(res.Cycles) / res.Seconds
	if res.Errors > 0 && res.Cycles == 0 {
		return res, firstErr
	}
	slices.Sort(lat)
	pct := func(p float64) int64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()
	}
	res.P50Micro, res.P90Micro, res.P99Micro = pct(0.50), pct(0.90), pct(0.99)
	if len(lat) > 0 {
		res.MaxMicro = lat[len(lat)-1].Microseconds()
	}
	return res, nil
}

// open opens the store with one pool slot per client unless --db-max-conns
// says otherwise, so that the pool is not what is measured.
func (c *BenchCommand) open(ctx context.Context, fs *flagSet, clients []int) (*store, error) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "db-max-conns" })
	if !set {
		c.store.maxConns = slices.Max(clients)
	}
	return c.store.open(ctx, c.env, "bench", true)
}
